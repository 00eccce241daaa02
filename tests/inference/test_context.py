"""Context warnings (pytest_benchaudit.inference.context): the served model, log-probabilities asked
and not returned, the released fallback, and a generation cache that cannot hit."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_benchaudit.inference.backend import ModelSpec
from pytest_benchaudit.inference.cache import GenerationCache
from pytest_benchaudit.inference.context import ContextWatch, cache_warnings, served_relation
from pytest_benchaudit.inference.engine import Engine
from pytest_benchaudit.inference.openai_compat import OpenAICompatBackend
from pytest_benchaudit.pipeline.types import Message, Request
from pytest_benchaudit.scoring.extract import MMLU_FALLBACK
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer


@pytest.mark.parametrize(
    ("asked", "served", "relation"),
    [
        ("gpt-4o", "gpt-4o", "same"),
        ("GPT-4o", "gpt-4o", "same"),
        ("llama3", "llama3:latest", "same"),  # Ollama's tag for the newest
        ("gpt-4o", "gpt-4o-2024-08-06", "snapshot"),
        ("gpt-4", "gpt-4-0613", "snapshot"),
        ("claude-3-5-sonnet-latest", "claude-3-5-sonnet-20241022", "snapshot"),
        ("gpt-4o", "gpt-4o-mini", "other"),  # another model of the family is not a snapshot
        ("gpt-4o", "gpt-4o-mini-2024-07-18", "other"),
        ("llama3", "gpt-4o-2024-08-06", "other"),
        ("llama3", "meta-llama/Meta-Llama-3-8B-Instruct", "other"),
    ],
)
def test_served_relation(asked: str, served: str, relation: str) -> None:
    assert served_relation(asked, served) == relation


def _record(
    i: int,
    *,
    model: str = "m",
    served: str | None = "m",
    top: int | None = None,
    logprobs: bool = True,
    detail: str = "",
    error: str | None = None,
) -> dict:
    params = {"max_tokens": 1, **({"top_logprobs": top} if top is not None else {})}
    return {
        "model": model,
        "benchmark": "mmlu_cs",
        "task": "mcq",
        "pipeline": "released",
        "variant": "",
        "question_id": f"q{i}",
        "request": {"params": params},
        "served_model": served,
        "error": error,
        "top_logprobs": [{" A": -1.0}] if logprobs else None,
        "extraction_detail": detail,
    }


def test_a_served_model_that_differs_is_one_warning_with_counts() -> None:
    watch = ContextWatch({"llama3": "llama3"})
    for i in range(7):
        watch.add(_record(i, model="llama3", served="gpt-4o-2024-08-06" if i < 5 else "llama3"))
    watch.add(_record(9, model="llama3", served=None, error="HTTP 500: boom"))  # no answer: not counted
    watch.note_listed("llama3", ["gpt-4o"])
    (w,) = watch.warnings()
    assert w["kind"] == "served_model_mismatch"
    assert "'gpt-4o-2024-08-06' (5 of 7 answers)" in w["message"] and "GET /models lists 'gpt-4o'" in w["message"]


def test_a_dated_snapshot_is_a_note_and_the_same_model_says_nothing() -> None:
    watch = ContextWatch({"gpt-4o": "gpt-4o", "other": "other"})
    for i in range(3):
        watch.add(_record(i, model="gpt-4o", served="gpt-4o-2024-08-06"))
        watch.add(_record(i, model="other", served="other"))
    watch.note_listed("other", ["other", "something-else"])
    (w,) = watch.warnings()
    assert w["kind"] == "served_model_snapshot" and "'gpt-4o-2024-08-06' (3 of 3 answers)" in w["message"]


def test_models_not_checked_say_nothing() -> None:
    watch = ContextWatch({"local": None})  # no model id sent: nothing to compare with
    watch.add(_record(0, model="local", served="/models/smollm.gguf"))
    assert watch.warnings() == []


def test_logprobs_asked_and_missing_and_the_released_fallback_are_counted() -> None:
    watch = ContextWatch({}, MMLU_FALLBACK)
    records = [
        _record(
            i,
            top=100,
            logprobs=i % 4 != 0,
            detail=f"{MMLU_FALLBACK}: no log-probabilities returned" if i % 4 == 0 else "A=-1",
        )
        for i in range(20)
    ]
    records.append(_record(20, top=None, logprobs=False))  # not asked: not a missing one
    for record in records:
        watch.add(record)
    hand_missing = sum(1 for r in records if r["request"]["params"].get("top_logprobs") and not r["top_logprobs"])
    hand_fallback = sum(1 for r in records if r["extraction_detail"].startswith(MMLU_FALLBACK))
    kinds = {w["kind"]: w["message"] for w in watch.warnings()}
    assert hand_missing == hand_fallback == 5
    assert f"model m: {hand_missing} of 20 answers came back without the log-probabilities" in kinds["logprobs_missing"]
    assert "(top_logprobs=100)" in kinds["logprobs_missing"]
    assert kinds["released_fallback"].startswith(
        f"mmlu_cs.mcq (released), model m: {hand_fallback} of 21 items were scored by the {MMLU_FALLBACK}"
    )


@given(st.randoms(use_true_random=False))
def test_reordering_the_records_changes_no_warning(rnd: random.Random) -> None:
    records = [
        _record(i, model=m, served=s, top=100, logprobs=i % 3 != 0, detail=MMLU_FALLBACK if i % 3 == 0 else "")
        for i, (m, s) in enumerate([("a", "a"), ("a", "a-2024-01-01"), ("b", "c"), ("b", "b")] * 3)
    ]

    def warnings_of(rows: list[dict]) -> list[dict[str, str]]:
        watch = ContextWatch({"a": "a", "b": "b"}, MMLU_FALLBACK)
        for row in rows:
            watch.add(row)
        return watch.warnings()

    shuffled = list(records)
    rnd.shuffle(shuffled)
    assert warnings_of(shuffled) == warnings_of(records)


def test_cache_warnings_merge_the_engines_stats() -> None:
    why = {"answered_by": "meta-llama/Llama-3", "served": ["llama3"]}
    stats = [
        {"unusable": {"m": {**why, "stores": 2, "misses": 0}}},
        {"unusable": {"m": {**why, "stores": 1, "misses": 4}}},
        {"hits": 3},
    ]
    (w,) = cache_warnings(stats)
    assert w["kind"] == "cache_unusable" and "(3 stored unusable, 4 lookups missed for it)" in w["message"]
    assert cache_warnings([{"hits": 1, "misses": 0}]) == []


def test_engine_counts_stored_answers_no_lookup_can_use(tmp_path: Path) -> None:
    """/models lists 'llama3', the answers name another model: each stored answer is unusable, and
    the next engine's lookups of them miss; the engine's cache stats say so (and what /models listed)."""
    request = Request(mode="chat", messages=(Message(role="user", content="Q"),), params={})
    with ScriptedServer(lambda call: Reply(content="A", model="meta-llama/Meta-Llama-3-8B"), model_id="llama3") as srv:
        spec = ModelSpec(label="m", kind="endpoint", base_url=srv.url, model_id="llama3", timeout=5.0)
        stats = []
        for _ in range(2):
            engine = Engine(window=4, cache=GenerationCache(tmp_path))
            engine.add_model("m", lambda: OpenAICompatBackend(spec, concurrency=2))
            assert engine.generate("m", request).text == "A"
            stats.append(engine.cache_stats())
            engine.close()
    assert [s["hits"] for s in stats] == [0, 0]
    assert stats[0]["served"] == {"m": ["llama3"]}
    assert stats[0]["unusable"]["m"] == {
        "answered_by": "meta-llama/Meta-Llama-3-8B",
        "served": ["llama3"],
        "stores": 1,
        "misses": 0,
    }
    assert stats[1]["unusable"]["m"]["misses"] == 1  # the stored answer was found, and could not be used


def test_the_fallback_is_counted_per_layer_and_variant() -> None:
    watch = ContextWatch({}, MMLU_FALLBACK)
    for i in range(4):
        watch.add({**_record(i, detail=MMLU_FALLBACK), "variant": "top_logprobs=5" if i < 3 else ""})
    messages = [w["message"] for w in watch.warnings() if w["kind"] == "released_fallback"]
    assert messages[0].startswith("mmlu_cs.mcq (released), model m: 1 of 1 items")
    assert messages[1].startswith("mmlu_cs.mcq (released top_logprobs=5), model m: 3 of 3 items")
