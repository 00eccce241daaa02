"""Fault injection: real pytest runs (pytester) against a ScriptedServer that misbehaves.

For every run: each question ends recorded exactly once (valid, or invalid with the error
stored), and the run completes -- no crash, no hang, no lost or duplicated record.
"""

from __future__ import annotations

import collections
import email.utils
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.processes import PID_PLUGIN, Paced, finish_process, pytest_process
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer
from pytest_benchaudit.testing.toy import write_mcq_suite

OK = Reply(content="Answer: A")
HUGE_CHARS = 10 * 1024 * 1024
HTML_PAGE = (
    b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>Bad Gateway</h1><p>The upstream server is unavailable.</p></body></html>"
)


def write_suite(root: Path, markers: list[str]) -> list[str]:
    """The ``faulty`` suite with one question per marker (gold A); returns the question ids."""
    ids = [f"f{n:02d}_{marker}" for n, marker in enumerate(markers, 1)]
    write_mcq_suite(
        root,
        "faulty",
        [
            {
                "id": qid,
                "question": f"Fault question [{marker}]?",
                "options": ["alpha", "beta", "gamma", "delta"],
                "gold": "A",
            }
            for qid, marker in zip(ids, markers)
        ],
        title="Fault-injection benchmark",
    )
    return ids


def marker_of(call: Call) -> str:
    text = call.last_user_text
    return text[text.index("[") + 1 : text.index("]")] if "[" in text else ""


class Faults:
    """Script: the reply for each marker, by attempt; remembers when each attempt arrived."""

    def __init__(self, table: dict[str, Callable[[int], Reply]]) -> None:
        self.table = table
        self.seen: dict[str, list[float]] = collections.defaultdict(list)
        self.lock = threading.Lock()

    def __call__(self, call: Call) -> Reply:
        marker = marker_of(call)
        with self.lock:
            self.seen[marker].append(time.monotonic())
        return self.table.get(marker, lambda attempt: OK)(call.attempt)


def then_ok(fault: Reply, times: int = 1) -> Callable[[int], Reply]:
    return lambda attempt: fault if attempt <= times else OK


def always(fault: Reply) -> Callable[[int], Reply]:
    return lambda attempt: fault


def http_date(seconds_ahead: float) -> str:
    return email.utils.formatdate(time.time() + seconds_ahead, usegmt=True)


FAULTS: dict[str, Callable[[int], Reply]] = {
    "OK": always(OK),
    "R429_SECONDS": then_ok(Reply(status=429, headers={"Retry-After": "1"}, error_message="slow down")),
    "R429_DATE": lambda attempt: Reply(status=429, headers={"Retry-After": http_date(2)}) if attempt == 1 else OK,
    "R429_BARE": then_ok(Reply(status=429, error_message="rate limited, no hint")),
    "R429_FOREVER": always(Reply(status=429, error_message="quota exhausted")),
    "T500": then_ok(Reply(status=500, error_message="transient 500")),
    "T502": then_ok(Reply(status=502, error_message="transient 502")),
    "T503": then_ok(Reply(status=503, error_message="transient 503"), times=2),
    "P500": always(Reply(status=500, error_message="permanent 500")),
    "P502": always(Reply(status=502, error_message="permanent 502")),
    "P503": always(Reply(status=503, error_message="permanent 503")),
    "RESET_ONCE": then_ok(Reply(drop_connection=True)),
    "RESET_ALWAYS": always(Reply(drop_connection=True)),
    # held until the server stops: never answered within the request timeout, however slow the machine
    "TIMEOUT_ONCE": then_ok(Reply(delay=600.0)),
    "TIMEOUT_ALWAYS": always(Reply(delay=600.0)),
    "MALFORMED": always(Reply(raw_body=b'{"choices": [{"message": {"content": "Answer: A"')),
    "MALFORMED_ONCE": then_ok(Reply(raw_body=b"\x00\xff not json at all")),
    "HTML_200": always(Reply(raw_body=HTML_PAGE, content_type="text/html")),
    "HTML_502": always(Reply(status=502, raw_body=HTML_PAGE, content_type="text/html; charset=utf-8")),
    "NOT_COMPLETION": always(Reply(raw_body=b'{"object": "list", "data": [{"id": "x"}]}')),
    "CONTENT_NOT_TEXT": always(Reply(raw_body=b'{"choices": [{"message": {"content": 42}, "finish_reason": "stop"}]}')),
    "BAD_GZIP": always(Reply(raw_body=b"certainly not gzip", headers={"Content-Encoding": "gzip"})),
    "HUGE": always(Reply(content="x" * HUGE_CHARS + "\nAnswer: A")),
}

# (valid, correct, attempts, text every error must contain)
EXPECTED: dict[str, tuple[bool, bool, int | None, str | None]] = {
    "OK": (True, True, 1, None),
    "R429_SECONDS": (True, True, 2, None),
    "R429_DATE": (True, True, 2, None),
    "R429_BARE": (True, True, 2, None),
    "R429_FOREVER": (False, False, 3, "HTTP 429: quota exhausted (gave up after 3 attempts)"),
    "T500": (True, True, 2, None),
    "T502": (True, True, 2, None),
    "T503": (True, True, 3, None),
    "P500": (False, False, 3, "HTTP 500: permanent 500"),
    "P502": (False, False, 3, "HTTP 502: permanent 502"),
    "P503": (False, False, 3, "HTTP 503: permanent 503"),
    "RESET_ONCE": (True, True, 2, None),
    "RESET_ALWAYS": (False, False, 3, "connection error"),
    "TIMEOUT_ONCE": (True, True, 2, None),
    "TIMEOUT_ALWAYS": (False, False, 3, "timeout: no answer within 5s"),
    "MALFORMED": (False, False, 3, "malformed response"),
    "MALFORMED_ONCE": (True, True, 2, None),
    "HTML_200": (False, False, 3, "malformed response (JSONDecodeError"),
    "HTML_502": (False, False, 3, "HTTP 502: <!DOCTYPE html>"),
    "NOT_COMPLETION": (False, False, 3, "no 'choices' in the response"),
    "CONTENT_NOT_TEXT": (False, False, 3, "answer content is not a string"),
    "BAD_GZIP": (False, False, 3, "malformed response (DecodingError"),
    "HUGE": (True, True, 1, None),
}

COMMON = [
    "--data-dir",
    "data",
    "--report-dir",
    "out",
    "--max-retries",
    "2",
    "--request-timeout",
    "5",  # every answer that is not held has seconds to come on a loaded machine (1 s did not always)
    "-p",
    "no:randomly",
    "-p",
    "timeout",
    "--timeout",
    "60",
    "--no-cache",
]


def run(pytester: pytest.Pytester, server: ScriptedServer, *extra: str, subprocess: bool = False) -> pytest.RunResult:
    args = ["suites/faulty", "--model", f"m@{server.url}", *COMMON, *extra]
    return pytester.runpytest_subprocess(*args, timeout=180) if subprocess else pytester.runpytest(*args)


def check_once(pytester: pytest.Pytester, result: pytest.RunResult, ids: list[str]) -> dict[str, dict[str, Any]]:
    """The run completed and every question is recorded exactly once; records by question id."""
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "+ Timeout +" not in out, out[-3000:]
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) == 0 and outcomes.get("error", 0) == 0, out[-3000:]
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == len(ids), outcomes
    run_dir = only_run_dir(pytester.path / "out")
    data = read_run(run_dir)
    counts = collections.Counter(r["question_id"] for r in data["records"])
    assert counts == collections.Counter(ids), counts  # every question, exactly once
    recs = {r["question_id"]: r for r in data["records"]}
    for rec in recs.values():
        if rec["valid"]:
            assert rec["error"] is None
        elif rec["invalid_reason"] == "inference_error":
            assert rec["error"] and rec["raw_output"] == ""
    (res,) = data["summary"]["results"]
    assert res["n"] == len(ids)
    assert data["run"]["ended"] and data["run"]["n_records"] == len(ids)
    return recs


def check_expected(recs: dict[str, dict[str, Any]], ids: list[str]) -> None:
    for qid in ids:
        marker = qid.split("_", 1)[1]
        valid, correct, attempts, error = EXPECTED[marker]
        rec = recs[qid]
        assert (rec["valid"], rec["correct"]) == (valid, correct), (qid, rec["error"], rec["invalid_reason"])
        if attempts is not None:
            assert rec["attempts"] == attempts, (qid, rec["attempts"], rec["error"])
        if error is None:
            assert rec["error"] is None
        else:
            assert rec["invalid_reason"] == "inference_error" and error in rec["error"], (qid, rec["error"])


def test_every_fault_recorded_once(pytester: pytest.Pytester) -> None:
    markers = list(FAULTS)
    ids = write_suite(pytester.path, markers)
    faults = Faults(FAULTS)
    started = time.monotonic()
    with ScriptedServer(faults) as server:
        result = run(pytester, server)
    assert time.monotonic() - started < 300  # bounded retries and timeouts: no hang (a bound, not a timing)
    recs = check_once(pytester, result, ids)
    check_expected(recs, ids)
    assert not server.script_errors
    # Retry-After is honoured: seconds and an HTTP date both hold the retry back (the jittered
    # backoff of a first retry would be at most 0.5 s here).
    for marker in ("R429_SECONDS", "R429_DATE"):
        first, second = faults.seen[marker][:2]
        assert second - first >= 0.9, (marker, second - first)
    # 10 MB answer: stored in full (the raw output is stored as it came back), scored, and the
    # terminal shows only the short failure messages, never the answer.
    huge = recs[ids[markers.index("HUGE")]]
    assert len(huge["raw_output"]) == HUGE_CHARS + len("\nAnswer: A") and huge["prediction"] == "A"
    assert len(result.stdout.str()) < 200_000
    # wrong content type / not a completion: the start of what came back is kept in the error
    assert "Bad Gateway" in recs[ids[markers.index("HTML_200")]]["error"]
    # failure messages say why, and pytest reported each invalid item as failed, not errored
    result.stdout.fnmatch_lines(["*INVALID (inference_error): HTTP 500: permanent 500*"])


def test_server_dies_mid_run(pytester: pytest.Pytester) -> None:
    """The server stops after N answers: the rest end invalid with a connection error, none
    lost, none duplicated."""
    n_answered = 5
    ids = write_suite(pytester.path, [f"Q{i}" for i in range(16)])
    answered: list[str] = []
    lock = threading.Lock()
    holder: dict[str, ScriptedServer] = {}

    def script(call: Call) -> Reply:
        with lock:
            if len(answered) < n_answered and marker_of(call) not in answered:
                answered.append(marker_of(call))
                return OK
            if not holder.get("stopping"):
                holder["stopping"] = True  # type: ignore[assignment]
                # stop from another thread (a handler cannot wait for its own server to stop), at
                # once: this request and any in flight are held until the stop drops them
                threading.Thread(target=holder["server"].stop, daemon=True).start()
        return Reply(delay=30)

    server = ScriptedServer(script)
    holder["server"] = server
    with server:
        result = run(pytester, server, "--concurrency", "3")
    recs = check_once(pytester, result, ids)
    valid = sorted(marker_of_id(q) for q, r in recs.items() if r["valid"])
    assert valid == sorted(answered) and len(valid) == n_answered
    for rec in recs.values():
        if not rec["valid"]:
            assert rec["invalid_reason"] == "inference_error"
            assert rec["error"].startswith("connection error"), rec["error"]
            assert "gave up after 3 attempts" in rec["error"]


def marker_of_id(qid: str) -> str:
    return qid.split("_", 1)[1]


def test_faults_under_xdist(pytester: pytest.Pytester) -> None:
    markers = [
        "OK",
        "R429_SECONDS",
        "R429_BARE",
        "T502",
        "P503",
        "RESET_ONCE",
        "RESET_ALWAYS",
        "TIMEOUT_ONCE",
        "MALFORMED",
        "HTML_200",
        "NOT_COMPLETION",
        "BAD_GZIP",
        "OK",
        "T500",
    ]
    ids = write_suite(pytester.path, markers)
    with ScriptedServer(Faults(FAULTS)) as server:
        result = run(pytester, server, "-n", "2", "--junitxml", "junit.xml", subprocess=True)
    recs = check_once(pytester, result, ids)
    check_expected(recs, ids)
    assert (pytester.path / "junit.xml").read_text().count("<testcase ") == len(ids)


# What a hostile or broken endpoint may send: a clear-screen, a window title, a colour, NUL, CR,
# backspace and a C1 CSI (U+009B) in the answer, and the same in an error body.
HOSTILE_ANSWER = "Answer: C \x1b[2J\x1b]0;pwned\x07\x1b[31m\x00\r\b\x9b1m"
HOSTILE_ERROR = "\x1b[2Jboom\x00\b\x9b"
CONTROLS = "\x1b\x00\x07\b\r\x9b"


def _controls_in(text: str) -> list[str]:
    return [hex(ord(c)) for c in CONTROLS if c in text]


def test_control_characters_from_the_endpoint_are_shown_escaped(pytester: pytest.Pytester) -> None:
    """An answer or error body with escape sequences, NUL, CR or C1 controls cannot clear, recolour or
    overwrite a CI log: the terminal and the JUnit XML show them escaped; the record keeps them raw."""
    import xml.etree.ElementTree as ET

    ids = write_suite(pytester.path, ["HOSTILE", "HOSTILE_500", "OK"])
    table = {
        "HOSTILE": always(Reply(content=HOSTILE_ANSWER)),
        "HOSTILE_500": always(Reply(status=500, error_message=HOSTILE_ERROR)),
    }
    with ScriptedServer(Faults(table)) as server:
        result = run(pytester, server, "--junitxml", "junit.xml", subprocess=True)
    recs = check_once(pytester, result, ids)
    assert recs[ids[0]]["raw_output"] == HOSTILE_ANSWER and recs[ids[0]]["prediction"] == "C"  # stored as sent
    out = result.stdout.str() + result.stderr.str()
    assert _controls_in(out) == []
    # the summary's answer list shows what was sent, escaped, one line each
    result.stdout.fnmatch_lines(
        [
            "  f01_HOSTILE  wrong: gold 'A', predicted 'C' (score 0); raw output: Answer: C \\x1b[[]2J*",
            "  f02_HOSTILE_500  INVALID (inference_error): HTTP 500: \\x1b[[]2Jboom\\x00\\x08"
            "\\x9b (gave up after 3 attempts)*",
        ]
    )
    xml = (pytester.path / "junit.xml").read_text(encoding="utf-8")
    assert _controls_in(xml) == []
    messages = {
        case.get("name"): case.find("failure").get("message")  # type: ignore[union-attr]
        for case in ET.fromstring(xml).iter("testcase")
        if case.find("failure") is not None
    }
    (wrong,) = [m for name, m in messages.items() if "q0001" in str(name)]
    # escaped by benchaudit, whole (not pytest's XML escape, which writes ESC as "#x1B" and lets CR and C1 through)
    assert wrong.endswith("raw output: Answer: C \\x1b[2J\\x1b]0;pwned\\x07\\x1b[31m\\x00 \\x08\\x9b1m"), wrong


def test_an_endpoint_down_reason_is_shown_escaped(pytester: pytest.Pytester) -> None:
    """A 401 stops the model at once (the breaker); its reason, the endpoint's error body, is printed
    at once and at the end: with its control characters escaped."""
    write_suite(pytester.path, ["A", "B", "C"])
    with ScriptedServer(lambda call: Reply(status=401, error_message=HOSTILE_ERROR)) as server:
        code, out = finish_process(
            pytest_process(pytester, ["suites/faulty", "--model", f"m@{server.url}", *COMMON, "--concurrency", "1"])
        )
    assert code == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert _controls_in(out) == []
    assert (
        "benchaudit: model m: endpoint down — the endpoint refused the credentials (HTTP 401: \\x1b[2Jboom\\x00"
        "\\x08\\x9b)" in out
    ), out[-3000:]
    (incomplete,) = [line for line in out.splitlines() if line.startswith("INCOMPLETE: model m: ")]
    assert "(HTTP 401: \\x1b[2Jboom\\x00\\x08\\x9b)" in incomplete


# -- abnormal ends: each names the run directory and the command that continues it, exit status 2 --


def _stopped_with_resume(out: str, run_dir: Path) -> list[str]:
    """The end of an abnormal run: the run directory and the resume command (returned as argv)."""
    import shlex

    lines = out.splitlines()
    assert f"run directory: out/{run_dir.name}" in lines, out[-3000:]
    (command,) = [
        line.strip()
        for line in lines
        if line.strip().startswith("pytest ") and line.strip().endswith(f"--resume out/{run_dir.name}")
    ]
    argv = shlex.split(command)
    assert "suites/faulty" in argv and argv.count("--resume") == 1
    return argv[1:]


def _resume_completes(pytester: pytest.Pytester, argv: list[str], ids: list[str]) -> dict[str, Any]:
    """Run the printed command: it asks what was not recorded, and every question ends recorded once."""
    code, out = finish_process(pytest_process(pytester, argv))
    assert code == 0, out[-3000:]
    data = read_run(only_run_dir(pytester.path / "out"))
    assert collections.Counter(r["question_id"] for r in data["records"]) == collections.Counter(ids)
    assert data["run"]["ended"] and data["summary"]["results"][0]["n"] == len(ids)
    return data


def test_sigint_names_the_run_and_the_resume_command(pytester: pytest.Pytester) -> None:
    """Ctrl-C mid-run: exit status 2 even though the gate holds on what was answered, the run
    directory and the command to continue are printed, and that command finishes the run."""
    import signal

    ids = write_suite(pytester.path, [f"Q{i}" for i in range(40)])
    paced = Paced(0.01, hold_after=8)
    with ScriptedServer(paced) as server:
        args = ["suites/faulty", "--model", f"m@{server.url}", *COMMON, "--concurrency", "1", "--gate", "faulty>=0.5"]
        proc = pytest_process(pytester, args, interruptible=True)
        deadline = time.monotonic() + 300  # a bound against a hang only: the 9th request is held
        while paced.asked <= 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        code, out = finish_process(proc)
        paced.released.set()  # the held request and the resumed run are answered at once
        assert code == pytest.ExitCode.INTERRUPTED, out[-3000:]
        run_dir = only_run_dir(pytester.path / "out")
        assert "STOPPED: interrupted (Ctrl-C or SIGINT)" in out
        recorded = read_run(run_dir)["records"]
        assert 0 < len(recorded) < len(ids)
        _resume_completes(pytester, _stopped_with_resume(out, run_dir), ids)


def test_a_killed_inference_process_names_the_run_and_the_resume_command(pytester: pytest.Pytester) -> None:
    ids = write_suite(pytester.path, [f"Q{i}" for i in range(12)])
    pytester.makepyfile(pidplugin=PID_PLUGIN)
    with ScriptedServer(Paced(0.05)) as server:
        args = ["suites/faulty", "--model", f"m@{server.url}", *COMMON, "--concurrency", "1", "-p", "pidplugin"]
        import os

        code, out = finish_process(pytest_process(pytester, args, env={**os.environ, "KILL_AT": "4"}))
        assert code == pytest.ExitCode.INTERRUPTED, out[-3000:]
        assert "STOPPED: the inference process exited with status -9" in out
        _resume_completes(pytester, _stopped_with_resume(out, only_run_dir(pytester.path / "out")), ids)


def test_a_tripped_breaker_prints_the_resume_command(pytester: pytest.Pytester) -> None:
    import socket

    write_suite(pytester.path, [f"Q{i}" for i in range(6)])
    with socket.socket() as sock:  # a port nothing listens on: every request is refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, out = finish_process(
        pytest_process(
            pytester,
            [
                "suites/faulty",
                "--model",
                f"m@http://127.0.0.1:{port}/v1",
                *COMMON,
                "--max-retries",
                "0",
                "--breaker",
                "2",
                "--concurrency",
                "1",
            ],
        )
    )
    assert code == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert "INCOMPLETE: model m:" in out
    argv = _stopped_with_resume(out, only_run_dir(pytester.path / "out"))
    assert argv[argv.index("--breaker") + 1] == "2"  # the run's own options, as given


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_the_first_failed_write_stops_the_run(pytester: pytest.Pytester, workers: list[str]) -> None:
    """A real failed write: the pytest process runs under RLIMIT_FSIZE (what `ulimit -f` sets), so
    records.jsonl cannot grow past 24 KiB and the kernel fails the write (EFBIG, "File too large"),
    as a full disk would (ENOSPC).  The run stops asking at once, keeps what reached the disk, says
    so in one line with the run directory and the resume command, and exits 2; the command finishes it."""
    import resource

    limit = 24 * 1024
    ids = write_suite(pytester.path, [f"Q{i}" for i in range(150)])
    paced = Paced(0.01)
    with ScriptedServer(paced) as server:
        args = ["suites/faulty", "--model", f"m@{server.url}", *COMMON, "--concurrency", "1", *workers]
        code, out = finish_process(
            pytest_process(pytester, args, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
        )
        assert code == pytest.ExitCode.INTERRUPTED, out[-3000:]
        run_dir = only_run_dir(pytester.path / "out")
        assert f"benchaudit: cannot write out/{run_dir.name}/records.jsonl: File too large" in out, out[-3000:]
        assert "STOPPED: a write to the run directory failed" in out
        on_disk = (run_dir / "records.jsonl").read_bytes()
        assert len(on_disk) <= limit
        complete = on_disk.count(b"\n")
        # stopped asking: the questions asked are those recorded, those whose write failed and the
        # few in flight (under xdist, also the items each worker had been handed), not the 150
        assert paced.asked < (complete + 40 if not workers else len(ids) - 20), (paced.asked, complete)
        assert not (run_dir / "summary.json").exists()  # no summary of part of a run
        _resume_completes(pytester, _stopped_with_resume(out, run_dir), ids)
