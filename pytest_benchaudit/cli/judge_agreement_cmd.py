"""``benchaudit judge-agreement RUN_A RUN_B | RUN``: agreement, Cohen's kappa, confusion table and strata of two judges.

And ``judge-agreement --human SAMPLE.csv``: the judge's accuracy against people.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pytest_benchaudit.annotation.judge_agreement import (
    JudgeAgreementError,
    agreement_report,
    pair_runs,
    render,
    within_run,
)
from pytest_benchaudit.annotation.sample import SampleError
from pytest_benchaudit.cli._common import Subparsers, records_under
from pytest_benchaudit.pipeline.record_documents import RecordRow
from pytest_benchaudit.runs.store import load_run

HELP = "agreement, Cohen's kappa, confusion table and strata of two judges"


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "judge-agreement",
        help="agreement of two judges, or judge vs regex (raw agreement, Cohen's kappa, confusion)",
        description="RUN_A RUN_B: pair records by (benchmark, task, question_id, model, variant) and compare the "
        "grading verdicts (or `correct` for a run without a judge) or the extracted predictions. RUN: "
        "within one run with judge extraction, the judge's answer vs regex_prediction. Prints raw "
        "agreement, Cohen's kappa, a confusion table, per-model score differences (pp) and strata "
        "(regex found nothing; regex and judge disagree).",
    )
    p.add_argument("runs", nargs="*", type=Path, metavar="RUN", help="one run directory, or two (A then B)")
    p.add_argument(
        "--human",
        type=Path,
        metavar="CSV",
        help="instead of runs: a sample from `benchaudit sample --for judge` with the annotators' "
        "verdict columns filled; prints the judge's accuracy against people and Cohen's kappa "
        "between the first two annotators",
    )
    p.add_argument(
        "--purpose",
        choices=["auto", "extraction", "grading"],
        default="auto",
        help="what to compare for two runs (default: grading if the records carry grading judges, else extraction)",
    )
    p.add_argument("--pipeline", default=None, metavar="P", help="only records under pipeline P")
    p.add_argument(
        "--max-labels",
        type=int,
        default=12,
        metavar="N",
        help="labels shown in the confusion table; the rest are pooled as (other) (default 12)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON instead of tables")
    return p


def _load(path: Path, pipeline: str | None = None) -> list[RecordRow]:
    _meta, records = load_run(path, warn=lambda msg: print(f"warning: {msg}", file=sys.stderr), require_records=True)
    if pipeline is not None:
        records_under(records, pipeline)  # a pipeline the run does not hold is one error naming the nearest
    return records


def run(args: argparse.Namespace) -> int:
    """Run ``benchaudit judge-agreement``: 0 when a comparison was printed, 2 on bad input."""
    if getattr(args, "human", None) is not None:
        return _run_human(args)
    try:
        if len(args.runs) not in (1, 2):
            raise JudgeAgreementError(f"give one run directory or two, not {len(args.runs)}")
        if len(args.runs) == 2:
            if args.runs[0].resolve() == args.runs[1].resolve():
                raise JudgeAgreementError("RUN_A and RUN_B are the same directory")
            pairing = pair_runs(
                _load(args.runs[0], args.pipeline),
                _load(args.runs[1], args.pipeline),
                purpose=args.purpose,
                pipeline=args.pipeline,
                names=(args.runs[0].name, args.runs[1].name),
            )
        else:
            if args.purpose == "grading":
                raise JudgeAgreementError("within one run only extraction (judge vs regex_prediction) is compared")
            pairing = within_run(_load(args.runs[0], args.pipeline), pipeline=args.pipeline, name=str(args.runs[0]))
        if not pairing["pairs"]:
            raise JudgeAgreementError(
                "no paired items to compare (no common (benchmark, task, question_id, model, "
                "variant) with a usable label on both sides)"
            )
        doc = agreement_report(pairing)
    except JudgeAgreementError as err:
        print(f"benchaudit judge-agreement: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        print(render(doc, max_labels=max(1, args.max_labels)))
    return 0


def _run_human(args: argparse.Namespace) -> int:
    """``judge-agreement --human CSV``: the judge against the annotators of a filled sample."""
    from pytest_benchaudit.annotation.sample import (
        human_judge_report,
        read_sample,
        render_human_judge,
    )

    if args.runs:
        print("benchaudit judge-agreement: give either runs or --human CSV, not both", file=sys.stderr)
        return 2
    try:
        rows, verdicts = read_sample(args.human, "judge")
        doc = human_judge_report(rows, verdicts)
    except SampleError as err:
        print(f"benchaudit judge-agreement: {err}", file=sys.stderr)
        return 2
    print(json.dumps(doc, indent=2) if args.json else render_human_judge(doc))
    return 0
