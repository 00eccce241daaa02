"""What ``make demo`` prints between and after its runs: the same questions under two pipelines, explained.

``python -m pytest_benchaudit.report.demo RELEASED_RUN STANDARDIZED_RUN [--html PATH]`` reads the
two run directories (their ``summary.json``) and prints, in plain words:

* each pipeline's score over all questions, over valid answers, and its invalid rate;
* the difference in percentage points, and why it can be that large;
* which single fields of the released pipeline move its score (the ``--vary`` counterfactuals
  of the released run: each variant changes one field toward the standardized pipeline and
  names the stage that moved it);
* where the run directories and the HTML report are, and the next commands to try.

No model and no pytest: it only reads files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_benchaudit.aggregate.results import variant_deltas
from pytest_benchaudit.report.terminal import WIDTH, render_variant_deltas


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"

__all__ = ["explain", "main"]


def _load(run: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    return summary.get("results", []), meta.get("pipeline_cards", {})


def _base(results: list[dict[str, Any]]) -> dict[str, Any]:
    return next(r for r in results if not r.get("variant"))


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _pipeline_lines(name: str, r: dict[str, Any]) -> list[str]:
    reasons = ", ".join(f"{k} {v}" for k, v in r["invalid_reasons"].items()) or "none"
    return [f"  {name:<13}: {_pct(r['score'])} of all questions, {_pct(r['score_valid'])} of valid answers, "
            f"{_pct(r['invalid_rate'])} invalid",
            _cut(f"  {'':<13}  invalid answers: {reasons}", WIDTH)]


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
        lines += ["", "Which fields move the released score (each variant of the released run changes one field):",
                  render_variant_deltas(rows)]
    lines += ["", "Run directories (records.jsonl, summary.json, run.json with the pipeline cards):",
              f"  released     : {released}", f"  standardized : {standardized}"]
    if html:
        lines.append(f"HTML report (ranks, score shifts, plots; one self-contained file): {html}")
    lines += ["", "Next, try:",
              f"  benchaudit show {standardized}    # the summary and pipeline cards again",
              f"  benchaudit rescore {released} --set scoring.denominator=valid    # re-score, no model",
              f"  benchaudit sweep {released} --toward standardized    # each downstream field alone",
              "  pytest suites/cybermetric -k cm80 --pipeline released --vary extraction.rule=final_answer_letter"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_benchaudit.report.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("released", type=Path)
    parser.add_argument("standardized", type=Path)
    parser.add_argument("--html", default=None)
    args = parser.parse_args(argv)
    try:
        print(explain(args.released, args.standardized, args.html))
    except (OSError, ValueError, KeyError, StopIteration) as err:
        print(f"demo: cannot read the runs ({type(err).__name__}: {err})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
