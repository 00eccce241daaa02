"""Adaptive concurrency per endpoint: back off when 429s are frequent, recover gradually.

One :class:`AdaptiveLimiter` per endpoint client.  It starts at the configured
concurrency (``--concurrency``, the ceiling) and behaves like TCP's congestion
control (additive increase, multiplicative decrease), with one difference: a 429
is taken as *congestion* only when refusals are frequent among the recent answers.

* **Every 429** counts in ``throttled``, pauses sending until the time the endpoint
  names (``Retry-After`` / ``retry-after-ms``, else the ``x-ratelimit-reset-*``
  header of an exhausted budget (OpenAI's durations ``1s``, ``6m0s``, ``20ms``;
  Anthropic's RFC 3339 times), else the caller's backoff), and the client retries
  the request.
* **Frequent 429s** (congestion): the limit is halved (down to a quarter of the
  ceiling), once per burst: a 429 to a request sent *before* the last decrease
  says nothing new (all requests in flight then were sent at the old rate), so a
  burst of 32 refusals halves once, not 32 times; a request sent after the
  decrease and refused while refusals are still frequent halves again.  Sends are
  also *spaced*: at each decrease the interval between two sends becomes at least
  the endpoint's wait (at most 0.25 s), or the interval its request limit allows
  (``x-ratelimit-limit-requests`` and ``anthropic-ratelimit-requests-limit`` are
  per minute), so a request-rate limit is met by pacing rather than only by
  collapsing concurrency, which would leave the client bound by its own latency.
* **Sporadic 429s** (``isolated`` in :meth:`AdaptiveLimiter.stats`): paused for and
  retried as above, but neither halve nor pace.  Hosted endpoints refuse a small
  share of requests whatever the client's rate (a shared pool, a replica
  restarting); halving on each, as TCP halves on each random loss, settles the
  window near 1/sqrt(p) of the ceiling: at 1.5% of answers refused, concurrency 32
  ran at ~11 in flight and took 2.6x as long as a client that only retries.

  The rule: the outcomes (refused or answered) of the last ``window`` answers are
  kept, ``window = max(2, ceiling)`` (about one round of requests), and a 429 is
  congestion when the refusals among them, itself included, reach
  ``threshold = max(2, ceil(0.15 * window))``: 2 at ceilings up to 13, 3 at 16, 5
  at 32, 10 at 64.  Why 15%: with refusals independent at rate p, a refusal is
  taken as congestion when at least threshold - 1 of the other window - 1 answers
  were refused too.  At ceiling 32 that is P(Bin(31, p) >= 4): 0.12% of the 429s
  at p = 1.5%, 1.3% at p = 3% -- a halving every ~55,000 answers at 1.5%, where a
  rule of 10% (threshold 3) would halve on 8% of them, every ~850 answers.  A
  token bucket being overrun refuses most of what exceeds its rate (against a
  fast endpoint nearly every request of a burst), so the threshold is reached
  within the first few refusals.  At small ceilings the window is short and two
  refusals in it halve (at ceiling 2: two refusals in a row).
* **Answers**: the limit grows by 1 per ``limit`` successes (one step per round of
  requests), up to the ceiling, and the spacing shrinks by 2% per answer (not
  below 95% of the interval the endpoint's per-minute request limit allows, once known).  A success whose headers say a budget is
  exhausted (``x-ratelimit-remaining-requests: 0``) pauses until its reset, so the
  next requests are not sent only to be refused.

The limiter lives on the engine's event loop; it is not thread-safe and needs none.
"""

from __future__ import annotations

import asyncio
import collections
import email.utils
import re
import time
from collections.abc import Mapping
from datetime import datetime

from pytest_benchaudit.inference.clock import MONOTONIC, Clock

__all__ = ["AdaptiveLimiter", "rate_limit_wait", "parse_duration"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_BUDGETS = ("requests", "tokens", "input-tokens", "output-tokens")


def parse_duration(value: str | None) -> float | None:
    """Seconds from a rate-limit reset header: ``1s``, ``6m0s``, ``20ms``, ``0.5``, or an RFC 3339 / HTTP date."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if parts and "".join(n + u for n, u in parts) == text.replace(" ", ""):
        return sum(float(n) * _UNIT[u] for n, u in parts)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return max(0.0, when.timestamp() - time.time())
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(text).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def rate_limit_wait(headers: Mapping[str, str], *, exhausted_only: bool = True) -> float | None:
    """How long the headers say to wait: ``retry-after-ms``, ``Retry-After``, else the longest reset of a
    budget whose remaining count is 0 (every reset given, with ``exhausted_only=False``)."""
    h = {k.lower(): v for k, v in headers.items()}
    if h.get("retry-after-ms"):
        try:
            return max(0.0, float(h["retry-after-ms"]) / 1000.0)
        except ValueError:
            pass
    if h.get("retry-after"):
        wait = parse_duration(h["retry-after"])
        if wait is not None:
            return wait
    waits = []
    for budget in _BUDGETS:
        for remaining, reset in (
            (f"x-ratelimit-remaining-{budget}", f"x-ratelimit-reset-{budget}"),
            (f"anthropic-ratelimit-{budget}-remaining", f"anthropic-ratelimit-{budget}-reset"),
        ):
            if reset not in h:
                continue
            if exhausted_only and h.get(remaining, "").strip() not in ("0", "0.0"):
                continue
            wait = parse_duration(h[reset])
            if wait is not None:
                waits.append(wait)
    return max(waits) if waits else None


class AdaptiveLimiter:
    """Requests in flight to one endpoint, adapted to its frequent 429s (see the module docstring)."""

    def __init__(self, ceiling: int, *, floor: int | None = None, clock: Clock = MONOTONIC) -> None:
        self.clock = clock  # what pauses and pacing read and wait on (a virtual one in tests)
        self.ceiling = max(1, ceiling)
        # Hosted limits are rates (requests or tokens per minute): below a quarter of the ceiling,
        # pacing does the backing off, so the client is not left bound by its own latency.
        self.floor = max(1, min(self.ceiling // 4 if floor is None else floor, self.ceiling))
        self.limit = float(self.ceiling)
        self.in_flight = 0
        self.paused_until = 0.0
        self.throttled = 0  # 429s seen
        self.isolated = 0  # 429s too rare in the window to be a limit: paused for and retried, not backed off
        # The outcomes (True = refused) of the last `window` answers: about one round of requests.
        self.window = max(2, self.ceiling)
        self.threshold = max(2, -(-3 * self.window // 20))  # ceil(15% of the window), integer arithmetic
        self._outcomes: collections.deque[bool] = collections.deque(maxlen=self.window)
        self._refused = 0  # True entries in _outcomes
        self.decreases = 0
        self.lowest = self.ceiling
        self._last_decrease = 0.0
        self.interval = 0.0  # seconds between two sends (pacing), 0 = none
        self.rate_interval = 0.0  # 60 / the endpoint's per-minute request limit, once it has said it
        self._next_send = 0.0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._woken = 0

    @property
    def cap(self) -> int:
        return max(self.floor, int(self.limit))

    def _record(self, refused: bool) -> None:
        if len(self._outcomes) == self.window:
            self._refused -= self._outcomes[0]  # the deque drops it on append
        self._outcomes.append(refused)
        self._refused += refused

    async def acquire(self) -> float:
        """Wait for a slot (and for any pause to end); returns the send time, the ticket for :meth:`throttle`."""
        while True:
            delay = self.paused_until - self.clock.now()
            if delay > 0:
                await self.clock.sleep(delay)
                continue
            if self.in_flight < self.cap:
                now = self.clock.now()
                if now < self._next_send:
                    await self.clock.sleep(self._next_send - now)
                    continue
                # A late wake-up (a busy machine) may be made up by the next sends, up to 4 intervals.
                self._next_send = max(now - 4 * self.interval, self._next_send) + self.interval
                self.in_flight += 1
                return now
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():  # woken, then cancelled: pass the wake-up on
                    self._woken -= 1
                    self._wake()
                raise
            self._woken -= 1

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        free = self.cap - self.in_flight - self._woken
        while free > 0 and self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                self._woken += 1
                free -= 1

    def success(self, headers: Mapping[str, str] | None = None) -> None:
        """An answer arrived: grow by one per round; pause if the headers say a budget is spent."""
        self._record(False)
        if self.limit < self.ceiling:
            self.limit = min(float(self.ceiling), self.limit + 1.0 / self.cap)  # +1 per `cap` answers
            self._wake()
        if headers:
            self._learn(headers)
        if self.interval:
            shrunk = self.interval * 0.98 if self.interval > 1e-4 else 0.0
            # 5% under the limit's interval: timer and scheduling delays only ever make sends late.
            self.interval = max(shrunk, 0.95 * self.rate_interval) if self.throttled else shrunk
        if headers:
            wait = rate_limit_wait(headers)
            if wait:
                self.paused_until = max(self.paused_until, self.clock.now() + min(wait, 60.0))

    def _learn(self, headers: Mapping[str, str]) -> None:
        h = {k.lower(): v for k, v in headers.items()}
        for name in ("x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit"):
            try:
                per_minute = float(h[name])
            except (KeyError, ValueError):
                continue
            if per_minute > 0:
                self.rate_interval = 60.0 / per_minute

    def throttle(self, sent_at: float, wait: float, headers: Mapping[str, str] | None = None) -> None:
        """A 429 for a request sent at ``sent_at``: pause ``wait`` seconds; when refusals are frequent in the
        window, halve (once per burst) and pace (see the module docstring)."""
        if headers:
            self._learn(headers)
        self.throttled += 1
        self._record(True)
        now = self.clock.now()
        if self._refused < self.threshold:
            self.isolated += 1
        elif sent_at >= self._last_decrease:
            self.limit = max(float(self.floor), self.limit / 2.0)
            self._last_decrease = now
            self.decreases += 1
            self.lowest = min(self.lowest, self.cap)
            self.interval = max(self.interval, min(wait, 0.25), min(self.rate_interval, 0.25))
        self.paused_until = max(self.paused_until, now + wait)

    def stats(self) -> dict[str, float]:
        return {
            "limit": self.cap,
            "ceiling": self.ceiling,
            "lowest": self.lowest,
            "throttled": self.throttled,
            "decreases": self.decreases,
            "isolated": self.isolated,
            "interval_s": round(self.interval, 4),
        }
