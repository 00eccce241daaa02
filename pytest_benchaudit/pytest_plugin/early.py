"""Starting early: the inference process forked at start-up, and a serial run's first requests
sent during collection.

**At start-up** (:func:`fork_inference_process`, called by ``plugin.py``'s
``pytest_load_initial_conftests``, pytest's first hook after it has read the command line): see
:mod:`pytest_benchaudit.inference.prestart`.  This module is kept free of heavy imports for that reason.

**During collection.** The runner's look-ahead starts at the run loop, once pytest has collected (and possibly
deselected) every item.  Collecting one suite takes 0.1-0.3 s, every suite a few seconds, and the
endpoint would idle all that while.  When nothing can still take an item out of the run, the
runner queues the requests of the first items as collection makes them: at most
:data:`EARLY_ROUNDS` x the models' concurrency, so that a suite that fails to collect later
costs at most that many requests.

Nothing can take an item out of the run when:

* this process runs the items it collects: not an xdist worker (its items are the controller's
  schedule), not ``--collect-only``, ``--setup-only`` or ``--setup-plan``;
* no option selects items: ``-k``, ``-m``, ``--deselect``, ``--lf``, ``--sw``, ``--resume``,
  ``-x``/``--maxfail`` (the run stops at a failure, and wrong answers fail), and no argument
  names less than whole suite files: a node id (``suite.toml::mcq::q0001[m]``, ``...::mcq``)
  selects items only once its task's items are made, after they would have been asked;
* every plugin and ``conftest.py`` implementing ``pytest_collection_modifyitems`` is one known to
  deselect only through those options (:data:`KNOWN_MODIFIERS`; checked again at each task, as
  a later directory's ``conftest.py`` loads during collection);
* every model is an endpoint that is up: none that the run launches (``local``, ``vllm:``,
  started at the run loop) and no replay (its run is checked at the run loop);
* no collection error so far, and the run would not be refused if collection ended now
  (:func:`.prerun_checks.pre_run_problems`).

The runner judges these once per task, before the task's items are made (``Runner.early_asker``);
each item then costs only its render and queue.

An item queued early that the run does not run after all (a later ``conftest.py`` deselected
it) is released at the run loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_benchaudit.inference import prestart

if TYPE_CHECKING:
    from pytest_benchaudit.pytest_plugin.options import RunOptions

__all__ = ["EARLY_ROUNDS", "KNOWN_MODIFIERS", "fork_inference_process", "unknown_modifiers", "why_not_early"]

EARLY_ROUNDS = 2  # requests asked during collection: this many x the models' concurrency

# Modules whose pytest_collection_modifyitems deselects only through the options why_not_early
# checks (pytest's -k/-m/--deselect/--lf; the fixtures' reordering and --nf only reorder;
# hypothesis's only marks its own tests) or not at all (ours: --resume, the pre-run checks).
KNOWN_MODIFIERS = (
    "_pytest.mark",
    "_pytest.main",
    "_pytest.fixtures",
    "_pytest.cacheprovider",
    "_hypothesis_pytestplugin",
    "pytest_benchaudit.",
)

_SELECTING = (
    ("keyword", "-k"),
    ("markexpr", "-m"),
    ("deselect", "--deselect"),
    ("lf", "--lf"),
    ("stepwise", "--sw"),
    ("stepwise_skip", "--sw-skip"),
    ("collectonly", "--collect-only"),
    ("setuponly", "--setup-only"),
    ("setupplan", "--setup-plan"),
)


def fork_inference_process(args: list[str]) -> None:
    """Fork the inference process now if the command line (``args``, with ``$PYTEST_ADDOPTS`` and
    the ini file's ``addopts`` already in it) will want one (the runner adopts it;
    :mod:`pytest_benchaudit.inference.prestart`)."""
    prestart.start_early(args)


def why_not_early(config: pytest.Config, opts: RunOptions) -> str | None:
    """Why this run may not ask during collection, judged from its options and models (``None``:
    it may, as far as they tell; :func:`unknown_modifiers` is the per-item part)."""
    if hasattr(config, "workerinput"):
        return "an xdist worker"
    if not opts.models:
        return "no model"
    for dest, flag in _SELECTING:
        if getattr(config.option, dest, None):
            return flag
    if opts.resume is not None:
        return "--resume"
    if getattr(config.option, "maxfail", 0):
        return "-x/--maxfail"
    for arg in config.args:
        if "::" in arg:  # pytest matches the node id against items after their task made them all
            return f"a node id ({arg})"
    from pytest_benchaudit.pytest_plugin.launched import LAUNCHED

    for spec in opts.models:
        if spec.kind in LAUNCHED or spec.kind == "replay":
            return f"--model {spec.label} ({spec.kind})"
    return None


def _module_of(plugin: Any) -> str:
    name = getattr(plugin, "__name__", None)  # a module registered as a plugin (or a conftest)
    return name if isinstance(name, str) else type(plugin).__module__


def unknown_modifiers(config: pytest.Config) -> list[str]:
    """The plugins (and conftests) implementing ``pytest_collection_modifyitems`` that are not
    known to leave every item in the run (:data:`KNOWN_MODIFIERS`)."""
    impls = config.pluginmanager.hook.pytest_collection_modifyitems.get_hookimpls()
    return [impl.plugin_name for impl in impls if not _module_of(impl.plugin).startswith(KNOWN_MODIFIERS)]
