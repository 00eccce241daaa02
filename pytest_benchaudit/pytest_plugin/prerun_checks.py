"""Checks made once, after collection and before any item runs: one usage error, never one per item.

Collection (:mod:`.collect`) resolves every task's pipeline (layer, ``--set``, ``--vary``)
and notes here what is wrong with it instead of failing item by item: a prompt template
the suite does not have, a few-shot count the data cannot supply, an ``aggregation.by``
field no question carries, an unknown rule or metric.  It also notes which layers the
collected tasks define and which (benchmark, task) targets exist with which metric.

:class:`PreRunChecks` then raises one ``pytest.UsageError`` (exit status 4) listing:

- every pipeline problem found, each naming the task, the field and what is allowed;
- ``--pipeline NAME`` when no collected task defines that layer (the layers there are, and
  the nearest name): a misspelled layer would otherwise skip everything and pass CI; the
  same for each layer of ``--pipelines A,B``;
- each ``--gate`` whose target is not a collected benchmark or task, or whose threshold lies
  outside the quantity's range (``seceval>=70`` against a fraction: the hint says 0.70).

Under xdist the workers collect: each runs nothing and hands its problems to the controller,
which prints them once and exits with status 4.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import pytest
from typing_extensions import TypedDict

from pytest_benchaudit.common.errors import did_you_mean
from pytest_benchaudit.pipeline.card import suite_checksums, suite_file_changes, suite_hash
from pytest_benchaudit.pipeline.record_documents import Cards, PipelineCard
from pytest_benchaudit.report.gates import check_gate_targets

__all__ = [
    "CollectChecks",
    "PreRunChecks",
    "RESUME_RUN",
    "ResumeRun",
    "USAGE_ERRORS_KEY",
    "checks_of",
    "resume_mismatch",
]

RESUME_RUN: Final = "benchaudit_resume_run"  # workerinput: the resumed run's cards and checksums (ResumeRun)


class ResumeRun(TypedDict):
    """``workerinput[RESUME_RUN]``: the run a worker's collection must match (``--resume`` under xdist)."""

    path: str
    cards: Cards  # the run's run.json pipeline_cards
    checksums: dict[str, str]  # its dataset_checksums


def resume_mismatch(
    old_cards: Mapping[str, PipelineCard],
    old_sums: Mapping[str, str],
    cards: Mapping[str, PipelineCard],
    sums: Mapping[str, str],
) -> str | None:
    """Why a collection cannot continue a run (``--resume``): a task the run does not have, a suite
    file (suite.toml, the file it extends) whose checksum differs, a data file whose checksum
    differs, a task whose pipeline card differs (naming the fields and materials); or None.

    A run's card that a fixture changed is compared by the hash it was collected with
    (``suite_hash``): collection cannot know what the fixture will give."""
    if not old_cards:
        return None
    new_tasks = sorted(set(cards) - set(old_cards))
    if new_tasks:
        return (
            f"the run has no {', '.join(new_tasks)} (its tasks: {', '.join(sorted(old_cards))}); resume it "
            "with the same suites"
        )
    files = suite_file_changes(suite_checksums(old_cards), suite_checksums(cards))
    if files:
        return (
            f"suite file(s) changed since the run: {'; '.join(files)}; resume with the suite as it was, or "
            "start a new run (one run holds one prompt)"
        )
    changed = sorted(f for f, digest in sums.items() if f in old_sums and old_sums[f] != digest)
    if changed:
        return (
            f"data file(s) changed since the run: {', '.join(changed)} (checksums differ); resume with the "
            "same data or start a new run"
        )
    for key in sorted(cards):
        if cards[key].get("hash") != suite_hash(old_cards[key]):
            return (
                f"{key} was run under pipeline {suite_hash(old_cards[key])}, this invocation resolves "
                f"{cards[key].get('hash')}{_card_difference(old_cards[key], cards[key])}; resume it with the "
                "same pipeline"
            )
    return None


def _card_difference(old: PipelineCard, new: PipelineCard) -> str:
    """`` (differs in: prompt.template_text, ...)``: the fields and materials two cards disagree on
    (nothing when a fixture made the run's card: what collection gave then is not in it)."""
    if "suite_hash" in old:
        return ""
    fields = [
        f
        for f in sorted(set(old.get("fields") or {}) | set(new.get("fields") or {}))
        if (old.get("fields") or {}).get(f) != (new.get("fields") or {}).get(f)
    ]
    old_m, new_m = old.get("materials") or {}, new.get("materials") or {}
    names = fields + [m for m in sorted(set(old_m) | set(new_m)) if old_m.get(m) != new_m.get(m)]
    if not old.get("materials"):
        names.append("the run's card predates template texts and checksums in cards")
    return f" (differs in: {', '.join(names)})" if names else ""


@dataclass
class CollectChecks:
    """What collection found out, for :class:`PreRunChecks` (one per process)."""

    problems: list[str] = field(default_factory=list)
    layers: set[str] = field(default_factory=set)  # layers the collected tasks define
    layer_found: bool = False  # some collected task defines --pipeline's layer
    found: set[str] = field(default_factory=set)  # the asked layers (--pipeline / --pipelines) some task defines
    targets: dict[tuple[str, str], str] = field(default_factory=dict)  # (benchmark, task) -> metric

    def problem(self, message: str) -> None:
        if message not in self.problems:
            self.problems.append(message)


_KEY = pytest.StashKey[CollectChecks]()


def checks_of(config: pytest.Config) -> CollectChecks:
    """This process's :class:`CollectChecks` (created on first use)."""
    if _KEY not in config.stash:
        config.stash[_KEY] = CollectChecks()
    return config.stash[_KEY]


def pre_run_problems(checks: CollectChecks, layer: str | list[str], gates: list[Any]) -> list[str]:
    """Everything that must stop the run before its first item, one message each (``layer``: the
    ``--pipeline`` name, or the list of ``--pipelines``)."""
    problems = list(checks.problems)
    if not checks.targets and not checks.layers:
        return problems  # no benchmark suite collected (a plain test session): nothing to check against
    option, names = ("--pipeline", [layer]) if isinstance(layer, str) else ("--pipelines", layer)
    for name in reversed(
        [n for n in names if n not in checks.found and not (option == "--pipeline" and checks.layer_found)]
    ):
        problems.insert(
            0,
            f"{option} {name!r}: no collected task defines this layer"
            f"{did_you_mean(name, checks.layers)}; layers of the selected suites: "
            f"{', '.join(sorted(checks.layers))}",
        )
    problems += check_gate_targets(gates, checks.targets)
    return problems


_WORKER_KEY = "benchaudit_usage_errors"  # workeroutput: the problems a worker found
USAGE_ERRORS_KEY = _WORKER_KEY  # (public: remote.refuse_worker hands a worker's option errors the same way)


class PreRunChecks:
    """pytest plugin object: raise the problems collection found as one usage error.

    In a serial run it raises ``pytest.UsageError`` (exit status 4, ``ERROR: ...``).  An xdist
    worker cannot raise one (xdist would report an internal error), so it runs nothing and hands
    its problems to the controller in ``workeroutput``; the controller prints them once and exits
    with status 4.
    """

    def __init__(self, config: pytest.Config, layer: str | list[str], gates: list[Any]) -> None:
        self.config, self.layer, self.gates = config, layer, gates
        self.from_workers: list[str] = []  # problems xdist workers reported (controller side)
        self.told = 0  # how many of them the terminal summary printed
        self.session: pytest.Session | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        problems = pre_run_problems(checks_of(config), self.layer, self.gates)
        resumed = getattr(config, "workerinput", {}).get(RESUME_RUN)
        if resumed and not problems:  # --resume under xdist: the controller does not collect, workers check
            from pytest_benchaudit.pytest_plugin.options import get_options

            state = get_options(config).state
            mismatch = resume_mismatch(resumed["cards"], resumed["checksums"], state.cards, state.checksums)
            if mismatch:
                problems.append(f"--resume {resumed['path']}: {mismatch}")
        if not problems:
            return
        workeroutput = getattr(config, "workeroutput", None)
        if workeroutput is None:
            raise pytest.UsageError("\n".join(problems))
        workeroutput[_WORKER_KEY] = problems
        items[:] = []

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        for problem in (getattr(node, "workeroutput", {}) or {}).get(_WORKER_KEY, []):
            if problem not in self.from_workers:
                self.from_workers.append(problem)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.from_workers:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for problem in self.from_workers:
            terminalreporter.write_line(f"ERROR: {problem}", red=True)
        self.told = len(self.from_workers)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        # xdist may deliver a worker's output only while it shuts its nodes down, after the
        # terminal summary: the status is still set here (pytest returns it after unconfigure).
        if self.from_workers and self.session is not None:
            for problem in self.from_workers[self.told :]:
                print(f"ERROR: {problem}", file=sys.stderr)
            self.session.exitstatus = pytest.ExitCode.USAGE_ERROR
