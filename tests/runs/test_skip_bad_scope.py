"""--skip-bad-records holds for one command only: the store's setting is a context the CLI enters around
the command (runs/store.py skipping_bad_records), not a process-wide switch, so two commands run in one
process (tests, a notebook, an IDE runner) cannot leak it to each other, whichever comes first and
whether the first returns or raises."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.common.errors import RunDirError
from pytest_benchaudit.runs.store import BadRecord, load_run, read_records, skipping_bad_records
from pytest_benchaudit.testing.runs import write_run_dir


def _run_with_a_bad_line(tmp_path: Path) -> Path:
    run_dir = write_run_dir(
        tmp_path,
        "run",
        [
            {
                "benchmark": "toy",
                "task": "mcq",
                "question_id": f"q{i}",
                "model": "m",
                "correct": i % 2 == 0,
                "score": float(i % 2 == 0),
            }
            for i in range(3)
        ],
    )
    with (run_dir / "records.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"benchmark": "toy", "not": "a record"}\n')  # line 4
    return run_dir


def _strict_failure(capsys: pytest.CaptureFixture[str], run_dir: Path) -> None:
    assert main(["summarize", str(run_dir)]) == 1
    err = capsys.readouterr().err
    assert f"{run_dir / 'records.jsonl'}:4: not a record" in err and "Traceback" not in err


def test_skipping_in_one_command_does_not_leak_into_the_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _run_with_a_bad_line(tmp_path)
    assert main(["summarize", str(run_dir), "--skip-bad-records"]) == 0
    assert "skipped 1 line(s) that are not records" in capsys.readouterr().err
    _strict_failure(capsys, run_dir)  # the same process, the next command: strict again
    assert main(["summarize", str(run_dir), "--skip-bad-records"]) == 0
    capsys.readouterr()
    # Readers used directly after the commands read strictly too.
    with pytest.raises(BadRecord, match=":4: not a record"):
        load_run(run_dir)


def test_a_command_that_fails_inside_the_block_resets_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = _run_with_a_bad_line(tmp_path)
    from pytest_benchaudit.cli import summarize_cmd

    # An error main() reports (exit 1), and one it does not handle (a bug): both leave the block, which resets.
    def fails(args: object) -> int:
        raise RunDirError("cannot be read")

    def broken(args: object) -> int:
        raise RuntimeError("a bug in the command")

    monkeypatch.setattr(summarize_cmd, "run", fails)
    assert main(["summarize", str(run_dir), "--skip-bad-records"]) == 1
    assert "cannot be read" in capsys.readouterr().err
    monkeypatch.setattr(summarize_cmd, "run", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["summarize", str(run_dir), "--skip-bad-records"])
    monkeypatch.undo()
    _strict_failure(capsys, run_dir)


def test_the_block_nests_and_an_explicit_argument_wins(tmp_path: Path) -> None:
    run_dir = _run_with_a_bad_line(tmp_path)
    said: list[str] = []
    with skipping_bad_records():
        assert len(list(read_records(run_dir, on_skipped=said.append))) == 3
        with skipping_bad_records(False):
            with pytest.raises(BadRecord):
                list(read_records(run_dir))
        assert len(load_run(run_dir, warn=said.append)[1]) == 3  # the outer setting is back
        with pytest.raises(BadRecord):
            list(read_records(run_dir, skip_bad=False))
        # Another thread has its own context: a block in this one does not decide for it.
        seen: list[BaseException | int] = []

        def read() -> None:
            try:
                seen.append(len(list(read_records(run_dir))))
            except BadRecord as err:
                seen.append(err)

        thread = threading.Thread(target=read)
        thread.start()
        thread.join()
        assert len(seen) == 1 and isinstance(seen[0], BadRecord)
    assert len(said) == 2 and all("skipped 1 line(s)" in s for s in said)
    with pytest.raises(BadRecord):
        list(read_records(run_dir))
    assert len(list(read_records(run_dir, skip_bad=True, on_skipped=said.append))) == 3
