"""The look-ahead: which requests are rendered and queued before their items run, and when.

Each process that runs items has one (:class:`pytest_benchaudit.pytest_plugin.runner.Runner`
owns it).  It prefetches the requests of exactly the items this process will run: the
selected items in run order in a serial run; on an xdist worker, the items the controller
has queued for *this* worker (read through :mod:`._xdist`), so a worker never generates for
another worker's items.  A serial run may queue its first items' requests while collection
still goes on (:mod:`.early` says when nothing can take them out of the run).

The look-ahead is bounded: at most ``8 x window`` requests (8,192 at most) are rendered and
queued ahead of the running item (topped up in batches of at least ``window`` as items run),
and a request is dropped once its item has consumed the generation.  An item asked ``K`` times
(``inference.repeats``) has at most ``window`` of its repeats queued ahead (:meth:`LookAhead.per_item`);
the runner renders and queues the others while it asks them, so a huge ``K`` never holds more
than that many requests.  It is given only what it
uses of the runner: the engine's window, a model's registration, the engine's prefetch and
release, and xdist's worker queue.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from pytest_benchaudit.inference.backend import ModelSpec
from pytest_benchaudit.pytest_plugin._xdist import WorkerQueue
from pytest_benchaudit.pytest_plugin.collect import BenchItem
from pytest_benchaudit.pytest_plugin.early import EARLY_ROUNDS, unknown_modifiers, why_not_early
from pytest_benchaudit.pytest_plugin.options import RunOptions
from pytest_benchaudit.pytest_plugin.prerun_checks import checks_of, pre_run_problems
from pytest_benchaudit.pytest_plugin.repeat_items import repeat_request, repeats_of
from pytest_benchaudit.pytest_plugin.resume import recorded_repeats

__all__ = ["LookAhead"]

_SKIPS = ("skip", "skipif")
Pair = tuple[str, Any]  # (model label, request)


class LookAhead:
    """Requests rendered and queued ahead, by node id, until their item consumes them (see module doc)."""

    def __init__(
        self,
        config: pytest.Config,
        opts: RunOptions,
        *,
        window: Callable[[], int],
        concurrency: Callable[[ModelSpec], int],
        ensure_model: Callable[[ModelSpec], None],
        prefetch_many: Callable[[list[Pair]], None],
        release: Callable[[str, Any], None],
    ) -> None:
        self.config = config
        self.opts = opts
        self._window = window
        self._concurrency = concurrency
        self._ensure_model = ensure_model
        self._prefetch_many = prefetch_many
        self._release = release
        # One (model label, request) per repeat the item will ask (inference.repeats; one as a rule),
        # at most per_item() of them; _queued counts them all.
        self._ahead: dict[str, list[Pair]] = {}
        self._queued = 0
        self._plan: list[pytest.Item] = []  # serial run: the items in run order ...
        self._cursor = 0  # ... and the first one not yet considered for prefetch
        self._seen: set[int] = set()  # xdist worker: item indices already considered
        self._worker_queue = WorkerQueue(config)  # xdist's private queue, read through the adapter
        self._parent_skips: dict[int, tuple[Any, bool]] = {}  # id(parent) -> (parent, a skip mark on its chain)
        self._early_left: int | None = None  # requests still to be asked during collection (None: not judged yet)
        self._early: dict[str, None] = {}  # node ids whose requests were queued during collection, in order

    @property
    def pending(self) -> int:
        """How many items have requests queued ahead and not yet consumed."""
        return len(self._ahead)

    def per_item(self) -> int:
        """How many of one item's repeats are queued at a time: the engine's window (enough to keep
        every connection busy on one question asked many times)."""
        return self._window()

    def _keep(self, nodeid: str, pairs: list[Pair]) -> None:
        self._ahead[nodeid] = pairs
        self._queued += len(pairs)

    def _drop(self, nodeid: str) -> list[Pair] | None:
        pairs = self._ahead.pop(nodeid, None)
        if pairs is not None:
            self._queued -= len(pairs)
        return pairs

    def start(self, items: list[pytest.Item]) -> None:
        """The run loop begins (a serial run): ``items`` in run order; queue the first of them."""
        self._plan, self._cursor = items, 0
        self._top_up(self._serial_candidates())

    def _render_ahead(self, item: pytest.Item) -> list[tuple[str, Any]] | None:
        """(model label, request) to queue for ``item``, one per repeat it will ask (the repeats a
        resumed run recorded left out; the first :meth:`per_item` of them), or ``None`` when it is
        not asked ahead."""
        if not isinstance(item, BenchItem) or self._skipped(item):
            return None
        # A conftest.py that overrides question/pipeline/model may change the request;
        # asking ahead with the defaults would then pay for an answer nobody reads.
        if not item.direct:
            return None
        try:
            request = item.bench.request
            self._ensure_model(item.bench.model)
        except Exception:  # rendering/start-up errors surface when the item itself runs
            return None
        label = item.bench.model.label
        return [(label, repeat_request(request, k)) for k in self._repeats_to_ask(item)]

    def _repeats_to_ask(self, item: BenchItem) -> list[int]:
        """The first repeats ``item`` asks (at most :meth:`per_item`): 0..K-1 (``inference.repeats``)
        less those a resumed run recorded."""
        count = repeats_of(item.bench.pipeline)
        if count == 1:
            return [0]
        done = recorded_repeats(self.config, item)
        return list(itertools.islice((k for k in range(count) if k not in done), self.per_item()))

    def early_asker(self, session: pytest.Session) -> Callable[[pytest.Item], bool] | None:
        """What collection hands each item of the task it is about to make (the callable returns
        whether it wants more), or ``None`` when nothing is asked before collection ends
        (:mod:`.early`).  Judged once per task: a ``conftest.py`` loads per directory, a collection
        error is per file, and a task's pre-run problems are noted before its items are made."""
        if self._early_left is None:
            self._early_left = 0
            if why_not_early(self.config, self.opts) is None:
                self._early_left = EARLY_ROUNDS * sum(self._concurrency(m) for m in self.opts.models)
        if self._early_left > 0 and (session.testsfailed or unknown_modifiers(self.config)):
            self._early_left = 0  # neither goes away: nothing more is asked before the run loop
        if self._early_left <= 0 or pre_run_problems(
            checks_of(self.config), self.opts.pipelines or self.opts.pipeline, self.opts.gates
        ):
            return None  # (a problem may be a gate on a task collected later: the next task is judged anew)
        return self._ask_early

    @property
    def asked_during_collection(self) -> list[str]:
        """The node ids whose requests were queued while collection went on (until the run loop)."""
        return list(self._early)

    def _ask_early(self, item: pytest.Item) -> bool:
        """Queue ``item``'s request now, during collection; ``False`` once no more are wanted."""
        if not self._early_left:
            return False
        pairs = self._render_ahead(item)
        if pairs and item.nodeid not in self._ahead:
            self._keep(item.nodeid, pairs)
            self._early[item.nodeid] = None
            self._early_left -= len(pairs)
            self._queue(pairs)
        return self._early_left > 0

    def _skipped(self, item: pytest.Item) -> bool:
        """Whether ``item`` or a parent carries a skip/skipif mark (the parents' answer is kept per
        parent: ``get_closest_marker`` walks the whole chain for every item)."""
        if any(m.name in _SKIPS for m in item.own_markers):
            return True
        parent = item.parent
        known = self._parent_skips.get(id(parent))
        if known is None or known[0] is not parent:
            marked = any(
                m.name in _SKIPS
                for node in (parent.listchain() if parent is not None else ())
                for m in node.own_markers
            )
            known = self._parent_skips[id(parent)] = (parent, marked)
        return known[1]

    def _ahead_limit(self) -> int:
        """How many requests (not items) are queued ahead of the running item: 8 x the engine's window (2,048 by
        default), at most 8,192 (but never under 2 x the window).  Items consume answers in order;
        an answer retried after a backoff (0.25-0.5 s after an HTTP 500) holds its item up, and the
        inference process must meanwhile have enough queued to keep every connection busy: at 20 ms
        and 32 in flight, ~1,500 a second (2 x the window: a full run 10% slower, bench/RESULTS.md)."""
        window = self._window()
        return max(2 * window, min(8 * window, 8192))

    def _top_up(self, candidates: Any) -> None:
        """Render and queue requests from ``candidates`` (items, in run order) until the look-ahead
        is full (:meth:`_ahead_limit`); nothing while more than ``window`` short of it (so batches
        wake the engine once).

        A batch is handed over in chunks that start at 32 requests and double up to ``window``:
        rendering the first, full look-ahead takes ~0.1 ms a request (0.3 s for SecEval), and the
        endpoint would idle all that while if nothing were sent before the last was rendered."""
        window = self._window()
        if self._queued > self._ahead_limit() - window:
            return
        batch: list[tuple[str, Any]] = []
        chunk = min(32, window)
        for item in candidates:
            pairs = self._render_ahead(item)
            if pairs and item.nodeid not in self._ahead:
                self._keep(item.nodeid, pairs)
                batch.extend(pairs)
                if self._queued >= self._ahead_limit():
                    break
                if len(batch) >= chunk:
                    self._queue(batch)
                    batch, chunk = [], min(2 * chunk, window)
        self._queue(batch)

    def _queue(self, batch: list[tuple[str, Any]]) -> None:
        if batch:
            self._prefetch_many(batch)

    def _serial_candidates(self) -> Any:
        while self._cursor < len(self._plan):
            self._cursor += 1
            yield self._plan[self._cursor - 1]

    def _worker_candidates(self, item: pytest.Item) -> Any:
        items = item.session.items
        for index in self._worker_queue.queued_indices():
            if 0 <= index < len(items) and index not in self._seen:
                self._seen.add(index)
                yield items[index]

    def take_requests(self, node: pytest.Item) -> list[Any] | None:
        """The requests queued ahead for ``node``, one per repeat (``None`` if none were): handed
        over once, then forgotten."""
        pairs = self._drop(node.nodeid)
        return None if pairs is None else [request for _, request in pairs]

    def release_unplanned(self, session: pytest.Session) -> None:
        """Requests asked during collection whose items the run does not run after all (a
        ``conftest.py`` found later deselected them): released, never waited for."""
        self._early_left = 0
        if self._early:
            planned = {item.nodeid for item in session.items}
            for nodeid in [n for n in self._early if n not in planned]:
                for pair in self._drop(nodeid) or ():
                    self._release(*pair)
            self._early.clear()

    def advance(self, item: pytest.Item) -> None:
        """Keep the look-ahead full as ``item`` starts (called from ``Runner.run_item``, which every
        benchmark item runs under either protocol, or another plugin's; a cheap no-op when full)."""
        if not hasattr(self.config, "workerinput"):
            if self._plan:
                self._top_up(self._serial_candidates())
            return
        # The running item itself needs no queueing: its generate() claims it at the head of the queue.
        self._top_up(self._worker_candidates(item))

    def release(self, nodeid: str) -> None:
        """An item queued ahead that never asked for its answer (it errored first): release it."""
        for pair in self._drop(nodeid) or ():
            self._release(*pair)
