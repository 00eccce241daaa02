"""``inference.repeats`` (``--repeats K``) on the pytest side: the K requests of a question and
the verdict of its one pytest item.

Each question is asked K times per model and layer.  Repeat ``k`` is a request of its own: its
``repeat`` index is part of the request's identity and cache key (a repeat is never the cached
answer of another, and two repeats are never folded into one request the way identical requests
of two ``--pipelines`` layers are), and where the pipeline sends a seed it is sent
``seed + k``; where it sends none, none is sent (the record's request shows it).  Each repeat
becomes a record of its own (``repeat: k``), handed to the controller as it comes back (the runner
streams a question's K requests, a window at a time); the question's item passes when the
reducer's verdict over the K verdicts is correct (:func:`passes`, :class:`Tally` counting them as
they come).  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_benchaudit.pipeline.types import Request

__all__ = ["Tally", "passes", "reducer_of", "repeat_request", "repeats_of", "verdict_text"]


def repeats_of(pipeline: Any) -> int:
    """The pipeline's ``inference.repeats`` (K), 1 where the pipeline has no such field."""
    return int(getattr(pipeline.inference, "repeats", 1) or 1)


def reducer_of(pipeline: Any) -> str:
    """The pipeline's ``aggregation.reducer`` (``mean`` where it has none)."""
    return str(getattr(pipeline.aggregation, "reducer", "mean") or "mean")


def repeat_request(request: Request, repeat: int) -> Request:
    """``request`` as repeat ``repeat`` asks it: the repeat index set and, when the request sends a
    seed, the seed moved by ``repeat`` (``base + k``).  Repeat 0 is ``request`` itself.

    Built anew, not copied: a copy would keep the original's cached ``identity``."""
    if repeat == 0:
        return request
    params = dict(request.params)
    if isinstance(params.get("seed"), int):
        params["seed"] = params["seed"] + repeat
    fields = {name: getattr(request, name) for name in type(request).model_fields}
    return Request(**{**fields, "params": params, "repeat": repeat})


def passes(reducer: str, corrects: Sequence[bool]) -> bool:
    """Whether a question's item passes, from the verdicts of its K repeats:

    * ``mean``: at least half of the repeats correct (the question's mean score is >= 0.5);
    * ``majority``: more than half correct;
    * ``any``: at least one correct;
    * ``all``: every one correct.
    """
    return Tally(right=sum(1 for c in corrects if c), total=len(corrects)).passes(reducer)


def verdict_text(corrects: Sequence[bool], reducer: str) -> str:
    """``3/5 correct (majority)``: the K verdicts as a failure message names them."""
    return Tally(right=sum(1 for c in corrects if c), total=len(corrects)).text(reducer)


@dataclass
class Tally:
    """A question's verdicts counted as its repeats come back (K may be large: counts, not a list)."""

    right: int = 0
    total: int = 0

    def add(self, correct: bool) -> None:
        self.right += bool(correct)
        self.total += 1

    def passes(self, reducer: str) -> bool:
        """:func:`passes` on the counted verdicts."""
        if not self.total:
            return False
        if reducer == "majority":
            return 2 * self.right > self.total
        if reducer == "any":
            return self.right > 0
        if reducer == "all":
            return self.right == self.total
        return 2 * self.right >= self.total

    def text(self, reducer: str) -> str:
        """:func:`verdict_text` of the counted verdicts."""
        return f"{self.right}/{self.total} correct ({reducer})"
