"""One run stays one run: one writer per run directory (runs/store.py's writer lock), and a
records.jsonl that holds an item twice is refused on read, naming the items and lines.

The lock is a real ``fcntl.flock`` held by real processes; the duplicate files are what two
writers of one run left (the same record key on two lines).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.runs.store import LOCK_NAME, DuplicateRecords, RunDirectory, RunLocked, load_run, read_records
from pytest_benchaudit.testing.runs import complete_record, write_run_dir

pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork") or sys.platform == "win32", reason="the writer lock is fcntl.flock (POSIX)"
)


def _record(qid: str, correct: bool = True, variant: str = "") -> dict:
    return {
        "benchmark": "toy",
        "task": "mcq",
        "question_id": qid,
        "model": "m",
        "variant": variant,
        "correct": correct,
        "score": 1.0 if correct else 0.0,
    }


# A process that takes the writer lock the way a run does, says so, and holds it until killed (or until
# its stdin closes, so that it never outlives the test: no fixed sleep that a slow machine could outlast).
HOLDER = """
import sys
from pathlib import Path
from pytest_benchaudit.runs.store import RunDirectory
run = RunDirectory.reopen(Path(sys.argv[1]))
print("HOLDING", flush=True)
sys.stdin.read()
"""


def _hold(run_dir: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run_dir), "--model", "m@http://u:pw-0123456789@h/v1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "HOLDING"
    return proc


def test_a_second_writer_is_refused_naming_the_holder(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path, "run", [_record("q1")])
    holder = _hold(run_dir)
    try:
        with pytest.raises(RunLocked) as err:
            RunDirectory.reopen(run_dir)
        message = str(err.value)
        assert f"pid {holder.pid} on host {socket.gethostname()} since " in message
        assert "-c" in message and "pw-0123456789" not in message  # the holder's command, its URL password removed
        # The refused writer changed nothing: the file is as the holder has it.
        assert [r["question_id"] for r in read_records(run_dir)] == ["q1"]
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    # A killed writer holds nothing: the kernel dropped its lock with its process.
    again = RunDirectory.reopen(run_dir)
    again.append(complete_record(_record("q2")))
    again.finish()
    assert [r["question_id"] for r in read_records(run_dir)] == ["q1", "q2"]


def test_one_process_holds_the_lock_from_creation_to_finish(tmp_path: Path) -> None:
    run = RunDirectory(tmp_path)
    with pytest.raises(RunLocked, match=f"pid {os.getpid()} "):
        RunDirectory.reopen(run.path)  # a resume while the run itself is still writing
    run.append(complete_record(_record("q1")))
    run.finish()
    assert not (run.path / LOCK_NAME).exists()  # released: the finished run holds its run files only
    assert sorted(p.name for p in run.path.iterdir()) == ["records.jsonl", "run.json"]
    reopened = RunDirectory.reopen(run.path)
    with pytest.raises(RunLocked):
        RunDirectory.reopen(run.path)
    reopened.finish()


def test_a_refused_resume_leaves_the_run_unlocked(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path, "run", [_record("q1"), _record("q1")])
    with pytest.raises(DuplicateRecords):
        RunDirectory.reopen(run_dir)
    with pytest.raises(DuplicateRecords):  # not RunLocked: the first refusal released its lock
        RunDirectory.reopen(run_dir)


def test_duplicated_records_are_an_error_naming_items_and_lines(tmp_path: Path) -> None:
    records = [_record(f"q{i}") for i in range(1, 8)]
    # Two writers of one run: q2, q3 recorded again (the second writer's answers differ).
    records += [_record("q2", correct=False), _record("q3", correct=False), _record("q8")]
    records += [_record("q1", variant="max_tokens=5")]  # another variant: another item, no duplicate
    run_dir = write_run_dir(tmp_path, "run", records)
    with pytest.raises(DuplicateRecords) as err:
        list(read_records(run_dir))
    message = str(err.value)
    assert "2 record(s) repeat an item already recorded" in message
    assert "toy.mcq q2 [m] (lines 2 and 8)" in message and "toy.mcq q3 [m] (lines 3 and 9)" in message
    assert "--skip-bad-records" in message
    with pytest.raises(DuplicateRecords):
        load_run(run_dir)


def test_repeats_of_one_question_are_items_of_their_own(tmp_path: Path) -> None:
    # inference.repeats = 3: q1 asked three times is three records (repeat 0, 1, 2), not duplicates;
    # a record without the field is repeat 0, so it and an explicit repeat 0 are one item twice.
    records = [{**_record("q1"), "repeat": k} for k in range(3)] + [_record("q2")]
    run_dir = write_run_dir(tmp_path, "run", records)
    assert [(r["question_id"], r.get("repeat", 0)) for r in read_records(run_dir)] == [
        ("q1", 0),
        ("q1", 1),
        ("q1", 2),
        ("q2", 0),
    ]
    run_dir = write_run_dir(
        tmp_path, "run2", records + [{**_record("q1"), "repeat": 2}, {**_record("q2"), "repeat": 0}]
    )
    with pytest.raises(DuplicateRecords) as err:
        list(read_records(run_dir))
    message = str(err.value)
    assert "2 record(s) repeat an item" in message
    assert "toy.mcq q1 [m] repeat 2 (lines 3 and 5)" in message and "toy.mcq q2 [m] (lines 4 and 6)" in message


def test_skip_bad_records_keeps_the_first_of_each(tmp_path: Path) -> None:
    records = [_record("q1"), _record("q2"), _record("q1", correct=False), _record("q2", correct=False)]
    run_dir = write_run_dir(tmp_path, "run", records)
    said: list[str] = []
    kept = list(read_records(run_dir, skip_bad=True, on_skipped=said.append))
    assert [(r["question_id"], r["correct"]) for r in kept] == [("q1", True), ("q2", True)]
    (message,) = said
    assert (
        "skipped 2 line(s)" in message and "a second record of toy.mcq q1 [m] (the first, line 1, is kept)" in message
    )


def test_many_duplicates_are_counted_and_the_first_named(tmp_path: Path) -> None:
    records = [_record(f"q{i:02d}") for i in range(20)] * 2
    run_dir = write_run_dir(tmp_path, "run", records)
    with pytest.raises(DuplicateRecords) as err:
        list(read_records(run_dir))
    message = str(err.value)
    assert message.count("toy.mcq q") == 5 and "and 15 more" in message and "20 record(s)" in message


def test_summarize_and_show_refuse_a_run_with_duplicated_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [_record("q1"), _record("q2", correct=False), _record("q3"), _record("q2", correct=False)]
    run_dir = write_run_dir(tmp_path, "run", records)
    assert main(["summarize", str(run_dir)]) == 1
    err = capsys.readouterr().err
    assert "1 record(s) repeat an item" in err and "toy.mcq q2 [m] (lines 2 and 4)" in err
    assert "Traceback" not in err and not (run_dir / "summary.json").exists()
    assert main(["summarize", str(run_dir), "--skip-bad-records"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    # A hand count of the file: q1, q2, q3 each once, q2 wrong.
    assert [(r["n"], r["n_correct"]) for r in summary["results"]] == [(3, 2)]
    capsys.readouterr()
    # The records still hold q2 twice: show says so rather than print a summary as if all were well.
    assert main(["show", str(run_dir)]) == 1
    assert "toy.mcq q2 [m] (lines 2 and 4)" in capsys.readouterr().err
    assert main(["show", str(run_dir), "--skip-bad-records"]) == 0
    out, err = capsys.readouterr()
    assert "1 line(s) of records.jsonl repeat an item" in err
    row = next(line for line in out.splitlines() if line.startswith("mcq"))
    assert row.split()[2] == "3"


# A writer that forks a child while it holds the lock (as the inference process may be forked). Both
# live until killed or until their shared stdin closes (no fixed sleep a slow machine could outlast).
FORKING_HOLDER = """
import os, sys
from pathlib import Path
from pytest_benchaudit.runs.store import RunDirectory
run = RunDirectory.reopen(Path(sys.argv[1]))
child = os.fork()
if child == 0:
    sys.stdin.read()
    os._exit(0)
print("HOLDING", child, flush=True)
sys.stdin.read()
"""


def test_a_child_forked_by_the_writer_does_not_keep_the_run_locked(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path, "run", [_record("q1")])
    proc = subprocess.Popen(
        [sys.executable, "-c", FORKING_HOLDER, str(run_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    word, child = proc.stdout.readline().split()
    assert word == "HOLDING"
    try:
        with pytest.raises(RunLocked, match=f"pid {proc.pid} "):
            RunDirectory.reopen(run_dir)
        proc.send_signal(signal.SIGKILL)  # the writer is killed; its forked child lives on
        proc.wait(timeout=30)
        os.kill(int(child), 0)  # still there
        RunDirectory.reopen(run_dir).finish()  # the child's copy of the lock was closed at the fork
    finally:
        if proc.poll() is None:
            proc.kill()
        try:
            os.kill(int(child), signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_run_files_are_strict_json(tmp_path: Path) -> None:
    from pytest_benchaudit.common.errors import RunDirError
    from pytest_benchaudit.runs.store import read_run_json, write_json_atomic

    target = tmp_path / "run.json"
    with pytest.raises(RunDirError, match=r"pipeline_cards\.toy\.mcq\.fields\.inference\.decoding\.temperature = nan"):
        write_json_atomic(
            target, {"pipeline_cards": {"toy.mcq": {"fields": {"inference.decoding.temperature": float("nan")}}}}
        )
    assert not target.exists()  # nothing half-valid was written
    with pytest.raises(RunDirError, match=r"x\.1 = -inf"):
        write_json_atomic(target, {"x": [1.0, float("-inf")]})
    run_dir = tmp_path / "old"
    run_dir.mkdir()
    (run_dir / "run.json").write_text('{"run_id": "old", "overrides": {"inference.decoding.temperature": NaN}}')
    with pytest.raises(RunDirError, match="NaN is not JSON"):
        read_run_json(run_dir)
