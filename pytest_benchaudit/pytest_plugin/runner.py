"""The per-process runner: owns the engine, asks models ahead of the items, turns answers into records.

Registered in every process that runs items (a serial run, or each xdist worker).  Which
requests are queued ahead, and when, is its :class:`~.lookahead.LookAhead`'s; each item then
waits only for its own generation, runs extraction and scoring (the judge's part is
:mod:`pytest_benchaudit.scoring.judge_calls`'s), and attaches its record to its test report, which
carries it to the controller.

Why ~460 lines: one object owns the engine (here or in the inference process), the breaker and
cost meter of each backend, and the per-item record.  The servers the run launches are :mod:`.launched`'s.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_benchaudit.common.errors import UsageError
from pytest_benchaudit.common.progress import stall_after
from pytest_benchaudit.common.safe_text import printable
from pytest_benchaudit.common.secrets import register_secret_env
from pytest_benchaudit.dataset.suites import SUITE_FILENAME
from pytest_benchaudit.inference import prestart
from pytest_benchaudit.inference.backend import ModelSpec
from pytest_benchaudit.inference.engine import Engine
from pytest_benchaudit.inference.factory import budgeted_recipe, endpoint_recipe
from pytest_benchaudit.inference.prestart import INFERENCE_PROCESS_ENV, inference_process_setting
from pytest_benchaudit.inference.providers import adjust_request
from pytest_benchaudit.inference.usage import NOT_ASKED
from pytest_benchaudit.pipeline.record_documents import RecordRow
from pytest_benchaudit.pipeline.stages import Pipeline
from pytest_benchaudit.pipeline.types import Extraction, Generation, Question, Request, Score
from pytest_benchaudit.pytest_plugin import _fastpath
from pytest_benchaudit.pytest_plugin.collect import BenchItem, BenchmarkFailure, item_hashes
from pytest_benchaudit.pytest_plugin.launched import LAUNCHED, LocalUrl, launched_identity
from pytest_benchaudit.pytest_plugin.local_pace import announce_local_pace
from pytest_benchaudit.pytest_plugin.lookahead import LookAhead
from pytest_benchaudit.pytest_plugin.options import RunOptions
from pytest_benchaudit.pytest_plugin.paths import names_suites
from pytest_benchaudit.pytest_plugin.protocol import LightProtocol
from pytest_benchaudit.pytest_plugin.repeat_items import Tally, reducer_of, repeat_request, repeats_of
from pytest_benchaudit.pytest_plugin.resume import recorded_repeats
from pytest_benchaudit.scoring.evaluate import evaluate, failure_message
from pytest_benchaudit.scoring.judge_calls import judge_answer, needs_judge

if TYPE_CHECKING:
    from pytest_benchaudit.inference.process import ProcessEngine
    from pytest_benchaudit.scoring.evaluate import RecordExtras

__all__ = ["Runner", "default_concurrency", "add_runner_options"]

SWITCH_INTERVAL_S = 0.001  # sys.setswitchinterval while the engine runs (see Runner._engine)


def add_runner_options(parser: pytest.Parser) -> None:
    """Options of the runner (registered with the other benchaudit options)."""
    from pytest_benchaudit.inference.breaker import DEFAULT_THRESHOLD

    parser.getgroup("benchaudit").addoption(
        "--breaker",
        type=int,
        default=DEFAULT_THRESHOLD,
        metavar="N",
        help=f"stop asking a model after N consecutive connection failures or timeouts (default "
        f"{DEFAULT_THRESHOLD}; 0: never); its remaining questions are recorded invalid (endpoint_down) "
        "and --resume asks them later. HTTP 401/403 stops it at once",
    )
    parser.getgroup("benchaudit").addoption(
        "--no-inference-process",
        action="store_true",
        default=False,
        help="ask the models from a thread of the pytest process (pytest and the HTTP client then share one "
        f"core); by default they are asked from a process of their own. ${INFERENCE_PROCESS_ENV}=0 does "
        "the same",
    )


def _skip_if_not_asked(generation: Generation, max_cost: float | None) -> None:
    """A request --max-cost kept from being sent: the item is skipped, not recorded, so --resume asks it."""
    if generation.error == NOT_ASKED:
        pytest.skip(f"{NOT_ASKED} ({max_cost:g} USD); --resume continues the run")


@contextlib.contextmanager
def _engine_alive() -> Iterator[None]:
    """An inference process that died, or a backend whose own code failed (a bug, never recorded as
    the model's inference_error), ends the run with one message, wherever the engine is used (the
    records written so far are kept; ``--resume`` asks the rest)."""
    from pytest_benchaudit.inference.backend import BackendBug
    from pytest_benchaudit.inference.process import InferenceProcessError

    try:
        yield
    except InferenceProcessError as err:
        pytest.exit(printable(f"benchaudit: {err}"), returncode=pytest.ExitCode.INTERRUPTED)
    except BackendBug as err:
        pytest.exit(
            printable(
                f"benchaudit: {err}; the run stops (the records written so far are kept, --resume asks the rest)"
            ),
            returncode=pytest.ExitCode.INTERNAL_ERROR,
        )


def _inference_process_env() -> bool:
    """``$BENCHAUDIT_INFERENCE_PROCESS`` (:func:`.prestart.inference_process_setting`); a value it
    does not know is a usage error."""
    setting = inference_process_setting(os.environ)
    if setting is not None:
        return setting
    raise pytest.UsageError(
        f"${INFERENCE_PROCESS_ENV}={os.environ[INFERENCE_PROCESS_ENV]!r}: expected 0 (the "
        "models asked from a thread of the pytest process) or 1 (from a process of their own)"
    )


def _process_available() -> bool:
    from pytest_benchaudit.inference.process import available

    return available()


def default_concurrency(spec: ModelSpec, option: int | None) -> int:
    """``--concurrency`` if given, else the model's own setting (2 for the local model), else 32."""
    if option:
        return option
    return spec.concurrency or 32


class Runner:
    """pytest plugin object: engine, prefetch, per-item evaluation."""

    def __init__(self, config: pytest.Config, opts: RunOptions, local_url: LocalUrl) -> None:
        self.config = config
        self.opts = opts
        self.local_url = local_url
        self.engine: Engine | ProcessEngine | None = None
        self.in_process = (
            bool(config.getoption("no_inference_process", False))
            or not _inference_process_env()
            or not _process_available()
        )
        self._switch_interval = sys.getswitchinterval()
        self._registered: set[str] = set()
        self._window_size: int | None = None
        self.lookahead = LookAhead(
            config,
            opts,
            window=self._window,
            concurrency=lambda m: default_concurrency(m, self.opts.concurrency),
            ensure_model=self._ensure_model,
            prefetch_many=self._prefetch_many,
            release=self._release,
        )
        self._meter: Any = None  # --max-cost: what this process spent (inference.usage.CostMeter)
        try:  # how long a request may go unanswered before the progress line says it waits
            self.stall_after = stall_after()
        except UsageError as err:
            raise pytest.UsageError(str(err)) from None
        self.breaker_threshold = int(config.getoption("breaker", 20) or 0)
        if self.breaker_threshold < 0:
            raise pytest.UsageError(f"--breaker {self.breaker_threshold}: expected 0 (off) or a positive number")
        register_secret_env(m.api_key_env for m in opts.models)
        self.protocol = LightProtocol(config)
        if self._will_ask_models() and names_suites(list(config.args), config.invocation_params.dir):
            # Start the inference process now: its start-up (an interpreter, the HTTP client, ~0.5 s)
            # runs beside pytest's collection instead of after it.
            self._engine()

    def early_asker(self, session: pytest.Session) -> Callable[[pytest.Item], bool] | None:
        """What collection hands each item of the task it is about to make (:meth:`.LookAhead.early_asker`)."""
        return self.lookahead.early_asker(session)

    def _prefetch_many(self, batch: list[tuple[str, Any]]) -> None:
        with _engine_alive():
            self._engine().prefetch_many(batch)

    def _release(self, model: str, request: Any) -> None:
        if self.engine is not None:
            self.engine.release(model, request)

    def _will_ask_models(self) -> bool:
        return not self.in_process and bool(self.opts.models) and not self.config.option.collectonly

    # -- engine ---------------------------------------------------------------------
    def _engine(self) -> Engine | ProcessEngine:
        if self.engine is None and not self.in_process:
            from pytest_benchaudit.inference.process import ProcessEngine

            # The models are asked from a process of its own (inference.process): the HTTP client's
            # CPU then runs beside pytest's item loop, not on its core and GIL.
            self.engine = ProcessEngine(self._window(), self.opts.cache_dir, self.opts.cache_expiry_s)
        if self.engine is None:
            from pytest_benchaudit.inference.cache import GenerationCache

            window = self._window()
            # --no-cache: cache_dir is None. The cache opens lazily on the engine's loop thread.
            cache = (
                GenerationCache(self.opts.cache_dir, expiry_s=self.opts.cache_expiry_s)
                if self.opts.cache_dir is not None
                else None
            )
            self.engine = Engine(window=window, cache=cache)
            # The engine's loop thread and pytest's item loop share one GIL; a thread that gave it
            # up for a system call (a record line, a terminal write, waiting for an answer) waits
            # up to the switch interval (5 ms by default) to get it back from the other, busy one.
            # 1 ms: ~25% more items per second when CPU-bound (bench/RESULTS.md); restored at the end.
            self._switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self._switch_interval, SWITCH_INTERVAL_S))
        return self.engine

    def _generate(self, model: str, request: Any) -> Generation:
        """The engine's generation of ``request`` (see :func:`_engine_alive`)."""
        with _engine_alive():
            engine = self._engine()
            if engine.on_wait is None:
                engine.on_wait = self._on_wait
            return engine.generate(model, request)

    def _on_wait(self, engine: Engine | ProcessEngine) -> None:
        """An item has waited another second for its answer: the progress line says how many requests
        have been unanswered longer than ``$BENCHAUDIT_STALL_AFTER`` seconds (an xdist worker has none)."""
        from pytest_benchaudit.common.progress import waiting_text

        answers = self.config.pluginmanager.get_plugin("benchaudit-answers")
        if answers is not None:
            count, longest = engine.waiting(self.stall_after)
            answers.show_waiting(count, waiting_text(count, self.stall_after, longest))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Collected benchmark items live until the session ends: move them (and everything else
        alive now) out of the cyclic garbage collector's view.  Each full collection would
        otherwise walk every item again (a 16,000-item run spent seconds in it, and pytest's
        end-of-session ``gc.collect()`` calls ~1 s more)."""
        if any(isinstance(item, BenchItem) for item in session.items):
            import gc

            gc.freeze()
            _freeze_at_exit()

    @pytest.hookimpl(trylast=True)
    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> None:
        """At the first suite file found, start the inference process: its start-up (an interpreter,
        the HTTP client) then runs beside the rest of collection instead of after it."""
        if self.engine is None and file_path.name == SUITE_FILENAME and self._will_ask_models():
            self._engine()

    def _window(self) -> int:
        """Requests the engine keeps in flight: enough to keep every model's concurrency busy."""
        if self._window_size is None:
            self._window_size = max(
                256, 4 * sum(default_concurrency(m, self.opts.concurrency) for m in self.opts.models)
            )
        return self._window_size

    def _ensure_model(self, spec: ModelSpec) -> None:
        if spec.label in self._registered:
            return
        if spec.kind == "replay":
            from pytest_benchaudit.runs.replay import ReplayBackend

            self._engine().add_model(
                spec.label, functools.partial(ReplayBackend, Path(spec.replay_dir or ""), spec.label)
            )
            self._registered.add(spec.label)
            return
        identity = None
        if spec.kind in LAUNCHED:  # a server this run launched (here, or in the xdist controller)
            identity = launched_identity(spec)  # its port changes every run; the cache must not care
            spec = spec.model_copy(
                update={"base_url": self.local_url.get(spec), "api_key_env": self.local_url.api_key_env(spec)}
            )
        concurrency = default_concurrency(spec, self.opts.concurrency)
        register_secret_env([spec.api_key_env])
        if spec.endpoints:
            from pytest_benchaudit.inference.balanced import balanced_identity

            identity = balanced_identity(spec)
        in_flight = concurrency * max(1, len(spec.endpoints))  # --concurrency applies per endpoint
        recipe = self._budgeted(endpoint_recipe(spec, concurrency, self.breaker_threshold), spec, in_flight)
        engine = self._engine()
        if isinstance(engine, Engine):
            engine.add_model(spec.label, recipe, identity=identity)
        else:  # the key is read in the inference process: it travels with the recipe, in memory
            engine.add_model(
                spec.label,
                recipe,
                identity=identity,
                env={spec.api_key_env: os.environ.get(spec.api_key_env)} if spec.api_key_env else None,
            )
        self._registered.add(spec.label)

    def _budgeted(self, factory: Any, spec: ModelSpec, concurrency: int) -> Any:
        """``factory`` behind the --max-cost meter (this process's share of it under xdist)."""
        if self.opts.max_cost is None:
            return factory
        from pytest_benchaudit.inference.usage import CostMeter, price_for

        if self._meter is None:
            workers = int(getattr(self.config, "workerinput", {}).get("workercount", 1) or 1)
            self._meter = CostMeter(self.opts.max_cost / workers)
        price = price_for(self.opts.prices, spec.label.removeprefix("judge:"), spec)
        return budgeted_recipe(factory, self._meter, price, concurrency)

    def _check_replays(self) -> None:
        """``--model replay:RUN_DIR`` with upstream fields that differ: one usage error, before any item."""
        from pytest_benchaudit.common.errors import RunDirError
        from pytest_benchaudit.runs.replay import upstream_mismatches
        from pytest_benchaudit.runs.store import read_run_json

        for spec in self.opts.models:
            if spec.kind != "replay":
                continue
            try:
                meta = read_run_json(Path(spec.replay_dir or ""))
            except RunDirError as err:
                raise pytest.UsageError(f"--model replay:{spec.replay_dir}: {err}") from None
            problems = upstream_mismatches(meta.get("pipeline_cards", {}), self.opts.state.cards)
            if problems:
                raise pytest.UsageError(
                    f"--model replay:{spec.replay_dir}: " + "; ".join(problems) + " — this needs new generations"
                )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        if session.config.option.collectonly or hasattr(session.config, "workerinput"):
            return
        self._check_replays()
        # Servers the run launches (local, vllm:): once, now; a failed start is one usage error, not one per item.
        selected = [i for i in session.items if isinstance(i, BenchItem) and not i.get_closest_marker("skip")]
        # vLLM refuses more log-probabilities than its --max-logprobs: launch it with what the layers ask for
        self.local_url.max_logprobs = (
            max((i.bench.pipeline.inference.decoding.top_logprobs or 0 for i in selected), default=0) or None
        )
        self.local_url.start_all({i.bench.model for i in selected})
        self.lookahead.release_unplanned(session)
        if selected:
            del selected
            self.lookahead.start(session.items)
        if self.engine is not None:
            announce_local_pace(session, self._prefetch_many, self._generate)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        # Benchmark items: the same reports without pytest's per-phase hooks (None: pytest's protocol).
        return self.protocol.run(item, nextitem)

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self.lookahead.release(nodeid)  # queued ahead, never asked for: the item errored first

    # -- one item --------------------------------------------------------------------
    def run_item(self, node: BenchItem, question: Question, pipeline: Pipeline, model: ModelSpec) -> None:
        self.lookahead.advance(node)
        with _engine_alive():
            self._ensure_model(model)
        spec = node.bench
        # The default fixtures give the very objects the requests were prefetched with: reuse them.
        queued = None
        if question is spec.question and pipeline is spec.pipeline and model is spec.model:
            queued = self.lookahead.take_requests(node)
        hashes = item_hashes(node, question, pipeline, self.opts.state.cards)  # after every fixture
        where = f"{question.benchmark}.{question.task} {question.id} [{model.label}]: "
        if repeats_of(pipeline) > 1:
            self._run_repeats(node, question, pipeline, model, queued, hashes, where)
            return
        request = queued[0] if queued else spec.render(question, pipeline, model)
        data = node.record = self._ask(node, question, pipeline, model, request, hashes)
        self._properties(node, data)
        if not data["correct"]:
            # One line on the terminal and in JUnit: an answer's ESC, CR or NUL is shown escaped, never acted on.
            raise BenchmarkFailure(printable(where + failure_message(data)))

    def _properties(self, node: BenchItem, data: RecordRow) -> None:
        node.user_properties.extend(
            [
                ("benchmark", data["benchmark"]),
                ("task", data["task"]),
                ("model", data["model"]),
                # Shown by CI viewers as they are: control characters from the answer escaped (the record keeps them).
                ("pipeline", data["pipeline"]),
                ("gold", printable(str(data["gold"]))),
                ("prediction", printable(str(data["prediction"] or ""))),
                ("valid", data["valid"]),
                ("score", data["score"]),
            ]
        )
        if not data["valid"]:
            node.user_properties.append(("invalid_reason", data["invalid_reason"]))

    def _run_repeats(
        self,
        node: BenchItem,
        question: Question,
        pipeline: Pipeline,
        model: ModelSpec,
        queued: list[Any] | None,
        hashes: tuple[str, str],
        where: str,
    ) -> None:
        """An item asked K times (``inference.repeats``): each repeat's record goes to the controller as
        soon as it is made (:meth:`_hand_over`; an interrupted run keeps every repeat answered so far,
        and ``--resume`` asks the others), the verdicts are counted, not kept; the item's verdict is the
        reducer's over every repeat (those a resumed run recorded too)."""
        recorded = recorded_repeats(self.config, node)
        tally, first, wrong = Tally(), None, None
        for correct in recorded.values():
            tally.add(correct)
        keywords: dict[str, Any] = {}  # what each of its reports carries (pytest's {x: 1 for x in item.keywords})
        for record in self._ask_repeats(node, question, pipeline, model, queued, hashes, recorded):
            keywords = keywords or dict.fromkeys(node.keywords, 1)
            self._hand_over(node, record, keywords)
            tally.add(bool(record["correct"]))
            first = first or record
            if wrong is None and not record["correct"]:
                wrong = record
        if first is None:
            return  # every repeat was recorded (the item is deselected, as a rule)
        node.record, node.records_handed_over = first, True  # the call report shows it; it is written already
        self._properties(node, first)
        reducer = reducer_of(pipeline)
        node.user_properties.append(("repeats", tally.text(reducer)))
        if not tally.passes(reducer):
            shown = wrong or first
            raise BenchmarkFailure(
                printable(f"{where}{tally.text(reducer)}; repeat {shown['repeat']}: " + failure_message(shown))
            )

    def _ask_repeats(
        self,
        node: BenchItem,
        question: Question,
        pipeline: Pipeline,
        model: ModelSpec,
        queued: list[Any] | None,
        hashes: tuple[str, str],
        recorded: dict[int, bool],
    ) -> Iterator[RecordRow]:
        """The records of the item's repeats not yet recorded, in order, as they are answered.  At most
        :meth:`.LookAhead.per_item` of its requests are queued at a time (those the look-ahead queued
        first): each is rendered when a slot frees, so K never sets how many requests exist at once."""
        label = model.label
        ahead: collections.deque[Any] = collections.deque(queued or ())
        taken = {r.repeat for r in ahead}
        rest = (k for k in range(repeats_of(pipeline)) if k not in recorded and k not in taken)
        base: list[Any] = []  # repeat 0's request, rendered once when first needed

        def queue_more(n: int) -> None:
            batch = []
            for k in itertools.islice(rest, n):
                if not base:
                    base.append(node.bench.render(question, pipeline, model))
                batch.append(repeat_request(base[0], k))
            if batch:
                self._prefetch_many([(label, r) for r in batch])
                ahead.extend(batch)

        queue_more(max(0, self.lookahead.per_item() - len(ahead)))
        try:
            while ahead:
                request = ahead.popleft()
                queue_more(1)  # the slot this one frees, filled before its answer is waited for
                yield self._ask(node, question, pipeline, model, request, hashes)
        finally:  # stopped early (a skip, Ctrl-C, a dead engine): what is still queued is not waited for
            for request in ahead:
                self._release(label, request)

    def _hand_over(self, node: BenchItem, record: RecordRow, keywords: dict[str, Any]) -> None:
        """Report one repeat's record now: a passed report of the ``setup`` phase carrying it (what pytest's
        terminal, JUnit XML, ``--lf`` and xdist's scheduler count as nothing; an xdist worker sends it to
        the controller like any report), which the controller appends to records.jsonl at once."""
        now = time.time()
        node_id = node.id if hasattr(type(node), "id") else node.nodeid  # pytest >= 9.2: the structured id
        node.ihook.pytest_runtest_logreport(
            report=_fastpath.make_report(
                node_id,
                node.location,
                dict(keywords),
                "passed",
                None,
                "setup",
                [],
                0.0,
                now,
                now,
                [],
                benchaudit_record=record,
            )
        )

    def _ask(
        self,
        node: BenchItem,
        question: Question,
        pipeline: Pipeline,
        model: ModelSpec,
        request: Any,
        hashes: tuple[str, str],
    ) -> RecordRow:
        """Ask ``request`` (re-asked while its answer cannot be read, ``inference.reask_on_invalid``),
        read and score the answer: the record, as JSON-ready data."""
        earlier: list[str] = []
        for ask in range(1 + pipeline.inference.reask_on_invalid):
            asked = request if ask == 0 else request.model_copy(update={"sample": ask})
            generation = self._generate(model.label, asked)
            if generation.error and "logprob" in generation.error:
                from pytest_benchaudit.inference.launch.vllm import logprob_refusal

                refusal = logprob_refusal(generation.error)
                if refusal:  # every item would fail the same way: one message instead of 100% inference_error
                    pytest.exit(printable(f"--model {model.label}: {refusal}"), returncode=pytest.ExitCode.USAGE_ERROR)
            _skip_if_not_asked(generation, self.opts.max_cost)
            judged, verdict, extra = self._judge(question, pipeline, generation)
            record = evaluate(
                question,
                pipeline,
                asked,
                generation,
                model=model.label,
                variant=node.bench.variant,
                item_id=node.nodeid,
                resources=node.bench.resources,
                extraction=judged,
                score=verdict,
                extra=extra,
            )
            if record.valid or record.invalid_reason == "endpoint_down":  # re-asking a dead endpoint is no use
                break
            earlier.append(generation.text if generation.error is None else f"[error] {generation.error}")
        # Dumped once, then the fields set in place (the same dict model_copy + model_dump gave,
        # without a second copy and dump); the message and properties read the dict.
        # Record's dump is a RecordRow (a test holds their keys and types equal): no second validation per item.
        data = cast(RecordRow, record.model_dump(mode="json"))
        data["asks"], data["earlier_outputs"] = ask + 1, earlier[:ask]
        data["pipeline_hash"], data["upstream_hash"] = hashes  # the card's: template, data and judge included
        data["repeat"] = request.repeat
        return data

    def _judge(
        self, question: Question, pipeline: Pipeline, generation: Generation
    ) -> tuple[Extraction | None, Score | None, RecordExtras]:
        """Ask the ``--judge`` model to extract or grade, when the pipeline wants it
        (:func:`pytest_benchaudit.scoring.judge_calls.judge_answer` decides what to ask and reads the reply)."""
        if self.opts.judge is None or generation.error is not None or not needs_judge(pipeline):
            return None, None, {}
        spec = self.opts.judge.model_copy(update={"label": f"judge:{self.opts.judge.label}"})
        self._ensure_model(spec)

        def ask(request: Request) -> Generation:
            reply = self._generate(spec.label, adjust_request(request, spec))
            _skip_if_not_asked(reply, self.opts.max_cost)
            return reply

        judged = judge_answer(question, pipeline, generation, spec.label, ask)
        return judged.extraction, judged.score, judged.extra

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        record = getattr(item, "record", None)
        if call.when == "call" and record is not None:
            # Travels to the xdist controller with the report (extra report attributes are serialised).
            report.benchaudit_record = record
            if isinstance(item, BenchItem):
                if item.records_handed_over:  # inference.repeats: each repeat's record was reported as it came
                    report.benchaudit_handed_over = True
                item.record, item.records_handed_over = (
                    None,
                    False,
                )  # the item (kept until the session ends) does not keep it
        elif call.when == "teardown" and isinstance(item, BenchItem):
            # Every report has its own copy of the JUnit properties (JUnit reads the teardown
            # report's); the item, kept until the session ends, needs them no more.
            item.user_properties.clear()
        return report

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput["benchaudit"] = {
                "cards": self.opts.state.cards,
                "checksums": self.opts.state.checksums,
                "cache": self.engine.cache_stats() if self.engine is not None else None,
            }
        self._close_engine()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self._close_engine()  # a run stopped before its session ended (a usage error) started one too

    def _close_engine(self) -> None:
        prestart.discard()  # forked at start-up, never needed (no suite collected, --no-inference-process)
        if self.engine is not None:
            self.engine.close()
            self.engine = None
            sys.setswitchinterval(self._switch_interval)


@functools.cache  # once per process (pytester runs many sessions in one)
def _freeze_at_exit() -> None:
    """At interpreter exit, freeze what is still alive before the interpreter's own final
    collections walk it (registered now, so it runs before the atexit handlers registered at
    start-up, and after pytest's unconfigure, whose forced collections report unraisable
    exceptions).  A run's objects are then freed by reference counting or with the process:
    the exit of a 2,189-item run took ~75 ms, ~25 ms frozen (bench/RESULTS.md)."""
    import atexit
    import gc

    atexit.register(gc.freeze)
