"""The inspect_evals layers send what inspect_evals 0.26.0 sends, question by question.

The fixtures (tests/fixtures/peers/inspect_evals-0.26.0/, see its README) are the bodies Inspect sent
to a logging endpoint on the same questions: per question every non-content field verbatim and each
message's role, sha256 and length.  Here real pytest runs (pytester) of the shipped suites send
their requests to the scripted OpenAI-compatible server on 127.0.0.1, and every body it received is
compared with the fixture field by field, for every question: CyberMetric-80 and MMLU computer
security 0- and 5-shot end to end, CyberMetric-500 and -2000 through the same renderer the items use.
The records tie each body to the question the project asked (its id), and the scores are hand counts.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from helpers import SUITES
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.dataset.readers import load_questions
from pytest_benchaudit.dataset.suites import load_suite
from pytest_benchaudit.prompt.templates import render_request
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "peers" / "inspect_evals-0.26.0"
REPLY = Reply(content="ANSWER: A")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def digest(body: dict[str, Any]) -> dict[str, Any]:
    """A body as the fixtures keep it: the non-content fields, and role + sha256 + length per message."""
    return {
        "fields": {k: v for k, v in body.items() if k != "messages"},
        "messages": [
            {"role": m["role"], "sha256": sha(m["content"]), "length": len(m["content"])} for m in body["messages"]
        ],
    }


def fixture(task: str) -> dict[str, dict[str, Any]]:
    """The captured digests of ``task`` by the project's question id."""
    rows = [json.loads(line) for line in (FIXTURES / f"{task}.jsonl").read_text(encoding="utf-8").splitlines()]
    return {r["id"]: {"fields": r["fields"], "messages": r["messages"]} for r in rows}


def run_suite(
    pytester: pytest.Pytester, real_data: Path, bench: str, task: str, layer: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with ScriptedServer(lambda call: REPLY) as server:
        result = pytester.runpytest(
            str(SUITES / bench),
            "-k",
            task,
            "--pipeline",
            layer,
            "--data-dir",
            str(real_data),
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
            "-p",
            "no:randomly",
        )
        bodies = [c.body for c in server.calls if c.path.endswith("/chat/completions")]
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()[-3000:]
    return bodies, read_run(only_run_dir(pytester.path / "out"))


def check_bodies(
    bodies: list[dict[str, Any]], records: list[dict[str, Any]], expected: dict[str, dict[str, Any]]
) -> None:
    # Every body the server received is one question's captured body, field by field; each question once.
    by_user = {e["messages"][-1]["sha256"]: qid for qid, e in expected.items()}
    assert len(by_user) == len(expected)  # the question's own message identifies it
    seen: Counter[str] = Counter()
    for body in bodies:
        got = digest(body)
        qid = by_user.get(got["messages"][-1]["sha256"])
        assert qid is not None, f"a body Inspect never sent: {got}"
        assert got["fields"] == expected[qid]["fields"], qid
        assert got["messages"] == expected[qid]["messages"], qid
        seen[qid] += 1
    assert seen == Counter({qid: 1 for qid in expected})
    # The record of question Q carries the request Inspect sent for Q (ids match, not only the set).
    for record in records:
        sent = record["request"]["messages"]
        assert [
            {"role": m["role"], "sha256": sha(m["content"]), "length": len(m["content"])} for m in sent
        ] == expected[record["question_id"]]["messages"], record["question_id"]


def gold_count(records: list[dict[str, Any]], letter: str) -> int:
    return sum(1 for r in records if r["gold"] == letter)


@pytest.mark.parametrize(
    ("bench", "task", "layer", "capture", "n", "gold_a"),
    [
        ("cybermetric", "cm80", "inspect_evals", "cm80", 80, 20),
        ("mmlu_cs", "mcq", "inspect_evals", "mmlu_0shot", 100, 28),
        ("mmlu_cs", "mcq", "inspect_evals_5shot", "mmlu_5shot", 100, 28),
    ],
    ids=["cybermetric-cm80", "mmlu_cs-0shot", "mmlu_cs-5shot"],
)
def test_every_question_is_sent_what_inspect_sends(
    pytester: pytest.Pytester, real_data: Path, bench: str, task: str, layer: str, capture: str, n: int, gold_a: int
) -> None:
    bodies, out = run_suite(pytester, real_data, bench, task, layer)
    expected = fixture(capture)
    assert len(expected) == n == len(out["records"]) == len(bodies)  # asked once: no re-ask, no retry
    check_bodies(bodies, out["records"], expected)
    # "ANSWER: A" reads A under inspect_choice for every question: the score is the share of gold A,
    # counted by hand (CyberMetric-80: 20 of each letter; MMLU computer security test: A 28 of 100).
    assert {r["prediction"] for r in out["records"]} == {"A"} and all(r["valid"] for r in out["records"])
    assert gold_count(out["records"], "A") == gold_a
    (result,) = out["summary"]["results"]
    assert result["pipeline"] == layer and result["n"] == n
    assert result["score"] == pytest.approx(gold_a / n)
    card = out["run"]["pipeline_cards"][f"{bench}.{task}"]
    assert card["fields"]["extraction.rule"] == "inspect_choice"


def test_a_reply_with_reasoning_is_read_as_inspect_reads_it(pytester: pytest.Pytester, real_data: Path) -> None:
    # Each question gets one of the reasoning probes whose reading inspect_ai's openai-api model and
    # parse_answers recorded (parse_answers_verdicts.json); the layer must read what Inspect read.
    verdicts = json.loads((FIXTURES / "parse_answers_verdicts.json").read_text(encoding="utf-8"))["verdicts"]
    probes = sorted(p for p in verdicts if "think>" in p.lower())
    assert len(probes) >= 10

    def script(call: Any) -> Reply:
        return Reply(content=probes[int(sha(call.last_user_text)[:8], 16) % len(probes)])

    with ScriptedServer(script) as server:
        result = pytester.runpytest(
            str(SUITES / "cybermetric"),
            "-k",
            "cm80",
            "--pipeline",
            "inspect_evals",
            "--data-dir",
            str(real_data),
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
            "-p",
            "no:randomly",
        )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()[-3000:]
    out = read_run(only_run_dir(pytester.path / "out"))
    assert out["run"]["pipeline_cards"]["cybermetric.cm80"]["fields"]["extraction.reasoning"] == "strip_first"
    seen = set()
    for record in out["records"]:
        inspect = verdicts[record["raw_output"]]["single"]
        assert record["prediction"] == (inspect[0] if inspect else None), record["raw_output"]
        seen.add(record["raw_output"])
    assert len(seen) >= 8  # most probes were asked


@pytest.mark.parametrize("task", ["cm500", "cm2000"])
def test_the_larger_cybermetric_files_render_what_inspect_sends(real_data: Path, task: str) -> None:
    # The renderer the items use (render_request), on every question of the file; the body adds the model.
    suite = load_suite(SUITES / "cybermetric" / "suite.toml")
    pipeline = suite.pipeline(task, "inspect_evals")
    template = suite.templates[pipeline.prompt.template]
    expected = fixture(task)
    questions, _ = load_questions(suite, task, real_data, "--data-dir")
    assert len(questions) == len(expected)
    for question in questions:
        request = render_request(pipeline, template, question)
        body = {
            "model": "m",
            **request.params,
            "messages": [m.model_dump(include={"role", "content"}) for m in request.messages],
        }
        assert digest(body) == expected[question.id], question.id


def test_the_fixtures_keep_no_benchmark_text() -> None:
    # Only hashes and lengths per question; the skeletons hold harness text around placeholders.
    for path in FIXTURES.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            assert set(row) == {"id", "inspect_id", "fields", "messages"}
            assert all(set(m) == {"role", "sha256", "length"} for m in row["messages"])
    skeleton = json.loads((FIXTURES / "cm80.skeleton.json").read_text(encoding="utf-8"))["body"]
    assert "{question}" in skeleton["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("bench", "layer"),
    [("cybermetric", "inspect_evals"), ("mmlu_cs", "inspect_evals"), ("mmlu_cs", "inspect_evals_5shot")],
)
def test_card_shows_the_layer_with_its_citations(capsys: pytest.CaptureFixture[str], bench: str, layer: str) -> None:
    assert main(["card", bench, "--pipeline", layer, "--suites-dir", str(SUITES)]) == 0
    cards = json.loads(capsys.readouterr().out)
    for card in cards.values():
        assert card["pipeline"] == layer and card["fields"]["extraction.rule"] == "inspect_choice"
        assert "inspect_ai 0.3.285" in card["why"]["extraction.rule"]
        # every field's reason cites the peer's version or the captured bodies
        uncited = {
            f: why
            for f, why in card["why"].items()
            if not any(s in why for s in ("inspect_evals 0.26.0", "inspect_ai 0.3.285", "captured"))
        }
        assert not uncited, uncited
        assert any("Quirk" in note for note in card["notes"])


def test_ledger_runs_with_the_peer_layers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", "--format", "json", "--suites-dir", str(SUITES)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data  # the peer layers are read with the suites without error
