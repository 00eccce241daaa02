"""The controller side of a run: run directory, records, summary, gates, shared servers.

Registered in the process that owns the run: the only process of a serial run,
or the xdist controller.  Every record arrives here exactly once, attached to
the ``call`` report of its item (xdist serialises reports from workers), and is
appended to ``records.jsonl`` at once.  Pipeline cards and dataset checksums
come from collection (serial) or from each worker's ``workeroutput`` (xdist).

Records are not kept: during the run the controller holds counters only (questions a dead
endpoint never got, served model ids, the keys of a resumed run's records).  One streaming
pass over ``records.jsonl`` feeds the summary (compact columns per task: a score and a
validity flag per record, enough for the Wilson / t intervals and breakdowns), the usage
table and the bounded answer list (:class:`RecordsDigest`); a 161,670-item run is never in
memory at once.  In a serial run that pass follows the file as it grows (at each flush, while
the run waits for answers), so the end of the run reads only the last records; under xdist
the cards come with the workers' output at the end, and the pass is made then.

``--resume RUN_DIR`` reopens an interrupted run instead of creating one (:meth:`RunDirectory.reopen`:
a torn last line is dropped with one warning): its records stay in the summary, new ones are
appended, and the items already recorded are never asked again (:mod:`.resume`).

Why ~500 lines: the run directory, the breaker's incomplete-run accounting, cost, gates, xdist
node glue and the terminal summary all act on the one run the controller owns.  Which records a
resumed run holds and which items it skips is :mod:`.resume`'s; the streaming pass over
``records.jsonl`` is :mod:`.digest`'s; what run.json says of the invocation, :mod:`.runmeta`'s.
"""

from __future__ import annotations

import platform
import sys
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_benchaudit.aggregate.summary_documents import BenchmarkScore, TaskResult, UsageRow, UsageSummary
from pytest_benchaudit.common.errors import RunDirError
from pytest_benchaudit.common.safe_text import printable
from pytest_benchaudit.common.secrets import redact
from pytest_benchaudit.pipeline.card import merge_cards, public_cards, resumed_cards, run_warnings, suite_checksums
from pytest_benchaudit.pipeline.record_documents import Cards, CardWarning, RecordRow
from pytest_benchaudit.pytest_plugin.digest import RecordsDigest
from pytest_benchaudit.pytest_plugin.launched import KEYS_KEY, LocalUrl
from pytest_benchaudit.pytest_plugin.options import RunOptions
from pytest_benchaudit.pytest_plugin.reporting import DEFAULT_BUDGET, AnswerReporting, is_benchmark_report, show_answers
from pytest_benchaudit.pytest_plugin.resume import (
    RECORDED,
    RESUME_KEYS,
    RecordKey,
    ResumeFilter,
    ResumeWarning,
    check_same_collection,
    check_same_invocation,
    deselect_recorded,
    drop_not_asked,
    item_key,
    not_asked,
    record_key,
    resume_command,
    resume_workerinput,
    write_stopped,
)
from pytest_benchaudit.pytest_plugin.runmeta import clean_argv, run_models, run_warning_list, sum_cache_stats, versions
from pytest_benchaudit.pytest_plugin.userhooks import UserHooks
from pytest_benchaudit.report.gates import GateVerdict, evaluate_gates, gate_results
from pytest_benchaudit.runs.run_meta import RunMeta
from pytest_benchaudit.runs.store import RunDirectory, new_run_id, read_records, run_slug

if TYPE_CHECKING:
    from pytest_benchaudit.inference.cache import CacheStats

# The summary's modules (aggregate.results, report.terminal: tabulate) are imported where the
# summary is made: the first flush of records, not the start-up before the first request.

__all__ = ["Controller", "ResumeFilter", "ResumeWarning", "item_key", "record_key", "RESUME_KEYS"]


class Controller:
    """pytest plugin object owning the run directory and the end-of-run report."""

    def __init__(self, config: pytest.Config, opts: RunOptions, local_url: LocalUrl) -> None:
        self.config = config
        self.opts = opts
        self.local_url = local_url
        self.run_dir: RunDirectory | None = None
        self.served: dict[str, set[str]] = {}  # model -> the model ids its endpoint said it served
        self.answers = ""  # the bounded list of wrong/invalid answers, rendered at the end
        self.results: list[TaskResult] = []
        self.finish_error: str | None = None  # the run directory could not be finished (see pytest_sessionfinish)
        # Why the run stopped before every question was asked and recorded (Ctrl-C, the inference
        # process died, a write failed); None while it has not.  Such a run ends with exit status 2.
        self.stopped: str | None = None
        self.write_error: str | None = None  # the first failed write to the run directory (it stops the run)
        self.session: pytest.Session | None = None
        self.benchmarks: list[BenchmarkScore] = []
        self.verdicts: list[GateVerdict] = []
        # --resume: keys of the records already in the run directory, and what its run.json held.
        self.recorded: set[RecordKey] = set()
        self.recorded_correct: set[RecordKey] = set()  # of those, the correct ones (an item's repeats' verdicts)
        config.stash[RECORDED] = (self.recorded, self.recorded_correct)
        self.recorded_wrong = 0  # how many of those are not correct (the resumed run's exit status counts them)
        self.resumed_from: RunMeta | None = None  # run.json of the run --resume continues
        self.duplicates = 0
        self.cache_stats: list[CacheStats] = []  # each process's Engine.cache_stats()
        self.usage: list[UsageRow] = []  # tokens and cost per model x task (inference.usage)
        self.context_warnings: list[CardWarning] = []  # inference.context: what the answers say of their context
        self.not_asked_cost = 0  # items --max-cost kept from being asked
        # Circuit breaker: per model, how many questions were not asked and why (run incomplete).
        self.not_asked: dict[str, int] = {}
        self.down_reason: dict[str, str] = {}
        self.show_answers = show_answers(config)  # a bad --show-answers is a usage error now, not at the end
        self.hooks = UserHooks(config)  # the pytest_benchaudit_* hooks plugins implement (newhooks.py)
        # A serial run (the runner in this process) knows its cards once collected: its records are
        # digested as they reach the file.  The xdist controller learns them at the end.
        self.digest: RecordsDigest | None = None
        self._follow = opts.state.runner is not None
        # Wrong/invalid answers: compact, and kept out of pytest's per-failure sections (see reporting.py).
        config.pluginmanager.register(AnswerReporting(config), "benchaudit-answers")
        if opts.resume is not None:
            self._resume(opts.resume)

    # -- --resume ------------------------------------------------------------------
    def _resume(self, path: Any) -> None:
        torn: list[str] = []
        try:
            if self.config.option.collectonly:  # only show what would run: read, change nothing
                for record in read_records(path, on_torn_tail=torn.append):
                    if not not_asked(record):
                        self._note_previous(record)
            else:
                # Locked first (one writer per run), then the questions a dead endpoint never got are
                # dropped (asked now), then the records are read.
                self.run_dir = RunDirectory.reopen(path, on_record=self._note_previous, prepare=drop_not_asked)
                torn = self.run_dir.warnings
        except (ValueError, OSError, RunDirError) as err:
            raise pytest.UsageError(f"--resume {path}: {err}") from None
        # The store validated run.json (RUN_META) when it reopened the run; its meta is that document.
        meta: RunMeta | None = cast(RunMeta, self.run_dir.meta.copy()) if self.run_dir is not None else None
        self.resumed_from = meta
        try:
            if meta is not None:
                check_same_invocation(path, meta, self.opts)
        except BaseException:
            if self.run_dir is not None:  # refused: unlocked, for the --resume with the right options
                self.run_dir.abandon()
            raise
        for message in torn:
            self.config.issue_config_time_warning(
                ResumeWarning(message + " (dropped; --resume asks it again)"), stacklevel=2
            )

    def _note_previous(self, record: RecordRow) -> None:
        """A record of the resumed run: its key (deselects its item) and served model id; not kept."""
        key = record_key(record)
        self.recorded.add(key)
        if not record.get("correct"):
            self.recorded_wrong += 1
        else:
            self.recorded_correct.add(key)
        self._note_served(record)

    def _note_served(self, record: RecordRow) -> None:
        if record.get("served_model"):
            self.served.setdefault(str(record.get("model")), set()).add(str(record["served_model"]))

    # A resumed run keeps the cards and checksums it was made with (a resume that differs is refused,
    # and a refused one must not overwrite them, or the next --resume would compare against its values).
    def _cards(self) -> Cards:
        resumed = self.resumed_from.get("pipeline_cards", {}) if self.resumed_from is not None else {}
        return public_cards(resumed_cards(self.opts.state.cards, resumed))

    def _checksums(self) -> dict[str, str]:
        resumed = self.resumed_from.get("dataset_checksums", {}) if self.resumed_from is not None else {}
        return {**self.opts.state.checksums, **resumed}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """What the cards warn of (a data file that differs from the checksum its suite pins) is said
        as soon as collection has read the files, before any question (``--co`` included), and
        again beside the scores.  Under xdist the workers collect: it is said at the end only."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        for warning in run_warnings(public_cards(self.opts.state.cards)):
            reporter.ensure_newline()
            reporter.write_line(printable(redact(f"benchaudit: warning: {warning['message']}")), yellow=True, bold=True)

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Serial run: items already recorded in the resumed run are deselected (never asked again)."""
        if self.resumed_from is not None:
            check_same_collection(self.opts.resume, self.resumed_from, self.opts.state.cards, self.opts.state.checksums)
        deselect_recorded(config, items, self.recorded)

    def _run_meta(self) -> RunMeta:
        assert self.run_dir is not None
        models = run_models(self.opts.models, self.local_url.url_of, self.served)
        meta: RunMeta = {
            "run_id": self.run_dir.run_id,
            "argv": clean_argv(list(self.config.invocation_params.args)),
            "pipeline": self.opts.pipeline,
        }
        if self.opts.pipelines:
            meta["pipelines"] = list(self.opts.pipelines)  # --pipelines: every layer
        meta.update(
            {
                "overrides": {k: v for k, v in self.opts.overrides},
                "limit": self.opts.limit,
                "vary": [(f, v) for f, v in self.opts.vary],
                "versions": dict(versions()),
                "models": models,
                "data_dir_origin": self.opts.data_origin,
                "pipeline_cards": self._cards(),
                "dataset_checksums": self._checksums(),
                "suite_checksums": suite_checksums(self._cards()),  # suite.toml and what it extends (--resume compares)
                "platform": {
                    "system": platform.system(),
                    "machine": platform.machine(),
                    "python": sys.version.split()[0],
                },
            }
        )
        if self.cache_stats:
            meta["generation_cache"] = sum_cache_stats(self.cache_stats)
        if self.opts.max_cost is not None:
            meta["max_cost"] = {"usd": self.opts.max_cost, "not_asked": self.not_asked_cost}
        if self.not_asked:
            meta["incomplete"] = {
                m: {"not_asked": n, "reason": self.down_reason.get(m, "")} for m, n in self.not_asked.items()
            }
        elif self.run_dir is not None:
            self.run_dir.meta.pop("incomplete", None)  # a resumed run that asked what was left
        remote = self.config.pluginmanager.get_plugin("benchaudit-remote")  # xdist: each worker's host, data
        if remote is not None:
            meta.update(remote.run_meta())
        # run.json's one warnings list ({"kind", "message"} each): the cards', what the answers say of
        # their context, and what the earlier sessions of a resumed run saw that this one cannot.
        earlier = self.resumed_from.get("warnings", []) if self.resumed_from is not None else []
        hook: list[CardWarning] = [{"kind": "hook_failed", "message": self.hooks.failure}] if self.hooks.failure else []
        meta["warnings"] = run_warning_list([*run_warnings(self._cards()), *self.context_warnings, *hook], earlier)
        if self.resumed_from is not None and self.resumed_from.get("argv"):
            # The run's own command line stays; the one that resumed it is kept beside it.
            meta["resume_argv"] = meta["argv"]
            meta["argv"] = self.resumed_from["argv"]
        return meta

    def _open_run(self) -> RunDirectory:
        # Created on the first benchmark report, so plain test sessions leave no empty runs.
        if self.run_dir is None:
            try:
                # Under xdist the cards arrive at the end: the name then says the model only.
                benches = {k.split(".", 1)[0] for k in self.opts.state.cards}
                slug = run_slug(benches, (m.label for m in self.opts.models))
                self.run_dir = RunDirectory(self.opts.report_dir, new_run_id(slug))
            except RunDirError as err:  # checked at start-up; this is the race (the folder went away since)
                pytest.exit(str(err), returncode=pytest.ExitCode.USAGE_ERROR)
            try:
                self.run_dir.write_run(**self._run_meta())
            except (RunDirError, OSError) as err:  # the disk is full from the start
                self._write_failed(err)
        return self.run_dir

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: hand the servers the run launches (local model, vLLM) to each worker.

        Each is started once, here in the controller, before the first worker starts;
        a failed start is one usage error."""
        urls = self.local_url.start_all([*self.opts.models, self.opts.judge])
        if urls:
            node.workerinput["benchaudit_launched_urls"] = urls
            node.workerinput[KEYS_KEY] = self.local_url.keys()  # each server's per-run key, like its URL
        # Workers collect: they deselect what is already recorded (ResumeFilter) and check their
        # collection against the run's (checks.PreRunChecks).
        node.workerinput.update(
            resume_workerinput(self.recorded, self.recorded_correct, self.resumed_from, self.opts.resume)
        )

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        out = getattr(node, "workeroutput", {}).get("benchaudit") or {}
        merge_cards(self.opts.state.cards, out.get("cards", {}))  # a card an item made wins over the collected one
        self.opts.state.checksums.update(out.get("checksums", {}))
        if out.get("cache"):
            self.cache_stats.append(out["cache"])

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.run_dir is None and is_benchmark_report(report):
            self._open_run()
        record = getattr(report, "benchaudit_record", None)
        if report.skipped and self.opts.max_cost is not None and "not asked: --max-cost" in str(report.longrepr):
            self.not_asked_cost += 1
        if record is None or self.run_dir is None or self.write_error:
            return
        if getattr(report, "benchaudit_handed_over", False):
            return  # inference.repeats: each repeat's record came in a report of its own, written then
        self._write(record)

    def _write(self, record: RecordRow) -> bool:
        """Append one record to the run (``False``: the write failed, the run stops)."""
        if self.recorded and record_key(record) in self.recorded:
            # Already in the resumed run (a worker that did not deselect it): recorded once only.
            self.duplicates += 1
            return True
        try:
            flushed = self.run_dir.append(record)  # type: ignore[union-attr]
        except OSError as err:  # disk full, file too large, the folder went away
            self._write_failed(err)
            return False
        if flushed and self._follow:
            self._catch_up()
        self._note_served(record)
        if not self.hooks.call("pytest_benchaudit_record", record=record):
            self._hook_failed(record)
        if record.get("invalid_reason") == "endpoint_down":
            self._endpoint_down(record)
        return True

    def _write_failed(self, err: OSError | RunDirError) -> None:
        """The first failed write stops the run: nothing more is asked (pytest stops after the
        running item), what reached the disk is kept, and ``--resume`` asks the rest."""
        if self.write_error:
            return
        where = self.run_dir.records_path if self.run_dir is not None else self.opts.report_dir
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        self.write_error = f"cannot write {where}: {reason}" if isinstance(err, OSError) else str(err)
        self.stopped = f"a write to the run directory failed ({self.write_error})"
        self._stop_asking(f"benchaudit: {self.write_error}; nothing more is asked")

    def _hook_failed(self, record: RecordRow) -> None:
        """A ``pytest_benchaudit_record`` implementation raised: the run stops asking (its tracker would miss
        what follows), every record written stays, and the end of the run writes the summary as usual."""
        if self.stopped:
            return
        item = f"{record.get('benchmark')}.{record.get('task')} {record.get('question_id')} [{record.get('model')}]"
        self.stopped = f"{self.hooks.failure}, at the record of {item}"
        self._stop_asking(f"benchaudit: {self.hooks.failure}; nothing more is asked")

    def _stop_asking(self, message: str) -> None:
        """Nothing more is asked: the inference process stops, pytest (and xdist) stop after the running item."""
        runner = self.opts.state.runner
        engine = getattr(runner, "engine", None) if runner is not None else None
        if engine is not None and hasattr(engine, "close_soon"):  # the inference process stops asking now
            engine.close_soon()
        if self.session is not None:
            self.session.shouldstop = message
        dsession = self.config.pluginmanager.get_plugin("dsession")  # xdist's loop stops on a flag of its own:
        if dsession is not None and not getattr(dsession, "shouldstop", True):  # workers get no more items
            dsession.shouldstop = message

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Ctrl-C (SIGINT), a dead inference process (``pytest.exit`` with status 2) or a failed
        write (``session.shouldstop``): the run stops early; the end of the run says so."""
        error = excinfo.value
        if self.stopped:
            return
        if isinstance(error, pytest.exit.Exception):
            if error.returncode == pytest.ExitCode.INTERRUPTED:
                self.stopped = str(error.msg).removeprefix("benchaudit: ")
        elif type(error) is not KeyboardInterrupt and str(error):
            self.stopped = str(error).rstrip(".")  # pytest's or xdist's own stop (--sw; -x under xdist)
        else:
            self.stopped = "interrupted (Ctrl-C or SIGINT)"

    def resume_command(self) -> str:
        """The command that continues this run: its own arguments (secrets masked) with ``--resume``."""
        return resume_command(
            clean_argv(list(self.config.invocation_params.args)),
            self.run_dir.path if self.run_dir is not None else "RUN_DIR",
        )

    def _catch_up(self) -> None:
        """Digest the records flushed so far (see :class:`RecordsDigest`)."""
        assert self.run_dir is not None
        try:
            if self.digest is None:
                self.digest = RecordsDigest(self.run_dir.records_path, self._cards(), self.show_answers, self._asked())
            self.digest.feed()
        except (RunDirError, ValueError, OSError):
            # The end of the run reads the file whole and says what is wrong with it.
            self._drop_digest()
            self._follow = False

    def _asked(self) -> dict[str, str | None]:
        """The model id sent, per model whose served model is checked: the endpoints the run does not
        launch (a launched server serves what it was started with; a replay serves a stored run)."""
        return {m.label: m.model_id for m in self.opts.models if m.kind == "endpoint"}

    def _drop_digest(self) -> None:
        if self.digest is not None:
            self.digest.close()
            self.digest = None

    def _endpoint_down(self, record: RecordRow) -> None:
        """Count a question the breaker did not send; the first one of a model says so, at once."""
        model = str(record.get("model"))
        self.not_asked[model] = self.not_asked.get(model, 0) + 1
        if model in self.down_reason:
            return
        from pytest_benchaudit.inference.breaker import endpoint_down_reason

        why = endpoint_down_reason(str(record.get("error") or ""))
        self.down_reason[model] = why
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(
                printable(
                    redact(
                        f"benchaudit: model {model}: endpoint down — {why}. Its remaining questions are recorded invalid "
                        f"(endpoint_down) without being asked; --resume {self.run_dir.path if self.run_dir else 'RUN_DIR'} "
                        "asks them later."
                    )
                ),
                yellow=True,
                bold=True,
            )

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.run_dir is None:
            return
        runner = self.opts.state.runner
        engine = getattr(runner, "engine", None) if runner is not None else None
        if engine is not None and hasattr(engine, "close_soon"):  # nothing more is asked: the inference
            engine.close_soon()  # process stops while the summary is written
        if self.write_error:  # what reached the disk stays as it is; no summary of a part of the run
            self.run_dir.abandon()
            session.exitstatus = pytest.ExitCode.INTERRUPTED
            return
        try:
            self._finish(session, exitstatus, engine)
        except (RunDirError, OSError) as err:
            # The folder went away or the disk filled up during the run: one line, no traceback.
            self.finish_error = (
                f"benchaudit: cannot finish the run directory {self.run_dir.path}: {err}; no summary was written"
            )
            self.stopped = self.stopped or "the run directory could not be finished"
            session.exitstatus = pytest.ExitCode.INTERRUPTED

    def _finish(self, session: pytest.Session, exitstatus: int, engine: Any = None) -> None:
        """Summarise records.jsonl, write summary.json and run.json (with ``engine``'s cache
        stats: a serial run's), and set the exit status."""
        assert self.run_dir is not None
        cards = self._cards()
        # One streaming pass over records.jsonl (this run's records and a resumed run's): each
        # consumer keeps what it needs, not the record.  A serial run made most of it already.
        self.run_dir.flush()
        digest, self.digest = self.digest, None
        if digest is None or digest.cards != cards:
            if digest is not None:
                digest.close()
            digest = RecordsDigest(self.run_dir.records_path, cards, self.show_answers, self._asked())
        digest.feed(final=True)
        summary, tally, answers = digest.summary, digest.tally, digest.answers
        from pytest_benchaudit.aggregate.results import benchmark_scores, summary_document

        self.results = summary.results()
        budget = DEFAULT_BUDGET if self.config.getoption("show_answers", None) is None else None
        self.answers = answers.render(budget)
        self.benchmarks = benchmark_scores(self.results, cards)
        self.verdicts = evaluate_gates(self.opts.gates, self.results, self.benchmarks) if self.opts.gates else []
        gates = gate_results(self.verdicts)
        judge = [self.opts.judge] if self.opts.judge is not None else []
        self.usage = tally.rows(self.opts.prices, {m.label: m for m in [*self.opts.models, *judge]})
        document = summary_document(self.results, self.benchmarks, gates, cards)
        usage: UsageSummary = {"prices_date": self.opts.prices.date, "rows": self.usage}
        if self.opts.max_cost is not None:
            usage["max_cost_usd"] = self.opts.max_cost
            usage["not_asked"] = self.not_asked_cost
        document["usage"] = usage
        self.run_dir.write_json("summary.json", document)
        self.hooks.call("pytest_benchaudit_summary", summary=document)  # a hook that raises: named at the end
        if engine is not None and hasattr(engine, "cache_stats"):  # serial run: the runner is in this process
            self.cache_stats.append(engine.cache_stats())
        self.context_warnings = digest.context_warnings(self.cache_stats)
        self.run_dir.finish(**self._run_meta(), exitstatus=int(exitstatus))
        if (
            self.resumed_from is not None
            and self.recorded
            and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
        ):
            # A resumed run's status is the whole run's, not this invocation's items': a wrong or
            # invalid answer recorded before still fails it, as it failed the run that recorded it.
            session.exitstatus = pytest.ExitCode.TESTS_FAILED if self.recorded_wrong else pytest.ExitCode.OK
        if self.verdicts:
            # With gates, the gates alone decide: wrong answers are measurements, not test errors.
            session.exitstatus = (
                pytest.ExitCode.OK if all(v.passed for v in self.verdicts) else pytest.ExitCode.TESTS_FAILED
            )
        if self.not_asked or self.stopped:
            # Questions were never asked (or their answers not recorded): no score, and no gate, of
            # this run is complete.
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        if self.hooks.failure:  # a plugin's bug, as pytest counts an exception in a hook (README: exit statuses)
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def _write_stopped(self, terminalreporter: Any) -> None:
        assert self.run_dir is not None and self.stopped is not None
        write_stopped(
            terminalreporter,
            self.stopped,
            self.run_dir.records_path.is_file(),
            self.resume_command(),
            status=3 if self.hooks.failure else 2,
        )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.run_dir is None:
            return
        if self.finish_error or self.write_error:
            if self.finish_error:
                terminalreporter.write_line(printable(redact(self.finish_error)), red=True, bold=True)
            if self.stopped:
                self._write_stopped(terminalreporter)
            terminalreporter.write_line(f"run directory: {self.run_dir.path}")
            return
        from pytest_benchaudit.report.terminal import render_summary, render_usage

        text = render_summary(self.results, self.benchmarks, self.opts.state.cards, self.verdicts)
        terminalreporter.write_sep("=", "benchaudit summary")
        if text:
            terminalreporter.write_line(redact(text))
        usage = render_usage(self.usage, self.opts.prices.date)
        if usage:
            terminalreporter.write_line(redact(usage))
        for warning in self.context_warnings:  # once each, as run.json's warnings list has them
            terminalreporter.write_line(redact(f"benchaudit: warning: {warning['message']}"), yellow=True)
        if self.not_asked_cost:
            terminalreporter.write_line(
                f"--max-cost {self.opts.max_cost:g} USD reached: {self.not_asked_cost} items not "
                f"asked; --resume {self.run_dir.path} continues"
            )
        if self.answers:
            terminalreporter.write_line("")
            terminalreporter.write_line(redact(self.answers))
        for warning in run_warnings(self._cards()):  # once each (a data file that differs from its pin)
            terminalreporter.write_line(redact(f"benchaudit: warning: {warning['message']}"), yellow=True, bold=True)
        if self.cache_stats:
            stats = sum_cache_stats(self.cache_stats)
            if stats["enabled"]:
                terminalreporter.write_line(f"generation cache: {stats['hits']} hits, {stats['misses']} misses")
        for model, n in self.not_asked.items():
            terminalreporter.write_line(
                printable(
                    redact(
                        f"INCOMPLETE: model {model}: {n:,} questions not asked (endpoint_down: {self.down_reason.get(model)}); "
                        f"exit status 2; `--resume {self.run_dir.path}` with the same options asks them"
                    )
                ),
                red=True,
                bold=True,
            )
        if self.not_asked and not self.stopped:
            terminalreporter.write_line(f"  {redact(self.resume_command())}")
        if self.hooks.failure and self.hooks.failure not in (self.stopped or ""):  # else STOPPED says it
            terminalreporter.write_line(
                printable(
                    redact(
                        f"benchaudit: {self.hooks.failure}; it is not called again in this run. The run directory is "
                        "finished (records, summary.json, run.json); exit status 3"
                    )
                ),
                red=True,
                bold=True,
            )
        if self.stopped:
            self._write_stopped(terminalreporter)
        if self.resumed_from is not None:
            terminalreporter.write_line(f"resumed: {len(self.recorded)} items already recorded were not asked again")
        if self.duplicates:
            terminalreporter.write_line(
                f"resumed: {self.duplicates} records of items already recorded arrived again and were not appended"
            )
        terminalreporter.write_line(f"run directory: {self.run_dir.path}")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Stop every server the run launched (terminate, then kill after a grace period)."""
        self._drop_digest()  # a session that ended before its summary (its file is closed)
        if self.run_dir is not None and getattr(self.run_dir, "lock", None) is not None:
            self.run_dir.lock.release()  # a run refused after it was opened (pytest in-process: the lock outlives it)
        self.local_url.stop()
