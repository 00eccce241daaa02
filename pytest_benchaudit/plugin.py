"""pytest entry point: options, fixtures and the parts that do the work.

Thin by design: the pytest side lives in :mod:`pytest_benchaudit.pytest_plugin`.
Options are declared and validated in ``options``, suite files are collected by
``collect``, items are run by ``runner`` (every process that runs items) and the run
directory, summary and gates belong to ``controller`` (the process that owns the run).
The hooks benchaudit calls on users' plugins and conftests are declared in
:mod:`pytest_benchaudit.newhooks`.  Importing this module does nothing else: the early inference
process is forked from :func:`pytest_load_initial_conftests`, once pytest has read its arguments.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from pytest_benchaudit.common.errors import BenchauditError
from pytest_benchaudit.pytest_plugin.collect import collect_file, model, pipeline, question  # noqa: F401
from pytest_benchaudit.pytest_plugin.options import OPTIONS_KEY, add_options, build_options

__all__ = [
    "model",
    "pipeline",
    "pytest_addhooks",
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_configure",
    "pytest_load_initial_conftests",
    "pytest_report_header",
    "question",
]

_FREEZE_KEY = pytest.StashKey[int]()  # gc.get_freeze_count() before this session could freeze anything


@pytest.hookimpl
def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_benchaudit import newhooks

    pluginmanager.add_hookspecs(newhooks)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """The first hook after pytest has read its command line (``args``: the arguments with
    ``$PYTEST_ADDOPTS`` and the ini file's ``addopts``), before conftests, the rest of the plugin
    and collection: a run that asks models forks its inference process now, so that its ~0.5 s of
    imports run beside the rest of pytest's start-up (inference/prestart.py).  Not on an xdist
    worker (its runner forks at configure, as every run this misjudges does)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        from pytest_benchaudit.pytest_plugin.early import fork_inference_process

        fork_inference_process(args)
    # A cleanup registered this early runs after pytest's own (they run last-registered first):
    # the runner's gc.freeze() is undone once pytest's end-of-session collections are over.
    early_config.stash[_FREEZE_KEY] = gc.get_freeze_count()
    early_config.add_cleanup(lambda: _unfreeze(early_config))


def _unfreeze(config: pytest.Config) -> None:
    """Undo the runner's ``gc.freeze()`` (pytest_plugin/runner.py) when the session ends, so that a
    process that goes on (an in-process ``pytester`` run, an IDE's runner) collects the session's
    objects again; not when something else had frozen objects before this session."""
    if config.stash.get(_FREEZE_KEY, 1) == 0 and gc.get_freeze_count():
        gc.unfreeze()


@pytest.hookimpl
def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_benchaudit.pytest_plugin.protocol import add_protocol_options
    from pytest_benchaudit.pytest_plugin.reporting import add_output_options
    from pytest_benchaudit.pytest_plugin.runner import add_runner_options

    add_options(parser)
    add_output_options(parser)
    add_runner_options(parser)
    add_protocol_options(parser)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    from pytest_benchaudit.pytest_plugin.controller import Controller
    from pytest_benchaudit.pytest_plugin.launched import LocalUrl
    from pytest_benchaudit.pytest_plugin.paths import load_run_plugins, resolve_suite_args
    from pytest_benchaudit.pytest_plugin.prerun_checks import PreRunChecks
    from pytest_benchaudit.pytest_plugin.runner import Runner

    try:  # any error of the package before the first item is a usage error (exit 4)
        # the benchaudit plugins (entry points): their suites, formats, rules and metrics (a broken one: exit 4)
        plugin_notes = load_run_plugins(
            config.getoption("disable_plugin"),
            bool(config.getoption("model")),
            list(config.args),
            config.invocation_params.dir,
        )
        # `pytest suites/secEval` runs suites/seceval (said in the header); an unknown suite lists them
        config.args[:], path_notes = resolve_suite_args(list(config.args), config.invocation_params.dir)
        opts = build_options(config)
    except (BenchauditError, pytest.UsageError) as err:
        if hasattr(config, "workerinput"):  # a worker's own options (on another host: a named model its
            from pytest_benchaudit.pytest_plugin.remote import refuse_worker  # pyproject lacks): raising would

            refuse_worker(config, str(err))  # hang xdist; it collects nothing and the controller says why
            return
        raise pytest.UsageError(str(err)) from None
    opts.notes[:0] = plugin_notes + path_notes
    config.stash[OPTIONS_KEY] = opts
    # Problems collection finds (pipeline values, layer, gate targets): one usage error before any item.
    config.pluginmanager.register(
        PreRunChecks(config, opts.pipelines or opts.pipeline, opts.gates), "benchaudit-checks"
    )
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
    """One line per name the run resolved for the user (a suite path's case, a bare model name);
    for a run that asks models, which protocol its benchmark items run by."""
    opts = config.stash.get(OPTIONS_KEY, None)
    if opts is None:
        return []
    lines = [f"benchaudit: {note}" for note in opts.notes]
    if opts.models:
        from pytest_benchaudit.pytest_plugin.protocol import protocol_header

        lines.append(f"benchaudit: {protocol_header(config)}")
    return lines
