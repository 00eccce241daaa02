"""``benchaudit multiverse RUN... --out DIR``: every defensible pipeline of each task at once (issue 36).

Each task's space (the suite's ``[tasks.T.multiverse]``, else its defaults) is enumerated, every
specification re-scored from the stored outputs, and what survives reported: ``DIR/multiverse.json``,
``DIR/multiverse.html`` and the terminal, the verdicts first.  ``--list BENCH`` prints a suite's
spaces and their sizes before any work.  See :mod:`pytest_benchaudit.multiverse` and docs/multiverse.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_benchaudit.cli._common import CliError, Subparsers, add_data_dir, add_suites_dir, suite_file

__all__ = ["HELP", "add_parser", "run"]

HELP = "every defensible pipeline of each task at once: which model orderings survive (no model calls)"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "multiverse",
        help=HELP,
        description="Score stored runs under every specification of each task's space (the downstream fields' "
        "defensible values, declared in the suite's [tasks.T.multiverse] or its defaults; upstream "
        "fields where the runs hold their generations) and report which model orderings hold in "
        "every specification, the score distributions, rank intervals and the share of the "
        "variance each field explains. Writes DIR/multiverse.json and DIR/multiverse.html.",
    )
    p.add_argument("runs", nargs="*", type=Path, metavar="RUN", help="run directories, or folders of them")
    p.add_argument("--out", type=Path, metavar="DIR", help="where multiverse.json and multiverse.html go")
    p.add_argument(
        "--list",
        metavar="BENCH",
        dest="list_bench",
        help="print BENCH's space per task (fields, values and why, size) and stop",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the sample of a large space and of the bootstrap")
    p.add_argument(
        "--resamples",
        type=int,
        default=1000,
        help="bootstrap resamples of the rank interval over questions x specifications (default 1000)",
    )
    p.add_argument(
        "--max-specs",
        type=int,
        default=4096,
        metavar="N",
        help="enumerate the full factorial up to N specifications per task, else a seeded sample of N (default 4096)",
    )
    p.add_argument("--json", action="store_true", help="print multiverse.json instead of the text report")
    add_suites_dir(p)
    add_data_dir(p)
    return p


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.multiverse.mv_terminal import render_multiverse, render_spaces

    if args.list_bench:
        from pytest_benchaudit.multiverse.universe import suite_spaces

        suite_file(args.list_bench, args.suites_dir)  # a missing suite: one error listing those there are
        print(render_spaces(suite_spaces(args.list_bench, args.suites_dir), args.max_specs))
        return 0
    if not args.runs:
        raise CliError("give run directories (or folders of them), or --list BENCH")
    if args.out is None:
        raise CliError("give --out DIR: where multiverse.json and multiverse.html go")
    if args.resamples < 0:
        raise CliError("--resamples must be 0 or more")
    from pytest_benchaudit.multiverse.mv_html import write_multiverse_html
    from pytest_benchaudit.multiverse.universe import build_multiverse, write_document

    doc = build_multiverse(
        args.runs,
        suites_dir=args.suites_dir,
        data_dir=args.data_dir,
        seed=args.seed,
        resamples=args.resamples,
        max_specs=args.max_specs,
    )
    target = write_document(doc, args.out / "multiverse.json")
    html = write_multiverse_html(doc, args.out / "multiverse.html")
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        return 0
    print(render_multiverse(doc))
    print(f"\nmultiverse.json: {target}\nHTML report: {html}")
    return 0
