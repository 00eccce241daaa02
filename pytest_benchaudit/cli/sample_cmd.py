"""``benchaudit sample RUN... --for judge|gold``: a stratified, seeded sample for people to check.

``--for judge``: records with a judge verdict (extraction readings or CORRECT/INCORRECT grades);
``--for gold``: the flags of ``audit-gold`` (most models agree on one answer against the gold).
The CSV gets one empty ``verdict_N`` column per annotator; ``judge-agreement --human`` and
``audit-gold --confirm`` read it back.  How units are drawn: :mod:`pytest_benchaudit.annotation.sample`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_benchaudit.cli._common import Subparsers, records_under

if TYPE_CHECKING:
    from pytest_benchaudit.annotation.sample import GoldUnit, JudgeUnit
    from pytest_benchaudit.pipeline.record_documents import RecordRow

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """Add ``sample`` to the ``benchaudit`` sub-commands; returns its parser."""
    from pytest_benchaudit.annotation.sample import DEFAULT_STRATA, GOLD_STRATA, JUDGE_STRATA

    p = subparsers.add_parser(
        "sample",
        help="a stratified, seeded sample of judge verdicts or gold-label flags for people to check (CSV)",
        description="Draw --n units, an equal share per stratum (capped at its size, leftovers to the strata that "
        "still have units, so rare strata are over-represented), seeded and reproducible. The CSV holds "
        "question text and responses for the annotators: a local file, never exported. Annotators fill "
        "one verdict_N column each (judge: their own label in the judge's vocabulary, CORRECT / "
        "INCORRECT for grading, the answer or NONE for extraction; gold: error, ok or unclear); then "
        "run `judge-agreement --human CSV` or `audit-gold --confirm CSV`.",
    )
    p.add_argument(
        "runs",
        nargs="+",
        type=Path,
        metavar="RUN",
        help="run directories, or folders of run directories (e.g. an import's --report-dir)",
    )
    p.add_argument(
        "--for",
        dest="kind",
        required=True,
        choices=["judge", "gold"],
        help="judge: records with a judge verdict; gold: the flags of audit-gold",
    )
    p.add_argument("--n", type=int, default=120, help="units to draw (default 120, as the paper's judge check)")
    p.add_argument(
        "--strata",
        default=None,
        metavar="K1,K2",
        help=f"stratum keys; judge: {', '.join(JUDGE_STRATA)} (default {','.join(DEFAULT_STRATA['judge'])}); "
        f"gold: {', '.join(GOLD_STRATA)} (default {','.join(DEFAULT_STRATA['gold'])})",
    )
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--annotators", type=int, default=2, help="empty verdict columns to add (default 2)")
    p.add_argument("--min-models", type=int, default=None, metavar="K", help="--for gold: as audit-gold --min-models")
    p.add_argument("--pipeline", default=None, metavar="P", help="only records under pipeline P")
    p.add_argument("--out", type=Path, required=True, metavar="CSV", help="where the sample goes")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``benchaudit sample``: 0 when the sample was written; errors: their kind's status (common.errors)."""
    from pytest_benchaudit.annotation import sample as smp
    from pytest_benchaudit.annotation.gold_audit import audit_gold
    from pytest_benchaudit.compare import expand_runs
    from pytest_benchaudit.runs.store import load_run

    # A bad run or option is one line with the exit status of its kind (cli/app.py, common.errors).
    smp.check_usage(args.kind, args.n, args.annotators)
    strata = (
        [k.strip() for k in args.strata.split(",") if k.strip()]
        if args.strata is not None
        else list(smp.DEFAULT_STRATA[args.kind])
    )
    records: list[RecordRow] = []
    for path in expand_runs(args.runs):
        records += load_run(path, warn=lambda msg: print(f"warning: {msg}", file=sys.stderr), require_records=True)[1]
    if args.pipeline is not None:
        records = records_under(records, args.pipeline)
    units: list[JudgeUnit] | list[GoldUnit]
    if args.kind == "judge":
        units, failed = smp.judge_units(records)
        what = f"{len(units)} judged records ({failed} judge calls without a verdict left out)"
        allowed: tuple[str, ...] = smp.JUDGE_STRATA
    else:
        flags = audit_gold(records, min_models=args.min_models, pipeline=args.pipeline).flags
        units = smp.gold_units([f.row() for f in flags], records)
        what = f"{len(units)} audit-gold flags"
        allowed = smp.GOLD_STRATA
    if not units:
        raise smp.SampleError(f"nothing to sample: the runs hold {what}")
    rows = smp.stratified_sample(units, args.n, strata, seed=args.seed, allowed=allowed)
    smp.write_sample(rows, args.kind, args.out, args.annotators)
    n_strata = len({r["stratum"] for r in rows})
    print(f"{args.out}: {len(rows)} of {what}, {n_strata} strata by {','.join(strata) or '(none)'}, seed {args.seed}")
    print(f"{args.out} {smp.LOCAL_NOTE}")
    return 0
