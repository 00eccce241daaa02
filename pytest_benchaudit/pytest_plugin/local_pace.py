"""What a run on the embedded model will take, said before it goes on.

The embedded model answers a question in seconds to minutes on a CPU: before the items run, the
first two distinct requests are asked together and the run prints "~N s per question here: M
questions ≈ T", so that a 9-hour run is no surprise.  Both answers are kept for their items.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from pytest_benchaudit.pipeline.types import Generation
from pytest_benchaudit.pytest_plugin.collect import BenchItem

__all__ = ["announce_local_pace", "duration_text"]

Prefetch = Callable[[list[tuple[str, Any]]], None]
Generate = Callable[[str, Any], Generation]


def announce_local_pace(session: pytest.Session, prefetch_many: Prefetch, generate: Generate) -> None:
    """Time two answers of the embedded model and print the run's estimate on the terminal.

    Silent when fewer than two distinct requests go to the local model, when there is no terminal
    reporter, or when an answer came from the cache or failed (neither says anything about this
    machine's speed).  ``prefetch_many`` and ``generate`` are the runner's (each adds one claim on
    the request: the items still find their answers)."""
    local = [
        i
        for i in session.items
        if isinstance(i, BenchItem) and i.bench.model.kind == "local" and not i.get_closest_marker("skip") and i.direct
    ]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if len(local) < 2 or reporter is None:
        return
    # Downstream variants of a question share its request: count what will really be asked
    # (identities only: the requests themselves are rendered again when queued).
    unique = list({(i.bench.model.label, i.bench.request.identity): i for i in local}.values())
    if len(unique) < 2:
        return
    start = time.perf_counter()
    firsts = [(i.bench.model.label, i.bench.request) for i in unique[:2]]
    prefetch_many(firsts)
    answers = [generate(label, request) for label, request in firsts]
    if any(a.from_cache or a.error is not None for a in answers):
        return
    took = time.perf_counter() - start
    # Two answers, asked together: (time of the second) / 2 is the pace of a server that answers
    # one at a time and of one that answers both at once alike; start-up is spread over both.
    per_question = max(took / 2, 0.01)
    total = per_question * len(unique)
    reask = max(i.bench.pipeline.inference.reask_on_invalid for i in local)
    reporter.write_line(
        f"benchaudit: the embedded model takes ~{per_question:.0f} s per question here (2 "
        f"answers in {took:.1f} s): {len(unique):,} questions ≈ {duration_text(total)}"
        + (f" (up to {1 + reask}x that while answers cannot be read: the pipeline re-asks)" if reask else "")
        + ("; --limit N asks fewer" if total > 600 else "")
    )


def duration_text(seconds: float) -> str:
    """``seconds`` as a person reads an estimate: "45 s", "12 min", "9.4 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
