"""The --resume pieces as functions (pytest_plugin/resume.py): keys, the resume command, what workers get,
the placeholders dropped.  The end-to-end runs are tests/pytest_plugin/test_resume.py."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from pytest_benchaudit.pytest_plugin import resume


def test_a_record_key_reads_a_record_from_before_repeats_as_repeat_0() -> None:
    rec = {"benchmark": "b", "task": "t", "question_id": "q1", "model": "m", "variant": None}
    assert resume.record_key(rec) == ("b", "t", "q1", "m", "", "0")
    assert resume.record_key({**rec, "variant": "v", "repeat": 2}) == ("b", "t", "q1", "m", "v", "2")


def test_the_resume_command_keeps_the_arguments_and_replaces_an_earlier_resume() -> None:
    args = ["suites/x", "--model", "m@http://127.0.0.1:1/v1", "--resume", "old dir", "--resume=older", "-k", "a b"]
    cmd = resume.resume_command(args, Path("runs/new run"))
    assert shlex.split(cmd) == [
        "pytest",
        "suites/x",
        "--model",
        "m@http://127.0.0.1:1/v1",
        "-k",
        "a b",
        "--resume",
        "runs/new run",
    ]


def test_workers_get_the_recorded_keys_and_the_correct_ones_only_with_repeats() -> None:
    one = {("b", "t", "q1", "m", "", "0"), ("b", "t", "q2", "m", "", "0")}
    out = resume.resume_workerinput(one, {("b", "t", "q1", "m", "", "0")}, {}, "run")
    assert out == {resume.RESUME_KEYS: [["b", "t", "q1", "m", "", "0"], ["b", "t", "q2", "m", "", "0"]]}
    assert json.loads(json.dumps(out)) == out  # workerinput travels as JSON-like data
    repeats = {*one, ("b", "t", "q1", "m", "", "1")}
    out = resume.resume_workerinput(repeats, {("b", "t", "q1", "m", "", "1")}, {}, "run")
    assert out[resume.RESUME_CORRECT] == [["b", "t", "q1", "m", "", "1"]]
    meta = {
        "pipeline_cards": {"b.t": {"hash": "h", "fields": {}, "questions_total": 3}},
        "dataset_checksums": {"b/q.json": "s"},
    }
    run = resume.resume_workerinput(set(), set(), meta, Path("r"))[resume.RESUME_RUN]
    # The run's cards as run.json has them (pipeline.record_documents.PipelineCard): what resume_mismatch compares
    assert run == {"path": "r", "cards": meta["pipeline_cards"], "checksums": {"b/q.json": "s"}}
    assert resume.resume_workerinput(set(), set(), {}, None) == {}


def test_the_placeholders_of_questions_never_asked_are_dropped_and_every_other_line_kept(tmp_path: Path) -> None:
    lines = [
        json.dumps({"question_id": "q1", "invalid_reason": None}),
        json.dumps({"question_id": "q2", "invalid_reason": "endpoint_down"}),
        '{"torn": ',  # a line that does not parse is kept for RunDirectory.reopen to judge
        json.dumps({"question_id": "q3", "invalid_reason": "empty"}, indent=None, separators=(", ", ": ")),
    ]
    (tmp_path / "records.jsonl").write_text("\n".join(lines) + "\n")
    resume.drop_not_asked(tmp_path)
    assert (tmp_path / "records.jsonl").read_text().splitlines() == [lines[0], lines[2], lines[3]]
    before = (tmp_path / "records.jsonl").read_bytes()
    resume.drop_not_asked(tmp_path)  # nothing to drop: the file is left as it is
    assert (tmp_path / "records.jsonl").read_bytes() == before
    resume.drop_not_asked(tmp_path / "missing")  # no records yet: nothing to do


def test_run_warnings_keep_order_and_only_the_per_session_ones_of_an_earlier_session() -> None:
    from pytest_benchaudit.pytest_plugin.runmeta import PER_SESSION_WARNINGS, run_warning_list

    card = {"kind": "data_checksum", "message": "a differs"}
    served = {"kind": "served_model_mismatch", "message": "m: 10 of 10"}
    cache = {"kind": "cache_unusable", "message": "m: 3 stored"}
    hook = {"kind": "hook_failed", "message": "a plugin's hook raised"}
    assert PER_SESSION_WARNINGS == {"cache_unusable", "hook_failed"}
    assert run_warning_list([card, served, card], []) == [card, served]  # each once, in order
    # a resumed run: the earlier session's copy of a recomputed kind is stale; its cache warning stays
    earlier = [{"kind": "served_model_mismatch", "message": "m: 4 of 4"}, cache, card]
    assert run_warning_list([card, served], earlier) == [card, served, cache]
    assert run_warning_list([card, served, cache], earlier) == [card, served, cache]  # not twice
    # the order of the earlier list moves nothing but where its kept entries come
    assert run_warning_list([card], list(reversed(earlier))) == [card, cache]
    # a hook that raised in an earlier session is kept like its cache warning
    assert run_warning_list([card], [hook, served]) == [card, hook]
