"""What the end of a run needs of ``records.jsonl``, read from the file itself (:class:`RecordsDigest`).

The controller (:mod:`.controller`) feeds it as the file grows (a serial run) or once at the
end (xdist): the summary's columns, the usage tally, the bounded answer list and the context
watch, never the records themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pytest_benchaudit.pipeline.record_documents import Cards, CardWarning
from pytest_benchaudit.runs.store import RecordsFollower

if TYPE_CHECKING:
    from pytest_benchaudit.aggregate.results import Summarizer
    from pytest_benchaudit.inference.cache import CacheStats
    from pytest_benchaudit.inference.usage import UsageTally
    from pytest_benchaudit.report.terminal import AnswerList

__all__ = ["RecordsDigest"]


class RecordsDigest:
    """What the end of a run needs of ``records.jsonl``, read from the file itself: the summary's
    columns, the usage tally and the bounded answer list, never the records.

    :meth:`feed` reads the lines completed since the last call (a bounded amount: a resumed run's
    large file is read over several calls); ``feed(final=True)``, after the last flush, the rest.
    The result is the same as one :func:`~.store.read_records` pass at the end.
    """

    # Read at most this much per call during the run: a catch-up costs ~1 ms per 100 records,
    # and one call never holds the item loop for long.
    STEP_BYTES = 4 << 20

    def __init__(
        self, path: Path, cards: Cards, show_answers: int | None, asked: dict[str, str | None] | None = None
    ) -> None:
        """``asked``: the model id sent, per model whose served model the context warnings check."""
        from pytest_benchaudit.aggregate.results import Summarizer
        from pytest_benchaudit.inference.context import ContextWatch
        from pytest_benchaudit.inference.usage import UsageTally
        from pytest_benchaudit.report.terminal import AnswerList
        from pytest_benchaudit.scoring.extract import MMLU_FALLBACK

        self.cards = cards
        self.summary: Summarizer = Summarizer(cards)
        self.tally: UsageTally = UsageTally()
        self.answers: AnswerList = AnswerList(show_answers)
        self.context = ContextWatch(asked or {}, MMLU_FALLBACK)  # served model, log-probabilities, fallback
        self._follower = RecordsFollower(path, validate=False)

    def feed(self, *, final: bool = False) -> None:
        for record in self._follower.rest() if final else self._follower.new(self.STEP_BYTES):
            self.summary.add(record)
            self.tally.add(record)
            self.answers.add(record)
            self.context.add(record)

    def close(self) -> None:
        self._follower.close()

    def context_warnings(self, cache_stats: list[CacheStats]) -> list[CardWarning]:
        """The served model, log-probabilities and the released fallback (from the records), and a cache
        that cannot hit (from the engines' ``cache_stats``, with what GET /models listed)."""
        from pytest_benchaudit.inference.context import cache_warnings

        for stats in cache_stats:
            for model, ids in (stats.get("served") or {}).items():
                self.context.note_listed(model, ids)
        return [*self.context.warnings(), *cache_warnings(cache_stats)]
