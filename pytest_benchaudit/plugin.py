"""pytest entry point: options, fixtures and the parts that do the work.

Thin by design: the pytest side lives in :mod:`pytest_benchaudit.pytest_plugin`.
Options are declared and validated in ``options``, suite files are collected by
``collect``, items are run by ``runner`` (every process that runs items) and the run
directory, summary and gates belong to ``controller`` (the process that owns the run).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_benchaudit.pytest_plugin.early import fork_inference_process

# Before the rest of the plugin is imported: a run that asks models forks its inference process
# now, so that its ~0.5 s of imports run beside pytest's start-up (inference/prestart.py).
fork_inference_process()

from pytest_benchaudit.common.errors import BenchauditError  # noqa: E402
from pytest_benchaudit.pytest_plugin.collect import collect_file, model, pipeline, question  # noqa: F401, E402
from pytest_benchaudit.pytest_plugin.options import OPTIONS_KEY, add_options, build_options  # noqa: E402

__all__ = ["model", "pipeline", "pytest_addoption", "pytest_collect_file", "pytest_configure", "pytest_report_header",
           "question"]


@pytest.hookimpl
def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_benchaudit.pytest_plugin.reporting import add_output_options
    from pytest_benchaudit.pytest_plugin.protocol import add_protocol_options
    from pytest_benchaudit.pytest_plugin.runner import add_runner_options

    add_options(parser)
    add_output_options(parser)
    add_runner_options(parser)
    add_protocol_options(parser)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    from pytest_benchaudit.pytest_plugin.controller import Controller
    from pytest_benchaudit.pytest_plugin.launched import LocalUrl
    from pytest_benchaudit.pytest_plugin.runner import Runner

    from pytest_benchaudit.pytest_plugin.checks import PreRunChecks
    from pytest_benchaudit.pytest_plugin.paths import resolve_suite_args

    try:  # any error of the package before the first item is a usage error (exit 4)
        # `pytest suites/secEval` runs suites/seceval (said in the header); an unknown suite lists them
        config.args[:], path_notes = resolve_suite_args(list(config.args), config.invocation_params.dir)
        opts = build_options(config)
    except (BenchauditError, pytest.UsageError) as err:
        if hasattr(config, "workerinput"):  # a worker's own options (on another host: a named model its
            from pytest_benchaudit.pytest_plugin.remote import refuse_worker  # pyproject lacks): raising would

            refuse_worker(config, str(err))  # hang xdist; it collects nothing and the controller says why
            return
        raise pytest.UsageError(str(err)) from None
    opts.notes[:0] = path_notes
    config.stash[OPTIONS_KEY] = opts
    # Problems collection finds (pipeline values, layer, gate targets): one usage error before any item.
    config.pluginmanager.register(PreRunChecks(config, opts.pipelines or opts.pipeline, opts.gates), "benchaudit-checks")
    from pytest_benchaudit.pytest_plugin.reporting import ReportTrim

    config.pluginmanager.register(ReportTrim(config), "benchaudit-report-trim")  # what the session keeps of reports
    local_url = LocalUrl(config)
    is_worker = hasattr(config, "workerinput")
    # xdist has already set option.dist when -n is given (its cmdline_main runs first).
    is_xdist_controller = (
        not is_worker and getattr(config.option, "dist", "no") != "no" and not config.option.collectonly
    )
    if not is_xdist_controller:
        runner = Runner(config, opts, local_url)
        opts.state.runner = runner
        config.pluginmanager.register(runner, "benchaudit-runner")
    if not is_worker:
        config.pluginmanager.register(Controller(config, opts, local_url), "benchaudit-controller")
    if is_xdist_controller or is_worker:  # workers on other hosts (execnet gateways): see pytest_plugin/remote.py
        from pytest_benchaudit.pytest_plugin.remote import RemoteWorkers, WorkerFacts

        config.pluginmanager.register((WorkerFacts if is_worker else RemoteWorkers)(config, opts), "benchaudit-remote")
    if is_worker:
        from pytest_benchaudit.pytest_plugin.controller import ResumeFilter

        # --resume under xdist: workers deselect the items the run already recorded.
        config.pluginmanager.register(ResumeFilter(config), "benchaudit-resume")


@pytest.hookimpl
def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if OPTIONS_KEY not in parent.config.stash:  # a worker whose options failed (refuse_worker): nothing to run
        return None
    return collect_file(file_path, parent)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """One line per name the run resolved for the user (a suite path's case, a bare model name)."""
    opts = config.stash.get(OPTIONS_KEY, None)
    return [f"benchaudit: {note}" for note in opts.notes] if opts is not None else []
