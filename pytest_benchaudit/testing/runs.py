"""Run directories in tests: read the one a run wrote, make one by hand, make a real one of the toy suite,
hold a run's writer lock from another process.

The readers return the files as JSON (no schema applied), so a test asserts on what was written, not on
what the package's own readers make of it.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_benchaudit.testing.scripted_server import ScriptedServer
from pytest_benchaudit.testing.toy import toy_script, write_toy

__all__ = [
    "RECORD_DEFAULTS",
    "build_toy_run",
    "complete_record",
    "only_run_dir",
    "read_run",
    "write_run_dir",
    "writer_lock_held",
]

# Record fields a hand-made record may leave out: filled so it passes the store's schema check.
RECORD_DEFAULTS: dict[str, Any] = {
    "benchmark": "toy",
    "task": "mcq",
    "question_id": "q1",
    "question_index": 0,
    "model": "m",
    "pipeline": "standardized",
    "pipeline_hash": "",
    "request": {},
    "raw_output": "",
    "valid": True,
    "gold": "A",
    "score": 0.0,
    "correct": False,
}


def complete_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the schema's required fields it lacks filled from :data:`RECORD_DEFAULTS`."""
    return {**RECORD_DEFAULTS, **record}


def write_run_dir(root: Path, name: str, records: list[dict[str, Any]]) -> Path:
    """A minimal run directory (run.json + records.jsonl) holding hand-made records (completed
    with :func:`complete_record`, so they are records under the schema)."""
    run = root / name
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": name}), encoding="utf-8")
    (run / "records.jsonl").write_text(
        "".join(json.dumps(complete_record(r)) + "\n" for r in records), encoding="utf-8"
    )
    return run


def only_run_dir(report_dir: Path) -> Path:
    """The one run directory under ``report_dir`` (an assertion error listing them when there are more)."""
    runs = [p for p in report_dir.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def read_run(run_dir: Path) -> dict[str, Any]:
    """A run directory's records (a list), summary and run document, as the files hold them."""
    return {
        "records": [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()],
        "summary": json.loads((run_dir / "summary.json").read_text()),
        "run": json.loads((run_dir / "run.json").read_text()),
    }


def build_toy_run(root: Path, suite_extra: str = "") -> Path:
    """The toy suite under ``root`` and a finished run of it (12 + 1 records) in ``root/out``, made by a real
    pytest process against the scripted server; returns ``root``.  ``suite_extra``: TOML appended to the
    suite file first (another layer, say)."""
    write_toy(root)
    if suite_extra:
        with (root / "suites" / "toy" / "suite.toml").open("a") as fh:
            fh.write(suite_extra)
    with ScriptedServer(toy_script()) as server:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "suites/toy",
                "--data-dir",
                "data",
                "--model",
                f"toy-model@{server.url}",
                "--report-dir",
                "out",
                "--max-retries",
                "0",
                "--no-cache",
            ],
            cwd=root,
            capture_output=True,
            text=True,
        )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return root


# A process that holds a run directory's writer lock, as the process writing a run does, until its stdin closes.
_HOLDER = """
import sys
from pytest_benchaudit.runs.store import WriterLock
lock = WriterLock.acquire(sys.argv[1])
print("locked", flush=True)
sys.stdin.read()
lock.release()
"""


@contextlib.contextmanager
def writer_lock_held(run_dir: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holds ``run_dir``'s writer lock within the block (it waits on its stdin: no timing)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(run_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=60)
