"""``benchaudit audit RUN... --out DIR``: the paper's analyses of stored runs in one command.

For runs made under one layer (pytest runs or imported published outputs), toward another layer
(``--toward``, default ``standardized``):

1. every run is re-scored under the target layer's downstream fields (``DIR/runs/<layer>/``, as
   ``benchaudit rescore --pipeline`` does): the target layer as far as stored outputs allow;
2. field by field attribution (``sweep --toward``): one variant per downstream field in which the target
   layer differs, re-scored; the upstream fields that differ are listed as "needs new generations",
   never estimated;
3. the comparison of the two layers (``compare``: scores under both denominators, ranks, rank shifts
   with paired-bootstrap CIs and direction stability, tau-b and inversions, PCA with parallel
   analysis, peer gaps), the sensitivity table (rho_ext; rho_gen when ``--regenerated`` runs are
   given) and, with ``--similarity``, task similarity against tau-b;
4. the ledger rows of the runs' benchmarks; the diagnose findings (``benchaudit diagnose`` on the runs,
   or those given with ``--findings``);
5. the command (:mod:`pytest_benchaudit.cli.audit`) writes ``DIR/audit.json``, ``DIR/report.html``
   and an Every Eval Ever export per run (``DIR/every-eval-ever/``).
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from pytest_benchaudit.audit.compare import CompareError, compare_document, load_runs, make_sets
from pytest_benchaudit.audit.offline import rescore_run, sweep_run

__all__ = ["AUDIT_VERSION", "build_audit", "upstream_differences", "scores_both_ways"]

AUDIT_VERSION = "benchaudit.audit/1"
UPSTREAM = ("dataset", "prompt", "inference")


def upstream_differences(cards: dict[str, Any], layer: str, suites_dir: Path) -> list[dict[str, Any]]:
    """Per task: the dataset/prompt/inference fields whose stored value differs from ``layer``'s."""
    from pytest_benchaudit.dataset.suites import SUITE_FILENAME, SuiteError, load_suite
    from pytest_benchaudit.pipeline.stages import PipelineError

    rows: list[dict[str, Any]] = []
    for key, card in sorted(cards.items()):
        if "|" in key:
            continue
        bench, _, task = key.partition(".")
        try:
            target = load_suite(Path(suites_dir) / bench / SUITE_FILENAME).pipeline(task, layer).card()["fields"]
        except (SuiteError, PipelineError, KeyError, OSError) as err:
            rows.append({"task": key, "fields": [], "note": f"no {layer!r} layer to compare with ({err})"})
            continue
        stored = card.get("fields", {})
        diff = [{"field": f, "stored": stored.get(f), layer: target.get(f)} for f in sorted(set(stored) | set(target))
                if f.split(".", 1)[0] in UPSTREAM and stored.get(f) != target.get(f)]
        if diff:
            rows.append({"task": key, "fields": diff, "note": "needs new generations: not re-scored, not estimated"})
    return rows


def scores_both_ways(doc: dict[str, Any], results: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per task x model x layer: n, valid, the score over all questions and over the valid ones, the headline."""
    rows = []
    for side, res in results.items():
        label = doc["sets"][side]["label"]
        for r in res:
            rows.append({"layer": label, "benchmark": r["benchmark"], "task": r["task"], "model": r["model"],
                         "metric": r["metric"], "denominator": r["denominator"], "n": r["n"], "n_valid": r["n_valid"],
                         "score": r["score"], "score_total": r["score_total"], "score_valid": r["score_valid"],
                         "invalid_rate": r["invalid_rate"]})
    return rows


def _diagnose(base: list[Any], ledger: list[dict[str, Any]], suites_dir: Path, data_dir: str | None
              ) -> list[dict[str, Any]]:
    """``benchaudit diagnose`` on the stored runs (their base records), with the ledger rows for FM15."""
    from pytest_benchaudit.audit.diagnose import LoadedRun, diagnose, to_json
    from pytest_benchaudit.audit.offline import _Resources

    runs = [LoadedRun(run.path.name, run.meta, run.records) for run in base]
    rows = {str(row["benchmark"]): row for row in ledger if "benchmark" in row}
    found = diagnose(runs, resources=_Resources(suites_dir, data_dir), ledger_rows=rows)
    return [dict(f) for f in to_json(found, 0)["findings"]]


def build_audit(run_paths: list[Path], out: Path, *, toward: str = "standardized", suites_dir: Path = Path("suites"),
                data_dir: str | None = None, regenerated: list[Path] | None = None, similarity: Any = None,
                n_prompts: int = 5, findings: list[dict[str, Any]] | None = None, n_resamples: int = 5000,
                seed: int = 0, permutations: int = 1000) -> dict[str, Any]:
    """Run the audit; returns the audit document (also written to ``out/audit.json`` by the command).

    ``similarity``: an embedder (see :func:`pytest_benchaudit.audit.similarity.parse_embedder`) or None.
    Raises :class:`CompareError` (bad runs, nothing to compare) or :class:`OfflineError` (a run that
    cannot be re-scored).
    """
    from pytest_benchaudit.audit.ledger import build_ledger
    from pytest_benchaudit.dataset.suites import SuiteError
    from pytest_benchaudit.pipeline.stages import PipelineError
    from pytest_benchaudit.audit.sensitivity import sensitivity_table

    base = load_runs(run_paths)
    layers = sorted({r["pipeline"] for run in base for r in run.records})
    if toward in layers:
        raise CompareError(f"--toward {toward}: the runs are already under {toward!r}; give runs of another layer")
    rescored_dirs, attribution, upstream = [], [], []
    for run in base:
        new, _results, _cards = rescore_run(run.path, layer=toward, report_dir=out / "runs" / toward,
                                            suites_dir=suites_dir, data_dir=data_dir)
        rescored_dirs.append(new.path)
        rows, _res, _c = sweep_run(run.path, [], toward=toward, suites_dir=suites_dir, data_dir=data_dir)
        attribution += rows
        for row in upstream_differences(run.meta.get("pipeline_cards") or {}, toward, suites_dir):
            if row not in upstream:
                upstream.append(row)
    target = load_runs(rescored_dirs)
    set_a, set_b = make_sets(base, target)
    assert set_b is not None  # a second run set was given
    doc = compare_document(set_a, set_b, None, n_resamples=n_resamples, seed=seed, permutations=permutations)
    cards = {k: c for run in base for k, c in (run.meta.get("pipeline_cards") or {}).items()}
    doc["sensitivity"] = sensitivity_table(set_a, doc["by_set"]["a"], cards,
                                           target + (load_runs(regenerated) if regenerated else []),
                                           n_resamples=n_resamples, seed=seed, permutations=permutations)
    if similarity is not None:
        from pytest_benchaudit.audit.similarity import add_similarity

        add_similarity(doc, [set_a, set_b], similarity, suites_dir, n_prompts=n_prompts, seed=seed)
    benches = sorted({r["benchmark"] for run in base for r in run.records})
    try:
        ledger = [row for row in build_ledger(suites_dir)["benchmarks"] if row.get("benchmark") in benches]
    except (SuiteError, PipelineError) as err:  # reported; the audit goes on
        ledger = [{"note": f"no ledger: {err}"}]
    if findings is None:
        findings = _diagnose(base, ledger, suites_dir, data_dir)
    results = {"a": [r for by in set_a.results.values() for r in by.values()],
               "b": [r for by in set_b.results.values() for r in by.values()]}
    return {
        "version": AUDIT_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "runs": [str(run.path) for run in base], "layers": {"from": layers, "toward": toward},
        "rescored_runs": [str(p) for p in rescored_dirs],
        "scores": scores_both_ways(doc, results),
        "attribution": attribution, "upstream_differences": upstream,
        "ledger": ledger, "findings": findings, "exports": [],
        "compare": doc,
        "how": "downstream fields re-scored from the stored outputs; upstream differences listed, never estimated; "
               "see docs/compare.md for the analyses",
    }

