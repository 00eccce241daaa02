"""A tiny progress bar for ``benchaudit`` commands that take more than a few seconds.

Used by ``rescore``/``sweep`` (records), ``import`` (rows), ``compare`` (runs loaded,
benchmarks bootstrapped) and ``fetch`` (bytes).  :func:`waiting_text` is what a pytest run's own
progress line adds while requests are stuck (``2 requests waiting > 30 s (longest 1:05)``, after
``$BENCHAUDIT_STALL_AFTER`` seconds, default 30), so a stalled body does not freeze it silently.  It writes one self-overwriting line to
stderr::

    rescore |########------------| 41,000/100,000 records  11.9k records/s  ETA 0:05

and only when someone can see it: when the stream is a terminal, or when
``BENCHAUDIT_PROGRESS=1`` forces it on (``BENCHAUDIT_PROGRESS=0`` forces it off).  Under
pytest, in pipes, in CI logs and in redirected output it writes nothing at all, so machine
readable output (``--format json``) and test captures stay clean.  The line is redrawn at
most every ``min_interval`` seconds (0.1 s: about 10 times a second) and not before
``delay`` seconds have passed, so a command that finishes quickly shows no bar.

Why not ``tqdm``: it is not a dependency of this project, and what is needed here is one
line of arithmetic and a ``\\r``; a new dependency for that would be one more thing to pin,
audit and install on machines that run benchmarks offline.  The reporter is also cheap
when silent (``update`` is an addition and a comparison), which matters in loops over
100,000 records.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TextIO, TypeVar

from pytest_benchaudit.common.errors import UsageError

__all__ = [
    "Progress",
    "iterate",
    "progress_enabled",
    "ENV",
    "MIN_INTERVAL",
    "DELAY",
    "STALL_ENV",
    "STALL_AFTER_S",
    "stall_after",
    "waiting_text",
]

ENV = "BENCHAUDIT_PROGRESS"
MIN_INTERVAL = 0.1  # seconds between redraws (about 10 a second)
DELAY = 0.5  # seconds before the first draw: quick commands show no bar
STALL_ENV = "BENCHAUDIT_STALL_AFTER"
STALL_AFTER_S = 30.0  # a request unanswered this long is shown on the run's progress line
T = TypeVar("T")


def stall_after(environ: Mapping[str, str] | None = None) -> float:
    """Seconds after which an unanswered request counts as waiting (``$BENCHAUDIT_STALL_AFTER``,
    default 30); a value that is not a positive number is a :class:`UsageError` naming the variable."""
    raw = (os.environ if environ is None else environ).get(STALL_ENV, "").strip()
    if not raw:
        return STALL_AFTER_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise UsageError(f"${STALL_ENV}={raw!r}: expected a number of seconds above 0 (default {STALL_AFTER_S:g})")
    return value


def waiting_text(count: int, after: float, longest: float) -> str:
    """What a progress line adds while requests are stuck: ``2 requests waiting > 30 s (longest 1:05)``;
    ``""`` for none."""
    if count <= 0:
        return ""
    return f"{count:,} request{'s' if count != 1 else ''} waiting > {after:g} s (longest {_clock(longest)})"


def progress_enabled(stream: TextIO) -> bool:
    """``BENCHAUDIT_PROGRESS=1`` on, ``=0`` off, else on only when ``stream`` is a terminal."""
    forced = os.environ.get(ENV, "").strip().lower()
    if forced in ("1", "true", "yes", "on"):
        return True
    if forced in ("0", "false", "no", "off"):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed or replaced streams
        return False


def _count(x: float, unit: str) -> str:
    if unit == "B":
        for size, suffix in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if x >= size:
                return f"{x / size:.1f} {suffix}"
        return f"{x:.0f} B"
    return f"{x:,.0f}"


def _rate(r: float, unit: str) -> str:
    if unit == "B":
        return f"{_count(r, 'B')}/s"
    name = unit or "it"
    if r >= 10_000:
        return f"{r / 1000:.1f}k {name}/s"
    return f"{r:.1f} {name}/s" if r < 100 else f"{r:,.0f} {name}/s"


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Count/total, rate and ETA on one stderr line; silent unless :func:`progress_enabled`.

    ``total`` may be ``None`` (unknown: no bar, no ETA) and may be raised while running.
    ``unit="B"`` formats counts and rates as bytes.  Use as a context manager or call
    :meth:`close` (which draws the final state, when anything was drawn, and ends the line).
    """

    def __init__(
        self,
        total: int | None = None,
        label: str = "",
        unit: str = "",
        *,
        stream: TextIO | None = None,
        min_interval: float | None = None,
        delay: float | None = None,
        enabled: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        width: int | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = progress_enabled(self.stream) if enabled is None else enabled
        self.total = total
        self.label = label
        self.unit = unit
        self.n = 0
        self.min_interval = MIN_INTERVAL if min_interval is None else min_interval
        self.delay = DELAY if delay is None else delay
        self._clock = clock
        self._width = width
        self._start = clock() if self.enabled else 0.0
        self._last = float("-inf")
        self._drawn = False
        self._closed = False

    # -- counting
    def update(self, k: int = 1) -> None:
        self.n += k
        if not self.enabled:
            return
        now = self._clock()
        if now - self._last >= self.min_interval and now - self._start >= self.delay:
            self._draw(now)

    def count(self, items: Iterable[T]) -> Iterator[T]:
        """Yield ``items``, counting each one (the bar stays open for more)."""
        for item in items:
            yield item
            self.update()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.enabled and self._drawn:
            self._draw(self._clock())
            self._write("\n")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- drawing
    def line(self, now: float | None = None) -> str:
        """The text of the progress line at ``now`` (no carriage return)."""
        now = self._clock() if now is None else now
        elapsed = max(now - self._start, 1e-9)
        rate = self.n / elapsed
        unit = f" {self.unit}" if self.unit and self.unit != "B" else ""
        parts = [self.label] if self.label else []
        if self.total:
            frac = min(self.n / self.total, 1.0)
            bar_w = 20
            filled = int(frac * bar_w)
            parts.append("|" + "#" * filled + "-" * (bar_w - filled) + "|")
            parts.append(f"{_count(self.n, self.unit)}/{_count(self.total, self.unit)}{unit}")
        else:
            parts.append(f"{_count(self.n, self.unit)}{unit}")
        parts.append(" " + _rate(rate, self.unit))
        if self.total and rate > 0:
            left = max(self.total - self.n, 0) / rate
            parts.append(f" ETA {_clock(left)}")
        elif self.total:
            parts.append(" ETA ?")
        return " ".join(parts)

    def _draw(self, now: float) -> None:
        self._last = now
        text = self.line(now)
        width = self._width or shutil.get_terminal_size((100, 20)).columns
        room = max(width - 1, 10)
        self._write("\r" + text[:room].ljust(room))  # pad: erase a longer previous line
        self._drawn = True

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: stop trying
            self.enabled = False


def iterate(
    items: Iterable[T], total: int | None = None, label: str = "", unit: str = "", **kwargs: object
) -> Iterator[T]:
    """Yield ``items``, counting them on a :class:`Progress` closed when the loop ends."""
    if total is None:
        try:
            total = len(items)  # type: ignore[arg-type]
        except TypeError:
            total = None
    bar = Progress(total, label, unit, **kwargs)  # type: ignore[arg-type]
    if not bar.enabled:
        yield from items
        return
    try:
        for item in items:
            yield item
            bar.update()
    finally:
        bar.close()
