"""The generation cache: the store (keys, what is stored, several processes, failures) and
end-to-end runs that reuse it (serial, --no-cache, xdist workers sharing it)."""

from __future__ import annotations

import multiprocessing
import sqlite3
import warnings
from pathlib import Path

import pytest

from helpers.cache_entries import IDENTITY, concurrent_writer, gen, req
from pytest_benchaudit.inference.backend import ModelSpec
from pytest_benchaudit.inference.cache import (
    CACHE_FILENAME,
    CacheWarning,
    GenerationCache,
    cache_key,
    model_identity,
)
from pytest_benchaudit.inference.engine import Engine
from pytest_benchaudit.inference.openai_compat import OpenAICompatBackend
from pytest_benchaudit.pipeline.types import Generation
from pytest_benchaudit.pytest_plugin.options import default_cache_dir
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.toy import TOY_QUESTIONS

# -- the store ---------------------------------------------------------------------------


def test_hit_returns_the_generation_as_stored(tmp_path: Path) -> None:
    cache = GenerationCache(tmp_path)
    assert cache.get(IDENTITY, req()) is None
    stored = gen(reasoning="thought", top_logprobs=({"B": -0.1, "C": -2.5},))
    assert cache.put(IDENTITY, req(), stored)
    assert cache.get(IDENTITY, req()) == stored  # latency, usage, attempts kept as first received
    assert (cache.hits, cache.misses, cache.stores) == (1, 1, 1)
    # a new connection (a later run) sees it too
    assert GenerationCache(tmp_path).get(IDENTITY, req()) == stored
    assert (tmp_path / CACHE_FILENAME).is_file()
    with sqlite3.connect(tmp_path / CACHE_FILENAME) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_every_part_of_the_request_and_model_is_in_the_key(tmp_path: Path) -> None:
    cache = GenerationCache(tmp_path)
    cache.put(IDENTITY, req(max_tokens=5), gen())
    assert cache.get(IDENTITY, req(max_tokens=6)) is None
    assert cache.get(IDENTITY, req()) is None
    assert cache.get(IDENTITY, req("What is 2+3?", max_tokens=5)) is None
    assert cache.get(IDENTITY, req(max_tokens=5).model_copy(update={"adjustments": ("raised",)})) is None
    other = model_identity(ModelSpec(label="m", kind="endpoint", base_url="http://127.0.0.1:10/v1", model_id="m"))
    assert cache.get(other, req(max_tokens=5)) is None
    assert cache.get(IDENTITY, req(max_tokens=5)) is not None


def test_a_different_sample_index_is_a_different_key(tmp_path: Path) -> None:
    cache = GenerationCache(tmp_path)
    first = req()
    reask = first.model_copy(update={"sample": 1})
    assert cache_key(IDENTITY, first) != cache_key(IDENTITY, reask)
    cache.put(IDENTITY, first, gen("I cannot tell."))
    assert cache.get(IDENTITY, reask) is None
    cache.put(IDENTITY, reask, gen("Answer: B"))
    assert cache.get(IDENTITY, first).text == "I cannot tell."
    assert cache.get(IDENTITY, reask).text == "Answer: B"


def test_model_identity_drops_credentials_and_the_local_port() -> None:
    with_creds = ModelSpec(label="m", kind="endpoint", base_url="http://user:pw@127.0.0.1:9/v1/", model_id="m")
    plain = ModelSpec(label="m", kind="endpoint", base_url="http://127.0.0.1:9/v1", model_id="m")
    assert model_identity(with_creds) == model_identity(plain)
    assert "pw" not in model_identity(with_creds)
    local_a = ModelSpec(label="local", kind="local", base_url="http://127.0.0.1:4001/v1", model_id="SmolLM2")
    local_b = local_a.model_copy(update={"base_url": "http://127.0.0.1:4002/v1"})
    assert model_identity(local_a) == model_identity(local_b)  # a fresh port each run is the same model
    assert model_identity(plain) != model_identity(plain.model_copy(update={"model_id": "other"}))
    assert model_identity(plain) != model_identity(plain.model_copy(update={"label": "m2"}))


def test_errors_are_not_stored(tmp_path: Path) -> None:
    cache = GenerationCache(tmp_path)
    assert not cache.put(IDENTITY, req(), Generation(error="HTTP 500: upstream exploded", attempts=3))
    assert cache.get(IDENTITY, req()) is None and len(cache) == 0


def test_two_processes_write_concurrently_without_loss(tmp_path: Path) -> None:
    n = 200
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=concurrent_writer, args=(str(tmp_path), w, n)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    cache = GenerationCache(tmp_path)
    assert len(cache) == n + n // 2  # 100 own keys each + 100 shared
    for w in range(2):
        for i in range(n):
            text = f"shared {i}" if i % 2 else f"own {w} {i}"
            assert cache.get(IDENTITY, req(text)).text == f"Answer: {text}"
    with sqlite3.connect(tmp_path / CACHE_FILENAME) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_lock_that_does_not_clear_disables_the_cache_with_one_warning(tmp_path: Path) -> None:
    cache = GenerationCache(tmp_path, busy_timeout=0.02, retries=2)
    cache.put(IDENTITY, req("before"), gen())
    blocker = sqlite3.connect(tmp_path / CACHE_FILENAME, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # another process holding the write lock
    try:
        with pytest.warns(CacheWarning, match="disabled for this run.*locked"):
            assert not cache.put(IDENTITY, req("during"), gen())
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once: later calls are quiet no-ops
            assert not cache.put(IDENTITY, req("again"), gen())
            assert cache.get(IDENTITY, req("before")) is None
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert cache.disabled


def test_a_corrupt_file_disables_the_cache_with_one_warning(tmp_path: Path) -> None:
    (tmp_path / CACHE_FILENAME).write_bytes(b"this is not a database, just bytes " * 200)
    cache = GenerationCache(tmp_path)
    with pytest.warns(CacheWarning, match="disabled for this run"):
        assert cache.get(IDENTITY, req()) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not cache.put(IDENTITY, req(), gen())


def test_an_unwritable_directory_disables_the_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    cache = GenerationCache(blocker / "cache")
    with pytest.warns(CacheWarning):
        assert cache.get(IDENTITY, req()) is None


# -- the engine ----------------------------------------------------------------------------


def _engine(server: ScriptedServer, cache: GenerationCache | None) -> Engine:
    spec = ModelSpec(
        label="m",
        kind="endpoint",
        base_url=server.url,
        model_id="m",
        api_key_env=None,
        retry_base=0.01,
        max_retries=1,
        timeout=10.0,
    )
    engine = Engine(window=16, cache=cache)
    engine.add_model("m", lambda: OpenAICompatBackend(spec, concurrency=4))
    return engine


def _n_asked(server: ScriptedServer) -> int:
    return sum(1 for c in server.calls if c.path.endswith("completions"))


def test_engine_asks_once_then_answers_from_the_cache(tmp_path: Path) -> None:
    def script(call):
        if "FAIL" in call.last_user_text:
            return Reply(status=400, error_message="no")
        return Reply(content="Answer: " + call.last_user_text)

    with ScriptedServer(script) as server:
        first = _engine(server, GenerationCache(tmp_path))
        try:
            for text in ("a", "b", "FAIL"):
                first.prefetch("m", req(text))
            answers = [first.generate("m", req(t)) for t in ("a", "b", "FAIL")]
            assert first.cache_stats()["hits"] == 0 and first.cache_stats()["misses"] == 3
        finally:
            first.close()
        sent = _n_asked(server)  # completions only: each engine also asks GET /models once (served model ids)
        assert sent == 3
        second = _engine(server, GenerationCache(tmp_path))
        try:
            again = [second.generate("m", req(t)) for t in ("a", "b", "FAIL")]
            assert (second.cache_hits, second.cache_misses) == (2, 1)
        finally:
            second.close()
        assert _n_asked(server) == sent + 1  # only the failed request is asked again
        assert [g.model_copy(update={"from_cache": False}) for g in again[:2]] == answers[:2]
        assert all(g.from_cache for g in again[:2]) and not any(g.from_cache for g in answers)
        assert again[2].error and answers[2].error


def test_engine_says_a_cache_failure_once_on_the_calling_thread(tmp_path: Path) -> None:
    (tmp_path / CACHE_FILENAME).write_bytes(b"garbage " * 1000)
    with ScriptedServer(lambda call: Reply(content="Answer: A")) as server:
        engine = _engine(server, GenerationCache(tmp_path))
        try:
            with pytest.warns(CacheWarning, match="disabled"):
                assert engine.generate("m", req("a")).text == "Answer: A"
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                assert engine.generate("m", req("b")).text == "Answer: A"
        finally:
            engine.close()
        assert _n_asked(server) == 2


# -- end to end -----------------------------------------------------------------------------


def _toy_args(server: ScriptedServer, report_dir: str, *extra: str) -> list[str]:
    return [
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{server.url}",
        "--report-dir",
        report_dir,
        "--max-retries",
        "2",
        "-p",
        "no:randomly",
        *extra,
    ]


def _comparable(record: dict) -> dict:
    # from_cache says where the generation came from (issue 12): the rest must be the same
    return {k: v for k, v in record.items() if k not in ("timestamp", "latency_s", "from_cache")}


def _asked(server: ScriptedServer) -> list[str]:
    return [c.last_user_text for c in server.calls if c.path.endswith("/completions")]


def test_a_second_run_asks_nothing_and_records_the_same(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy
) -> None:
    first = pytester.runpytest(*_toy_args(scripted, "one", "-k", "mcq"))
    first.assert_outcomes(passed=6, failed=6)
    first.stdout.fnmatch_lines(["*generation cache: 0 hits, 12 misses*"])
    asked_first = len(_asked(scripted))
    assert asked_first >= 12
    cache = GenerationCache(default_cache_dir())
    assert len(cache) == 11  # every generation but the HTTP 500 one

    # Everything that succeeded comes from the cache: not one request.
    second = pytester.runpytest(*_toy_args(scripted, "two", "-k", "mcq and not q0009"))
    second.assert_outcomes(passed=6, failed=5)
    second.stdout.fnmatch_lines(["*generation cache: 11 hits, 0 misses*"])
    assert len(_asked(scripted)) == asked_first
    one = {r["question_id"]: r for r in read_run(only_run_dir(pytester.path / "one"))["records"]}
    two = {r["question_id"]: r for r in read_run(only_run_dir(pytester.path / "two"))["records"]}
    assert set(two) == {qid for qid, _, _ in TOY_QUESTIONS} - {"t09"}
    for qid, rec in two.items():
        assert _comparable(rec) == _comparable(one[qid]), qid
        assert rec["latency_s"] == one[qid]["latency_s"]  # the original generation's latency is kept
        assert rec["from_cache"] and not one[qid]["from_cache"]

    # A failed generation was not stored: it is asked again.
    pytester.runpytest(*_toy_args(scripted, "three", "-k", "q0009"))
    again = _asked(scripted)[asked_first:]
    assert len(again) == 3 and all("HTTP_500" in text for text in again)  # first try + 2 retries

    # --no-cache asks everything again and stores nothing new.
    before = len(_asked(scripted))
    pytester.runpytest(*_toy_args(scripted, "four", "-k", "mcq and not q0009", "--no-cache"))
    assert len(_asked(scripted)) - before >= 11
    assert len(GenerationCache(default_cache_dir())) == 11


def test_cache_dir_option(pytester: pytest.Pytester, toy) -> None:
    with ScriptedServer(lambda call: Reply(content="Answer: B")) as server:
        pytester.runpytest(*_toy_args(server, "one", "-k", "t01", "--cache-dir", "mycache"))
        pytester.runpytest(*_toy_args(server, "two", "-k", "t01", "--cache-dir", "mycache"))
        assert len(_asked(server)) == 1
    assert len(GenerationCache(pytester.path / "mycache")) == 1
    assert not (default_cache_dir() / CACHE_FILENAME).exists()


def test_xdist_workers_share_the_cache(pytester: pytest.Pytester, toy) -> None:
    with ScriptedServer(lambda call: Reply(content="Answer: B")) as server:
        first = pytester.runpytest_subprocess(*_toy_args(server, "one", "-n", "2"))
        assert first.ret == pytest.ExitCode.TESTS_FAILED
        assert len(_asked(server)) == 13
        assert len(GenerationCache(default_cache_dir())) == 13
        second = pytester.runpytest_subprocess(*_toy_args(server, "two", "-n", "2"))
        assert second.ret == pytest.ExitCode.TESTS_FAILED
        assert len(_asked(server)) == 13  # the second run's workers read what the first run's stored
    one = read_run(only_run_dir(pytester.path / "one"))["records"]
    two = read_run(only_run_dir(pytester.path / "two"))["records"]

    def key(r: dict) -> tuple:
        return (r["task"], r["question_id"])

    assert sorted(map(_comparable, one), key=key) == sorted(map(_comparable, two), key=key)
