"""The one place that reads pytest-xdist's private state: a worker's queue, and how the controller
maps path arguments for workers on other hosts.

A worker's runner prefetches the requests of the items the controller has queued for *this*
worker; xdist exposes that queue only on its private ``WorkerInteractor`` plugin object.  With a
gateway that is not a plain ``popen``, xdist rewrites each path argument relative to an rsync root
and fails with an internal error on one outside every root: :func:`unmapped_path_args` finds those
first, with xdist's own mapping, so the remote check (:mod:`.remote`) says which and how to write it.

Private names used (``xdist.remote.WorkerInteractor``):

- ``torun``: the worker's queue of item indices: since xdist 3.7 a ``TestQueue`` whose
  ``lock()`` context yields the ``collections.deque`` of indices; in 3.5 and 3.6 the execution
  model's ``queue.Queue``, read under its ``mutex`` (the standard library's ``Queue.mutex`` and
  ``Queue.queue``);
- ``nextitem_index``: the index of the item that runs after the current one (``None`` or
  xdist's ``Marker.SHUTDOWN`` when there is none).

For the path arguments: ``xdist.workermanage.make_reltoroot`` (an internal module: the mapping of
path arguments onto rsync roots, gone with xdist's rsync in 4.0) and the folder of pytest's private
``_pytest`` package (one of the roots xdist's ``NodeManager`` lists).

Checked on pytest-xdist 3.5.0 and 3.8.0 (``make test-pytest-matrix``); read only within the range
:data:`._fastpath.XDIST_TESTED` declares.  Public fallback: outside that range, or when the
interactor or either attribute is missing (another distributor), :meth:`WorkerQueue.queued_indices` returns no
indices, so a worker prefetches nothing ahead and each item asks for its own answer as it runs:
the same records, without the look-ahead.  Without ``make_reltoroot`` (another xdist),
:func:`unmapped_path_args` finds nothing: a path xdist cannot map is xdist's own error, as before
the check.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_benchaudit.pytest_plugin._fastpath import untested_reason

__all__ = ["WorkerQueue", "unmapped_path_args"]


class WorkerQueue:
    """The item indices xdist has assigned to this worker and not yet run, read on demand."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._interactor: Any = None  # None: not looked up yet; False: none found

    def _find(self) -> Any:
        if self._interactor is None and untested_reason() is not None:
            self._interactor = False  # a release the CI did not test: no private read (no look-ahead)
        if self._interactor is None:
            self._interactor = next(
                (
                    plugin
                    for plugin in self._config.pluginmanager.get_plugins()
                    if hasattr(plugin, "torun") and hasattr(plugin, "nextitem_index")
                ),
                False,
            )
        return self._interactor

    def queued_indices(self) -> list[int]:
        """The next item's index, then the queued ones, in run order (empty if unknown)."""
        interactor = self._find()
        if not interactor:
            return []
        with _locked(interactor.torun) as queued:
            indices = [i for i in queued if isinstance(i, int)]
        nxt = interactor.nextitem_index
        return ([nxt] if isinstance(nxt, int) else []) + indices


@contextlib.contextmanager
def _locked(torun: Any) -> Iterator[Iterable[Any]]:
    """The queue's content under its lock: xdist >= 3.7's ``TestQueue.lock()``, or a
    ``queue.Queue``'s mutex (xdist 3.5, 3.6); nothing for a queue of another shape."""
    lock = getattr(torun, "lock", None)
    if lock is not None:
        with lock() as queued:
            yield queued
    elif hasattr(torun, "mutex") and isinstance(getattr(torun, "queue", None), Iterable):
        with torun.mutex:
            yield list(torun.queue)
    else:
        yield []


def _rsync_roots(config: pytest.Config) -> list[Path]:
    """The folders xdist copies to the gateways (as its NodeManager lists them)."""
    import _pytest

    def folder(path: str) -> str:
        stripped = path.rstrip("co")
        return os.path.dirname(stripped) if os.path.basename(stripped) == "__init__.py" else stripped

    candidates = [
        folder(pytest.__file__),
        folder(_pytest.__file__),
        *(config.getoption("rsyncdir", None) or []),
        *(config.getini("rsyncdirs") or []),
    ]
    return [Path(c).resolve() for c in candidates]


def unmapped_path_args(config: pytest.Config) -> list[str]:
    """The arguments of the command line that xdist would fail to map onto an rsync root for workers
    through other gateways (each that exists here and lies outside every root), in order; none when
    this xdist has no such mapping."""
    try:
        from xdist.workermanage import make_reltoroot  # xdist's own mapping (gone with its rsync, in 4.0)
    except ImportError:
        return []
    roots = _rsync_roots(config)
    unmapped = []
    for arg in (str(a) for a in config.invocation_params.args):
        try:
            make_reltoroot(roots, [arg])
        except ValueError:
            unmapped.append(arg)
    return unmapped
