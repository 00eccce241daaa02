"""pytest entry point: options, fixtures and the parts that do the work.

Thin by design: options are declared and validated in :mod:`.options`, suite
files are collected by :mod:`.collect`, items are run by :mod:`.runner` (every
process that runs items) and the run directory, summary and gates belong to
:mod:`.controller` (the process that owns the run).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_benchaudit.pytest_plugin.collect import collect_file, model, pipeline, question
from pytest_benchaudit.pytest_plugin.options import OPTIONS_KEY, add_options, build_options

__all__ = ["pytest_addoption", "pytest_configure", "pytest_collect_file"]


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_benchaudit.pytest_plugin.reporting import add_output_options
    from pytest_benchaudit.pytest_plugin.runner import add_runner_options

    add_options(parser)
    add_output_options(parser)
    add_runner_options(parser)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    from pytest_benchaudit.pytest_plugin.controller import Controller
    from pytest_benchaudit.pytest_plugin.runner import LocalUrl, Runner

    opts = build_options(config)
    config.stash[OPTIONS_KEY] = opts
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
    else:
        from pytest_benchaudit.pytest_plugin.controller import ResumeFilter

        # --resume under xdist: workers deselect the items the run already recorded.
        config.pluginmanager.register(ResumeFilter(config), "benchaudit-resume")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    return collect_file(file_path, parent)
