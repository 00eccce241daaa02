"""A record left in records.jsonl's write buffer reaches the disk without waiting for the next one.

Before the timed flush, a record appended just after a flush stayed in memory until the next append: a
run waiting minutes on a slow answer (or an xdist controller waiting on its workers) lost it to a kill.
The unit tests fire the timer themselves (no clock); the last one kills a real writer process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_benchaudit.runs.store import RunDirectory


class ManualTimer:
    """threading.Timer's shape; fired by the test."""

    made: list[ManualTimer] = []

    def __init__(self, interval: float, function: Callable[[], None]) -> None:
        self.interval, self.function = interval, function
        self.daemon = False
        self.started = self.cancelled = False
        ManualTimer.made.append(self)

    def start(self) -> None:
        self.started = True

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        self.function()


@pytest.fixture
def manual_timer(monkeypatch: pytest.MonkeyPatch) -> type[ManualTimer]:
    ManualTimer.made = []
    monkeypatch.setattr(RunDirectory, "timer_factory", ManualTimer)
    return ManualTimer


def _on_disk(run: RunDirectory) -> list[dict[str, object]]:
    return [json.loads(line) for line in run.records_path.read_text().splitlines()]


def _record(qid: str) -> dict[str, object]:
    return {"benchmark": "toy", "task": "mcq", "question_id": qid, "model": "m", "correct": False}


def test_a_record_left_in_the_buffer_is_flushed_by_the_timer(tmp_path: Path, manual_timer: type[ManualTimer]) -> None:
    run = RunDirectory(tmp_path, run_id="r")
    assert run.append(_record("q1")) is False  # just opened: the interval has not passed
    assert _on_disk(run) == []  # in the buffer
    (timer,) = manual_timer.made
    assert timer.started and timer.daemon and timer.interval == RunDirectory.FLUSH_INTERVAL_S
    run.append(_record("q2"))  # the timer already armed covers this one too: no second timer
    assert len(manual_timer.made) == 1
    timer.fire()
    assert [r["question_id"] for r in _on_disk(run)] == ["q1", "q2"]
    run.append(_record("q3"))  # the next unflushed record arms a new timer
    assert len(manual_timer.made) == 2
    run.finish()
    assert manual_timer.made[1].cancelled  # finish flushes by closing; the timer has nothing left to do
    assert [r["question_id"] for r in _on_disk(run)] == ["q1", "q2", "q3"]
    manual_timer.made[1].fire()  # a timer that fires after the close does nothing (and does not raise)


def test_a_failed_timed_flush_is_raised_at_the_next_append(
    tmp_path: Path, manual_timer: type[ManualTimer], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = RunDirectory(tmp_path, run_id="r")
    run.append(_record("q1"))

    def disk_full() -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run._records, "flush", disk_full)
    manual_timer.made[0].fire()  # in the timer thread: nothing to raise to; kept for the item loop
    with pytest.raises(OSError, match="No space left"):
        run.append(_record("q2"))
    monkeypatch.undo()
    run.abandon()


_WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pytest_benchaudit.runs.store import RunDirectory
    run = RunDirectory(Path(sys.argv[1]), run_id="r")
    run.append({"benchmark": "toy", "task": "mcq", "question_id": "q1", "model": "m"})
    print("appended", flush=True)
    time.sleep(600)  # waiting on a slow answer: no further append comes
""")


def test_a_killed_writer_waiting_on_a_slow_answer_keeps_its_last_record(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "appended"
        records = tmp_path / "r" / "records.jsonl"
        # The record reaches the file while the writer waits; the bound is generous (the timer fires
        # after 0.2 s) and only a broken flush reaches it.
        deadline = time.monotonic() + 60
        while not records.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert [json.loads(line)["question_id"] for line in records.read_text().splitlines()] == ["q1"]
