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
   analysis, peer gaps), the sensitivity table (rho_ext, the paper's: the runs re-scored with the
   target layer's extraction fields only, ``DIR/runs/<layer>-extraction-only/``; rho_downstream: re-scored
   with every downstream field; rho_gen when ``--regenerated`` runs are given) and, with
   ``--similarity``, task similarity against tau-b;
4. the ledger rows of the runs' benchmarks; the diagnose findings (``benchaudit diagnose`` on the runs,
   or those given with ``--findings``);
5. the command (:mod:`pytest_benchaudit.cli.audit_cmd`) writes ``DIR/audit.json``, ``DIR/report.html``
   and an Every Eval Ever export per run (``DIR/every-eval-ever/``).

A run made under two layers at once (``pytest ... --pipelines A,B``; one such run) is audited from
its first layer (or ``from_layer``) toward its second (or ``toward``) with the target layer's real
generations: it is split into one run per layer (``DIR/layers/<layer>/``, :mod:`.layer_runs`); set a
is the base layer's records, set b the target layer's own records (not re-scored); the downstream
fields are attributed by re-scoring the base records as above; the upstream fields that differ are
attributed together from the regenerated records (``upstream_attribution``: target minus the base
re-scored under the target's downstream fields); the sensitivity table gets rho_ext from the
re-scored run and rho_gen from the target layer's records when some upstream field differs.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_benchaudit.aggregate.summary_documents import TaskResult
from pytest_benchaudit.audit.audit_documents import (
    AttributionRow,
    AuditDocument,
    HarnessTableRow,
    ScoreRow,
    UpstreamAttributionRow,
    UpstreamDifference,
)
from pytest_benchaudit.audit.layer_diff import downstream_differs, upstream_differences
from pytest_benchaudit.common.errors import did_you_mean
from pytest_benchaudit.compare import CompareError, compare_document, load_runs, make_sets
from pytest_benchaudit.compare.compare_documents import CompareDocument
from pytest_benchaudit.compare.embedders import Embedder
from pytest_benchaudit.compare.runsets import LoadedRun, RunSet
from pytest_benchaudit.compare.similarity import DEFAULT_PROMPTS
from pytest_benchaudit.dataset.suites import SUITE_FILENAME
from pytest_benchaudit.diagnose.finding_documents import FindingRow
from pytest_benchaudit.diagnose.flips import OrderFlip
from pytest_benchaudit.ledger.ledger_documents import LedgerNote, LedgerRow
from pytest_benchaudit.pipeline.record_documents import Cards, RecordRow
from pytest_benchaudit.rescore.run_dirs import RescoreError, rescore_run, sweep_run
from pytest_benchaudit.runs.run_meta import RunMeta, not_recorded

__all__ = ["AUDIT_VERSION", "AuditOptions", "build_audit", "upstream_differences", "scores_both_ways"]

AUDIT_VERSION = "benchaudit.audit/1"
UPSTREAM = ("dataset", "prompt", "inference")


# Summary fields a score row carries when its run has them: the invalid reasons, and the error bars of
# a run asked K > 1 times (the report's repeats table reads them; docs/statistics.md defines each).
_CARRIED = (
    "invalid_reasons",
    "lower_is_better",
    "repeats",
    "reducer",
    "n_questions",
    "se",
    "se_clustered",
    "ci95",
    "ci95_clustered",
    "sampling_sd",
    "retest_agreement",
    "ci95_method",
    "ci95_clustered_method",
    "clustered_by",
    "n_groups",
)


def scores_both_ways(doc: CompareDocument, results: dict[str, list[TaskResult]]) -> list[ScoreRow]:
    """Per task x model x layer: n, valid, the score over all questions and over the valid ones, the
    headline; plus, where the summary row has them, the invalid reasons and the repeats' error bars."""
    rows: list[ScoreRow] = []
    for side, res in results.items():
        if side not in doc["sets"]:
            continue  # one run set (imported generic tasks: nothing re-scored toward another layer)
        label = doc["sets"][side]["label"]
        for r in res:
            row: ScoreRow = {
                "layer": label,
                "benchmark": r["benchmark"],
                "task": r["task"],
                "model": r["model"],
                "metric": r["metric"],
                "denominator": r["denominator"],
                "n": r["n"],
                "n_valid": r["n_valid"],
                "score": r["score"],
                "score_total": r["score_total"],
                "score_valid": r["score_valid"],
                "invalid_rate": r["invalid_rate"],
            }
            # the keys of _CARRIED, in its order
            if (v0 := r.get("invalid_reasons")) is not None:
                row["invalid_reasons"] = v0
            if (v1 := r.get("lower_is_better")) is not None:
                row["lower_is_better"] = v1
            if (v2 := r.get("repeats")) is not None:
                row["repeats"] = v2
            if (v3 := r.get("reducer")) is not None:
                row["reducer"] = v3
            if (v4 := r.get("n_questions")) is not None:
                row["n_questions"] = v4
            if (v5 := r.get("se")) is not None:
                row["se"] = v5
            if (v6 := r.get("se_clustered")) is not None:
                row["se_clustered"] = v6
            if (v7 := r.get("ci95")) is not None:
                row["ci95"] = v7
            if (v8 := r.get("ci95_clustered")) is not None:
                row["ci95_clustered"] = v8
            if (v9 := r.get("sampling_sd")) is not None:
                row["sampling_sd"] = v9
            if (v10 := r.get("retest_agreement")) is not None:
                row["retest_agreement"] = v10
            if (v11 := r.get("ci95_method")) is not None:
                row["ci95_method"] = v11
            if (v12 := r.get("ci95_clustered_method")) is not None:
                row["ci95_clustered_method"] = v12
            if (v13 := r.get("clustered_by")) is not None:
                row["clustered_by"] = v13
            if (v14 := r.get("n_groups")) is not None:
                row["n_groups"] = v14
            rows.append(row)
    return rows


def _diagnose(
    base: list[LoadedRun],
    ledger: list[LedgerRow],
    suites_dir: Path,
    data_dir: str | None,
    order_flips: Sequence[OrderFlip] | None = None,
) -> list[FindingRow]:
    """``benchaudit diagnose`` on the stored runs (their base records), with the ledger rows for FM15 and the
    multiverse's pairs for BA07."""
    from pytest_benchaudit.diagnose import LoadedRun as DiagnosedRun
    from pytest_benchaudit.diagnose import diagnose, to_json
    from pytest_benchaudit.rescore.run_dirs import _Resources

    runs = [DiagnosedRun(run.path.name, run.meta, run.records) for run in base]
    rows = {row["benchmark"]: row for row in ledger}
    found = diagnose(runs, resources=_Resources(suites_dir, data_dir), ledger_rows=rows, order_flips=order_flips)
    return to_json(found, 0)["findings"]


def _run_meta(run_dir: Path) -> RunMeta:
    """``run.json`` of ``run_dir`` (:func:`~pytest_benchaudit.runs.store.read_run_json`, which checks its cards' shape)."""
    from pytest_benchaudit.runs.store import read_run_json

    return read_run_json(run_dir)


def _two_layers(
    run_paths: list[Path], out: Path, toward: str | None, from_layer: str | None, pipelines: list[str] | None = None
) -> tuple[list[Path], str, Path | None, Path | None, dict[str, Path]]:
    """(the runs audited, the target layer, the target layer's run, the --pipelines run, every layer's
    run) for a ``--pipelines`` run; the runs as given, ``toward`` (default standardized) and no layer
    runs otherwise.  ``pipelines``: the layers of the cross-harness table (the first is the base; the
    target is ``toward`` or the first other one that asks the same kind of request)."""
    from pytest_benchaudit.audit.layer_runs import split_layers
    from pytest_benchaudit.common.errors import RunDirError
    from pytest_benchaudit.compare import expand_runs
    from pytest_benchaudit.runs.run_meta import run_layers

    paths = expand_runs(run_paths)
    layered: dict[Path, list[str]] = {}
    for p in paths:
        try:
            layered[p] = run_layers(_run_meta(p))
        except RunDirError:  # load_runs says what is wrong with it
            layered[p] = []
    layered = {p: ls for p, ls in layered.items() if ls}
    if not layered:
        for option, value in (("--from", from_layer), ("--pipelines", ",".join(pipelines or []) or None)):
            if value is not None:
                raise CompareError(
                    f"{option} {value}: only for a run made with pytest --pipelines (its layers); "
                    "these runs hold one layer each"
                )
        return run_paths, toward or "standardized", None, None, {}
    if len(paths) != 1:
        raise CompareError(
            f"{next(iter(layered))}: a --pipelines run is audited on its own (its layers are both sides); give it alone"
        )
    ((run, layers),) = layered.items()
    if pipelines:
        from_layer, toward = _harness_layers(run, layers, pipelines, from_layer, toward)
    base_layer = from_layer or (layers[1] if toward == layers[0] else layers[0])
    target = toward or next(x for x in layers if x != base_layer)
    for option, name in (("--from", base_layer), ("--toward", target)):
        if name not in layers:
            raise CompareError(
                f"{option} {name}: the run's layers are {', '.join(layers)} (--pipelines){did_you_mean(name, layers)}"
            )
    if base_layer == target:
        raise CompareError(
            f"--from and --toward are both {target!r}: choose two of the run's layers ({', '.join(layers)})"
        )
    try:
        views = split_layers(run, out / "layers")
    except RescoreError as err:
        raise CompareError(str(err)) from None
    if base_layer not in views or target not in views:
        raise CompareError(f"{run}: no records under {base_layer if base_layer not in views else target!r}")
    return [views[base_layer]], target, views[target], run, views


def _harness_layers(
    run: Path, layers: list[str], pipelines: list[str], from_layer: str | None, toward: str | None
) -> tuple[str, str]:
    """(base, target) of the two-layer part of an audit with ``--pipelines``; usage errors name the option."""
    from pytest_benchaudit.audit.cross_harness import request_kind
    from pytest_benchaudit.audit.layer_runs import layer_cards

    text = ",".join(pipelines)
    if len(pipelines) < 2 or len(set(pipelines)) != len(pipelines):
        raise CompareError(f"--pipelines {text}: expected two or more distinct layers of the run, the base first")
    for name in pipelines:
        if name not in layers:
            raise CompareError(
                f"--pipelines {text}: {name!r} is not a layer of {run} (its layers: "
                f"{', '.join(layers)}){did_you_mean(name, layers)}"
            )
    if from_layer not in (None, pipelines[0]):
        raise CompareError(
            f"--from {from_layer} with --pipelines {text}: the base is the first layer listed; give one of them"
        )
    if toward is not None:
        if toward not in pipelines[1:]:
            raise CompareError(
                f"--toward {toward} with --pipelines {text}: choose one of the layers listed after the base"
            )
        return pipelines[0], toward
    # The compare/attribution part re-scores the base's generations toward the target: a layer that
    # asks another kind of request (log-likelihoods) cannot be that target; the table says why.
    cards = _run_meta(run).get("pipeline_cards") or {}
    base = {request_kind(c) for c in layer_cards(cards, pipelines[0]).values()}
    same = [x for x in pipelines[1:] if {request_kind(c) for c in layer_cards(cards, x).values()} == base]
    return pipelines[0], (same or pipelines[1:])[0]


def cross_harness(
    views: dict[str, Path], layers: list[str], suites_dir: Path, data_dir: str | None
) -> list[HarnessTableRow]:
    """The cross-harness rows (:mod:`pytest_benchaudit.audit.cross_harness`) of the layers of one
    ``--pipelines`` run, split into ``views`` (layer -> single-layer run), the first layer the base.

    Each other layer's downstream part re-scores the base layer's records under that layer's stored
    card (its extraction/scoring/aggregation fields as the run used them, ``--set`` included), task by
    task, where both layers ask the same kind of request."""
    from pytest_benchaudit.aggregate.results import summarize
    from pytest_benchaudit.audit.cross_harness import LayerInput, downstream_defined, harness_rows
    from pytest_benchaudit.pipeline.layering import retarget
    from pytest_benchaudit.pipeline.stages import PipelineError
    from pytest_benchaudit.rescore.records import pipeline_from_card, rescore_records
    from pytest_benchaudit.rescore.run_dirs import _Resources, card_key
    from pytest_benchaudit.runs.store import load_run

    def index(results: list[TaskResult]) -> dict[str, dict[str, TaskResult]]:
        out: dict[str, dict[str, TaskResult]] = {}
        for r in results:
            out.setdefault(f"{r['benchmark']}.{r['task']}", {})[r["model"]] = r
        return out

    nothing: tuple[RunMeta, list[RecordRow]] = ({"run_id": ""}, [])  # a layer without records
    loaded = {x: load_run(views[x], require_records=True) if x in views else nothing for x in layers}
    base_meta, base_recs = loaded[layers[0]]
    base_cards: Cards = base_meta.get("pipeline_cards") or {}
    resources = _Resources(suites_dir, data_dir)
    inputs = []
    for name in layers:
        meta, recs = loaded[name]
        cards: Cards = meta.get("pipeline_cards") or {}
        rescored: dict[str, dict[str, TaskResult]] = {}
        notes: dict[str, str] = {}
        requests: dict[tuple[str, str], tuple[int, int]] = {}
        if name != layers[0]:
            sent = {(card_key(r), r["model"], r["question_id"], r.get("repeat", 0)): r.get("request") for r in recs}
            for r in base_recs:
                key = (card_key(r), r["model"], r["question_id"], r.get("repeat", 0))
                if key in sent:
                    same, n = requests.get(key[:2], (0, 0))
                    requests[key[:2]] = (same + (sent[key] == r.get("request")), n + 1)
            for task in sorted(set(base_cards) & set(cards)):
                if downstream_defined(base_cards[task], cards[task]) is not None:
                    continue
                try:
                    pipe = retarget(pipeline_from_card(base_cards[task]), pipeline_from_card(cards[task]), [])
                    new = rescore_records(
                        [r for r in base_recs if card_key(r) == task],
                        lambda _r: pipe,  # noqa: B023 - called within this iteration
                        lambda b, t: resources(b, t, pipe.scoring.metric),  # noqa: B023 - called within this iteration
                    )
                except (PipelineError, RescoreError, KeyError, TypeError, ValueError) as err:
                    notes[task] = f"{type(err).__name__}: {err}"
                    continue
                rescored.update(index(summarize(new, {task: pipe.card()})))
        inputs.append(
            LayerInput(
                name=name,
                cards=cards,
                results=index(summarize(recs, cards)),
                rescored=rescored,
                rescore_notes=notes,
                requests=requests,
            )
        )
    return [row.row() for row in harness_rows(inputs[0], inputs[1:])]


@dataclass(frozen=True)
class AuditOptions:
    """How :func:`build_audit` audits, besides which runs and where to: one value passed whole (as httpx
    takes a ``Timeout`` or ``Limits``), every field defaulting to what ``benchaudit audit`` does unasked.

    ``toward``: the target layer (None: ``standardized``; for a ``--pipelines`` run its second layer);
    ``from_layer``: the base layer of a ``--pipelines`` run (None: its first).  ``pipelines``: the layers
    of a ``--pipelines`` run for the cross-harness table (``harnesses``; the first listed is the base;
    the rest of the audit goes from it toward ``toward`` or the first other layer that asks the same
    kind of request); None: no table, the audit as without it.  ``suites_dir`` / ``data_dir``: where
    the suites and the data (lookup files a metric reads) are.  ``regenerated``: runs of the same
    models with new generations (rho_gen).  ``findings``: diagnose findings to use (None: diagnose the
    runs).  ``similarity``: an embedder (:func:`pytest_benchaudit.compare.similarity.parse_embedder`) for
    task similarity against tau-b, with ``n_prompts`` prompts per task (None: no similarity).
    ``n_resamples``, ``seed``, ``permutations``: the bootstrap's resamples, the seed of every random
    draw, the permutations of the similarity test.  ``order_flips``: the pairs of the runs' multiverse,
    for diagnose's BA07 (the command computes them; None: BA07 is not checked).
    """

    toward: str | None = None
    from_layer: str | None = None
    pipelines: Sequence[str] | None = None
    suites_dir: Path = Path("suites")
    data_dir: str | None = None
    regenerated: Sequence[Path] = ()
    findings: Sequence[FindingRow] | None = None
    similarity: Embedder | None = None
    n_prompts: int = DEFAULT_PROMPTS
    n_resamples: int = 5000
    seed: int = 0
    permutations: int = 1000
    order_flips: Sequence[OrderFlip] | None = None


def build_audit(run_paths: Sequence[Path], out: Path, options: AuditOptions = AuditOptions()) -> AuditDocument:
    """Run the audit of ``run_paths`` (written under ``out``) as ``options`` say; returns the audit
    document (also written to ``out/audit.json`` by the command).

    Raises :class:`CompareError` (bad runs, nothing to compare) or :class:`RescoreError` (a run that
    cannot be re-scored).
    """
    from pytest_benchaudit.compare.sensitivity import SensitivityRequest, classify_runs
    from pytest_benchaudit.dataset.suites import SuiteError
    from pytest_benchaudit.ledger.ledger_rows import build_ledger
    from pytest_benchaudit.pipeline.stages import PipelineError

    toward, suites_dir, data_dir, similarity = options.toward, options.suites_dir, options.data_dir, options.similarity
    pipelines = list(options.pipelines) if options.pipelines is not None else None
    findings = list(options.findings) if options.findings is not None else None
    regenerated = list(options.regenerated)
    given = toward
    run_paths, toward, target_run, layered_run, views = _two_layers(
        list(run_paths), out, toward, options.from_layer, pipelines
    )
    base = load_runs(run_paths)
    layers = sorted({r["pipeline"] for run in base for r in run.records})
    if toward in layers:
        if given is None:  # the user changed no option: say that the default is what does not fit
            raise CompareError(
                f"the runs are already under {toward!r}, the layer an audit goes toward by default; "
                "name another with --toward LAYER (e.g. --toward released)"
            )
        raise CompareError(f"--toward {toward}: the runs are already under {toward!r}; give runs of another layer")
    rescored_dirs: list[Path] = []
    attribution: list[AttributionRow] = []
    upstream: list[UpstreamDifference] = []
    extraction_dirs: list[Path] = []
    rendered: dict[tuple[str, str], UpstreamDifference | None] = {}  # (task, card hash) -> row: rendered once
    notes: list[str] = []
    unrecorded = _truncation_unrecorded(base)
    for run in base:
        why = not_recorded(run.meta, "finish_reason")
        if why:
            notes.append(
                f"{run.path.name}: truncation {why} (no finish reason in its samples): FM03 not checked, "
                "and no reply counts as truncated in its invalid reasons"
            )
    for run in base:
        if not _has_suite(run, suites_dir):
            # An imported log's generic task: no suite, so no layer to re-score toward; the audit keeps the
            # runs' own compare, diagnose and export.
            notes.append(
                f"{run.path.name}: its benchmarks have no suite under {suites_dir} (an imported generic "
                f"task): not re-scored toward {toward!r}"
            )
            continue
        new, _results, _cards = rescore_run(
            run.path,
            layer=toward,
            report_dir=out / "runs" / toward,
            suites_dir=suites_dir,
            data_dir=data_dir,
            option="--toward",
        )
        rescored_dirs.append(new.path)
        # The paper's rho_ext changes extraction alone: the same runs re-scored with only the target
        # layer's extraction.* fields (scoring and aggregation as stored), where those fields differ.
        # Where only extraction fields differ, the full re-score is that run already (one run per column).
        if downstream_differs(run.meta.get("pipeline_cards") or {}, toward, suites_dir) == {"extraction", "more"}:
            only, _r, _c = rescore_run(
                run.path,
                layer=toward,
                report_dir=out / "runs" / f"{toward}-extraction-only",
                suites_dir=suites_dir,
                data_dir=data_dir,
                stages=("extraction",),
                option="--toward",
            )
            extraction_dirs.append(only.path)
        rows, _res, _c = sweep_run(run.path, [], toward=toward, suites_dir=suites_dir, data_dir=data_dir)
        # Each row names the run it re-scored, so the report's "reproduce" command is complete.
        attribution += [AttributionRow(**row, run=str(run.path)) for row in rows]
        if target_run is None:
            # The cards of tasks the run has records of: -k and --limit leave cards of tasks never asked.
            asked = {f"{r['benchmark']}.{r['task']}" for r in run.records}
            cards = {k: v for k, v in (run.meta.get("pipeline_cards") or {}).items() if k.split("|")[0] in asked}
            for row in upstream_differences(cards, toward, suites_dir, data_dir, rendered):
                if row not in upstream:
                    upstream.append(row)
    target = load_runs(rescored_dirs) if rescored_dirs else []
    real = load_runs([target_run]) if target_run is not None else []
    set_a, set_b = make_sets(base, (real or target) or None)
    cards = {k: c for run in base for k, c in (run.meta.get("pipeline_cards") or {}).items()}
    extra = load_runs(regenerated) if regenerated else []
    if real and set_b is not None:  # a --pipelines run: set b is its target layer's own records
        upstream, split = _layer_upstream(set_a, make_sets(target)[0], set_b, cards, real[0].meta)
        # The target layer's own generations are rho_gen's run where some upstream field differs; where
        # none does they are the base's generations re-scored, which the re-scored run already stands for.
        if classify_runs(set_a, cards, real)[0]["kind"] == "upstream":
            extra = real + extra
        else:
            notes.append(
                f"{toward}: the layers send the same requests (no upstream field differs): no rho_gen from this run"
            )
    # The compare part with its analyses (compare.analysis_registry): sensitivity always, similarity on request.
    analyses: dict[str, object] = {
        "sensitivity": SensitivityRequest(target + load_runs(extraction_dirs) + extra, cards)
    }
    if similarity is not None:
        from pytest_benchaudit.compare.similarity import SimilarityRequest

        analyses["similarity"] = SimilarityRequest(similarity, suites_dir, options.n_prompts)
    doc = compare_document(
        set_a,
        set_b,
        None,
        n_resamples=options.n_resamples,
        seed=options.seed,
        permutations=options.permutations,
        options=analyses,
    )
    doc["sensitivity"]["notes"] += notes
    benches = sorted({r["benchmark"] for run in base for r in run.records})
    ledger: list[LedgerRow | LedgerNote]
    try:
        ledger_rows = [row for row in build_ledger(suites_dir)["benchmarks"] if row["benchmark"] in benches]
        ledger = list(ledger_rows)
    except (SuiteError, PipelineError) as err:  # reported; the audit goes on
        ledger_rows, ledger = [], [{"note": f"no ledger: {err}"}]
    if findings is None:
        findings = _diagnose(base, ledger_rows, suites_dir, data_dir, options.order_flips)
    results = {
        "a": [r for by in set_a.results.values() for r in by.values()],
        "b": [r for by in set_b.results.values() for r in by.values()] if set_b is not None else [],
    }
    audit: AuditDocument = {
        "version": AUDIT_VERSION,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "runs": [str(run.path) for run in base],
        "layers": {"from": layers, "toward": toward},
        "rescored_runs": [str(p) for p in rescored_dirs],
        "extraction_only_runs": [str(p) for p in extraction_dirs],
        "scores": _with_truncation(scores_both_ways(doc, results), unrecorded),
        "attribution": attribution,
        # A task whose layers send the same requests (or differ only where it changes nothing) is no
        # upstream difference: it is listed apart, with the fields and why.
        "upstream_differences": [row for row in upstream if row.get("differs") is not False],
        "upstream_same_requests": [row for row in upstream if row.get("differs") is False],
        "ledger": ledger,
        "findings": findings,
        "exports": [],
        "compare": doc,
        "how": "downstream fields re-scored from the stored outputs; upstream differences listed, never estimated; "
        "see docs/compare.md for the analyses",
    }
    if layered_run is not None:
        audit.update(
            {
                "runs": [str(layered_run)],
                "layer_runs": {layers[0]: str(base[0].path), toward: str(real[0].path)},
                "upstream_attribution": split,
                "how": "a --pipelines run: set a = the base layer's records, set b = the target layer's own records; "
                "downstream fields re-scored from the base layer's outputs (attribution), upstream fields "
                "attributed together from the target layer's generations (upstream_attribution); see "
                "docs/audit.md",
            }
        )
    if pipelines:
        audit["layers"]["harnesses"] = list(pipelines)
        audit["harnesses"] = cross_harness(views, list(pipelines), suites_dir, data_dir)
    return audit


def _truncation_unrecorded(runs: Sequence[LoadedRun]) -> dict[tuple[str, str, str], str]:
    """(benchmark, task, model) -> why its truncation is not recorded, for the runs whose source logs no finish
    reason (an lm-eval import): their score rows say so rather than count 0 truncated."""
    out: dict[tuple[str, str, str], str] = {}
    for run in runs:
        why = not_recorded(run.meta, "finish_reason")
        if why:
            out.update({(str(r["benchmark"]), str(r["task"]), str(r["model"])): why for r in run.records})
    return out


def _with_truncation(rows: list[ScoreRow], unrecorded: dict[tuple[str, str, str], str]) -> list[ScoreRow]:
    for row in rows:
        why = unrecorded.get((row["benchmark"], row["task"], row["model"]))
        if why:
            row["truncation"] = why
    return rows


def _has_suite(run: LoadedRun, suites_dir: Path) -> bool:
    """Whether any benchmark the run has records of has a suite under ``suites_dir``."""
    benches = {r["benchmark"] for r in run.records}
    return any((Path(suites_dir) / bench / SUITE_FILENAME).is_file() for bench in benches)


def _layer_upstream(
    set_a: RunSet, rescored: RunSet, real: RunSet, base_cards: Cards, target_meta: RunMeta
) -> tuple[list[UpstreamDifference], list[UpstreamAttributionRow]]:
    """(upstream_differences rows, upstream_attribution rows) of a --pipelines run's two layers."""
    from pytest_benchaudit.audit.layer_runs import upstream_attribution, upstream_fields_between

    target_cards = target_meta.get("pipeline_cards") or {}
    split = upstream_attribution(set_a.results, rescored.results, real.results, base_cards, target_cards)
    rows: list[UpstreamDifference] = []
    # Only the tasks asked under both layers: a run's cards also name tasks that -k or --limit left
    # without a single record, and those were not "regenerated in this run".
    asked = set(set_a.results) & set(real.results)
    for key in sorted(set(base_cards) & set(target_cards) & asked):
        a, b = base_cards[key].get("fields", {}), target_cards[key].get("fields", {})
        fields = upstream_fields_between(base_cards[key], target_cards[key])
        if fields:
            effects = [r["upstream_pp"] for r in split if r["task"] == key and r["upstream_pp"] is not None]
            rows.append(
                {
                    "task": key,
                    "regenerated": True,
                    "fields": [
                        {"field": f, "stored": a.get(f), str(target_meta.get("pipeline")): b.get(f)} for f in fields
                    ],
                    "note": "regenerated in this run: their joint effect per model is in upstream_attribution"
                    + (f" ({min(effects):+.1f} to {max(effects):+.1f} pp)" if effects else ""),
                }
            )
    return rows, split
