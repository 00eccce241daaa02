"""Run generations ahead of the pytest items that need them.

pytest runs items one after another; a model server is only kept busy if many
requests are in flight.  The :class:`Engine` owns one asyncio event loop in a
background thread.  Before items run, the plugin *prefetches* the requests of
the items this process will run (in run order); each item then only waits for
its own result.  Concurrency per model is bounded by the backend; the number of
requests in flight (started, not finished) is bounded by a window, so a suite of
any size never opens more than that many requests at once.  Finished
generations wait until their item consumes them (:meth:`Engine.generate`) and are
then forgotten; a claim that will not be consumed is given up with :meth:`Engine.release`.
The caller bounds how far ahead it queues (the runner: ``8 x window`` requests), so
the engine never holds more than that many requests or answers.  Identical requests to
the same model are sent once.

With a :class:`~pytest_benchaudit.inference.cache.GenerationCache`, each request is first
looked up (by the model's identity and the full request) and, when stored, its
generation is returned as it was first received (original latency, usage,
attempts) without a request being sent; a generation received without error is
stored.  ``cache_hits``/``cache_misses`` count them.  A cache that fails turns
itself off with one :class:`~pytest_benchaudit.inference.cache.CacheWarning`, issued on the
pytest thread by the next :meth:`Engine.generate`.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import sys
import threading
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pytest_benchaudit.inference.backend import Backend, ModelSpec
from pytest_benchaudit.inference.cache import (
    CacheStats,
    CacheWarning,
    GenerationCache,
    UnusableCache,
    answers_served,
    model_identity,
    with_served,
)
from pytest_benchaudit.pipeline.types import Generation, Request

__all__ = ["Engine", "request_key", "say_cache_warnings"]

BackendFactory = Callable[[], Backend]


def request_key(model: str, request: Request) -> str:
    """Identity of a generation: the model label and the full request."""
    return model + "\x00" + request.identity


def say_cache_warnings(messages: list[str], stacklevel: int = 3) -> None:
    """Issue (and empty) the cache's queued warnings on the calling (pytest) thread; the default
    ``stacklevel`` names the caller of the function that calls this one (``generate``'s caller)."""
    while messages:
        message = messages.pop(0)
        try:
            warnings.warn(message, CacheWarning, stacklevel=stacklevel)
        except Warning:  # -W error: a cache that turned itself off must not fail the item
            print(f"CacheWarning: {message}", file=sys.stderr)


class _Slot:
    __slots__ = ("future", "request", "model", "waiters", "started", "sent_at")

    def __init__(self, model: str, request: Request) -> None:
        self.future: concurrent.futures.Future[Generation] = concurrent.futures.Future()
        self.model = model
        self.request = request
        self.waiters = 0
        self.started = False
        self.sent_at: float | None = None  # time.monotonic() when its backend was asked


def waiting_of(slots: list[_Slot], older_than: float, now: float) -> tuple[int, float]:
    """(requests asked of their backend longer than ``older_than`` seconds ago and not answered,
    the longest such wait in seconds; 0.0 when none)."""
    ages = [now - s.sent_at for s in slots if s.sent_at is not None and not s.future.done()]
    old = [age for age in ages if age > older_than]
    return len(old), max(old, default=0.0)


class Engine:
    """A background event loop that generates with bounded look-ahead."""

    def __init__(self, window: int = 256, cache: GenerationCache | None = None) -> None:
        self.window = window
        self.cache = cache
        # model label -> task asking what its endpoint serves
        self._served_tasks: dict[str, asyncio.Future[list[str] | None]] = {}
        # model label -> why its stored answers can never hit (see context.cache_warnings)
        self._unusable: dict[str, UnusableCache] = {}
        self.cache_hits = 0
        self.cache_misses = 0
        self._cache_warnings: list[str] = []
        if cache is not None:
            cache.on_warning = self._cache_warnings.append  # said on the pytest thread, see generate()
        self._factories: dict[str, BackendFactory] = {}
        self._identities: dict[str, str | None] = {}
        self._backends: dict[str, Backend] = {}
        self._slots: dict[str, _Slot] = {}
        self._pending: collections.deque[str] = collections.deque()
        self._running = 0
        self._closing = False
        self._lock = threading.Lock()
        # Called (with the engine) about every ``wait_tick`` seconds while generate() waits: the
        # progress line says which requests are stuck instead of freezing (see waiting()).
        self.on_wait: Callable[[Any], None] | None = None
        self.wait_tick = 1.0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="benchaudit-engine", daemon=True)
        self._thread.start()

    # -- set-up -----------------------------------------------------------------
    def add_model(self, label: str, factory: BackendFactory, identity: str | None = None) -> None:
        """Register how to build the backend of ``label`` (built lazily, on the loop).

        ``identity`` names the model for the generation cache; by default it is read
        from the backend's ``spec`` (:func:`~pytest_benchaudit.inference.cache.model_identity`);
        a backend with neither is not cached.
        """
        self._factories[label] = factory
        if identity is not None:
            self._identities[label] = identity

    def cache_stats(self) -> CacheStats:
        """Lookups of this engine that the cache answered (hits) or not (misses)."""
        out: CacheStats = {"enabled": self.cache is not None, "hits": self.cache_hits, "misses": self.cache_misses}
        if self.cache is not None:
            out["path"] = str(self.cache.path)
            out["stores"] = self.cache.stores
            out["disabled"] = self.cache.disabled
            served: dict[str, list[str]] = {}
            for label, task in list(self._served_tasks.items()):
                if task.done() and not task.cancelled() and task.exception() is None:
                    ids = task.result()
                    if ids:
                        served[label] = ids
            out["served"] = served
            if self._unusable:
                out["unusable"] = {label: entry.copy() for label, entry in self._unusable.items()}
        return out

    # -- called from the pytest thread -------------------------------------------
    def prefetch(self, model: str, request: Request) -> None:
        """Queue a request; it starts as soon as the window allows."""
        self._claim(model, request, front=False)

    def prefetch_many(self, pairs: list[tuple[str, Request]]) -> None:
        """Queue many (model, request) pairs in order, with one lock and one wake-up of the loop
        (one ``prefetch`` each costs a cross-thread wake-up: ~0.1 ms per item)."""
        for model, _ in pairs:
            if model not in self._factories:
                raise KeyError(f"no backend registered for model {model!r}")
        with self._lock:
            for model, request in pairs:
                key = request_key(model, request)
                slot = self._slots.get(key)
                if slot is None:
                    slot = self._slots[key] = _Slot(model, request)
                    slot.waiters = 1
                    self._pending.append(key)
                else:
                    slot.waiters += 1
        self._loop.call_soon_threadsafe(self._pump)

    def generate(self, model: str, request: Request) -> Generation:
        """Wait for (and consume) the generation of ``request``; queue it first if needed."""
        key = self._claim(model, request, front=True, consume=True)
        slot = self._slots[key]
        try:
            while self.on_wait is not None:
                try:
                    return slot.future.result(timeout=self.wait_tick)
                except concurrent.futures.TimeoutError:
                    self.on_wait(self)
            return slot.future.result()
        finally:
            with self._lock:
                slot.waiters -= 1
                if slot.waiters <= 0 and slot.future.done():
                    self._slots.pop(key, None)
            self._say_cache_warnings()

    def release(self, model: str, request: Request) -> None:
        """Give up one claim (a prefetch whose item will not ask for it): when no claim is left,
        the request is dropped from the queue and its generation, if any, is not kept."""
        key = request_key(model, request)
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                return
            slot.waiters -= 1
            if slot.waiters <= 0:
                # _pump skips a queued key without a slot; a running one finishes into nothing.
                self._slots.pop(key, None)

    def _say_cache_warnings(self) -> None:
        say_cache_warnings(self._cache_warnings, stacklevel=4)

    # -- for a caller that waits elsewhere (the inference process, :mod:`.process`) ----------
    def submit(self, model: str, request: Request, *, front: bool = False) -> concurrent.futures.Future[Generation]:
        """Queue ``request`` with one claim and return the future of its generation, without waiting.

        The caller gives the claim up with :meth:`release` once it has read the result (or no
        longer wants it); until then the engine keeps the generation."""
        key = self._claim(model, request, front=front)
        return self._slots[key].future

    def hurry(self, model: str, request: Request) -> None:
        """Move a queued, not yet started request to the head of the queue (an item waits for it
        now); nothing for one that is running, finished or unknown (it is never asked again)."""
        key = request_key(model, request)
        with self._lock:
            slot = self._slots.get(key)
            if slot is not None and not slot.started:
                self._to_front(key)

    def _to_front(self, key: str) -> None:
        """Move a queued key to the head of the queue and wake the loop (with the lock held)."""
        try:
            self._pending.remove(key)
        except ValueError:
            pass
        self._pending.appendleft(key)
        self._loop.call_soon_threadsafe(self._pump)

    def call_soon(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` on the engine's loop thread, soon (from any thread)."""
        self._loop.call_soon_threadsafe(callback)

    def held(self) -> int:
        """Requests and generations the engine holds now (queued, running, or finished and unread)."""
        with self._lock:
            return len(self._slots)

    def waiting(self, older_than: float) -> tuple[int, float]:
        """How many requests were sent more than ``older_than`` seconds ago and have no answer yet
        (retries and backoff included), and the longest such wait (from any thread)."""
        with self._lock:
            slots = list(self._slots.values())
        return waiting_of(slots, older_than, time.monotonic())

    def close(self) -> None:
        """Cancel what is still queued or in flight (items that will not run) and stop the loop."""

        async def shutdown() -> None:
            self._closing = True
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for backend in self._backends.values():
                await backend.aclose()

        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
        self._loop.close()
        if self.cache is not None:
            self.cache.close()

    # -- internals ----------------------------------------------------------------
    def _claim(self, model: str, request: Request, *, front: bool, consume: bool = False) -> str:
        if model not in self._factories:
            raise KeyError(f"no backend registered for model {model!r}")
        key = request_key(model, request)
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                # Each prefetch (and an un-prefetched generate) counts one consumer.
                slot = self._slots[key] = _Slot(model, request)
                slot.waiters = 1
                if front:
                    self._pending.appendleft(key)
                else:
                    self._pending.append(key)
                self._loop.call_soon_threadsafe(self._pump)
                return key
            if not consume:
                slot.waiters += 1
            if front and not slot.started:
                self._to_front(key)  # an item is waiting for it now
        return key

    def _pump(self) -> None:
        """Start queued requests while the window has room (runs on the loop)."""
        while True:
            with self._lock:
                if self._closing or self._running >= self.window or not self._pending:
                    return
                key = self._pending.popleft()
                slot = self._slots.get(key)
                if slot is None or slot.started:
                    continue
                slot.started = True
                self._running += 1
            self._loop.create_task(self._run(slot))

    async def _run(self, slot: _Slot) -> None:
        try:
            backend = self._backends.get(slot.model)
            if backend is None:
                backend = self._backends[slot.model] = self._factories[slot.model]()
            identity = self._identity(slot.model, backend) if self.cache is not None else None
            served: list[str] | None = None
            if identity is not None and hasattr(backend, "served_models"):
                # What the endpoint serves now is part of the key; an endpoint that cannot say
                # is not answered from (nor written to) the cache.
                served = await self._served(slot.model, backend)
                identity = with_served(identity, served) if served else None
            cache = self.cache
            if cache is not None and identity is not None:
                cached = cache.get(
                    identity,
                    slot.request,
                    served=served,
                    on_unusable=lambda name: self._unusable_entry(slot.model, name, served, "misses"),
                )
                if cached is not None:
                    self.cache_hits += 1
                    slot.future.set_result(cached.model_copy(update={"from_cache": True}))
                    return
                self.cache_misses += 1
            slot.sent_at = time.monotonic()
            result = await backend.generate(slot.request)
            if cache is not None and identity is not None and result.error is None:
                if cache.put(identity, slot.request, result) and not answers_served(result, served):
                    self._unusable_entry(slot.model, result.served_model or "", served, "stores")
            slot.future.set_result(result)
        except BaseException as err:  # a backend bug must not hang the waiting item
            slot.future.set_exception(err)
        finally:
            with self._lock:
                self._running -= 1
            self._pump()

    def _unusable_entry(
        self, label: str, answered_by: str, served: list[str] | None, what: Literal["stores", "misses"]
    ) -> None:
        """Count a stored answer no lookup can use (it names a model ``GET /models`` does not list)."""
        entry = self._unusable.setdefault(
            label, {"answered_by": answered_by, "served": sorted(served or ()), "stores": 0, "misses": 0}
        )
        entry[what] += 1

    async def _served(self, label: str, backend: Any) -> list[str] | None:
        """The endpoint's served model ids, asked once per model (concurrent callers share the answer)."""
        task = self._served_tasks.get(label)
        if task is None:
            task = self._served_tasks[label] = asyncio.ensure_future(backend.served_models())
        try:
            return await asyncio.shield(task)
        except Exception:  # noqa: BLE001 - the cache is an optimisation: an odd endpoint just skips it
            return None

    def _identity(self, label: str, backend: Backend) -> str | None:
        """The model's identity for the cache; ``None`` (not cached) for a backend that has no
        endpoint spec and was registered without one (e.g. a replay of a stored run)."""
        if label not in self._identities:
            spec = getattr(backend, "spec", None)
            self._identities[label] = model_identity(spec) if isinstance(spec, ModelSpec) else None
        return self._identities[label]

    def run_sync(self, coro: Awaitable[object]) -> object:
        """Run a coroutine on the engine loop and wait for it (tests, diagnostics)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()  # type: ignore[arg-type]
