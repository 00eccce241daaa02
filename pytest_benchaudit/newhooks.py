"""Hooks benchaudit calls on plugins and ``conftest.py`` files (registered by ``pytest_addhooks``).

Implement them instead of reading benchaudit's report attributes or its run directory while it is
written: each is called in the process that writes the run (a serial run's, or the pytest-xdist
controller's, never a worker's), once the thing it hands over is written (a record is in the
run's buffered ``records.jsonl``, flushed within a second and at the end; ``summary.json`` is in place).

    # conftest.py: send each answer to an experiment tracker as it is recorded
    def pytest_benchaudit_record(record, config):
        tracker.log({"model": record["model"], "task": record["task"], "correct": record["correct"]})

    def pytest_benchaudit_summary(summary, config):
        for result in summary["results"]:
            tracker.summary(result)

Both receive read-only copies of the JSON documents, as ``records.jsonl`` and ``summary.json``
hold them (README, "What a run writes", lists their fields; their keys and types are
:class:`~pytest_benchaudit.pipeline.record_documents.RecordRow` and
:class:`~pytest_benchaudit.aggregate.summary_documents.SummaryDocument`, the annotations below): ``dict``
and ``list`` all the way down (``json.dumps`` and ``==`` read them as the file's), each refusing
any change with a ``TypeError``; ``copy.deepcopy(record)`` gives one you may change.

An implementation that raises is named in one line (its ``conftest.py`` or plugin, the line that
raised, the exception) and not called again in that run; the run directory is finished all the
same (every record kept, ``summary.json`` and ``run.json`` written, a ``hook_failed`` warning in
run.json) and pytest exits with status 3.  A record hook that raises also stops the run (nothing
more is asked; ``--resume`` continues it, handing the hook only the records it then writes).
``pytest.exit()`` in a hook is obeyed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the hookspecs import nothing of the package at run time (tests/test_architecture.py)
    from pytest_benchaudit.aggregate.summary_documents import SummaryDocument
    from pytest_benchaudit.pipeline.record_documents import RecordRow

__all__ = ["pytest_benchaudit_record", "pytest_benchaudit_summary"]


@pytest.hookspec()
def pytest_benchaudit_record(record: RecordRow, config: pytest.Config) -> None:
    """Called once for each record appended to the run's ``records.jsonl`` (one per question,
    model, layer and repeat), just after it was appended, in the order of the file; not for a record
    a resumed run already held, nor after a failed write.  ``record`` is that line's JSON object."""


@pytest.hookspec()
def pytest_benchaudit_summary(summary: SummaryDocument, config: pytest.Config) -> None:
    """Called once per run, just after ``summary.json`` was written (a run that asked nothing writes
    none and calls nothing).  ``summary`` is that file's JSON object."""
