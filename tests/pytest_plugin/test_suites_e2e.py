"""One end-to-end run per benchmark of the foundation suites against the scripted loopback server.

(CTI-Bench, AthenaBench, SecBench, SECURE and RedSage have theirs next to their task tests.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import SUITES
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

# Answers every request: chat text with a final letter, and first-token log-probabilities for
# completion requests that ask for them (MMLU's released pipeline).
REPLY = Reply(content="Reasoning...\nAnswer: B\nANSWER: B", top_logprobs={" B": -0.1, " A": -2.3, " C": -3.0})


@pytest.mark.parametrize(
    ("bench", "tasks"), [("mmlu_cs", {"mcq"}), ("cybermetric", {"cm80", "cm500", "cm2000"}), ("seceval", {"mcq"})]
)
@pytest.mark.parametrize("layer", ["standardized", "released"])
def test_benchmark_end_to_end(
    pytester: pytest.Pytester, real_data: Path, bench: str, tasks: set[str], layer: str
) -> None:
    with ScriptedServer(lambda call: REPLY) as server:
        result = pytester.runpytest(
            str(SUITES / bench),
            "--data-dir",
            str(real_data),
            "--limit",
            "4",
            "--pipeline",
            layer,
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
        )
        # GET /v1/models is asked once per model (the generation cache keys on the served ids)
        paths = {c.path for c in server.calls} - {"/v1/models"}
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    out = read_run(only_run_dir(pytester.path / "out"))
    results = {r["task"]: r for r in out["summary"]["results"]}
    assert set(results) == tasks
    for res in results.values():
        assert res["n"] == 4 and res["pipeline"] == layer and res["lower_is_better"] is False
        assert res["n_valid"] == 4  # every reply above is readable under every layer's rule
    if bench == "mmlu_cs" and layer == "released":
        assert paths == {"/v1/completions"}  # next-token log-probabilities, not chat
        assert all(r["prediction"] == "B" for r in out["records"])
    else:
        assert paths == {"/v1/chat/completions"}
