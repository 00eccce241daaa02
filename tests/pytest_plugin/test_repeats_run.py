"""``--repeats K`` (``inference.repeats``): real pytest runs against the scripted server on 127.0.0.1.

The server answers each question correctly with a known probability, drawn from a seeded random
stream of its own per question, and numbers every answer it gives: a record then says exactly which
reply it holds, so the cache, ``--resume``, xdist and replay can be checked per repeat.
"""

from __future__ import annotations

import collections
import json
import random
import re
import shlex
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_benchaudit.testing.runs import only_run_dir
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.toy import write_mcq_suite

OPTIONS = ["first option", "second option", "third option", "fourth option"]
# Question id -> the probability the server answers it correctly.
PROBABILITIES = {"r01": 1.0, "r02": 0.0, "r03": 0.5, "r04": 0.8, "r05": 0.2, "r06": 0.5}
GOLD = "B"


class Dice:
    """A script: question ``rNN`` is answered with the gold letter with probability
    ``PROBABILITIES[rNN]``, from a random stream seeded per question; each reply is numbered."""

    def __init__(self, seed: int = 7) -> None:
        self.streams = {q: random.Random(f"{seed}:{q}") for q in PROBABILITIES}
        self.lock = threading.Lock()
        self.count = 0

    def __call__(self, call: Any) -> Reply:
        qid = re.search(r"question (r\d\d)", call.last_user_text).group(1)  # type: ignore[union-attr]
        with self.lock:
            self.count += 1
            right = self.streams[qid].random() < PROBABILITIES[qid]
            number = self.count
        return Reply(content=f"Answer: {GOLD if right else 'C'} (reply {number})")


def write_suite(root: Path) -> None:
    write_mcq_suite(
        root,
        "rep",
        [{"id": q, "question": f"Repeat question {q}?", "options": OPTIONS, "gold": GOLD} for q in PROBABILITIES],
    )


def run(pytester: pytest.Pytester, server: ScriptedServer, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(
        "suites/rep",
        "--data-dir",
        "data",
        "--model",
        f"m@{server.url}",
        "--report-dir",
        "out",
        "-p",
        "no:randomly",
        *extra,
    )


def records_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]


def question_of(call: Any) -> str:
    return re.search(r"question (r\d\d)", call.last_user_text).group(1)  # type: ignore[union-attr]


def completions(server: ScriptedServer) -> list[Any]:
    return [c for c in server.calls if c.path.endswith("/completions")]


def test_repeats_one_record_per_repeat_seed_base_plus_k(pytester: pytest.Pytester) -> None:
    """--repeats 5 with a seed: 5 records per question (repeat 0..4), 5 distinct requests sent per
    question with seeds 100..104, one pytest item per question whose verdict is the reducer's."""
    write_suite(pytester.path)
    with ScriptedServer(Dice()) as server:
        result = run(
            pytester, server, "--repeats", "5", "--set", "inference.decoding.seed=100", "--junitxml", "junit.xml"
        )
        calls = completions(server)
    records = records_of(only_run_dir(pytester.path / "out"))
    assert len(records) == 5 * len(PROBABILITIES)
    by_question = collections.defaultdict(list)
    for r in records:
        by_question[r["question_id"]].append(r)
        assert r["request"]["params"]["seed"] == 100 + r["repeat"]  # base + k, in the record as sent
        assert r["request"].get("repeat", 0) == r["repeat"]
    assert {q: sorted(r["repeat"] for r in rs) for q, rs in by_question.items()} == {
        q: [0, 1, 2, 3, 4] for q in PROBABILITIES
    }
    # What reached the server: five requests per question, one per seed, none de-duplicated.
    sent = collections.Counter((question_of(c), c.body["seed"]) for c in calls)
    assert sent == {(q, 100 + k): 1 for q in PROBABILITIES for k in range(5)}
    # Every record holds a reply of its own.
    assert len({r["raw_output"] for r in records}) == len(records)
    # One item per question; it passes when at least half its repeats are correct (reducer mean).
    right = {q: sum(r["correct"] for r in rs) for q, rs in by_question.items()}
    passed = [q for q, n in right.items() if 2 * n >= 5]
    result.assert_outcomes(passed=len(passed), failed=len(PROBABILITIES) - len(passed))
    assert right["r01"] == 5 and right["r02"] == 0
    # Each failed item's message names its K verdicts (JUnit keeps pytest's one-line message).
    failures = {
        case.get("name"): case.find("failure").get("message")
        for case in ET.parse(pytester.path / "junit.xml").iter("testcase")
        if case.find("failure") is not None
    }
    assert failures["q0002[m]"].startswith("rep.mcq r02 [m]: 0/5 correct (mean); repeat 0: wrong")
    assert set(failures) == {f"q{int(q[1:]):04d}[m]" for q in right if q not in passed}
    for name, message in failures.items():
        q = f"r{int(name[1:5]):02d}"
        assert f": {right[q]}/5 correct (mean)" in message
    run_json = json.loads((only_run_dir(pytester.path / "out") / "run.json").read_text())
    assert run_json["overrides"]["inference.repeats"] == 5  # --repeats is --set inference.repeats


def test_repeats_without_a_seed_send_none_and_are_not_folded_into_one(pytester: pytest.Pytester) -> None:
    """No seed in the pipeline: none is sent; the K identical requests are still K requests."""
    write_suite(pytester.path)
    with ScriptedServer(Dice()) as server:
        run(pytester, server, "--repeats", "3")
        calls = completions(server)
    records = records_of(only_run_dir(pytester.path / "out"))
    assert len(calls) == len(records) == 3 * len(PROBABILITIES)
    assert all("seed" not in c.body for c in calls) and all("seed" not in r["request"]["params"] for r in records)
    assert collections.Counter(question_of(c) for c in calls) == {q: 3 for q in PROBABILITIES}


def test_cache_never_answers_a_repeat_with_another_repeats_answer(pytester: pytest.Pytester) -> None:
    """A second run of the same --repeats 3 (no seed: the three requests differ only by their
    repeat) is answered from the cache, each repeat with its own stored reply; a run that asks
    once gets repeat 0's (repeat 0 is the plain request: caches made before repeats still serve)."""
    write_suite(pytester.path)
    with ScriptedServer(Dice()) as server:
        run(pytester, server, "--repeats", "3")
        first = {
            (r["question_id"], r["repeat"]): r["raw_output"] for r in records_of(only_run_dir(pytester.path / "out"))
        }
        (pytester.path / "out").rename(pytester.path / "first")
        run(pytester, server, "--repeats", "3")
        again = records_of(only_run_dir(pytester.path / "out"))
        (pytester.path / "out").rename(pytester.path / "second")
        run(pytester, server)
        once = records_of(only_run_dir(pytester.path / "out"))
        asked = len(completions(server))
    assert asked == len(first) == 3 * len(PROBABILITIES)  # the second and third runs asked nothing
    assert all(r["from_cache"] for r in again + once)
    assert {(r["question_id"], r["repeat"]): r["raw_output"] for r in again} == first
    assert {r["question_id"]: r["raw_output"] for r in once} == {q: first[(q, 0)] for q in PROBABILITIES}
    assert all(r["repeat"] == 0 for r in once)


def test_replay_serves_repeat_k_its_own_stored_generation(pytester: pytest.Pytester) -> None:
    write_suite(pytester.path)
    with ScriptedServer(Dice()) as server:
        run(pytester, server, "--repeats", "3", "--set", "inference.decoding.seed=5")
    stored_dir = pytester.path / "stored"
    only_run_dir(pytester.path / "out").rename(stored_dir)
    stored = {(r["question_id"], r["repeat"]): r["raw_output"] for r in records_of(stored_dir)}
    result = pytester.runpytest(
        "suites/rep",
        "--data-dir",
        "data",
        "--model",
        f"replay:{stored_dir}",
        "--report-dir",
        "out",
        "-p",
        "no:randomly",
        "--repeats",
        "3",
        "--set",
        "inference.decoding.seed=5",
        "--no-cache",
    )
    replayed = records_of(only_run_dir(pytester.path / "out"))
    assert {(r["question_id"], r["repeat"]): r["raw_output"] for r in replayed} == stored, result.stdout.str()


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_repeats_below_one_or_not_a_number_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    write_suite(pytester.path)
    with ScriptedServer(Dice()) as server:
        result = run(pytester, server, "--repeats", value)
        assert completions(server) == []
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--repeats" in result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_xdist_asks_each_question_and_repeat_once(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    write_suite(pytester.path)
    with ScriptedServer(Dice()) as server:
        run(pytester, server, "--repeats", "4", "--set", "inference.decoding.seed=0", "-n", "2")
        calls = completions(server)
    records = records_of(only_run_dir(pytester.path / "out"))
    assert collections.Counter((r["question_id"], r["repeat"]) for r in records) == {
        (q, k): 1 for q in PROBABILITIES for k in range(4)
    }
    assert collections.Counter((question_of(c), c.body["seed"]) for c in calls) == {
        (q, k): 1 for q in PROBABILITIES for k in range(4)
    }


def test_resume_asks_only_the_missing_repeats(pytester: pytest.Pytester) -> None:
    """A run whose records.jsonl lost some repeats (as a killed run does) is resumed: only the
    missing (question, repeat) pairs are asked, each ends up recorded once, and an item's verdict
    counts its recorded repeats too."""
    write_suite(pytester.path)
    with ScriptedServer(Dice()) as server:
        run(pytester, server, "--repeats", "3", "--set", "inference.decoding.seed=10", "--no-cache")
        run_dir = only_run_dir(pytester.path / "out")
        lines = (run_dir / "records.jsonl").read_text().splitlines()
        kept = [line for i, line in enumerate(lines) if i % 4]  # every 4th record gone
        missing = {
            (json.loads(line)["question_id"], json.loads(line)["repeat"]) for i, line in enumerate(lines) if not i % 4
        }
        (run_dir / "records.jsonl").write_text("".join(line + "\n" for line in kept))
        before = len(completions(server))
        result = run(
            pytester,
            server,
            "--repeats",
            "3",
            "--set",
            "inference.decoding.seed=10",
            "--no-cache",
            "--resume",
            str(run_dir),
            "--junitxml",
            "junit.xml",
        )
        asked = completions(server)[before:]
    assert {(question_of(c), c.body["seed"] - 10) for c in asked} == missing and len(asked) == len(missing)
    records = records_of(run_dir)
    assert collections.Counter((r["question_id"], r["repeat"]) for r in records) == {
        (q, k): 1 for q in PROBABILITIES for k in range(3)
    }
    # Items of questions with every repeat recorded are not run; the others' verdicts count all 3.
    questions = {q for q, _ in missing}
    failures = {
        case.get("name"): case.find("failure").get("message")
        for case in ET.parse(pytester.path / "junit.xml").iter("testcase")
        if case.find("failure") is not None
    }
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == len(questions)
    for q in questions:
        n = sum(r["correct"] for r in records if r["question_id"] == q)
        if 2 * n < 3:
            assert f"rep.mcq {q} [m]: {n}/3 correct (mean)" in failures[f"q{int(q[1:]):04d}[m]"]


def test_a_subset_under_repeats_counts_questions_not_records(pytester: pytest.Pytester) -> None:
    """--limit 2 --repeats 3 on a 6-question task: the subset line says 2 of 6 questions (6 records),
    and --limit 5 --repeats 3 (15 records, more than the task's 6 questions) is still a subset."""
    write_suite(pytester.path)
    with ScriptedServer(Dice()) as server:
        small = run(pytester, server, "--repeats", "3", "--limit", "2")
        large = run(pytester, server, "--repeats", "3", "--limit", "5", "--no-cache")
    small.stdout.fnmatch_lines(["subset: mcq m: 2 of 6 questions (-k, --lf or --limit)*"])
    large.stdout.fnmatch_lines(["subset: mcq m: 5 of 6 questions (-k, --lf or --limit)*"])


def test_the_answer_list_names_each_repeat(pytester: pytest.Pytester) -> None:
    """The summary's wrong answers of one question asked 3 times are three lines, each naming its repeat."""
    write_suite(pytester.path)
    with ScriptedServer(Dice()) as server:
        result = run(pytester, server, "--repeats", "3", "-k", "q0002", "--show-answers", "all")
    result.stdout.fnmatch_lines(["  r02  wrong: *", "  r02 #1  wrong: *", "  r02 #2  wrong: *"])


def test_rescore_and_sweep_keep_each_repeat(pytester: pytest.Pytester) -> None:
    """Offline re-scoring works per repeat: ``benchaudit rescore`` writes one record per (question,
    repeat) with its own output, and ``sweep`` reads the run without calling its repeats duplicates."""
    write_suite(pytester.path)
    with ScriptedServer(Dice()) as server:
        run(pytester, server, "--repeats", "3")
    stored_dir = only_run_dir(pytester.path / "out")
    stored = {(r["question_id"], r["repeat"]): (r["raw_output"], r["score"]) for r in records_of(stored_dir)}
    assert len(stored) == 3 * len(PROBABILITIES)
    cli = [sys.executable, "-m", "pytest_benchaudit.cli"]
    done = subprocess.run(
        [
            *cli,
            "rescore",
            str(stored_dir),
            "--set",
            "scoring.denominator=valid",
            "--report-dir",
            "rescored",
            "--suites-dir",
            "suites",
            "--data-dir",
            "data",
        ],
        capture_output=True,
        text=True,
        cwd=pytester.path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rescored = records_of(only_run_dir(pytester.path / "rescored"))
    assert {(r["question_id"], r["repeat"]): (r["raw_output"], r["score"]) for r in rescored} == stored
    summary = json.loads((only_run_dir(pytester.path / "rescored") / "summary.json").read_text())["results"]
    assert summary[0]["repeats"] == 3 and summary[0]["n_questions"] == len(PROBABILITIES)
    swept = subprocess.run(
        [
            *cli,
            "sweep",
            str(stored_dir),
            "--vary",
            "scoring.denominator=valid",
            "--json",
            "--suites-dir",
            "suites",
            "--data-dir",
            "data",
        ],
        capture_output=True,
        text=True,
        cwd=pytester.path,
        timeout=120,
    )
    assert swept.returncode == 0, swept.stderr
    assert "repeat an item already recorded" not in swept.stderr


@pytest.mark.parametrize("asked", [["--repeats", "4"], ["--set", "inference.repeats=4"]], ids=["--repeats", "--set"])
def test_pass_k_with_the_repeats_asked_for_runs_and_scores_pass_at_k(
    pytester: pytest.Pytester, asked: list[str]
) -> None:
    """``aggregation.pass_k = 2`` with K = 4 repeats asked on the command line (in either order, by
    either option): before, the option check refused pass_k against a blank pipeline's one repeat.
    Each question's score is the unbiased pass@2 of its 4 verdicts, 1 - C(4-c, 2)/C(4, 2)."""
    import math

    write_suite(pytester.path)
    with ScriptedServer(Dice()) as server:
        result = run(pytester, server, "--set", "aggregation.pass_k=2", "--set", "aggregation.reducer=any", *asked)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stderr.str()
    run_dir = only_run_dir(pytester.path / "out")
    records = records_of(run_dir)
    right = collections.Counter(r["question_id"] for r in records if r["correct"])
    assert collections.Counter(r["question_id"] for r in records) == {q: 4 for q in PROBABILITIES}
    expected = sum(1 - math.comb(4 - right[q], 2) / math.comb(4, 2) for q in PROBABILITIES) / len(PROBABILITIES)
    (res,) = json.loads((run_dir / "summary.json").read_text())["results"]
    assert res["score"] == pytest.approx(expected)


def test_pass_k_beyond_the_repeats_names_the_options_given(pytester: pytest.Pytester) -> None:
    """pass_k above K is one usage error before any question, naming --repeats as the user typed it
    (not a --set inference.repeats they never gave)."""
    write_suite(pytester.path)
    with ScriptedServer(Dice()) as server:
        result = run(pytester, server, "--repeats", "2", "--set", "aggregation.pass_k=3")
        assert completions(server) == []
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: rep.mcq: --repeats 2, --set aggregation.pass_k: invalid value: "
            "aggregation.pass_k = 3 needs at least 3 repeats, not inference.repeats = 2*"
        ]
    )
    assert "--set inference.repeats" not in result.stderr.str()


STREAM_PLUGIN = """
import json
import threading
import time

import pytest

SEEN = {"held": 0, "records_before_call_report": None, "records": 0}
STOP = threading.Event()


def _sample(config):
    # How many requests the engine holds (queued, in flight, answered and unread), every few ms.
    runner = config.pluginmanager.get_plugin("benchaudit-runner")
    while not STOP.is_set():
        engine = runner.engine
        if engine is not None:
            SEEN["held"] = max(SEEN["held"], engine.held())
        time.sleep(0.002)


@pytest.hookimpl
def pytest_sessionstart(session):
    threading.Thread(target=_sample, args=(session.config,), daemon=True).start()


@pytest.hookimpl
def pytest_benchaudit_record(record, config):
    SEEN["records"] += 1


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    if report.when == "call" and SEEN["records_before_call_report"] is None:
        SEEN["records_before_call_report"] = SEEN["records"]


@pytest.hookimpl
def pytest_unconfigure(config):
    STOP.set()
    with open("seen.json", "w") as fh:
        json.dump(SEEN, fh)
"""


def test_a_large_k_is_asked_as_a_stream_and_each_repeat_recorded_as_it_comes(pytester: pytest.Pytester) -> None:
    """--repeats 700 on one question: before, all 700 requests were rendered and queued before the first
    answer (a huge K exhausted memory with nothing sent) and the 700 records reached the controller
    only with the item's report.  Now at most the engine's window (256) of its requests exist at a
    time, and every record is written before the item's own report."""
    write_suite(pytester.path)
    pytester.makepyfile(streamplugin=STREAM_PLUGIN)
    pytester.syspathinsert()
    with ScriptedServer(Dice()) as server:
        result = run(pytester, server, "--repeats", "700", "-k", "q0001", "-p", "streamplugin", "--no-cache")
        calls = completions(server)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    seen = json.loads((pytester.path / "seen.json").read_text())
    assert seen["records"] == len(calls) == 700
    assert seen["records_before_call_report"] == 700  # each written as it came, before the item ended
    # held at once: the window (256) queued, and the one whose answer is being read; not K
    assert 0 < seen["held"] <= 256 + 1, seen["held"]
    records = records_of(only_run_dir(pytester.path / "out"))
    assert sorted(r["repeat"] for r in records) == list(range(700))
    assert {r["question_id"] for r in records} == {"r01"}


def test_an_interrupted_large_k_keeps_its_answered_repeats_and_resume_asks_the_rest(pytester: pytest.Pytester) -> None:
    """Ctrl-C while one question's 300 repeats are being asked: before, the item had not finished, so
    no record was kept.  Now every answered repeat is in records.jsonl, and the printed resume command
    asks exactly the others."""
    import signal
    import time

    from helpers.processes import Paced, finish_process, pytest_process

    write_suite(pytester.path)
    paced = Paced(0.0, hold_after=60)
    with ScriptedServer(paced) as server:
        args = [
            "suites/rep",
            "--data-dir",
            "data",
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
            "-p",
            "no:randomly",
            "--no-cache",
            "--repeats",
            "300",
            "-k",
            "q0001",
            "--concurrency",
            "4",
        ]
        proc = pytest_process(pytester, args, interruptible=True)
        deadline = time.monotonic() + 300  # a bound against a hang only: the 61st request is held
        while paced.asked <= 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        # the answered ones reach the controller and its records.jsonl (flushed within 0.2 s): wait for the
        # file, not for a time
        while time.monotonic() < deadline:
            written = list((pytester.path / "out").glob("*/records.jsonl"))
            if written and written[0].read_text().count("\n") >= 40:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        code, out = finish_process(proc)
        paced.released.set()
        assert code == pytest.ExitCode.INTERRUPTED, out[-3000:]
        run_dir = only_run_dir(pytester.path / "out")
        kept = records_of(run_dir)
        assert 40 <= len(kept) <= 60 and len({r["repeat"] for r in kept}) == len(kept), len(kept)
        before = len(completions(server))
        (command,) = [
            line.strip() for line in out.splitlines() if line.strip().startswith("pytest ") and "--resume" in line
        ]
        code, out = finish_process(pytest_process(pytester, shlex.split(command)[1:]))
        asked = completions(server)[before:]
    assert code == pytest.ExitCode.TESTS_FAILED, out[-3000:]  # (the server answers A; the gold is B)
    records = records_of(run_dir)
    assert sorted(r["repeat"] for r in records) == list(range(300))
    assert len(asked) == 300 - len(kept)


def test_resume_with_other_repeats_names_the_repeats_option(pytester: pytest.Pytester) -> None:
    """Before: "the run used --set {'inference.repeats': 2}, this invocation {...}; resume it with the
    same --set options", to a user who typed --repeats and no --set."""
    write_suite(pytester.path)
    with ScriptedServer(Dice()) as server:
        run(pytester, server, "--repeats", "2", "-k", "q0001 or q0002")
        run_dir = only_run_dir(pytester.path / "out")
        (run_dir / "records.jsonl").write_text((run_dir / "records.jsonl").read_text().splitlines(keepends=True)[0])
        before = len(completions(server))
        result = run(pytester, server, "--repeats", "3", "--resume", str(run_dir))
        assert len(completions(server)) == before
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: --resume {run_dir}: the run set inference.repeats to 2, this invocation "
            "to 3 (--repeats 3); resume it with the same options"
        ]
    )
    assert "--set" not in result.stderr.str()
