"""Issue 33, item 14 (read side): run directories the store must not take at face value.

A record of another run appended to ``records.jsonl`` (runs/membership.py), a run another process is
still writing (the writer lock, runs/store.py ``run_in_progress``), and special or huge files where a
run's files should be (runs/files.py).  The runs are real (a pytest run of the toy suite against the
scripted server on 127.0.0.1; a real run held mid-way by that server, serially and under xdist), the
commands the real ``benchaudit`` ones; nothing here waits on a clock, only on events and pipes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from helpers.cli_runs import cli, no_traceback, record_lines
from pytest_benchaudit.runs.files import bounded_lines
from pytest_benchaudit.runs.membership import RunMembership
from pytest_benchaudit.runs.store import LOCK_NAME, RunDirError, load_run, read_records, run_in_progress
from pytest_benchaudit.testing.runs import writer_lock_held
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.toy import write_mcq_suite

_lines = record_lines


def test_membership_reads_only_what_run_json_declares() -> None:
    record: Any = {"model": "m", "benchmark": "b", "task": "t", "variant": "", "pipeline_hash": "h2"}
    card: Any = {
        "hash": "h1",
        "item_pipelines": {"h2": {"upstream_hash": None, "overrides": {}, "override_origins": {}}},
    }
    # a fixture changed some items' pipeline: their hash is listed under the card's item_pipelines
    assert RunMembership([{"spec": "m", "kind": "endpoint"}], {"b.t": card}).why_not(record) is None
    assert RunMembership(None, None).checks_anything() is False  # a hand-made run.json: nothing checked
    assert RunMembership(None, {"b.t": {}}).why_not(record) is None  # a card without a hash: any
    only: Any = {"b.t": {"hash": "h1"}}
    # a variant read under its task's card (as rescore reads a run whose variant cards are not stored)
    assert RunMembership(None, only).why_not(dict(record, variant="v")) is None
    assert "pipeline_hash 'h2'" in str(RunMembership(None, only).why_not(record))


# --------------------------------------------------------------------------- a run another process is writing


def test_the_lock_a_writer_holds_is_seen_by_readers_in_other_processes_only(toy_run: Path) -> None:
    with writer_lock_held(toy_run) as held:
        holder = run_in_progress(toy_run)
        assert holder is not None and f"pid {held.pid} on host" in holder
        with pytest.raises(RunDirError, match=f"another process is writing this run now \\(pid {held.pid} on host"):
            load_run(toy_run)
    assert run_in_progress(toy_run) is None and len(load_run(toy_run)[1]) == 13


def test_a_writer_reads_its_own_run(tmp_path: Path) -> None:
    from pytest_benchaudit.runs.store import RunDirectory

    run = RunDirectory(tmp_path)
    run.write_run(models=[{"spec": "m", "kind": "endpoint"}])
    assert run_in_progress(run.path) is None  # this process is the writer (the controller reads its run back)
    assert load_run(run.path) == (run.meta, [])
    run.finish()
    assert not (run.path / LOCK_NAME).exists() and run_in_progress(run.path) is None


HOLD_ROWS = [
    {
        "id": f"q{i}",
        "question": f"Question {i} {'HOLD' if i == 4 else 'CORRECT'}?",
        "options": ["one", "two", "three", "four"],
        "gold": "B",
    }
    for i in range(1, 5)
]


class HeldServer:
    """The scripted server, answering 'Answer: B' but holding the HOLD question's answer until released."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()

    def __call__(self, call: Any) -> Reply:
        if "HOLD" in call.last_user_text:
            self.asked.set()
            self.release.wait(300)
        return Reply(content="Answer: B")


def _writing(report_dir: Path, proc: subprocess.Popen[str]) -> Path:
    """The run directory once its writer holds the lock (the first answers are in, the last is held)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        runs = [p for p in report_dir.glob("*/") if (p / "run.json").is_file()] if report_dir.is_dir() else []
        if runs and run_in_progress(runs[0]) is not None:
            return runs[0]
        time.sleep(0.05)
    raise AssertionError(f"no run directory being written under {report_dir} (exit {proc.poll()})")


READERS = [
    ["summarize"],
    ["show"],
    ["card"],
    ["export", "--out", "{tmp}/exp"],
    ["compare", "--out", "{tmp}/cmp"],
    ["rescore", "--set", "scoring.denominator=valid", "--report-dir", "{tmp}/re"],
    ["diagnose"],
]


@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "xdist"])
def test_read_commands_refuse_a_run_being_written_and_read_it_once_it_ends(
    xdist: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if xdist:
        pytest.importorskip("xdist")
    write_mcq_suite(tmp_path, "held", HOLD_ROWS)
    script = HeldServer()
    with ScriptedServer(script) as server:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:randomly",
                "suites/held",
                "--data-dir",
                "data",
                "--model",
                f"m@{server.url}",
                "--report-dir",
                "out",
                "--no-cache",
                *(["-n", "2"] if xdist else []),
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert script.asked.wait(120)
            run = _writing(tmp_path / "out", proc)  # the last answer is held: the run is being written
            for reader in READERS:
                argv = [a.format(tmp=tmp_path) for a in reader]
                rc, _, err = cli(capsys, argv[0], run, *argv[1:])
                assert rc == 1 and len(err.strip().splitlines()) == 1, (argv, err)
                assert f"{run}: another process is writing this run now (pid {proc.pid} on host" in err, (argv, err)
            assert not (run / "summary.json").exists()  # summarize wrote nothing into the run being written
            assert not (tmp_path / "exp").exists() and not (tmp_path / "re").exists()
            script.release.set()
            out, _ = proc.communicate(timeout=300)
            assert proc.returncode == 0, out
        finally:
            script.release.set()
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=60)
    summary = json.loads((run / "summary.json").read_text())
    rc, out, err = cli(capsys, "summarize", run)  # the run ended: read whole, the same summary
    assert rc == 0 and "1 results from 4 records" in out, err
    assert json.loads((run / "summary.json").read_text())["results"] == summary["results"]
    assert not (run / LOCK_NAME).exists()


def test_a_writer_killed_mid_run_leaves_a_run_the_readers_read(
    toy_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A crashed writer holds no lock (the kernel drops it with the process): its lock file, left behind
    with the holder's name in it, does not make the run look busy."""
    with writer_lock_held(toy_run) as proc:
        assert run_in_progress(toy_run) is not None
        proc.kill()
        proc.wait(timeout=60)
        assert f'"pid": {proc.pid}' in (toy_run / LOCK_NAME).read_text()  # the dead writer's file is still there
        assert run_in_progress(toy_run) is None
        rc, out, err = cli(capsys, "summarize", toy_run)
        assert rc == 0 and "2 results from 13 records" in out, err
        rc, _, err = cli(capsys, "show", toy_run)
        assert rc == 0, err


# --------------------------------------------------------------------------- special and huge files


def _max_rss_mib(argv: list[str], cwd: Path) -> tuple[int, str, float]:
    """``benchaudit ARGV`` in a fresh process: (exit status, stderr, its peak resident memory in MiB)."""
    code = (
        "import resource, sys\nfrom pytest_benchaudit.cli.app import main\nrc = main(sys.argv[1:])\n"
        "print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=cwd, capture_output=True, text=True, timeout=300)
    rss = next(line for line in proc.stderr.splitlines() if line.startswith("RSS ")).split()[1]
    return proc.returncode, proc.stderr, int(rss) / 1024


def test_a_sparse_records_file_is_refused_without_reading_its_zeros_into_memory(toy_run: Path) -> None:
    size = 1 << 30  # 1 GiB of zeros, none on disk
    rc, err, baseline = _max_rss_mib(["summarize", str(toy_run)], toy_run.parent)  # the same command, whole
    assert rc == 0, err
    good = (toy_run / "records.jsonl").read_bytes()
    with (toy_run / "records.jsonl").open("r+b") as fh:
        fh.truncate(len(good) + size)  # the records, then what a crash can leave: a hole of zeros
    rc, err, rss = _max_rss_mib(["summarize", str(toy_run)], toy_run.parent)
    assert rc == 1, err
    assert (
        f"records.jsonl:14: NUL bytes (line 14 starts at byte {len(good):,}): not JSON lines but a damaged or "
        f"sparse file"
    ) in err and f"truncating the file to {len(good):,} bytes keeps them" in err
    assert rss < baseline + 64, (rss, baseline)  # at most a piece of the hole was read, never the gigabyte
    # What the message says keeps the records does: the run reads whole again.
    os.truncate(toy_run / "records.jsonl", len(good))
    assert len(list(read_records(toy_run))) == 13


@pytest.mark.timeout(120)  # the old reader waited on a FIFO forever: fail, never hang
@pytest.mark.parametrize("name", ["records.jsonl", "run.json", "summary.json"])
def test_a_fifo_in_place_of_a_run_file_is_refused_at_once(name: str, toy_run: Path) -> None:
    (toy_run / name).unlink()
    os.mkfifo(toy_run / name)
    command = "show" if name == "summary.json" else "summarize"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_benchaudit.cli", command, str(toy_run)],
        capture_output=True,
        text=True,
        timeout=100,
    )
    no_traceback(proc.stderr)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"benchaudit {command}: {toy_run / name}: a named pipe (FIFO), not a file; a run "
        f"directory's {name} is a file the run writes (nothing was read from it)"
    )


def test_a_device_or_a_directory_in_place_of_records_is_refused(
    toy_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = toy_run / "records.jsonl"
    records.unlink()
    records.symlink_to("/dev/zero")
    rc, _, err = cli(capsys, "export", toy_run, "--out", toy_run.parent / "exp")
    assert rc == 1 and "records.jsonl: a character device, not a file" in err
    records.unlink()
    records.mkdir()
    rc, _, err = cli(capsys, "rescore", toy_run, "--set", "scoring.denominator=valid")
    assert rc == 1 and "records.jsonl: a directory, not a file" in err


def test_long_lines_and_huge_documents_are_refused_within_their_limits(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"a": 1}\n' + b"x" * (3 << 20) + b"\n")
    with path.open("rb") as fh:
        lines = bounded_lines(fh, path, limit=2 << 20)
        assert next(lines) == b'{"a": 1}\n'
        with pytest.raises(RunDirError, match=r"records.jsonl:2: a line longer than 2 MiB \(from byte 9\)"):
            next(lines)
    with path.open("rb") as fh:  # within the limit, a long line is read whole
        assert [len(x) for x in bounded_lines(fh, path, limit=4 << 20)] == [9, (3 << 20) + 1]
    run = tmp_path / "run"
    run.mkdir()
    with (run / "run.json").open("wb") as fh:
        fh.truncate(300 << 20)  # sparse: claims 300 MiB
    with pytest.raises(RunDirError, match=r"run.json: 314,572,800 bytes, more than a benchaudit document holds"):
        load_run(run)
