"""``benchaudit card BENCH|RUN_DIR``: pipeline cards as JSON, of a benchmark's suite or of a run.

A suite's card is the one a run of that layer records, hash included: its materials (the template's
text, the few-shot exemplars, the data files' checksums) are read from the data directory the way
collection reads them (:mod:`pytest_benchaudit.dataset.materials`), so a card computed before a run
(a pre-registration) matches the run.  Where the data cannot be read, or the task is scored by a
``--judge`` (whose prompts a run's hash covers), the card says on stderr that its hash is not the
run's, and why.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_benchaudit.cli._common import CliError, Subparsers, add_suites_dir, run_cards, suite_file
from pytest_benchaudit.common.errors import did_you_mean

if TYPE_CHECKING:
    from pytest_benchaudit.pipeline.record_documents import Cards

HELP = "print pipeline cards as JSON (of a benchmark's suite, or of a run)"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser("card", help=HELP, description=HELP)
    p.add_argument("target", help="a benchmark name (e.g. seceval) or a run directory")
    p.add_argument("--task", help="one task (e.g. mcq)")
    p.add_argument("--pipeline", default=None, help="layer (default: standardized; a benchmark's suite only)")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a field, as in pytest --set",
    )
    p.add_argument(
        "--data-dir",
        help="data directory the card's checksums and exemplars are read from, as a run "
        "reads them (default: $BENCHAUDIT_DATA, else ~/.cache/benchaudit/datasets)",
    )
    add_suites_dir(p)
    return p


def _suite_cards(
    bench: str, suites_dir: Path, task: str | None, layer: str, sets: list[str], data_dir: str | None
) -> Cards:
    from pytest_benchaudit.dataset import materials
    from pytest_benchaudit.dataset.readers import resolve_data_dir
    from pytest_benchaudit.dataset.suites import DataUnavailable, load_suite
    from pytest_benchaudit.pipeline.layering import apply_overrides
    from pytest_benchaudit.pipeline.stages import parse_override
    from pytest_benchaudit.scoring.judge_calls import needs_judge
    from pytest_benchaudit.scoring.names import check_suite_names

    suite = load_suite(suite_file(bench, suites_dir))
    check_suite_names(suite)
    overrides = [parse_override(text) for text in sets]
    tasks = [task] if task else list(suite.tasks)
    for name in tasks:
        if name not in suite.tasks:
            raise CliError(
                f"{bench} has no task {name!r}{did_you_mean(name, suite.tasks)}; tasks: {', '.join(suite.tasks)}"
            )
    root, origin = resolve_data_dir(data_dir)
    cards: Cards = {}
    for name in tasks:
        pipeline = apply_overrides(suite.pipeline(name, layer), overrides)
        files: materials.TaskFiles | None = None
        try:
            files = materials.read_task_files(suite, name, root, origin)
        except DataUnavailable as err:
            _not_the_run(
                f"{bench}.{name}",
                f"its data cannot be read here ({err}); the hash leaves out the data files' checksums",
            )
        if needs_judge(pipeline):
            _not_the_run(f"{bench}.{name}", "it is scored by a --judge, whose prompts a run's hash covers")
        cards[f"{bench}.{name}"] = materials.task_card(suite, name, pipeline, files, Path.cwd())
    return cards


def _not_the_run(key: str, why: str) -> None:
    print(f"benchaudit card: {key}: not the hash a run records: {why}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    target, task = args.target, args.task
    if (Path(target) / "run.json").exists():
        given = [o for o, v in (("--pipeline", args.pipeline), ("--set", args.sets)) if v]
        if given:  # not silently ignored: a run's cards are what it was made with
            raise CliError(
                f"{' and '.join(given)}: for a benchmark's suite (benchaudit card BENCH); {target} is a run "
                "directory, whose cards are what it was made with (`benchaudit rescore RUN_DIR --pipeline "
                "P --set FIELD=VALUE` re-scores it under others)"
            )
        cards = run_cards(Path(target))
        if task:
            key = task if "." in task else next((k for k in cards if k.endswith(f".{task}")), task)
            if key not in cards:
                names = [*cards, *(k.split(".", 1)[-1] for k in cards)]
                raise CliError(
                    f"--task {task}: no card for {task!r} in this run{did_you_mean(task, names)}; tasks in "
                    f"this run: {', '.join(cards) or 'none'}"
                )
            cards = {key: cards[key]}
    else:
        cards = _suite_cards(target, args.suites_dir, task, args.pipeline or "standardized", args.sets, args.data_dir)
    print(json.dumps(cards, indent=2))
    return 0
