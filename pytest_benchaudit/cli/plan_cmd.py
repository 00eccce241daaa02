"""``benchaudit plan --task BENCH.TASK --mde D [--from RUN...]``: how many questions x repeats a comparison needs.

Two models compared on the same questions (the paired difference of docs/statistics.md): for each
repeat count K the plan gives the questions needed to detect a true difference ``--mde`` (absolute,
in the metric's unit: 0.03 is 3 points on a share) at ``--alpha`` with ``--power`` by the test
``benchaudit compare`` will run: the exact McNemar test at K = 1 on a 0/1 metric (its exact power from
the discordance rate), else the paired t test (its power from the noncentral t with Var = var_between
+ var_within / K) (:mod:`pytest_benchaudit.aggregate.power`), and whether the task holds that many.

The two variances are measured from ``--from`` runs' records.jsonl (two or more models on the task:
their paired differences; one model: its own variances, doubled for an independent second model), or
without runs come from a stated assumption (0/1 scores right half the time: the most a 0/1 score
varies).  No model server, no pytest run; the task's size is read from its data file, or, for a task imported
from another harness's log that no suite names (``benchaudit import``), counted from the ``--from`` runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from pytest_benchaudit.cli._common import CliError, Subparsers, add_data_dir, add_suites_dir, suite_file
from pytest_benchaudit.common.errors import did_you_mean

if TYPE_CHECKING:
    from pytest_benchaudit.aggregate.power import Variances

__all__ = ["HELP", "Plan", "add_parser", "run"]

HELP = "questions x repeats a paired comparison needs to detect a difference (power analysis)"

_EPILOG = """\
Each row is sized for the test compare will run on it (the plan prints which, and the power it reaches):
  K = 1 on a 0/1 metric  exact McNemar: its exact power from the discordance rate psi (the share of questions
                         exactly one model gets right; Var(D) + mde^2, since Var(D) = psi - mde^2 on 0/1
                         scores) and the difference, summed over the discordant count
  otherwise              paired t: its power from the noncentral t, Var(D) = var_between + var_within / K
Both start from the normal approximation n = (z_{1-alpha/2} + z_power)^2 * Var(D) / mde^2 (2.80 at alpha
0.05, power 0.80).  var_between: the variance over questions of the two models' expected difference
(repeats cannot remove it); var_within: one repeat's variance around it, both models' summed (K repeats
divide it by K).

Where the variances come from (the plan prints which):
  --from RUN... with two or more models on the task  their paired differences on the questions both
                                                     answered (the pair that varies most)
  --from RUN... with one model                       its variances, doubled for a second model
                                                     independent of it (errs on the safe side)
  no --from                                          0/1 scores right with probability 0.5: Var = 0.5
                                                     per question, all counted between questions
Runs asked once cannot tell the two parts apart: all of it is counted between questions, and
repeats are assumed to help nothing.  See docs/statistics.md.

example:
  benchaudit plan --task cybermetric.cm80 --mde 0.10 --from reports/<run>
"""


class PlanRowDoc(BaseModel):
    """One repeat count: questions needed, generations per model (questions x K), whether the task has them,
    the test compare will run (``mcnemar_exact`` or ``paired_t``) and the power it has at that n."""

    repeats: int
    questions: int
    generations: int
    fits: bool
    test: str
    power: float | None


class VariancesDoc(BaseModel):
    between: float
    within: float
    within_measured: bool
    source: str
    questions: int
    repeats: int
    binary: bool = False  # every score 0 or 1: the K = 1 row is sized for exact McNemar


class Plan(BaseModel):
    """What ``benchaudit plan --json`` prints."""

    task: str
    metric: str
    task_questions: int
    # Where task_questions was counted: "data" (the suite task's data file), "log" (an imported task with no
    # suite whose log states its dataset's size: Inspect's eval.dataset.samples) or "runs" (no such statement:
    # the distinct questions of the --from runs, which may be fewer than the harness's dataset holds).
    task_questions_from: str = "data"
    mde: float
    alpha: float
    power: float
    z_total: float
    variances: VariancesDoc
    rows: list[PlanRowDoc]
    # The fewest generations per model among the rows that fit (null when none does).
    best: PlanRowDoc | None
    # Questions needed with the within-question part averaged away entirely (K -> infinity; paired t).
    questions_any_repeats: int
    # 0/1 scores: the discordance rate of the alternative the K = 1 row (exact McNemar) is sized for,
    # Var(D) + mde^2 (at least mde); null otherwise.
    discordance: float | None = None
    runs: list[str]
    models: list[str]


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "plan",
        help=HELP,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="How many questions, each asked K times, a comparison of two models on the same "
        "questions needs to detect a true difference --mde with a two-sided test at "
        "--alpha with --power, and whether the task holds that many.",
    )
    p.add_argument(
        "--task",
        required=True,
        metavar="BENCH.TASK",
        help="the suite task compared (e.g. cybermetric.cm80; BENCH alone for a one-task suite): its "
        "size caps the questions available; a task imported from another harness's log with no "
        "suite (e.g. inspect.toy_mcq) needs --from, and its size is the questions its runs hold",
    )
    p.add_argument(
        "--mde",
        required=True,
        type=float,
        metavar="D",
        help="the true difference to detect, absolute in the metric's unit (0.03 = 3 points on a share)",
    )
    p.add_argument(
        "--from",
        dest="runs",
        nargs="+",
        type=Path,
        default=[],
        metavar="RUN",
        help="run directories with the task, or folders of them (ideally asked with --repeats): the variances are measured "
        "from their records.jsonl; without, a stated assumption is used",
    )
    p.add_argument(
        "--models",
        metavar="A,B",
        help="the two models of the runs to measure (default: the pair whose difference varies most)",
    )
    p.add_argument("--alpha", type=float, default=0.05, help="two-sided significance level (default 0.05)")
    p.add_argument("--power", type=float, default=0.80, help="the chance of detecting the difference (default 0.80)")
    p.add_argument(
        "--repeats", default="1,2,3,5,10", metavar="K,...", help="repeat counts to list (default 1,2,3,5,10)"
    )
    p.add_argument(
        "--pipeline",
        default="standardized",
        help="layer whose scoring.metric the task uses when no run is given (default: standardized)",
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    add_suites_dir(p)
    add_data_dir(p)
    return p


def _split_task(text: str, suites_dir: Path) -> tuple[Any, str]:
    """(suite, task) of ``BENCH.TASK`` (or ``BENCH`` of a one-task suite)."""
    from pytest_benchaudit.dataset.suites import load_suite

    bench, _, task = text.partition(".")
    suite = load_suite(suite_file(bench, suites_dir))
    if not task:
        if len(suite.tasks) != 1:
            raise CliError(
                f"--task {text!r}: {bench} has {len(suite.tasks)} tasks; name one as BENCH.TASK: "
                + ", ".join(f"{bench}.{t}" for t in suite.tasks)
            )
        task = next(iter(suite.tasks))
    if task not in suite.tasks:
        raise CliError(
            f"--task {text!r}: {bench} has no task {task!r}{did_you_mean(task, suite.tasks)}; tasks: "
            + ", ".join(f"{bench}.{t}" for t in suite.tasks)
        )
    return suite, task


def _has_suite(bench: str, suites_dir: Path) -> bool:
    from pytest_benchaudit.dataset.suites import SUITE_FILENAME

    return (Path(suites_dir) / bench / SUITE_FILENAME).is_file()


def _imported_task(text: str, runs: list[Path]) -> str:
    """The task of ``BENCH.TASK`` (or ``BENCH`` alone where the runs hold one task of it) when BENCH has no suite:
    an imported log's generic task (``benchaudit import``), known only from the ``--from`` runs' records."""
    from pytest_benchaudit.compare.runsets import CompareError, expand_runs
    from pytest_benchaudit.runs.store import load_run

    try:
        run_dirs = expand_runs(runs)
    except CompareError as err:
        raise CliError(f"--from {err}") from None
    bench, _, task = text.partition(".")
    found: set[tuple[str, str]] = set()
    for run_dir in run_dirs:
        _meta, records = load_run(run_dir, require_records=True)
        found |= {(str(r["benchmark"]), str(r["task"])) for r in records}
    tasks = sorted(t for b, t in found if b == bench)
    if not tasks:
        raise CliError(
            f"--task {text!r}: no suite {bench!r} and no records of benchmark {bench!r} in the --from runs; "
            "tasks in them: " + ", ".join(sorted(f"{b}.{t}" for b, t in found))
        )
    if not task:
        if len(tasks) != 1:
            raise CliError(
                f"--task {text!r}: the runs hold {len(tasks)} tasks of {bench}; name one as BENCH.TASK: "
                + ", ".join(f"{bench}.{t}" for t in tasks)
            )
        return tasks[0]
    if task not in tasks:
        raise CliError(
            f"--task {text!r}: the --from runs hold no task {task!r} of {bench}"
            f"{did_you_mean(task, tasks)}; tasks: " + ", ".join(f"{bench}.{t}" for t in tasks)
        )
    return task


def _task_questions(suite: Any, task: str, data_dir: str | None) -> int:
    """The questions the task scores: its data file's rows (those with an empty gold left out when the
    task says ``empty_gold = "skip"``, as the collector does)."""
    from pytest_benchaudit.dataset.config import skips_empty_gold
    from pytest_benchaudit.dataset.readers import load_questions, resolve_data_dir

    path, origin = resolve_data_dir(data_dir)
    questions, _ = load_questions(suite, task, path, origin)
    if skips_empty_gold(suite.tasks[task].data):
        questions = [q for q in questions if q.gold.strip()]
    return len(questions)


def _scores_by_model(
    runs: list[Path], bench: str, task: str, dataset_sizes: set[int] | None = None
) -> tuple[dict[str, dict[str, list[float]]], str]:
    """model -> question id -> its scores in repeat order, from the runs' base records of the task (not a
    --vary variant); and the metric they were scored with.  A model in two runs is two entries.  The sizes of
    the whole dataset that imported runs' logs state (run.json ``source.dataset_questions``) are added to
    ``dataset_sizes``."""
    from pytest_benchaudit.compare.runsets import CompareError, expand_runs
    from pytest_benchaudit.runs.store import load_run

    try:  # a folder of run directories is read as the runs in it, as compare reads it
        runs = expand_runs(runs)
    except CompareError as err:
        raise CliError(f"--from {err}") from None
    found: dict[str, dict[str, list[float]]] = {}
    metrics: set[str] = set()
    for run_dir in runs:
        meta, records = load_run(run_dir, require_records=True)
        stated = dict(meta.get("source") or {}).get("dataset_questions")
        if dataset_sizes is not None and isinstance(stated, int) and not isinstance(stated, bool):
            dataset_sizes.add(stated)
        mine = [r for r in records if r["benchmark"] == bench and r["task"] == task and not r.get("variant")]
        if not mine:
            tasks = sorted({f"{r['benchmark']}.{r['task']}" for r in records})
            raise CliError(f"--from {run_dir}: no records of {bench}.{task}; tasks in this run: {', '.join(tasks)}")
        pipelines = {r["pipeline"] for r in mine}
        per: dict[str, list[tuple[int, str, float]]] = defaultdict(list)
        for r in mine:
            label = r["model"] + (f"|{r['pipeline']}" if len(pipelines) > 1 else "")
            per[label].append((int(r.get("repeat") or 0), str(r["question_id"]), float(r["score"])))
            metrics.add(str(r.get("metric") or ""))
        for label, rows in per.items():
            name = label if label not in found else f"{label} ({run_dir.name})"
            by_q: dict[str, list[float]] = defaultdict(list)
            for _repeat, qid, score in sorted(rows):
                by_q[qid].append(score)
            found[name] = dict(by_q)
    metrics.discard("")
    if len(metrics) > 1:
        raise CliError(
            f"--from: the runs score {bench}.{task} with different metrics ({', '.join(sorted(metrics))}); "
            "a plan needs one"
        )
    return found, next(iter(metrics), "")


def _measured(scores: dict[str, dict[str, list[float]]], models: str | None) -> tuple[Variances, list[str]]:
    """The variances from the runs' scores, and the model (or the pair of models) they rest on."""
    from pytest_benchaudit.aggregate.power import one_model_variances, paired_variances

    names = list(scores)
    if models:
        chosen = [m.strip() for m in models.split(",")]
        unknown = [m for m in chosen if m not in scores]
        if len(chosen) != 2 or unknown:
            hint = did_you_mean(unknown[0], names) if unknown else ""
            raise CliError(f"--models {models!r}: give two of the runs' models, A,B{hint}; models: {', '.join(names)}")
        names = chosen
    try:
        if len(names) == 1:
            return one_model_variances(scores[names[0]], names[0]), names
        pairs = [
            (paired_variances(scores[a], scores[b], f"{a} vs {b}"), [a, b]) for a, b in itertools.combinations(names, 2)
        ]
    except ValueError as err:
        raise CliError(f"--from: {err}") from None
    # The pair whose difference varies most at K = 1: a plan that suffices for it suffices for the rest.
    return max(pairs, key=lambda pair: pair[0].total(1))


def _parse_repeats(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise CliError(f"--repeats {text!r}: a comma-separated list of whole numbers >= 1, e.g. 1,2,3,5,10")
    return sorted(set(values))


def _check_numbers(args: argparse.Namespace, lower_is_better: bool, metric: str) -> None:
    import math

    if not math.isfinite(args.mde) or args.mde <= 0:
        raise CliError(
            f"--mde {args.mde}: the difference to detect must be a number > 0 (absolute, in the metric's "
            "unit: 0.03 = 3 points on a share)"
        )
    if not lower_is_better and args.mde >= 1:
        raise CliError(
            f"--mde {args.mde}: {metric or 'the metric'} is a share in [0, 1]; the difference is absolute "
            f"in that unit (did you mean {args.mde / 100:g}, {args.mde:g} points?)"
        )
    for name, value in (("--alpha", args.alpha), ("--power", args.power)):
        if not 0 < value < 1:
            raise CliError(f"{name} {value}: must lie strictly between 0 and 1")


def make_plan(args: argparse.Namespace) -> Plan:
    """The plan of ``args`` (the parsed command line); :class:`CliError` on bad input."""
    from pytest_benchaudit.aggregate.power import (
        assumed_binary_variances,
        mcnemar_discordance,
        paired_t_power,
        plan_rows,
        questions_for_power,
        z_total,
    )
    from pytest_benchaudit.scoring.metrics import METRIC_INFO

    bench = args.task.partition(".")[0]
    imported = bool(args.runs) and not _has_suite(bench, args.suites_dir)
    try:
        suite, task = (
            (None, _imported_task(args.task, args.runs)) if imported else _split_task(args.task, args.suites_dir)
        )
    except CliError as err:
        if args.runs or _has_suite(bench, args.suites_dir):
            raise
        raise CliError(
            f"{err}; a task imported from another harness's log has no suite: give its runs with --from RUN..."
        ) from None
    bench = suite.name if suite is not None else bench
    repeats = _parse_repeats(args.repeats)
    dataset_sizes: set[int] = set()
    scores, metric = _scores_by_model(args.runs, bench, task, dataset_sizes) if args.runs else ({}, "")
    if not metric and suite is None:
        raise CliError(f"--task {args.task!r}: the runs' records of {bench}.{task} name no scoring metric")
    if not metric and suite is not None:
        from pytest_benchaudit.pipeline.stages import PipelineError

        try:
            metric = str(suite.pipeline(task, args.pipeline).scoring.metric)
        except PipelineError as err:
            raise CliError(f"--pipeline: {err}") from None
    info = METRIC_INFO.get(metric)
    _check_numbers(args, bool(info and info.lower_is_better), metric)
    if scores:
        variances, models = _measured(scores, args.models)
    elif info is not None and info.kind == "binary":
        variances, models = assumed_binary_variances(), []
    else:
        raise CliError(
            f"{bench}.{task} scores with {metric!r}, not a 0/1 score: there is no safe assumption "
            "about its variance; measure it with --from RUN (a run of the task, ideally with --repeats)"
        )
    # An imported task has no suite and no data file here: its size is what its log states of the dataset
    # (the largest, when runs disagree), else the questions its runs hold.
    held = len({qid for by_q in scores.values() for qid in by_q})
    size = (
        _task_questions(suite, task, args.data_dir)
        if suite is not None
        else max(dataset_sizes | {held})
        if dataset_sizes
        else held
    )
    size_from = "data" if suite is not None else "log" if dataset_sizes else "runs"
    try:  # a plan past 100 million questions, or a level whose normal quantile is infinite
        rows = plan_rows(args.mde, variances, size, repeats, args.alpha, args.power)
        # K -> infinity: the between-question part alone, under the paired t test.
        limit, _ = questions_for_power(
            lambda n: paired_t_power(n, args.mde, variances.between, args.alpha), args.power, rows[0].questions
        )
    except ValueError as err:
        raise CliError(f"--mde {args.mde:g}, --alpha {args.alpha:g}, --power {args.power:g}: {err}") from None
    fitting = [r for r in rows if r.fits]
    best = min(fitting, key=lambda r: (r.generations, r.repeats)) if fitting else None
    docs = [
        PlanRowDoc(
            repeats=r.repeats,
            questions=r.questions,
            generations=r.generations,
            fits=bool(r.fits),
            test=r.test,
            power=r.power,
        )
        for r in rows
    ]
    return Plan(
        task=f"{bench}.{task}",
        metric=metric,
        task_questions=size,
        task_questions_from=size_from,
        mde=args.mde,
        alpha=args.alpha,
        power=args.power,
        z_total=z_total(args.alpha, args.power),
        variances=VariancesDoc(
            between=variances.between,
            within=variances.within,
            within_measured=variances.within_measured,
            source=variances.source,
            questions=variances.questions,
            repeats=variances.repeats,
            binary=variances.binary,
        ),
        rows=docs,
        best=None if best is None else docs[rows.index(best)],
        questions_any_repeats=limit,
        discordance=mcnemar_discordance(variances, args.mde) if variances.binary else None,
        runs=[str(p) for p in args.runs],
        models=models,
    )


def render_plan(plan: Plan) -> str:
    """The plan as the terminal shows it: the question, the variances and their source, the table, the verdict."""
    from tabulate import tabulate

    share = _is_share(plan.metric)
    size = f"{plan.task_questions:,} questions" + {
        "runs": " in its runs: an imported task with no suite; the harness's dataset may hold more",
        "log": " in the harness's dataset, as its log states (an imported task with no suite)",
    }.get(plan.task_questions_from, "")
    what = f"{plan.mde:g}" + (f" ({100 * plan.mde:g} points)" if share else f" ({plan.metric})")
    v = plan.variances
    lines = [
        f"plan: {plan.task} ({size}): two models on the same questions, a true difference of {what}, "
        f"two-sided alpha {plan.alpha:g}, power {plan.power:g}",
        "each row sized for the test compare runs on it: exact McNemar at K = 1 on 0/1 scores (its exact power "
        "from the discordance rate), else the paired t (noncentral t, Var(D) = var_between + var_within / K)",
        f"variances: between-question {v.between:.4g}, within-question {v.within:.4g}"
        + ("" if v.within_measured else " (not measured)")
        + ("" if plan.discordance is None else f"; K = 1: discordance rate Var(D) + mde^2 = {plan.discordance:.4g}"),
        f"  {v.source}",
        "",
    ]
    table = [
        [
            r.repeats,
            f"{r.questions:,}",
            f"{r.generations:,}",
            "yes" if r.fits else "no",
            _TESTS.get(r.test, r.test),
            "—" if r.power is None else f"{r.power:.3f}",
        ]
        for r in plan.rows
    ]
    lines.append(
        tabulate(
            table,
            headers=[
                "repeats K",
                "questions needed",
                "generations per model",
                f"task has them ({plan.task_questions:,})",
                "test",
                "power",
            ],
            tablefmt="simple",
            disable_numparse=True,
            colalign=("right", "right", "right", "left", "left", "right"),
        )
    )
    lines.append("")
    if plan.best is not None:
        b = plan.best
        lines.append(
            f"fewest generations that fit: K = {b.repeats}, {b.questions:,} questions "
            f"({b.generations:,} generations per model)"
        )
    else:
        ks = ", ".join(str(r.repeats) for r in plan.rows)
        lines.append(f"no K of {ks} suffices: {plan.task} has {size}")
    if plan.questions_any_repeats > plan.task_questions:
        lines.append(
            f"even with unlimited repeats the between-question part alone needs "
            f"{plan.questions_any_repeats:,} questions: more than the task has; detect a larger difference "
            "or use a larger task"
        )
    elif v.within_measured and plan.best is None:
        lines.append(
            f"with enough repeats the between-question part alone needs {plan.questions_any_repeats:,} "
            "questions; try more repeats (--repeats)"
        )
    return "\n".join(lines)


_TESTS = {"mcnemar_exact": "exact McNemar", "paired_t": "paired t"}


def _is_share(metric: str) -> bool:
    from pytest_benchaudit.scoring.metrics import METRIC_INFO

    info = METRIC_INFO.get(metric)
    return info is None or not info.lower_is_better


def run(args: argparse.Namespace) -> int:
    plan = make_plan(args)
    print(json.dumps(plan.model_dump(), indent=2) if args.json else render_plan(plan))
    return 0
