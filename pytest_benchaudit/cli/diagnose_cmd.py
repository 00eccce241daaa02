"""``benchaudit diagnose RUN...``: the catalogued failure modes, checked on every model x task of the runs.

Loads the run directories (pytest runs or imports; a folder of run directories is expanded),
runs :func:`pytest_benchaudit.diagnose.diagnose` and prints a table, or the JSON
document with ``--json``.  No model and no network: downstream effects are re-scored from the
stored outputs, upstream ones are marked "needs new generations".
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_benchaudit.cli._common import Subparsers

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_benchaudit.diagnose import LoadedRun
    from pytest_benchaudit.diagnose.flips import OrderFlip
    from pytest_benchaudit.ledger.ledger_documents import LedgerRow

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """Add ``diagnose`` to the ``benchaudit`` sub-commands; returns its parser."""
    p = subparsers.add_parser(
        "diagnose",
        help="check every model x task of some runs for the catalogued failure modes "
        "(hypotheses with evidence, the field that fixes each, the effect in points)",
        description="For every benchmark x task x model of the runs, check the failure modes of "
        "docs/failure-modes.md and report each finding: catalogue id, one sentence worded as a "
        "hypothesis, the evidence (counts, a few question ids), the pipeline field that would fix it "
        "and its effect: re-scored offline for downstream fields, 'needs new generations' (with an "
        "estimate where one is honest) for upstream ones. Findings are listed largest |effect| first; "
        "dataset and card problems once per task; findings whose re-scored or recomputed effect is 0.0 "
        "are counted, not listed (--json: 'folded'). Exit status 0 whether or not there are "
        "findings, 2 on bad input.",
    )
    p.add_argument(
        "runs",
        nargs="+",
        type=Path,
        metavar="RUN",
        help="run directories, or folders of run directories (e.g. an import's --report-dir)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the findings as JSON (key 'findings'; the zero-effect ones under 'folded')",
    )
    p.add_argument(
        "--no-ledger",
        action="store_true",
        help="skip FM15 (documented vs released layers), which reads the suites' configs",
    )
    p.add_argument(
        "--no-multiverse",
        action="store_true",
        help="skip BA07 (a pair of models whose order flips across the task's multiverse), which re-scores "
        "every specification of each task's space (benchaudit multiverse)",
    )
    p.add_argument("--suites-dir", type=Path, default=Path("suites"), help="where suites live (default: suites/)")
    p.add_argument("--data-dir", help="data directory, for metrics that read lookup files (default: $BENCHAUDIT_DATA)")
    return p


def _ledger_rows(suites_dir: Path, benchmarks: set[str]) -> dict[str, LedgerRow]:
    from pytest_benchaudit.dataset.suites import load_suite, suite_path
    from pytest_benchaudit.ledger.ledger_rows import suite_ledger

    rows: dict[str, LedgerRow] = {}
    for bench in sorted(benchmarks):
        path = suite_path(suites_dir, bench)
        if path.is_file():
            rows[bench] = suite_ledger(load_suite(path))
        else:
            print(f"warning: no {path}: FM15 (ledger) not checked for {bench}", file=sys.stderr)
    return rows


def _order_flips(
    runs: list[LoadedRun], suites_dir: Path, data_dir: str | None, warn: Callable[[str], None]
) -> list[OrderFlip] | None:
    """The pairs of the runs' multiverse for BA07 (None, with a warning, when it cannot be made; not made
    when no task has two models, since no pair can flip)."""
    from pytest_benchaudit.common.errors import BenchauditError
    from pytest_benchaudit.multiverse.universe import multiverse_of, order_flips

    models: dict[tuple[str, str], set[str]] = {}
    for run_ in runs:
        for r in run_.records:
            models.setdefault((str(r["benchmark"]), str(r["task"])), set()).add(str(r["model"]))
    if all(len(m) < 2 for m in models.values()):
        return []
    try:
        doc = multiverse_of(
            [(run_.name, run_.meta, run_.records) for run_ in runs],
            suites_dir=suites_dir,
            data_dir=data_dir,
            resamples=0,
        )
    except BenchauditError as err:
        warn(f"BA07 (order flips across the multiverse) not checked: {err}")
        return None
    return order_flips(doc)


def run(args: argparse.Namespace) -> int:
    """Run ``benchaudit diagnose``: 0 when the checks ran (errors: their kind's status, common.errors)."""
    from pytest_benchaudit.compare import expand_runs
    from pytest_benchaudit.diagnose import LoadedRun, diagnose_report, render, to_json
    from pytest_benchaudit.diagnose.core import group_runs, missing_cards
    from pytest_benchaudit.rescore.run_dirs import _Resources
    from pytest_benchaudit.runs.store import load_run

    def warn(msg: str) -> None:
        print(f"warning: {msg}", file=sys.stderr)

    # A bad run is one line with the exit status of its kind (cli/app.py; 1: an unusable run directory).
    runs = []
    for path in expand_runs(args.runs):
        meta, records = load_run(path, warn=warn, require_records=True)
        runs.append(LoadedRun(path.name, meta, records))
    benchmarks = {str(r["benchmark"]) for run_ in runs for r in run_.records}
    ledger = None if args.no_ledger else _ledger_rows(args.suites_dir, benchmarks)
    resources = _Resources(args.suites_dir, args.data_dir)
    for where in missing_cards(runs):
        warn(f"{where} has no pipeline card in run.json: its records are not checked")
    flips = None if args.no_multiverse else _order_flips(runs, args.suites_dir, args.data_dir, warn)
    report = diagnose_report(runs, resources=resources, ledger_rows=ledger, order_flips=flips)
    n_groups = len(group_runs(runs))
    unchecked = truncation_unchecked(runs)
    if args.json:
        doc = to_json(report.findings, n_groups, report.folded)
        if unchecked:
            doc["not_checked"] = unchecked
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        print(render(report.findings, n_groups, report.folded) + "".join(f"\nnot checked: {u}" for u in unchecked))
    return 0


def truncation_unchecked(runs: Sequence[LoadedRun]) -> list[str]:
    """One line per run whose source records no finish reason (lm-eval): FM03 cannot see a truncated reply there,
    so its silence is no "0 truncated"."""
    from pytest_benchaudit.runs.run_meta import not_recorded

    return [
        f"FM03 (token-budget truncation) on {run.name}: finish reason {why}; truncation not recorded"
        for run in runs
        if (why := not_recorded(run.meta, "finish_reason"))
    ]
