"""The progress reporter: count/total, rate and ETA on stderr, throttled, silent unless asked."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.common import progress
from pytest_benchaudit.common.progress import Progress, iterate, progress_enabled
from pytest_benchaudit.testing.runs import only_run_dir
from pytest_benchaudit.testing.scripted_server import ScriptedServer


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(progress.ENV, "1")


def frames(text: str) -> list[str]:
    return [f.rstrip() for f in text.split("\r") if f.strip()]


def test_shows_count_total_rate_and_eta(forced: None) -> None:
    out, clock = io.StringIO(), Clock()
    bar = Progress(100, "rescore", "records", stream=out, clock=clock, width=200)
    clock.t += 2.0
    bar.update(40)  # 40 in 2 s: 20/s, 60 left -> 3 s
    (frame,) = frames(out.getvalue())
    assert "rescore" in frame and "40/100 records" in frame
    assert "20.0 records/s" in frame and "ETA 0:03" in frame
    assert "|########------------|" in frame
    clock.t += 3.0
    bar.update(60)
    bar.close()
    text = out.getvalue()
    assert text.endswith("\n") and "100/100 records" in frames(text)[-1] and "ETA 0:00" in frames(text)[-1]


def test_bytes_and_unknown_total(forced: None) -> None:
    out, clock = io.StringIO(), Clock()
    bar = Progress(None, "seceval/data.json", "B", stream=out, clock=clock, width=200)
    clock.t += 1.0
    bar.update(3 << 20)
    frame = frames(out.getvalue())[-1]
    assert "3.0 MiB" in frame and "3.0 MiB/s" in frame and "ETA" not in frame and "|" not in frame


def test_throttled_to_about_ten_redraws_a_second(forced: None) -> None:
    out, clock = io.StringIO(), Clock()
    bar = Progress(10_000, "x", stream=out, clock=clock, delay=0.0, width=120)
    for _ in range(10_000):  # 10,000 updates over 2 s
        clock.t += 0.0002
        bar.update()
    draws = out.getvalue().count("\r")
    assert 15 <= draws <= 21
    bar.close()
    assert out.getvalue().count("\r") == draws + 1  # the final state, once


def test_no_bar_for_quick_work(forced: None) -> None:
    out, clock = io.StringIO(), Clock()
    bar = Progress(10, "x", stream=out, clock=clock)  # default delay 0.5 s
    for _ in range(10):
        clock.t += 0.01
        bar.update()
    bar.close()
    assert out.getvalue() == ""


def test_silent_by_default_and_when_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.ENV, raising=False)
    pipe, clock = io.StringIO(), Clock()
    bar = Progress(5, "x", stream=pipe, clock=clock, delay=0.0)
    assert not bar.enabled
    for _ in range(5):
        clock.t += 1.0
        bar.update()
    bar.close()
    assert pipe.getvalue() == ""
    assert progress_enabled(TTY())  # a terminal turns it on ...
    monkeypatch.setenv(progress.ENV, "0")
    assert not progress_enabled(TTY())  # ... unless BENCHAUDIT_PROGRESS=0
    assert list(iterate(range(3), label="x", stream=TTY())) == [0, 1, 2]


def test_iterate_counts_and_closes(forced: None) -> None:
    out, clock = io.StringIO(), Clock()

    def items():
        for i in range(4):
            clock.t += 1.0
            yield i

    assert list(iterate(items(), 4, "load", "runs", stream=out, clock=clock, delay=0.0, width=200)) == [0, 1, 2, 3]
    last = frames(out.getvalue())[-1]
    assert "4/4 runs" in last and out.getvalue().endswith("\n")


@pytest.fixture
def toy_run(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> Path:
    pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out",
        "-k",
        "mcq",
        "--max-retries",
        "0",
    )
    return only_run_dir(pytester.path / "out")


def test_rescore_reports_records(
    pytester: pytest.Pytester, toy_run: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    capsys.readouterr()
    monkeypatch.delenv(progress.ENV, raising=False)
    monkeypatch.setattr(progress, "DELAY", 0.0)
    args = [
        "rescore",
        str(toy_run),
        "--report-dir",
        str(pytester.path / "r"),
        "--suites-dir",
        str(pytester.path / "suites"),
    ]
    assert main(args) == 0
    assert "\r" not in capsys.readouterr().err  # captured stderr is no terminal: nothing
    monkeypatch.setenv(progress.ENV, "1")
    assert main(args) == 0
    err = capsys.readouterr().err
    n = sum(1 for line in (toy_run / "records.jsonl").read_text().splitlines() if line.strip())
    assert re.search(rf"rescore \|#+\| {n}/{n} records +\S+ records/s +ETA 0:00", err), err


# --------------------------------------------------------------------------- a pytest run's line while a request is stuck


def test_waiting_text() -> None:
    assert progress.waiting_text(0, 30, 0.0) == ""
    assert progress.waiting_text(1, 30, 31.2) == "1 request waiting > 30 s (longest 0:31)"
    assert progress.waiting_text(2, 1.5, 65) == "2 requests waiting > 1.5 s (longest 1:05)"
    assert progress.stall_after({}) == progress.STALL_AFTER_S == 30.0
    assert progress.stall_after({progress.STALL_ENV: "2.5"}) == 2.5
    from pytest_benchaudit.common.errors import UsageError

    for bad in ("0", "-1", "soon", "inf"):
        with pytest.raises(UsageError, match=r"\$BENCHAUDIT_STALL_AFTER="):
            progress.stall_after({progress.STALL_ENV: bad})


def _stalling_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *extra: str) -> str:
    """Three questions; the first one's body stalls half-way for 3.5 s (within the read timeout)."""
    from pytest_benchaudit.testing.scripted_server import Reply, by_marker

    monkeypatch.setenv("BENCHAUDIT_STALL_AFTER", "1")
    script = by_marker({"CORRECT": Reply(content="Answer: B", stall_body=3.5)}, Reply(content="Answer: A"))
    with ScriptedServer(script) as server:
        result = pytester.runpytest(
            "suites/toy",
            "--data-dir",
            "data",
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
            "-k",
            "mcq",
            "--limit",
            "3",
            "--no-cache",
            "-p",
            "no:randomly",
            *extra,
        )
    assert len(only_run_dir(pytester.path / "out").joinpath("records.jsonl").read_text().splitlines()) == 3
    return result.stdout.str()


@pytest.mark.parametrize("where", ["inference process", "thread"])
def test_live_line_says_a_request_is_stuck(
    pytester: pytest.Pytester, toy, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.setenv(progress.ENV, "1")  # the live line, as on a terminal
    text = _stalling_run(pytester, monkeypatch, *(["--no-inference-process"] if where == "thread" else []))
    frames = [f for f in re.split(r"[\r\n]", text) if f.startswith("benchaudit 0/3 questions")]
    stuck = [f for f in frames if re.search(r"1 request waiting > 1 s \(longest 0:0[1-4]\)", f)]
    assert stuck, frames  # the line moved while the item waited, saying why
    assert "waiting" not in text.split("benchaudit summary")[-1]  # the answer came: the final line says nothing of it


def test_log_lines_say_a_request_is_stuck(pytester: pytest.Pytester, toy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.ENV, raising=False)  # not a terminal: a line per tenth, and one for the wait
    text = _stalling_run(pytester, monkeypatch)
    lines = re.findall(r"^benchaudit: 1 request waiting > 1 s \(longest 0:0[1-4]\)$", text, re.MULTILINE)
    assert len(lines) == 1, text  # one line for the wait, not one per second of it
