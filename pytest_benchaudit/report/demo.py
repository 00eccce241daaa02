"""What ``make demo`` prints between and after its runs: the same questions under two pipelines, explained.

``python -m pytest_benchaudit.report.demo RELEASED_RUN STANDARDIZED_RUN [--html PATH]`` reads the
two run directories (their ``summary.json``) and prints, in plain words:

* each pipeline's score over all questions, over valid answers, and its invalid rate;
* the difference in percentage points, and why it can be that large;
* which single fields of the released pipeline move its score (the ``--vary`` counterfactuals
  of the released run: each variant changes one field toward the standardized pipeline and
  names the stage that moved it);
* where the run directories and the HTML report are, and the next commands to try.

``python -m pytest_benchaudit.report.demo RUN [--audit DIR]`` does the same for one run made with
``--pipelines released,standardized`` (what ``make demo`` makes now) and, with the directory
``benchaudit audit RUN --out DIR`` wrote, explains the audit: the move from one layer to the other
split into its downstream part (re-scored) and its upstream part (the standardized layer's own
generations), the fields that move the released score, and where audit.json and the report are.  A run
of three or more layers (``make demo`` adds ``inspect_evals``: what Inspect would have scored), audited
with ``--pipelines``, also gets its cross-harness table explained: every layer against the benchmark's
own reading, each move split into reading (downstream) and asking (upstream).

No model and no pytest: it only reads files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_benchaudit.aggregate.results import variant_deltas
from pytest_benchaudit.aggregate.summary_documents import TaskResult
from pytest_benchaudit.common.errors import RunDirError
from pytest_benchaudit.pipeline.record_documents import Cards
from pytest_benchaudit.report.terminal import WIDTH, render_variant_deltas


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


__all__ = ["explain", "explain_layers", "main"]


def _load(run: Path) -> tuple[list[TaskResult], Cards]:
    from pytest_benchaudit.runs.store import read_run_json, read_summary_json

    return read_summary_json(run).get("results", []), read_run_json(run).get("pipeline_cards", {})


def _base(results: list[TaskResult]) -> TaskResult:
    """The base layer's result; a run that scored nothing (every item skipped) is a ValueError saying so."""
    base = next((r for r in results if not r.get("variant")), None)
    if base is None:
        raise ValueError(
            "the run scored no question: its items were skipped (`pytest -rs` says why; most often "
            "the benchmark's data is not in the data directory: benchaudit fetch NAME, or set BENCHAUDIT_DATA)"
        )
    return base


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _pipeline_lines(name: str, r: TaskResult) -> list[str]:
    reasons = ", ".join(f"{k} {v}" for k, v in r["invalid_reasons"].items()) or "none"
    return [
        f"  {name:<13}: {_pct(r['score_total'])} of all questions, {_pct(r['score_valid'])} of valid answers, "
        f"{_pct(r['invalid_rate'])} invalid",
        _cut(f"  {'':<13}  invalid answers: {reasons}", WIDTH),
    ]


def explain(released: Path, standardized: Path, html: str | None = None) -> str:
    """The demo's closing explanation, as text (each line under 120 columns)."""
    rel_results, rel_cards = _load(released)
    std_results, _ = _load(standardized)
    rel, std = _base(rel_results), _base(std_results)
    diff = 100 * ((std["score"] or 0) - (rel["score"] or 0))
    lines = [
        f"Same {rel['n']} questions ({rel['benchmark']}.{rel['task']}), same model ({rel['model']}), two pipelines:",
        *_pipeline_lines("released", rel),
        *_pipeline_lines("standardized", std),
        f"  difference   : {diff:+.1f} percentage points (standardized - released), from pipeline choices alone.",
        "",
        "Why: each pipeline reads and counts answers its own way. Here the released one reads the answer with",
        "the benchmark's own regex over the whole output (reasoning kept) and re-asks while none can be read;",
        "the standardized one reads an explicit final answer, strips reasoning and asks once. Each run's",
        "pipeline card (run.json) lists every field; the invalid rate says how many answers could not be read.",
    ]
    rows = variant_deltas(rel_results, rel_cards)
    if rows:
        lines += [
            "",
            "Which fields move the released score (each variant of the released run changes one field):",
            render_variant_deltas(rows),
        ]
    lines += [
        "",
        "Run directories (records.jsonl, summary.json, run.json with the pipeline cards):",
        f"  released     : {released}",
        f"  standardized : {standardized}",
    ]
    if html:
        lines.append(f"HTML report (ranks, score shifts, plots; one self-contained file): {html}")
    lines += [
        "",
        "Next, try:",
        f"  benchaudit show {standardized}    # the summary and pipeline cards again",
        f"  benchaudit rescore {released} --set scoring.denominator=valid    # re-score, no model",
        f"  benchaudit sweep {released} --toward standardized    # each downstream field alone",
        "  pytest suites/cybermetric -k cm80 --pipeline released --vary extraction.rule=final_answer_letter",
    ]
    return "\n".join(lines)


_COUNT = {2: "two", 3: "three", 4: "four", 5: "five"}


def explain_layers(run: Path, audit: Path | None = None) -> str:
    """The closing explanation of ``make demo``: one ``--pipelines`` run and its audit (each line under 120 columns)."""
    results, cards = _load(run)
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    layers = meta.get("pipelines") or ["released", "standardized"]
    base_layer, target_layer = layers[:2]
    rel = _base(results)
    own = {
        x: next(
            (r for r in results if r.get("variant") == x and r["model"] == rel["model"] and r["task"] == rel["task"]),
            None,
        )
        for x in layers[1:]
    }
    std = own[target_layer]
    if std is None:
        raise ValueError(f"no {target_layer!r} result for {rel['model']} on {rel['benchmark']}.{rel['task']}")
    shown = [(x, r) for x, r in own.items() if r is not None]
    lines = [
        f"Same {rel['n']} questions ({rel['benchmark']}.{rel['task']}), same model ({rel['model']}), one run, "
        f"{_COUNT.get(1 + len(shown), str(1 + len(shown)))} pipelines:",
        *_pipeline_lines(base_layer, rel),
        *[line for x, r in shown for line in _pipeline_lines(x, r)],
        *[
            f"  difference   : {100 * ((r['score'] or 0) - (rel['score'] or 0)):+.1f} percentage points ({x} - "
            f"{base_layer}), from pipeline choices alone."
            for x, r in shown
        ],
        "",
        "Why: each pipeline asks, reads and counts answers its own way. Here the released one asks with the",
        "benchmark's own prompt, reads the answer with its regex over the whole output (reasoning kept) and",
        "re-asks while none can be read; the standardized one asks its own prompt once, reads an explicit final",
        "answer and strips reasoning. The run's pipeline cards (run.json) list every field of every layer.",
    ]
    doc: dict[str, Any] = {}
    if audit is not None and (audit / "audit.json").is_file():
        doc = json.loads((audit / "audit.json").read_text(encoding="utf-8"))
    split = [
        r
        for r in doc.get("upstream_attribution") or []
        if r["model"] == rel["model"] and r["task"] == f"{rel['benchmark']}.{rel['task']}"
    ]
    if split:
        from pytest_benchaudit.report.terminal import render_layer_attribution

        r = split[0]
        lines += [
            "",
            "Where the difference comes from (benchaudit audit):",
            render_layer_attribution(split, base_layer, target_layer),
            f"  downstream = the {base_layer} answers re-scored under the {target_layer} extraction and scoring;",
            _cut(
                f"  upstream   = the {target_layer} answers themselves, new generations ("
                + (
                    ", ".join(r["upstream_fields"][:4]) + (", …" if len(r["upstream_fields"]) > 4 else "")
                    if r["upstream_fields"]
                    else "no upstream field differs"
                )
                + ": together).",
                WIDTH,
            ),
        ]
    harness = [r for r in doc.get("harnesses") or [] if r["model"] == rel["model"]]
    if harness:
        from pytest_benchaudit.audit.cross_harness import render_harnesses

        peers = [x for x in doc["layers"].get("harnesses", [])[1:] if x != target_layer]
        lines += [
            "",
            f"Every layer against {base_layer}, the benchmark's own reading (benchaudit audit --pipelines, "
            "the cross-harness table):",
            render_harnesses(harness, WIDTH),
            "  move       = the layer's score minus the benchmark's own; it splits in two parts that add up:",
            f"  downstream = the {base_layer} answers read and counted as the layer reads them (its extraction, "
            "scoring, denominator);",
            "  upstream   = what the layer's own questions did (its prompt, budget, re-asks: new generations).",
            *(
                [
                    _cut(
                        f"  {', '.join(peers)}: a general harness's pipeline for this benchmark "
                        "(docs/harnesses.md): the score its users see.",
                        WIDTH,
                    )
                ]
                if peers
                else []
            ),
        ]
    moved = [
        r
        for r in doc.get("attribution") or []
        if r.get("moved_by") not in (None, "none") and r["model"] == rel["model"]
    ]
    if moved:
        lines += [
            "",
            f"Which downstream fields move the {base_layer} score (each variant changes one field "
            f"toward {target_layer}, re-scored):",
            render_variant_deltas(moved),
        ]
    lines += [
        "",
        "Run directory (records.jsonl, summary.json, run.json with every layer's pipeline cards):",
        f"  {run}",
    ]
    if doc and audit is not None:
        n_findings = len(doc.get("findings") or [])
        lines += [
            f"Audit ({n_findings} diagnose findings, both layers compared; ranks, tau-b and rho need 3 or more "
            "models):",
            f"  {audit / 'audit.json'}",
            f"  HTML report (one self-contained file): {audit / 'report.html'}",
            f"  Every Eval Ever export: {audit / 'every-eval-ever'}",
        ]
    lines += [
        "",
        "Next, try:",
        f"  benchaudit show {run}    # both layers' summary and pipeline cards again",
        f"  benchaudit audit {run} --out reports/my-audit    # the whole audit again",
        "  pytest suites/cybermetric -k cm80 --pipelines released,standardized --model local --model M2 --model M3",
    ]
    if harness:
        lines.append(
            f"  benchaudit audit {run} --out reports/my-audit --pipelines "
            f"{','.join(doc['layers'].get('harnesses', []))}    # the cross-harness table again"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_benchaudit.report.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "runs",
        type=Path,
        nargs="+",
        metavar="RUN",
        help="RELEASED_RUN STANDARDIZED_RUN, or one run made with --pipelines",
    )
    parser.add_argument("--html", default=None)
    parser.add_argument("--audit", type=Path, default=None, help="the --out DIR of benchaudit audit on the one run")
    args = parser.parse_args(argv)
    if len(args.runs) > 2:
        parser.error("give one --pipelines run, or a released and a standardized run")
    try:
        print(
            explain_layers(args.runs[0], args.audit)
            if len(args.runs) == 1
            else explain(args.runs[0], args.runs[1], args.html)
        )
    except (OSError, ValueError, KeyError, RunDirError) as err:
        print(f"demo: cannot read the runs ({type(err).__name__}: {err})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
