"""An LLM judge's tokens: in the usage table (rows of their own, priced) and under --max-cost."""

from __future__ import annotations

import pytest

from pytest_benchaudit.inference.usage import check_prices, usage_rows
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

PRICES = check_prices({"date": "2026-11-20", "m": {"input": 2.0, "output": 8.0}, "j": {"input": 1.0, "output": 4.0}})
USAGE = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}


def _rec(i: int, judged: bool) -> dict:
    rec = {"model": "m", "benchmark": "b", "task": "t", "usage": {"prompt_tokens": 10 + i, "completion_tokens": 2}}
    if judged:
        rec["judge"] = {
            "model": "judge:j",
            "purpose": "grading",
            "usage": {"prompt_tokens": 100, "completion_tokens": i},
        }
    return rec


def test_judge_calls_are_rows_of_their_own_priced_as_the_judge() -> None:
    records = [_rec(i, judged=i % 2 == 0) for i in range(6)]
    rows = {r["model"]: r for r in usage_rows(records, PRICES)}
    judge_prompt = sum(r["judge"]["usage"]["prompt_tokens"] for r in records if "judge" in r)
    judge_completion = sum(r["judge"]["usage"]["completion_tokens"] for r in records if "judge" in r)
    assert rows["judge:j"]["items"] == 3
    assert (rows["judge:j"]["prompt_tokens"], rows["judge:j"]["completion_tokens"]) == (judge_prompt, judge_completion)
    assert rows["judge:j"]["cost_usd"] == pytest.approx((judge_prompt * 1.0 + judge_completion * 4.0) / 1e6)
    # the model's own row is what it was without the judge (metamorphic: the judge adds a row, moves none)
    without = {
        r["model"]: r for r in usage_rows([{k: v for k, v in r.items() if k != "judge"} for r in records], PRICES)
    }
    assert rows["m"] == without["m"] and set(without) == {"m"}


PYPROJECT = """
[tool.benchaudit.prices]
date = "2026-11-20"
"m" = { input = 1000.0, output = 1000.0 }
"j" = { input = 1000.0, output = 1000.0 }
"""


def _run(pytester: pytest.Pytester, model: ScriptedServer, judge: ScriptedServer, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"m@{model.url}",
        "--judge",
        f"j@{judge.url}",
        "--set",
        "extraction.rule=judge",
        "--report-dir",
        "out",
        "-k",
        "mcq",
        "--limit",
        "4",
        "--no-cache",
        "-p",
        "no:randomly",
        *extra,
    )


def test_judge_tokens_are_in_the_usage_table_and_summary(pytester: pytest.Pytester, toy) -> None:
    pytester.makepyprojecttoml(PYPROJECT)
    with (
        ScriptedServer(lambda call: Reply(content="Answer: A", usage=USAGE)) as model,
        ScriptedServer(lambda call: Reply(content='{"answer": "A"}', usage=USAGE)) as judge,
    ):
        result = _run(pytester, model, judge)
        judge_calls = len([c for c in judge.calls if c.path.endswith("/completions")])
    out = read_run(only_run_dir(pytester.path / "out"))
    hand = sum(r["judge"]["usage"]["prompt_tokens"] + r["judge"]["usage"]["completion_tokens"] for r in out["records"])
    rows = {r["model"]: r for r in out["summary"]["usage"]["rows"]}
    assert judge_calls == rows["judge:j"]["items"] == 4
    assert rows["judge:j"]["prompt_tokens"] + rows["judge:j"]["completion_tokens"] == hand == 4 * 1100
    assert rows["judge:j"]["cost_usd"] == pytest.approx(4 * 1.1)
    result.stdout.fnmatch_lines(["usage (prices of 2026-11-20, USD)", "*judge:j*toy.mcq*4*"])


def test_max_cost_needs_a_price_for_the_judge(pytester: pytest.Pytester, toy) -> None:
    pytester.makepyprojecttoml(PYPROJECT.replace('"j" = { input = 1000.0, output = 1000.0 }\n', ""))
    with ScriptedServer() as model, ScriptedServer() as judge:
        result = _run(pytester, model, judge, "--max-cost", "5")
        asked = len(model.calls) + len(judge.calls)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and asked == 0
    result.stderr.fnmatch_lines(["ERROR: --max-cost: no price for --judge j in ?tool.benchaudit.prices?*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_max_cost_spends_the_judge_from_the_same_budget(pytester: pytest.Pytester, toy) -> None:
    """Each call costs 1.1 USD; with the judge's calls charged, 3.3 USD buys fewer items than the
    model's calls alone would (3), and no item is recorded with a judge it could not pay for."""
    pytester.makepyprojecttoml(PYPROJECT)
    with (
        ScriptedServer(lambda call: Reply(content="Answer: A", usage=USAGE)) as model,
        ScriptedServer(lambda call: Reply(content='{"answer": "A"}', usage=USAGE)) as judge,
    ):
        _run(pytester, model, judge, "--max-cost", "3.3", "--concurrency", "1")
    out = read_run(only_run_dir(pytester.path / "out"))
    assert len(out["records"]) < 3
    assert all(r["judge"]["error"] is None and r["invalid_reason"] != "judge_error" for r in out["records"])
    spent = sum(r["cost_usd"] for r in out["summary"]["usage"]["rows"])
    assert spent == pytest.approx(2.2 * len(out["records"]))
