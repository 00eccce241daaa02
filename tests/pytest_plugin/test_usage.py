"""Usage and cost: per model and task in summary.json and the terminal; a dated price table;
--max-cost stops asking, the rest is not asked (no record), --resume continues."""

from __future__ import annotations

import datetime

import pytest

from pytest_benchaudit.common.errors import ConfigError
from pytest_benchaudit.inference.usage import PriceTable, check_prices, cost_of, usage_rows
from pytest_benchaudit.testing.provider_fakes import ProviderFake
from pytest_benchaudit.testing.runs import only_run_dir, read_run

PRICES = check_prices({"date": "2026-11-20", "gpt-4o": {"input": 2.5, "output": 10.0}})


def test_price_table_is_dated_and_checked() -> None:
    assert check_prices({"date": datetime.date(2026, 11, 20), "m": {"input": 1, "output": 2}}) == PriceTable(
        date="2026-11-20", models={"m": {"input": 1.0, "output": 2.0}}
    )
    assert check_prices(None) == PriceTable() and PriceTable().date is None  # no table: no date, no price
    with pytest.raises(ConfigError, match="needs date"):
        check_prices({"m": {"input": 1, "output": 2}})
    with pytest.raises(ConfigError, match=r"'m': expected \{ input = USD_PER_1M"):
        check_prices({"date": "2026-11-20", "m": {"input": 1}})


def test_usage_rows_per_model_and_task() -> None:
    records = [
        {"model": "gpt-4o", "benchmark": "b", "task": "t", "usage": {"prompt_tokens": 1000, "completion_tokens": 10}},
        {"model": "gpt-4o", "benchmark": "b", "task": "t", "usage": {"input_tokens": 500, "output_tokens": 5}},
        {"model": "local", "benchmark": "b", "task": "t", "usage": {}},
    ]
    rows = usage_rows(records, PRICES)
    assert rows[0] == {
        "model": "gpt-4o",
        "benchmark": "b",
        "task": "t",
        "items": 2,
        "prompt_tokens": 1500,
        "completion_tokens": 15,
        "cost_usd": round(1500 * 2.5e-6 + 15 * 10e-6, 6),
        "prices_date": "2026-11-20",
    }
    assert rows[1]["cost_usd"] is None and rows[1]["prices_date"] is None
    assert cost_of({"prompt_tokens": 10**6}, {"input": 3.0, "output": 0.0}) == 3.0


PYPROJECT = """
[tool.benchaudit.prices]
date = "2026-11-20"
"openai/gpt-4o" = { input = 10000.0, output = 10000.0 }
"""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    with ProviderFake("openai", key="sk-usage") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.root + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-usage")
        yield server


def test_usage_and_cost_in_summary_and_terminal(pytester, toy, fake) -> None:
    pytester.makepyprojecttoml(PYPROJECT)
    result = pytester.runpytest(
        "suites/toy", "--data-dir", "data", "--model", "gpt-4o", "--report-dir", "out", "-k", "mcq", "--limit", "4"
    )
    result.stdout.fnmatch_lines(["usage (prices of 2026-11-20, USD)", "*gpt-4o*toy.mcq*4*"])
    usage = read_run(only_run_dir(pytester.path / "out"))["summary"]["usage"]
    (row,) = usage["rows"]
    assert usage["prices_date"] == "2026-11-20" and row["items"] == 4 and row["completion_tokens"] == 8
    assert row["cost_usd"] == pytest.approx((row["prompt_tokens"] + 8) * 0.01)


def test_max_cost_stops_asking_and_resume_continues(pytester, toy, fake) -> None:
    pytester.makepyprojecttoml(PYPROJECT)
    args = [
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        "gpt-4o",
        "--report-dir",
        "out",
        "-k",
        "mcq",
        "--concurrency",
        "1",
    ]
    first = pytester.runpytest(*args, "--max-cost", "0.3")  # each request costs ~0.16 USD here
    first.stdout.fnmatch_lines(["*--max-cost 0.3 USD reached: 10 items not asked; --resume * continues"])
    run_dir = only_run_dir(pytester.path / "out")
    out = read_run(run_dir)
    assert len(out["records"]) == len(fake.calls) == 2
    assert out["summary"]["usage"]["not_asked"] == 10 and out["run"]["max_cost"] == {"usd": 0.3, "not_asked": 10}
    skipped = first.parseoutcomes()["skipped"]
    assert skipped == 10
    second = pytester.runpytest(*args, "--resume", str(run_dir))
    assert len(read_run(run_dir)["records"]) == 12 and len(fake.calls) == 12  # nothing asked twice
    second.stdout.fnmatch_lines(["resumed: 2 items already recorded were not asked again"])


def test_max_cost_needs_a_price(pytester, toy, fake) -> None:
    result = pytester.runpytest("suites/toy", "--data-dir", "data", "--model", "gpt-4o", "--max-cost", "1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --max-cost: no price for --model gpt-4o in ?tool.benchaudit.prices?*"])
