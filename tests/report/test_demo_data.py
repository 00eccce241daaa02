"""``make demo``'s first step (report/demo_data.py) against a 127.0.0.1 origin, never the real network.

In a fresh clone there is no ``../shared/datasets``: the demo must fetch CyberMetric's files (sha256-verified,
into the default data directory) or stop with one line saying what failed and how to point BENCHAUDIT_DATA at
a copy.  The origin serves the suite's own paths; a fetch that succeeds is checked byte for byte against the
real benchmark files (when they are here), one that fails leaves nothing behind.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.origin import Origin
from pytest_benchaudit.report import demo_data
from pytest_benchaudit.report.demo_data import DEMO_BENCHMARK, DEMO_FILE, ensure_demo_data

REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "suites"
FILES = ("CyberMetric-80-v1.json", "CyberMetric-500-v1.json", "CyberMetric-2000-v1.json")
_DATA = Path(os.environ.get("BENCHAUDIT_DATA") or "nowhere").expanduser().resolve()


@pytest.fixture
def origin() -> Iterator[Origin]:
    with Origin() as server:
        yield server


@pytest.fixture
def real_cybermetric() -> Path:
    folder = _DATA / DEMO_BENCHMARK
    if not all((folder / name).is_file() for name in FILES):
        pytest.skip(
            f"real benchmark data not available: no {folder}/CyberMetric-*.json "
            "(set BENCHAUDIT_DATA to the datasets directory; make test does)"
        )
    return folder


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/base/"


def _one_line_failure(text: str, data_dir: Path) -> str:
    lines = [line for line in text.splitlines() if line.startswith("demo: cannot")]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    assert "BENCHAUDIT_DATA" in lines[0] and str(data_dir) in lines[0]
    return lines[0]


def test_absent_data_is_fetched_from_the_origin_verified_and_then_left_alone(
    tmp_path: Path, origin: Origin, real_cybermetric: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in FILES:
        origin.routes[f"/base/{name}"] = (real_cybermetric / name).read_bytes()
    data = tmp_path / "datasets"
    assert ensure_demo_data(str(data), origin=origin.url, suites_dir=SUITES) == 0
    for name in FILES:  # byte for byte the benchmark's published files
        assert (data / DEMO_BENCHMARK / name).read_bytes() == (real_cybermetric / name).read_bytes()
    err = capsys.readouterr().err
    assert f"fetched  {DEMO_BENCHMARK}/{DEMO_FILE}" in err and "fetching it" in err
    asked = len(origin.requests)
    assert asked == len(FILES)
    # present now: the second demo asks nothing and prints nothing
    assert ensure_demo_data(str(data), origin=origin.url, suites_dir=SUITES) == 0
    assert len(origin.requests) == asked and capsys.readouterr().err == ""


def test_the_default_data_directory_is_the_one_pytest_reads(
    tmp_path: Path, origin: Origin, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No --data-dir and no BENCHAUDIT_DATA (a user's machine): the per-user cache, as pytest reads it.
    monkeypatch.delenv("BENCHAUDIT_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    present = tmp_path / "cache" / "benchaudit" / "datasets" / DEMO_BENCHMARK / DEMO_FILE
    present.parent.mkdir(parents=True)
    present.write_text("{}")
    assert ensure_demo_data(origin=origin.url, suites_dir=SUITES) == 0
    assert origin.requests == []  # found where pytest looks: nothing fetched


def test_no_origin_reachable_is_one_line_naming_the_failure_and_BENCHAUDIT_DATA(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "datasets"
    url = _closed_port_url()
    assert ensure_demo_data(str(data), origin=url, suites_dir=SUITES) == 2
    line = _one_line_failure(capsys.readouterr().err, data)
    assert DEMO_FILE in line and "ConnectError" in line and url in line
    assert not (data / DEMO_BENCHMARK / DEMO_FILE).exists()
    assert not [p for p in data.rglob("*") if p.is_file()]  # no partial file


def test_an_origin_that_answers_404_or_wrong_bytes_fails_in_one_line_and_writes_nothing(
    tmp_path: Path, origin: Origin, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "datasets"
    assert ensure_demo_data(str(data), origin=origin.url, suites_dir=SUITES) == 2
    assert "HTTP 404" in _one_line_failure(capsys.readouterr().err, data)
    origin.routes[f"/base/{DEMO_FILE}"] = b'{"questions": []}'  # a proxy's page, a truncated mirror
    assert ensure_demo_data(str(data), origin=origin.url, suites_dir=SUITES) == 2
    assert "checksum mismatch" in _one_line_failure(capsys.readouterr().err, data)
    assert not [p for p in data.rglob("*") if p.is_file()]


def test_a_data_directory_that_cannot_be_written_is_one_line(
    tmp_path: Path, origin: Origin, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "datasets"
    blocker.write_text("a file where the data directory should be")
    assert ensure_demo_data(str(blocker), origin=origin.url, suites_dir=SUITES) == 2
    _one_line_failure(capsys.readouterr().err, blocker)


def test_the_module_runs_as_make_demo_runs_it(tmp_path: Path) -> None:
    # `python -m pytest_benchaudit.report.demo_data` from the checkout (the Makefile's command): exit 2, one line.
    env = {**os.environ, "BENCHAUDIT_DATA": str(tmp_path / "datasets")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest_benchaudit.report.demo_data", "--origin", _closed_port_url()],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    _one_line_failure(done.stderr, tmp_path / "datasets")
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    demo = makefile.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    # the data step comes before the run that reads the data
    assert demo.index(f"-m {demo_data.__name__}") < demo.index("$(DEMO_PYTEST)")


def test_a_demo_run_that_scored_nothing_is_explained_not_a_stopiteration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What a fresh clone's demo met before the data step: every item skipped, then the explanation
    # ended in 'demo: cannot read the runs (StopIteration: )'.  A real run with an empty data directory.
    from pytest_benchaudit.report.demo import main as explain_main

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(SUITES / DEMO_BENCHMARK),
            "-k",
            "cm80",
            "--limit",
            "2",
            "--data-dir",
            str(tmp_path / "empty"),
            "--model",
            "m@http://127.0.0.1:9/v1",
            "--report-dir",
            str(tmp_path / "out"),
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-q",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "skipped" in done.stdout, done.stdout[-2000:]
    (run,) = (tmp_path / "out").iterdir()
    assert explain_main([str(run)]) == 1
    err = capsys.readouterr().err
    assert "StopIteration" not in err and len(err.strip().splitlines()) == 1
    assert "scored no question" in err and "BENCHAUDIT_DATA" in err
