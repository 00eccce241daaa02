"""Suite configs -> pytest items, and the ``question`` / ``pipeline`` / ``model`` fixtures.

``suites/<bench>/suite.toml`` is collected as a :class:`SuiteFile`; each task is a
:class:`TaskCollector` (so ``-k <task>`` selects it); each question x model is a
:class:`BenchItem`, a real ``pytest.Function`` whose fixtures ``question``,
``pipeline`` and ``model`` can be overridden in a ``conftest.py``.  Node ids read
``suites/seceval/suite.toml::mcq::q0001[local]``; with ``--vary`` each question x model
also runs once per variant: ``q0001[local|max_tokens=5]`` (see :mod:`.variants`); with
``--pipelines released,standardized`` once per layer: ``q0001[local|released]``,
``q0001[local|standardized]`` (the first layer is the base variant, the others variants
named after the layer; ``-k standardized`` selects one layer).

Why ~430 lines: the suite file, task collector, item class and fixtures form pytest's
collection tree for one suite.  What an item evaluates is :mod:`.specs`'; the checks of a
resolved pipeline and the card's assembly are pure functions of :mod:`pytest_benchaudit.pipeline.readiness`
and :mod:`pytest_benchaudit.pipeline.assembly`; the pre-run usage errors are :mod:`.prerun_checks`'.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_benchaudit.common.errors import ConfigError
from pytest_benchaudit.dataset import materials
from pytest_benchaudit.dataset.config import skips_empty_gold
from pytest_benchaudit.dataset.suites import SUITE_FILENAME, DataUnavailable, Suite, SuiteError, load_suite
from pytest_benchaudit.inference.backend import ModelSpec
from pytest_benchaudit.pipeline import assembly, readiness
from pytest_benchaudit.pipeline.card import add_item_card, item_card, note_collected_used
from pytest_benchaudit.pipeline.layering import apply_overrides
from pytest_benchaudit.pipeline.record_documents import Cards, RecordRow
from pytest_benchaudit.pipeline.stages import Pipeline, PipelineError
from pytest_benchaudit.pipeline.types import Question
from pytest_benchaudit.pipeline.variants import build_variants, card_key, layer_variant
from pytest_benchaudit.prompt.templates import TemplateError, inference_params, render_request
from pytest_benchaudit.pytest_plugin import _fastpath, cards
from pytest_benchaudit.pytest_plugin.options import get_options, item_runner
from pytest_benchaudit.pytest_plugin.prerun_checks import checks_of
from pytest_benchaudit.pytest_plugin.specs import ItemSpec, VariantSpec, note_end_of_sequence
from pytest_benchaudit.scoring.judge_calls import judge_problem, needs_judge
from pytest_benchaudit.scoring.judge_prompts import judge_card
from pytest_benchaudit.scoring.names import check_pipeline_names, check_suite_names

__all__ = [
    "SuiteFile",
    "TaskCollector",
    "BenchItem",
    "ItemSpec",
    "VariantSpec",
    "BenchmarkFailure",
    "collect_file",
    "default_fixtures_only",
    "item_hashes",
    "question",
    "pipeline",
    "model",
]


class BenchmarkFailure(AssertionError):
    """A wrong or invalid answer: reported with a short message, no traceback."""


def _skip_marker(
    pipe: Pipeline, suite: Suite, task: str, variant: str, judge_given: bool = False
) -> pytest.MarkDecorator | None:
    """The skip every item of this (variant) pipeline gets, or None: unspecified fields, a judge."""
    reason = readiness.skip_reason(
        readiness.where_of(suite.name, task, variant),
        pipe,
        readiness.runnable_problems(pipe, suite.templates),
        judge_problem(pipe, judge_given),
    )
    return pytest.mark.skip(reason=reason) if reason is not None else None


def pipeline_problems(
    suite: Suite, task: str, pipe: Pipeline, questions: list[Question], shots: list[Question], models: list[ModelSpec]
) -> list[str]:
    """What is wrong with a resolved pipeline against its task's data, found once before any item:
    the first question's request is rendered for each model (an unknown template, a few-shot count
    the data cannot supply, a bad placeholder), and ``aggregation.by`` must name a metadata field
    (:mod:`pytest_benchaudit.pipeline.readiness`)."""
    where = f"{suite.name}.{task}" + (f" under {pipe.name!r}" if pipe.name else "")
    problems: list[str] = []
    if questions:
        for spec in {m.min_max_tokens: m for m in models}.values():
            try:
                missing = readiness.template_problem(suite.name, pipe, list(suite.templates))
                if missing:
                    raise TemplateError(missing)
                render_request(
                    pipe, suite.templates[pipe.prompt.template], questions[0], shots, min_max_tokens=spec.min_max_tokens
                )
            except (TemplateError, PipelineError) as err:
                problems.append(f"{where}: {err}")
                break
    by = readiness.aggregation_by_problem(pipe, questions)
    if by:
        problems.append(f"{where}: {by}")
    return problems


def _replayed_questions(models: list[ModelSpec], checks: Any) -> dict[str, frozenset[tuple[str, str, str]]]:
    """For each ``replay:`` model, the questions its run directory holds (others skip: not in the run)."""
    from pytest_benchaudit.runs.replay import ReplayError, stored_questions

    out: dict[str, frozenset[tuple[str, str, str]]] = {}
    for spec in models:
        if spec.kind == "replay":
            try:
                out[spec.label] = stored_questions(Path(spec.replay_dir or ""), spec.label)
            except ReplayError as err:
                checks.problem(f"--model replay:{spec.replay_dir}: {err}")
                out[spec.label] = frozenset()
    return out


class SuiteFile(pytest.File):
    """A ``suite.toml``: one child collector per task."""

    def collect(self) -> Iterator[pytest.Collector]:
        try:
            suite = load_suite(self.path)
            check_suite_names(suite)
        except ConfigError as err:
            raise _CollectFailure(str(err)) from None
        for task in suite.tasks:
            yield TaskCollector.from_parent(self, name=task, suite=suite)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, _CollectFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))


class _CollectFailure(Exception):
    """Collection stopped with a message that needs no traceback."""


class TaskCollector(pytest.Collector):
    def __init__(self, *, suite: Suite, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite

    def collect(self) -> Iterator[BenchItem]:
        opts = get_options(self.config)
        suite, task = self.suite, self.name
        checks = checks_of(self.config)
        checks.layers.update(suite.tasks[task].layers)
        checks.targets.setdefault((suite.name, task), "")
        present = [layer for layer in opts.layers if layer in suite.tasks[task].layers]
        checks.found.update(present)
        checks.layer_found = checks.layer_found or opts.pipeline in present
        for layer in opts.layers if not present or opts.pipelines else ():
            if layer not in present:
                # Not an error: `pytest suites/ --pipeline released_base` runs where that layer exists
                # (a layer that no collected task defines is one usage error: checks.PreRunChecks).
                missing = pytest.mark.skip(
                    reason=f"{suite.name}.{task} defines no {layer!r} pipeline "
                    f"(available: {', '.join(suite.tasks[task].layers)})"
                )
                yield from self._placeholder(missing, f"|{layer}" if opts.pipelines else "")
        if not present:
            return
        # A bad pipeline value is noted once for the task (checks.PreRunChecks raises every such
        # problem as one usage error before any item) instead of failing item by item.
        try:
            if opts.pipelines:  # --pipelines A,B: each layer a variant of the first (pipeline.variants)
                pipes = {
                    layer: apply_overrides(suite.pipeline(task, layer), opts.overrides, opts.override_options)
                    for layer in present
                }
                variants = [
                    layer_variant(layer, p, opts.layers[0], pipes.get(opts.layers[0])) for layer, p in pipes.items()
                ]
                pipe = variants[0].pipeline
            else:
                base = suite.pipeline(task, opts.pipeline)
                pipe = apply_overrides(base, opts.overrides, opts.override_options)
                variants = build_variants(pipe, opts.vary)
            for v in variants:
                check_pipeline_names(v.pipeline)
        except PipelineError as err:
            checks.problem(f"{suite.name}.{task}: {err}")
            return
        checks.targets[(suite.name, task)] = pipe.scoring.metric
        try:
            files = materials.read_task_files(suite, task, opts.data_dir, opts.data_origin)
        except DataUnavailable as err:
            yield from self._placeholder(pytest.mark.skip(reason=str(err)))
            return
        except SuiteError as err:
            raise _CollectFailure(str(err)) from None
        opts.state.checksums.update(files.run_checksums)
        questions, shots, resources = files.questions, files.shots, files.resources
        data_sums, resource_sums = files.data_checksums, files.resource_checksums
        path = files.questions_path
        shown = assembly.TaskMaterials(
            dataset_checksums={path.name: data_sums[path.name]},
            suite_files=materials.suite_files(suite, self.config.rootpath),
            questions_total=len(questions),
            warnings=materials.pin_warnings(suite, files.pinned),
        )
        skips: dict[str, pytest.MarkDecorator | None] = {}
        specs: dict[str, VariantSpec] = {}
        for v in variants:
            judge = judge_card(opts.judge.label) if opts.judge is not None and needs_judge(v.pipeline) else None
            judged = cards.judge_material(judge) if judge is not None else None
            card = v.pipeline.card(
                assembly.materials(suite.templates, v.pipeline, shots, data_sums, resource_sums, judged)
            )  # what VariantSpec.materials gives
            part = VariantSpec(
                suite=suite,
                pipeline=v.pipeline,
                shots=shots,
                card=card,
                variant=v.name,
                resources=resources,
                key=card_key(suite.name, task, v.name),
                data_checksums=data_sums,
                resource_checksums=resource_sums,
                judge=judged,
                hashes=(card["hash"], card["upstream_hash"]),
            )
            specs[v.name] = part
            # How each hosted model is reached, and what its provider's quirks change.
            providers = {m.label: m.provider_card(inference_params(v.pipeline)) for m in opts.models if m.provider}
            # lm-eval's stop list ends with the endpoint's EOS: each model's, or why it cannot be known.
            eos_warnings = (
                note_end_of_sequence(providers, opts.models, part.key)
                if v.pipeline.inference.stop_eos == "endpoint"
                else []
            )
            opts.state.cards[part.key] = assembly.task_card(
                card, shown, variant=None if v.is_base else v.info(), judge=judge, providers=providers
            )
            if eos_warnings:
                opts.state.cards[part.key].setdefault("warnings", []).extend(eos_warnings)
            skips[v.name] = _skip_marker(v.pipeline, suite, task, v.name, opts.judge is not None)
        if opts.limit is not None:
            questions = questions[: opts.limit]
        for v in variants:
            if skips[v.name] is None:
                for problem in pipeline_problems(suite, task, v.pipeline, questions, shots, opts.models):
                    checks.problem(problem)
        # empty_gold = "skip": a row without a gold label is reported (skipped with the
        # reason), never scored; "keep" (the default) scores it, as released code may (SecEval).
        skip_empty_gold = skips_empty_gold(suite.tasks[task].data)
        replayed = _replayed_questions(opts.models, checks)
        # Every item of a task calls the same function under the same conftests: its fixture
        # closure is computed once and shared, as pytest shares it among parametrized items.
        fixtureinfo: Any = None
        direct = False
        # What is per task x variant is built once (the shared spec, the id suffix of each
        # model x variant, the skip marker), what is per question once per question.
        shared = specs
        columns = [
            (
                spec,
                shared[v.name],
                (f"{spec.label}|{v.layer}" if v.is_layer else spec.label if v.is_base else f"{spec.label}|{v.name}"),
                skips[v.name],
            )
            for spec in opts.models
            for v in variants
        ]
        new_id = _id_factory(self)
        # A serial run may ask the first items' models now, while the rest is collected (.early).
        runner = opts.state.runner
        ask_early = runner.early_asker(self.session) if runner is not None else None
        # Question by question, each model, then each variant: the variants of a question run
        # next to its base, so a downstream variant reads the generation the base just got.
        for q in questions:
            stem = f"q{q.index + 1:04d}"
            keywords = (q.id, suite.name)
            empty_gold = skip_empty_gold and not q.gold.strip()
            for spec, part, params, skip in columns:
                item = BenchItem.from_parent(
                    self,
                    name=f"{stem}[{params}]",
                    callobj=_run_question,
                    bench=ItemSpec(q, spec, part),
                    fixtureinfo=fixtureinfo,
                    nodeid=new_id(stem, params),
                )
                if fixtureinfo is None:
                    fixtureinfo = _fastpath.fixture_info(item)
                    direct = default_fixtures_only(fixtureinfo)
                item.direct = direct
                # `-k <question id>` works too, whatever the item is named.
                item.extra_keyword_matches.update(keywords)
                if skip is not None:
                    item.add_marker(skip)
                elif spec.label in replayed and (suite.name, task, q.id) not in replayed[spec.label]:
                    item.add_marker(
                        pytest.mark.skip(
                            reason=f"{suite.name}.{task} {q.id}: not in the replayed "
                            f"run {spec.replay_dir}; nothing stored to replay"
                        )
                    )
                elif empty_gold:
                    item.add_marker(
                        pytest.mark.skip(
                            reason=f"{suite.name}.{task} {q.id}: empty gold label "
                            "in the data file; reported, not scored"
                        )
                    )
                elif ask_early is not None and not ask_early(item):
                    ask_early = None
                yield item

    def _placeholder(self, skip: pytest.MarkDecorator, layer: str = "") -> Iterator[BenchItem]:
        """One skipped item per model (no pipeline layer, or data that cannot be had here),
        so the reason shows up in the run's output instead of stopping the whole run."""
        for spec in get_options(self.config).models:
            item = pytest.Function.from_parent(self, name=f"unavailable[{spec.label}{layer}]", callobj=_never_called)
            item.add_marker(skip)
            yield item  # type: ignore[misc]

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, _CollectFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))


def _never_called() -> None:
    raise AssertionError("skipped placeholder item ran")


def _run_question(question: Question, pipeline: Pipeline, model: ModelSpec, request: pytest.FixtureRequest) -> None:
    """The body of every benchmark item: ask, read, score, record; fail when not correct."""
    item_runner(request.config).run_item(request.node, question, pipeline, model)


def item_hashes(node: BenchItem, question: Question, pipeline: Pipeline, known: Cards) -> tuple[str, str]:
    """``(hash, upstream_hash)`` of the pipeline ``node`` asked and scored with, after every fixture.

    Under the default fixtures, its task's card's.  When a ``pipeline`` or ``question`` fixture
    gave something else, the card of what the item used (:func:`~pytest_benchaudit.pipeline.card.item_card`:
    the changed fields as overrides, each with where its fixture is defined) is added to
    ``known``, the run's cards, under the task's key, and its hashes are returned.
    """
    spec = node.bench
    shared = spec.shared
    replaced = pipeline is not shared.pipeline
    asked = question is not spec.question and question != spec.question
    if not replaced and not asked:
        if not shared.collected_used:  # once per task x variant: its card is what these items used
            shared.collected_used = True
            if hasattr(node.config, "workerinput"):  # for the controller, which merges the workers' cards
                shared.card["_used_by_items"] = True  # pipeline.card.USED
            note_collected_used(known, shared.key, shared.card)
        return shared.hashes
    defs = _fastpath.fixture_defs(node)
    root = node.config.rootpath
    origin = (cards.fixture_origin(defs.get("pipeline"), __name__, root) or "a fixture") if replaced else None
    q_origin = (cards.fixture_origin(defs.get("question"), __name__, root) or "a fixture") if asked else None
    card = item_card(shared.card, pipeline, shared.materials(pipeline), origin, q_origin)
    if "suite_hash" in card:
        add_item_card(known, shared.key, card, shared.collected_used)
    return card["hash"], card["upstream_hash"]


def default_fixtures_only(fixtureinfo: Any) -> bool:
    """True when an item uses this module's ``question``/``pipeline``/``model`` fixtures and
    nothing else (no conftest override, no autouse or ``usefixtures`` fixture); False when pytest
    does not say (``fixtureinfo`` None: pytest's own fixture set-up then runs)."""
    if fixtureinfo is None or not set(fixtureinfo.names_closure) <= {"question", "pipeline", "model", "request"}:
        return False
    for name in ("question", "pipeline", "model"):
        chain = fixtureinfo.name2fixturedefs.get(name)
        if not chain or getattr(chain[-1].func, "__module__", "") != __name__:
            return False
    return True


class BenchItem(pytest.Function):
    """One question x model (x variant) as a pytest Function.

    ``direct``: the item uses only this module's default fixtures, whose values are its own
    :class:`ItemSpec` fields; it then skips pytest's fixture set-up (about a third of the
    harness's CPU per item) and calls the runner with them.  Any override in a
    ``conftest.py``, or any other fixture, keeps pytest's usual fixture path.
    """

    # inference.repeats: the item's records were reported one by one as they came (Runner._hand_over);
    # ``record`` is then the first, for the call report to show, not to be written again.
    records_handed_over: bool = False

    def __init__(self, *, bench: ItemSpec, nodeid: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if nodeid is not None:
            # pytest >= 9.2 keeps structured node ids; ours is built the way a nodeid string is
            # parsed (name + "[params]") so --lf and the cache recognise our items.
            self._id = nodeid
        self.bench = bench
        self.record: RecordRow | None = None
        self.direct = False

    def setup(self) -> None:
        if not self.direct:
            super().setup()

    def runtest(self) -> None:
        if not self.direct:
            super().runtest()
            return
        spec = self.bench
        item_runner(self.config).run_item(self, spec.question, spec.pipeline, spec.model)

    def reportinfo(self) -> tuple[Path, int, str]:
        q = self.bench.question
        return self.path, 0, f"{q.benchmark}.{q.task} {q.id} [{self.bench.model.label}]"

    @functools.cached_property
    def location(self) -> tuple[str, int | None, str]:
        """pytest's ``(relative path, line, name)``, the path made relative once per task, not per
        item (pytest's own resolves and hashes it for each: ~0.1 ms an item)."""
        parent: Any = self.parent
        rel = getattr(parent, "bench_relpath", None)
        if rel is None:
            rel = parent.bench_relpath = _fastpath.location_relpath(self.session, Path(os.path.abspath(self.path)))
        _, line, name = self.reportinfo()
        return rel, line, name

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        if isinstance(excinfo.value, BenchmarkFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


def _id_factory(parent: pytest.Collector) -> Any:
    """``(stem, params) -> node id`` of a benchmark item under ``parent``, or ``None`` on a pytest
    whose node ids are plain strings (before 9.2: pytest builds ``name`` into them itself).

    pytest >= 9.2 keeps structured ids (path, names, params); the one it would build from our
    ``name`` keeps ``q0001[m0]`` as one name, so ours is built as ``NodeId.parse`` would read
    the string: names end with ``q0001``, params ``m0`` (same string, so ``--lf`` matches).
    """
    base = getattr(parent, "_id", None)
    if base is None or not hasattr(base, "params"):
        return lambda stem, params: None
    kind, path, names = type(base), base.path, tuple(base.names)
    return lambda stem, params: kind(path=path, names=(*names, stem), params=params)


def _spec(request: pytest.FixtureRequest) -> ItemSpec:
    spec = getattr(request.node, "bench", None)
    if spec is None:
        raise pytest.UsageError(
            f"{request.fixturename!r} is a pytest-benchaudit fixture for benchmark items; "
            f"{request.node.nodeid} is not one"
        )
    return spec


@pytest.fixture
def question(request: pytest.FixtureRequest) -> Question:
    """The benchmark question of this item (override in conftest.py to transform it)."""
    return _spec(request).question


@pytest.fixture
def pipeline(request: pytest.FixtureRequest) -> Pipeline:
    """The resolved, frozen pipeline of this item's task."""
    return _spec(request).pipeline


@pytest.fixture
def model(request: pytest.FixtureRequest) -> ModelSpec:
    """The model this item asks."""
    return _spec(request).model


def collect_file(file_path: Path, parent: pytest.Collector) -> SuiteFile | None:
    if file_path.name == SUITE_FILENAME:
        return SuiteFile.from_parent(parent, path=file_path)
    return None
