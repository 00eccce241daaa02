"""Generation against extraction sensitivity (``benchaudit compare BASE... --sensitivity RUN...``).

Which moves a benchmark's model ranking more: a change that needs new generations (an upstream
field: dataset, prompt, inference) or one that re-scores the stored outputs (extraction, scoring,
denominator)?  Each run given to ``--sensitivity`` is classified against the base set (set a):

- **regenerated** (``upstream``): some question it shares with the base has a different raw output,
  or its records carry another upstream hash (the hash of the dataset, prompt and inference fields);
- **re-scored** (``downstream``): same upstream hash and the same raw output for every shared
  question (what ``benchaudit rescore`` and ``sweep`` write).

The regenerated runs form one run set and the re-scored runs another; each is compared with the
base as ``compare`` compares two sets (benchmark ranking by mean task rank over the tasks both
have, among the models both score on all of them; Spearman rho with a 95% percentile CI from the
paired bootstrap over questions).  ``rho_gen`` and ``rho_ext`` per benchmark: 1 = the change kept
the ranking, lower = it reordered the models.  A benchmark without runs of one kind has that rho
null, with the reason.
"""

from __future__ import annotations

from typing import Any

from pytest_benchaudit.audit.compare.oneset import analyse_set
from pytest_benchaudit.audit.compare.runsets import CompareError, LoadedRun, RunSet, load_run_set
from pytest_benchaudit.audit.compare.twosets import compare_sets

__all__ = ["classify_runs", "sensitivity_table", "render_sensitivity"]

KINDS = {"upstream": "regenerated (upstream change)", "downstream": "re-scored (downstream change)"}


def _upstream_fields(base_cards: dict[str, Any], cards: dict[str, Any], key: str) -> list[str]:
    """Names of the dataset/prompt/inference fields whose value differs between two cards of a task."""
    a = (base_cards.get(key) or {}).get("fields", {})
    b = (cards.get(key) or {}).get("fields", {})
    return sorted(f for f in set(a) | set(b) if f.split(".", 1)[0] in ("dataset", "prompt", "inference")
                  and a.get(f) != b.get(f))


def classify_runs(base: RunSet, base_cards: dict[str, Any], runs: list[LoadedRun]) -> list[dict[str, Any]]:
    """One row per run: its kind (upstream / downstream) and the evidence."""
    raw: dict[tuple[str, str, str], Any] = {}
    upstream: dict[tuple[str, str], set[str]] = {}
    for (key, model), recs in base.items.items():
        for r in recs:
            raw[(key, model, str(r["question_id"]))] = r.get("raw_output")
            upstream.setdefault((key, model), set()).add(str(r.get("upstream_hash")))
    rows = []
    for run in runs:
        shared = differ = 0
        hashes_differ: set[str] = set()
        for r in run.records:
            key = f"{r['benchmark']}.{r['task']}"
            q = (key, r["model"], str(r["question_id"]))
            if q not in raw:
                continue
            shared += 1
            differ += r.get("raw_output") != raw[q]
            if str(r.get("upstream_hash")) not in upstream.get((key, r["model"]), set()):
                hashes_differ.add(key)
        if not shared:
            raise CompareError(f"--sensitivity {run.path}: shares no (task, model, question) with the base runs")
        kind = "upstream" if differ or hashes_differ else "downstream"
        fields = sorted({f for key in hashes_differ
                         for f in _upstream_fields(base_cards, run.meta.get("pipeline_cards") or {}, key)})
        rows.append({"run": str(run.path), "kind": kind, "shared_items": shared, "raw_outputs_differ": differ,
                     "upstream_hash_differs": sorted(hashes_differ), "upstream_fields_differ": fields,
                     "pipelines": sorted({r["pipeline"] for r in run.records})})
    return rows


def sensitivity_table(base: RunSet, an_base: dict[str, Any], base_cards: dict[str, Any], runs: list[LoadedRun],
                      n_resamples: int = 5000, seed: int = 0, permutations: int = 1000) -> dict[str, Any]:
    """compare.json's ``sensitivity``: run classes, and per benchmark rho_gen and rho_ext with CIs."""
    classes = classify_runs(base, base_cards, runs)
    by_kind: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for kind in KINDS:
        chosen = [run for run, c in zip(runs, classes) if c["kind"] == kind]
        if not chosen:
            continue
        rs = load_run_set(f"{base.label}~{kind}", chosen)
        cmp = compare_sets(base, rs, an_base, analyse_set(rs, seed, permutations), n_resamples, seed)
        by_kind[kind] = {r["benchmark"]: r for r in cmp["spearman"]}
        notes += [f"{kind}: {n}" for n in cmp["notes"]]
        notes += [f"{kind}: {m['model']} ({m['benchmark']}): {m['reason']}" for m in cmp["missing"]]
    benches = sorted({b for rows in by_kind.values() for b in rows} | {k.split(".", 1)[0] for k in an_base["scores"]})
    table = []
    for bench in benches:
        row: dict[str, Any] = {"benchmark": bench}
        for kind, short in (("upstream", "gen"), ("downstream", "ext")):
            sp = by_kind.get(kind, {}).get(bench)
            row[f"rho_{short}"] = sp["rho"] if sp else None
            row[f"ci95_{short}"] = sp["ci95"] if sp else None
            row[f"n_models_{short}"] = sp["n_models"] if sp else 0
            row[f"tasks_{short}"] = sp["tasks"] if sp else []
            if not sp:
                row[f"why_no_{short}"] = (f"no {KINDS[kind]} run of this benchmark" if kind not in by_kind or
                                          bench not in by_kind[kind] else "fewer than 3 models to rank")
                if kind == "upstream":
                    row[f"why_no_{short}"] += ": needs new generations"
        g, e = row["rho_gen"], row["rho_ext"]
        row["generation_moves_more"] = None if g is None or e is None else bool(g < e)
        table.append(row)
    return {"runs": classes, "benchmarks": table, "n_resamples": n_resamples, "seed": seed, "notes": notes,
            "how": "runs classified against the base (set a) by raw outputs and upstream hash; per kind, Spearman "
                   "rho between the base benchmark ranking (mean task rank) and the changed one, 95% percentile CI "
                   "from the paired bootstrap over questions"}


def render_sensitivity(sens: dict[str, Any]) -> str:
    """The sensitivity table for the terminal."""
    from tabulate import tabulate

    def ci(x: list[float] | None) -> str:
        return f"[{x[0]:.2f}, {x[1]:.2f}]" if x else "–"

    def rho(x: float | None) -> str:
        return "–" if x is None else f"{x:.2f}"

    rows = [[r["benchmark"], rho(r["rho_gen"]), ci(r["ci95_gen"]), r["n_models_gen"], rho(r["rho_ext"]),
             ci(r["ci95_ext"]), r["n_models_ext"]] for r in sens["benchmarks"]]
    out = ["Sensitivity: Spearman rho of each benchmark ranking, base vs regenerated (gen) and vs re-scored (ext); "
           f"paired bootstrap, {sens['n_resamples']} resamples",
           tabulate(rows, headers=["benchmark", "rho_gen", "95% CI", "models", "rho_ext", "95% CI", "models"],
                    tablefmt="simple", disable_numparse=True)]
    counts = {k: sum(c["kind"] == k for c in sens["runs"]) for k in KINDS}
    out.append(f"runs: {counts['upstream']} regenerated, {counts['downstream']} re-scored")
    for r in sens["benchmarks"]:
        for short in ("gen", "ext"):
            if r.get(f"why_no_{short}"):
                out.append(f"  {r['benchmark']}: no rho_{short}: {r[f'why_no_{short}']}")
    return "\n".join(out)
