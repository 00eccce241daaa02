"""The controller side of a run: run directory, records, summary, gates, shared servers.

Registered in the process that owns the run: the only process of a serial run,
or the xdist controller.  Every record arrives here exactly once, attached to
the ``call`` report of its item (xdist serialises reports from workers), and is
appended to ``records.jsonl`` at once.  Pipeline cards and dataset checksums
come from collection (serial) or from each worker's ``workeroutput`` (xdist).
"""

from __future__ import annotations

import platform
import re
import sys
from importlib import metadata
from typing import Any

import pytest

from .aggregate import benchmark_scores, summarize
from .backends import strip_credentials
from .options import RunOptions
from .records import RunDirectory
from .report.gates import GateVerdict, evaluate_gates
from .report.terminal import render_summary
from .runner import LocalUrl
from .secrets import redact
from .suites import SUITE_FILENAME

__all__ = ["Controller"]


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("pytest", "pytest-benchaudit", "pytest-xdist", "httpx", "pydantic"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


_URL = re.compile(r"https?://[^\s,]+")


def _clean_argv(args: list[str]) -> list[str]:
    """argv as run.json records it: URL credentials dropped, known secrets masked."""
    return [redact(_URL.sub(lambda m: strip_credentials(m.group(0)), arg)) for arg in args]


class Controller:
    """pytest plugin object owning the run directory and the end-of-run report."""

    def __init__(self, config: pytest.Config, opts: RunOptions, local_url: LocalUrl) -> None:
        self.config = config
        self.opts = opts
        self.local_url = local_url
        self.run_dir: RunDirectory | None = None
        self.records: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = []
        self.benchmarks: list[dict[str, Any]] = []
        self.verdicts: list[GateVerdict] = []

    def _run_meta(self) -> dict[str, Any]:
        served: dict[str, set[str]] = {}
        for rec in self.records:
            if rec.get("served_model"):
                served.setdefault(rec["model"], set()).add(rec["served_model"])
        models = []
        for m in self.opts.models:
            info = m.public()
            if m.kind == "local" and self.local_url.server is not None:
                info["endpoint"] = self.local_url.server.url
            info["served_model_ids"] = sorted(served.get(m.label, ()))
            models.append(info)
        return {
            "argv": _clean_argv(list(self.config.invocation_params.args)),
            "pipeline": self.opts.pipeline,
            "overrides": {k: v for k, v in self.opts.overrides},
            "versions": _versions(),
            "models": models,
            "data_dir_origin": self.opts.data_origin,
            "pipeline_cards": self.opts.state.cards,
            "dataset_checksums": self.opts.state.checksums,
            "platform": {"system": platform.system(), "machine": platform.machine(), "python": sys.version.split()[0]},
        }

    def _open_run(self) -> RunDirectory:
        # Created on the first benchmark report, so plain test sessions leave no empty runs.
        if self.run_dir is None:
            self.run_dir = RunDirectory(self.opts.report_dir)
            self.run_dir.write_run(**self._run_meta())
        return self.run_dir

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: hand the shared local model server to each worker (started once, here)."""
        if any(m.kind == "local" for m in self.opts.models):
            node.workerinput["benchaudit_local_url"] = self.local_url.get_or_usage_error()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        out = getattr(node, "workeroutput", {}).get("benchaudit") or {}
        self.opts.state.cards.update(out.get("cards", {}))
        self.opts.state.checksums.update(out.get("checksums", {}))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.run_dir is None and report.nodeid.split("::", 1)[0].endswith(SUITE_FILENAME):
            self._open_run()
        record = getattr(report, "benchaudit_record", None)
        if record is None or self.run_dir is None:
            return
        self.records.append(record)
        self.run_dir.append(record)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.run_dir is None:
            return
        cards = self.opts.state.cards
        self.results = summarize(self.records, cards)
        self.benchmarks = benchmark_scores(self.results, cards)
        self.verdicts = evaluate_gates(self.opts.gates, self.results, self.benchmarks) if self.opts.gates else []
        gates = [{"gate": v.gate.text, "passed": v.passed, "detail": v.detail} for v in self.verdicts]
        self.run_dir.write_json("summary.json", {"results": self.results, "benchmarks": self.benchmarks, "gates": gates})
        self.run_dir.finish(**self._run_meta(), exitstatus=int(exitstatus))
        if self.verdicts:
            # With gates, the gates alone decide: wrong answers are measurements, not test errors.
            session.exitstatus = pytest.ExitCode.OK if all(v.passed for v in self.verdicts) else pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.run_dir is None:
            return
        text = render_summary(self.results, self.benchmarks, self.opts.state.cards, self.verdicts)
        terminalreporter.write_sep("=", "benchaudit summary")
        if text:
            terminalreporter.write_line(redact(text))
        terminalreporter.write_line(f"run directory: {self.run_dir.path}")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.local_url.stop()
