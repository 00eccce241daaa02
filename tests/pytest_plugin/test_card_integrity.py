"""Run integrity: the card says what was sent and scored, whatever a fixture or a suite edit does.

Real pytest runs (pytester) against the scripted OpenAI-compatible server on 127.0.0.1:

* a ``conftest.py`` overriding ``pipeline`` (one field of each stage) or ``question``: the card in
  run.json, every record's hashes, the request the server received and ``benchaudit rescore``
  agree with what the item used, and the card names the fixture (``conftest.py:LINE``);
* the template's text is in the card and its hashes; run.json checksums the suite files and
  ``--resume`` refuses an edited suite naming the file;
* a data file that differs from the checksum its suite pins is one warning, in the terminal and
  in run.json.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from helpers import SUITES
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.dataset.readers import file_checksum, load_questions
from pytest_benchaudit.dataset.suites import load_suite
from pytest_benchaudit.pipeline.assembly import materials
from pytest_benchaudit.pipeline.layering import apply_overrides
from pytest_benchaudit.pipeline.stages import Pipeline
from pytest_benchaudit.pytest_plugin import cards
from pytest_benchaudit.scoring import judge_prompts
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import ScriptedServer

# A second template for the prompt-stage override (the toy suite has one): TOML lets a table follow the tasks.
TERSE = '\n[templates.terse]\nuser = "Q: {question}\\n{options}\\nOne letter."\n'


def run_toy(pytester: pytest.Pytester, server: ScriptedServer, *extra: str, out: str = "out") -> pytest.RunResult:
    return pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{server.url}",
        "--report-dir",
        out,
        "--max-retries",
        "0",
        "-p",
        "no:randomly",
        "-k",
        "mcq",
        *extra,
    )


def chat_bodies(server: ScriptedServer) -> list[dict[str, Any]]:
    return [c.body for c in server.calls if c.path.endswith("/chat/completions")]


def user_texts(server: ScriptedServer) -> list[str]:
    return [b["messages"][-1]["content"] for b in chat_bodies(server)]


def fixture_line(conftest: Path, name: str) -> int:
    """The line of the ``@pytest.fixture`` that defines ``name`` (what the card's origin names)."""
    lines = conftest.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"def {name}("))
    return at  # 1-based line of the decorator just above it


def pipeline_conftest(pytester: pytest.Pytester, field: str, value: Any) -> Path:
    return pytester.makeconftest(f"""
        import pytest
        from pytest_benchaudit.pipeline.layering import apply_overrides


        @pytest.fixture
        def pipeline(pipeline):
            return apply_overrides(pipeline, [({field!r}, {value!r})])
        """)


def rescore(pytester: pytest.Pytester, run: Path, *args: str) -> tuple[int, Path | None]:
    before = set(run.parent.iterdir())
    rc = main(
        ["rescore", str(run), "--report-dir", str(run.parent), "--suites-dir", str(pytester.path / "suites"), *args]
    )
    new = [p for p in run.parent.iterdir() if p not in before]
    return rc, (new[0] if new else None)


def scores(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((r["question_id"], r["prediction"], r["valid"], r["invalid_reason"], r["score"]) for r in records)


# One field of each stage, overridden through the `pipeline` fixture, and what the item must then show.
STAGE_OVERRIDES = [
    ("prompt.template", "terse"),
    ("inference.max_tokens", 7),
    ("extraction.reasoning", "keep"),
    ("scoring.denominator", "valid"),
    ("aggregation.method", "macro"),
]


@pytest.mark.parametrize(("field", "value"), STAGE_OVERRIDES, ids=[f for f, _ in STAGE_OVERRIDES])
def test_a_pipeline_fixture_override_is_what_the_card_hash_request_and_rescore_say(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy, field: str, value: Any
) -> None:
    suite = pytester.path / "suites" / "toy" / "suite.toml"
    suite.write_text(suite.read_text() + TERSE)
    conftest = pipeline_conftest(pytester, field, value)
    run_toy(pytester, scripted)
    run_dir = only_run_dir(pytester.path / "out")
    out = read_run(run_dir)
    card = out["run"]["pipeline_cards"]["toy.mcq"]
    # the card: the field as the items used it, named as an override with the fixture's place
    assert card["fields"][field] == value
    assert card["overrides"] == {field: value}
    assert card["override_origins"] == {field: f"conftest.py:{fixture_line(conftest, 'pipeline')}"}
    # its hash is the one every record carries, and not the suite's
    assert {r["pipeline_hash"] for r in out["records"]} == {card["hash"]} != {card["suite_hash"]}
    assert {r["upstream_hash"] for r in out["records"]} == {card["upstream_hash"]}
    upstream = field.split(".")[0] in ("prompt", "inference")
    assert (card["upstream_hash"] != card["suite_upstream_hash"]) is upstream
    # the requests the server received are the card's (an upstream change shows; a downstream one does not)
    bodies = chat_bodies(scripted)
    assert len({json.dumps(b["messages"]) for b in bodies}) == 12  # (a 429 is asked again: one more body)
    if field == "inference.max_tokens":
        assert {b["max_tokens"] for b in bodies} == {7}
    if field == "prompt.template":
        assert all(t.startswith("Q: Toy question") and t.endswith("One letter.") for t in user_texts(scripted))
        assert card["materials"]["prompt.template_text"]["user"] == "Q: {question}\n{options}\nOne letter."
    # the summary scores under the card's downstream fields (extraction, denominator, aggregation)
    (result,) = out["summary"]["results"]
    assert result["pipeline_hash"] == card["hash"]
    assert result["denominator"] == card["fields"]["scoring.denominator"]
    if field == "extraction.reasoning":  # the unclosed <think> is read as it came: its draft letter C
        assert next(r for r in out["records"] if r["question_id"] == "t05")["prediction"] == "C"
    # rescore accepts the value the card says, and re-scoring with it moves nothing
    rc, new = rescore(pytester, run_dir, "--set", f"{field}={json.dumps(value)}")
    assert rc == 0 and new is not None
    again = read_run(new)
    assert scores(again["records"]) == scores(out["records"])
    assert again["summary"]["results"][0]["score"] == pytest.approx(result["score"])


def test_a_model_copy_override_in_a_fixture_gets_its_own_hash(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy
) -> None:
    """``pipeline.model_copy(update=...)`` (pydantic's own way) used to keep the suite's cached hash."""
    pytester.makeconftest("""
        import pytest


        @pytest.fixture
        def pipeline(pipeline):
            return pipeline.model_copy(update={"inference": pipeline.inference.model_copy(update={"max_tokens": 7})})
        """)
    run_toy(pytester, scripted)
    run_dir = only_run_dir(pytester.path / "out")
    out = read_run(run_dir)
    card = out["run"]["pipeline_cards"]["toy.mcq"]
    assert card["fields"]["inference.max_tokens"] == 7 and card["overrides"] == {"inference.max_tokens": 7}
    assert {r["pipeline_hash"] for r in out["records"]} == {card["hash"]} != {card["suite_hash"]}
    assert {b["max_tokens"] for b in chat_bodies(scripted)} == {7}
    rc, _ = rescore(pytester, run_dir, "--set", "inference.max_tokens=7")
    assert rc == 0
    assert rescore(pytester, run_dir, "--set", "inference.max_tokens=64")[0] != 0  # what was not sent is refused


def test_model_copy_recomputes_the_hashes() -> None:
    base = Pipeline(name="l", benchmark="b", task="t")
    before = (base.hash, base.upstream_hash)
    copied = base.model_copy(update={"inference": base.inference.model_copy(update={"max_tokens": 7})})
    # the same pipeline built by the validated path: what the copy's hashes must be
    rebuilt = apply_overrides(base, [("inference.max_tokens", 7)]).model_copy(update={"overrides": {}})
    assert (copied.hash, copied.upstream_hash) == (rebuilt.hash, rebuilt.upstream_hash) != before


def test_an_overridden_question_is_in_the_card_and_its_hashes(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy
) -> None:
    conftest = pytester.makeconftest("""
        import pytest


        @pytest.fixture
        def question(question):
            return question.model_copy(update={"text": "Reworded: " + question.text})
        """)
    run_toy(pytester, scripted)
    run_dir = only_run_dir(pytester.path / "out")
    out = read_run(run_dir)
    card = out["run"]["pipeline_cards"]["toy.mcq"]
    origin = f"conftest.py:{fixture_line(conftest, 'question')}"
    assert card["override_origins"] == {"question": origin} and origin in card["overrides"]["question"]
    assert card["materials"]["dataset.question_fixture"] == origin
    assert card["fields"]["inference.max_tokens"] == 64  # no field changed
    assert {r["pipeline_hash"] for r in out["records"]} == {card["hash"]} != {card["suite_hash"]}
    assert card["upstream_hash"] != card["suite_upstream_hash"]  # what was asked is not the data file's
    texts = user_texts(scripted)
    assert len(set(texts)) == 12 and all(t.startswith("Reworded: Toy question") for t in texts)
    rc, new = rescore(pytester, run_dir)
    assert rc == 0 and new is not None and scores(read_run(new)["records"]) == scores(out["records"])


def test_a_fixture_override_under_xdist_keeps_the_items_card(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy
) -> None:
    """Each worker hands back its cards; the one its items made wins over the collected one."""
    pipeline_conftest(pytester, "inference.max_tokens", 7)
    run_toy(pytester, scripted, "-n", "2")
    out = read_run(only_run_dir(pytester.path / "out"))
    card = out["run"]["pipeline_cards"]["toy.mcq"]
    assert card["fields"]["inference.max_tokens"] == 7 and "item_pipelines" not in card
    assert {r["pipeline_hash"] for r in out["records"]} == {card["hash"]}
    assert {b["max_tokens"] for b in chat_bodies(scripted)} == {7}


def test_early_asking_never_sends_the_suite_request_under_an_override(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy
) -> None:
    """A serial run asks its first items during collection; an overriding fixture keeps them out of it."""
    pipeline_conftest(pytester, "inference.max_tokens", 7)
    result = pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out",
        "--max-retries",
        "0",
        "-p",
        "no:randomly",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 13
    bodies = chat_bodies(scripted)
    assert len({json.dumps(b["messages"]) for b in bodies}) == 13 and {b["max_tokens"] for b in bodies} == {7}


def test_template_text_is_in_the_card_and_its_hashes(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> None:
    run_toy(pytester, scripted, out="before")
    suite = pytester.path / "suites" / "toy" / "suite.toml"
    suite.write_text(
        suite.read_text().replace(
            'user = "{question}\\n{options}"', 'system = "You are a careful analyst."\nuser = "{question}\\n{options}"'
        )
    )
    run_toy(pytester, scripted, "--set", "prompt.format.system_role=system", out="system")
    suite.write_text(suite.read_text().replace("You are a careful analyst.", "You are a security expert."))
    run_toy(pytester, scripted, "--set", "prompt.format.system_role=system", out="edited")
    cards = {
        name: read_run(only_run_dir(pytester.path / name))["run"]["pipeline_cards"]["toy.mcq"]
        for name in ("before", "system", "edited")
    }
    system, edited = cards["system"], cards["edited"]
    assert system["fields"] == edited["fields"]  # the same fields ...
    assert system["materials"]["prompt.template_text"]["system"] == "You are a careful analyst."
    assert edited["materials"]["prompt.template_text"]["system"] == "You are a security expert."
    assert system["hash"] != edited["hash"] and system["upstream_hash"] != edited["upstream_hash"]  # ... other text
    assert len({c["hash"] for c in cards.values()}) == 3
    records = read_run(only_run_dir(pytester.path / "edited"))["records"]
    assert {r["pipeline_hash"] for r in records} == {edited["hash"]}
    assert {r["request"]["messages"][0]["content"] for r in records} == {"You are a security expert."}
    # the data file's checksum is a material too: what it hashes is the file read
    data = pytester.path / "data" / "toy" / "toy.jsonl"
    assert system["materials"]["dataset.checksums"] == {"toy.jsonl": hashlib.sha256(data.read_bytes()).hexdigest()}


def card_command(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> dict[str, Any]:
    """``benchaudit card toy`` over the toy suite and data under ``root``: the cards it prints."""
    capsys.readouterr()
    assert main(["card", "toy", "--suites-dir", str(root / "suites"), "--data-dir", str(root / "data"), *extra]) == 0
    out, err = capsys.readouterr()
    assert "not the hash a run records" not in err, err
    return json.loads(out)


def test_the_card_command_gives_the_hash_the_run_records(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy, capsys: pytest.CaptureFixture[str]
) -> None:
    """A card computed before a run (a pre-registration) is the run's: the same hash and upstream hash,
    with --set too; an edited template changes the card's hash, and the next run records the new one.
    (Before, `benchaudit card` hashed the fields alone: neither the run's hash nor moved by the template.)"""
    registered = card_command(capsys, pytester.path)
    edited_set = card_command(capsys, pytester.path, "--set", "inference.max_tokens=7", "--task", "mcq")
    run_toy(pytester, scripted, "-k", "t01 or x1", out="first")
    run_toy(pytester, scripted, "-k", "t01", "--set", "inference.max_tokens=7", out="with_set")
    first = read_run(only_run_dir(pytester.path / "first"))
    for key in ("toy.mcq", "toy.extra"):
        card = first["run"]["pipeline_cards"][key]
        assert (registered[key]["hash"], registered[key]["upstream_hash"]) == (card["hash"], card["upstream_hash"])
        assert registered[key]["materials"] == card["materials"]
    assert {r["pipeline_hash"] for r in first["records"] if r["task"] == "mcq"} == {registered["toy.mcq"]["hash"]}
    assert (
        edited_set["toy.mcq"]["hash"]
        == read_run(only_run_dir(pytester.path / "with_set"))["run"]["pipeline_cards"]["toy.mcq"]["hash"]
        != registered["toy.mcq"]["hash"]
    )
    suite = pytester.path / "suites" / "toy" / "suite.toml"
    suite.write_text(suite.read_text().replace('user = "{question}\\n{options}"', 'user = "Q: {question}\\n{options}"'))
    after = card_command(capsys, pytester.path, "--task", "mcq")
    assert after["toy.mcq"]["fields"] == registered["toy.mcq"]["fields"]  # the same fields, another text
    assert after["toy.mcq"]["hash"] != registered["toy.mcq"]["hash"]
    assert after["toy.mcq"]["upstream_hash"] != registered["toy.mcq"]["upstream_hash"]
    run_toy(pytester, scripted, "-k", "t01", out="edited")
    assert (
        read_run(only_run_dir(pytester.path / "edited"))["run"]["pipeline_cards"]["toy.mcq"]["hash"]
        == after["toy.mcq"]["hash"]
    )


def test_the_card_command_says_when_its_hash_cannot_be_the_runs(
    pytester: pytest.Pytester, toy, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the data, the card cannot hold the checksums a run hashes: it says so on stderr."""
    assert (
        main(
            [
                "card",
                "toy",
                "--task",
                "mcq",
                "--suites-dir",
                str(pytester.path / "suites"),
                "--data-dir",
                str(pytester.path / "nowhere"),
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert (
        "benchaudit card: toy.mcq: not the hash a run records: its data cannot be read here (toy: data not found" in err
    )
    assert "dataset.checksums" in json.loads(out)["toy.mcq"]["materials"]  # (empty: none read)


def test_the_card_command_gives_the_real_few_shot_runs_hash(
    pytester: pytest.Pytester, real_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """MMLU's released layer: 5 dev-set exemplars and the test file, real files; the card command's hash
    is the one a run records."""
    assert (
        main(
            [
                "card",
                "mmlu_cs",
                "--task",
                "mcq",
                "--pipeline",
                "released",
                "--suites-dir",
                str(SUITES),
                "--data-dir",
                str(real_data),
            ]
        )
        == 0
    )
    card = json.loads(capsys.readouterr().out)["mmlu_cs.mcq"]
    assert card["materials"]["prompt.few_shot_exemplars"]["ids"] and len(card["materials"]["dataset.checksums"]) == 2
    with ScriptedServer() as server:
        pytester.runpytest(
            str(SUITES / "mmlu_cs"),
            "--data-dir",
            str(real_data),
            "--pipeline",
            "released",
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
            "--limit",
            "1",
            "--max-retries",
            "0",
        )
    run = read_run(only_run_dir(pytester.path / "out"))
    assert run["run"]["pipeline_cards"]["mmlu_cs.mcq"]["hash"] == card["hash"]
    assert {r["pipeline_hash"] for r in run["records"]} == {card["hash"]}


def test_resume_refuses_an_edited_suite_naming_the_file(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy
) -> None:
    run_toy(pytester, scripted, "-k", "t01 or t02")
    run_dir = only_run_dir(pytester.path / "out")
    suite = pytester.path / "suites" / "toy" / "suite.toml"
    run = read_run(run_dir)["run"]
    assert run["suite_checksums"] == {"suites/toy/suite.toml": hashlib.sha256(suite.read_bytes()).hexdigest()}
    suite.write_text(
        suite.read_text().replace('user = "{question}\\n{options}"', 'user = "EDITED {question}\\n{options}"')
    )
    result = run_toy(pytester, scripted, "--resume", str(run_dir))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--resume*suite file(s) changed since the run: suites/toy/suite.toml (sha256*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert len(read_run(run_dir)["records"]) == 2  # nothing asked, nothing lost
    assert not any("EDITED" in t for t in user_texts(scripted))
    # the suite as it was: the run goes on with one prompt
    suite.write_text(suite.read_text().replace("EDITED ", ""))
    result = run_toy(pytester, scripted, "--resume", str(run_dir))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    records = read_run(run_dir)["records"]
    assert len(records) == 12 and len({r["pipeline_hash"] for r in records}) == 1


def test_resume_compares_a_card_a_fixture_made_by_its_collected_hash(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy
) -> None:
    pipeline_conftest(pytester, "inference.max_tokens", 7)
    run_toy(pytester, scripted, "-k", "t01 or t02")
    run_dir = only_run_dir(pytester.path / "out")
    result = run_toy(pytester, scripted, "--resume", str(run_dir))
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stderr.str()
    out = read_run(run_dir)
    assert len(out["records"]) == 12
    assert {r["pipeline_hash"] for r in out["records"]} == {out["run"]["pipeline_cards"]["toy.mcq"]["hash"]}


def pin(pytester: pytest.Pytester, files: dict[str, str]) -> None:
    suite = pytester.path / "suites" / "toy" / "suite.toml"
    table = "".join(f'"{name}" = {{ sha256 = "{digest}" }}\n' for name, digest in files.items())
    suite.write_text(
        suite.read_text()
        + textwrap.dedent("""
        [fetch]
        base_url = "http://127.0.0.1:9/toy/"
        [fetch.files]
        """)
        + table
    )


def test_a_data_file_that_differs_from_its_pin_warns_once(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy
) -> None:
    data = pytester.path / "data" / "toy"
    found = hashlib.sha256((data / "toy.jsonl").read_bytes()).hexdigest()
    pin(
        pytester,
        {"toy.jsonl": "0" * 64, "extra.jsonl": hashlib.sha256((data / "extra.jsonl").read_bytes()).hexdigest()},
    )
    result = pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out",
        "--max-retries",
        "0",
        "--pipelines",
        "standardized,released",
    )
    text = result.stdout.str()
    warning = (
        f"benchaudit: warning: toy/toy.jsonl: sha256 {found[:12]}… differs from the 000000000000… toy/suite.toml pins"
    )
    # Said once as collection reads the file (before any question), once beside the scores.
    assert text.count(warning) == 2, text
    assert text.index(warning) < text.index("collected") or text.index(warning) < text.index("benchaudit 1/")
    assert text.index("benchaudit summary") < text.rindex(warning)
    assert "extra.jsonl: sha256" not in text  # the file that matches its pin says nothing
    run = read_run(only_run_dir(pytester.path / "out"))["run"]
    mine = [w for w in run["warnings"] if w["kind"] == "data_checksum"]  # (run.json's one list: others' too)
    assert len(mine) == 1 and mine[0]["message"].startswith(warning.removeprefix("benchaudit: warning: "))


def test_a_data_file_that_differs_from_its_pin_is_said_by_collect_only_and_validate(
    pytester: pytest.Pytester, toy, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, `pytest --co` and `benchaudit validate` said nothing: the difference showed only at the
    end of a run that had asked every question."""
    data = pytester.path / "data" / "toy"
    found = hashlib.sha256((data / "toy.jsonl").read_bytes()).hexdigest()
    pin(
        pytester,
        {"toy.jsonl": "0" * 64, "extra.jsonl": hashlib.sha256((data / "extra.jsonl").read_bytes()).hexdigest()},
    )
    message = f"toy/toy.jsonl: sha256 {found[:12]}… differs from the 000000000000… toy/suite.toml pins"
    result = pytester.runpytest("suites/toy", "--data-dir", "data", "--co", "-q")
    assert result.ret == pytest.ExitCode.OK
    assert result.stdout.str().count(f"benchaudit: warning: {message}") == 1, result.stdout.str()
    capsys.readouterr()
    assert main(["validate", str(pytester.path / "suites"), "--data-dir", str(pytester.path / "data")]) == 0
    out, err = capsys.readouterr()
    assert [line for line in err.splitlines() if line.startswith("warning:")] == [
        f"warning: {message}; its scores are not comparable with runs on the pinned file (benchaudit fetch toy "
        "--force restores it)"
    ]
    assert (
        out.strip()
        == "1 of 1 suite(s) valid in "
        + str(pytester.path / "suites")
        + "; 1 data file(s) differ from their pinned checksum"
    )
    # the pinned file restored: nothing to say
    pin_file = pytester.path / "suites" / "toy" / "suite.toml"
    pin_file.write_text(pin_file.read_text().replace("0" * 64, found))
    capsys.readouterr()
    assert main(["validate", str(pytester.path / "suites"), "--data-dir", str(pytester.path / "data")]) == 0
    assert "warning" not in capsys.readouterr().err
    assert "benchaudit: warning" not in pytester.runpytest("suites/toy", "--data-dir", "data", "--co").stdout.str()


def test_a_data_file_that_matches_its_pin_warns_nothing(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy
) -> None:
    data = pytester.path / "data" / "toy"
    pin(pytester, {"toy.jsonl": hashlib.sha256((data / "toy.jsonl").read_bytes()).hexdigest()})
    result = run_toy(pytester, scripted)
    assert "toy.jsonl: sha256" not in result.stdout.str()
    warnings = read_run(only_run_dir(pytester.path / "out"))["run"]["warnings"]
    assert [w for w in warnings if w["kind"] == "data_checksum"] == []


def test_replay_refuses_an_edited_template_naming_it(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> None:
    """Before, each item became an inference_error ("no stored generation for this prompt")."""
    run_toy(pytester, scripted, out="stored")
    stored = only_run_dir(pytester.path / "stored")
    suite = pytester.path / "suites" / "toy" / "suite.toml"
    suite.write_text(
        suite.read_text().replace('user = "{question}\\n{options}"', 'user = "Now: {question}\\n{options}"')
    )
    result = pytester.runpytest(
        "suites/toy", "--data-dir", "data", "--model", f"replay:{stored}", "-k", "mcq", "--report-dir", "replayed"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*replay:*toy.mcq: prompt.template_text differs from the stored run's*this needs new generations*"]
    )


def test_replay_of_a_run_a_fixture_made_under_the_same_fixture(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy
) -> None:
    pipeline_conftest(pytester, "inference.max_tokens", 7)
    run_toy(pytester, scripted, out="stored")
    stored = only_run_dir(pytester.path / "stored")
    result = pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"replay:{stored}",
        "-k",
        "mcq",
        "--report-dir",
        "replayed",
        "--set",
        "extraction.reasoning=keep",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stderr.str()
    old = read_run(stored)
    new = read_run(only_run_dir(pytester.path / "replayed"))
    assert scores(new["records"]) != scores(old["records"])  # read with the raw text kept: t05 reads C
    assert {r["raw_output"] for r in new["records"]} == {r["raw_output"] for r in old["records"]}
    card = new["run"]["pipeline_cards"]["toy.mcq"]
    assert card["fields"]["inference.max_tokens"] == 7 and card["override_origins"]["extraction.reasoning"] == "--set"


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_fixture_that_changes_some_items_lists_every_pipeline_the_records_carry(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy, workers: list[str]
) -> None:
    pytester.makeconftest("""
        import pytest
        from pytest_benchaudit.pipeline.layering import apply_overrides


        @pytest.fixture
        def pipeline(pipeline, question):
            return apply_overrides(pipeline, [("inference.max_tokens", 7)]) if question.id == "t06" else pipeline
        """)
    run_toy(pytester, scripted, *workers)
    out = read_run(only_run_dir(pytester.path / "out"))
    card = out["run"]["pipeline_cards"]["toy.mcq"]
    listed = {card["hash"], *card.get("item_pipelines", {})}
    by_id = {r["question_id"]: r for r in out["records"]}
    assert {r["pipeline_hash"] for r in out["records"]} == listed and len(listed) == 2
    assert (
        by_id["t06"]["request"]["params"]["max_tokens"] == 7 and by_id["t01"]["request"]["params"]["max_tokens"] == 64
    )
    assert card["suite_hash"] == by_id["t01"]["pipeline_hash"] != by_id["t06"]["pipeline_hash"]
    assert not any(k.startswith("_") for k in card)


def test_few_shot_exemplars_and_option_format_are_materials_of_the_real_mmlu_card(real_data: Path) -> None:
    """MMLU's released layer prompts with the first 5 dev-set exemplars (real files)."""
    suite = load_suite(SUITES / "mmlu_cs" / "suite.toml")
    pipe = suite.pipeline("mcq", "released")
    shots, shot_path = load_questions(suite, "mcq", real_data, "test", few_shot=True)
    sums = {shot_path.name: file_checksum(shot_path)}
    mats = materials(suite.templates, pipe, shots, sums, {}, None)
    assert mats["prompt.few_shot_exemplars"]["ids"] == [q.id for q in shots[:5]] and len(shots) >= 5
    assert mats["prompt.template_text"] == suite.templates[pipe.prompt.template].model_dump(mode="json")
    card = pipe.card(mats)
    # one exemplar's gold label changed: another upstream hash, the same fields
    edited = [shots[0].model_copy(update={"gold": "D" if shots[0].gold != "D" else "A"}), *shots[1:]]
    other = pipe.card(materials(suite.templates, pipe, edited, sums, {}, None))
    assert other["fields"] == card["fields"] and other["upstream_hash"] != card["upstream_hash"]
    # another option format (a template field no pipeline field names): another upstream hash
    template = suite.templates[pipe.prompt.template]
    reformatted = {
        **suite.templates,
        pipe.prompt.template: template.model_copy(update={"option_format": "({label}) {text}"}),
    }
    moved = pipe.card(materials(reformatted, pipe, shots, sums, {}, None))
    assert moved["upstream_hash"] != card["upstream_hash"]
    # exemplars past the count used are not part of what was asked
    assert pipe.card(materials(suite.templates, pipe, [*shots[:5], *shots[:1]], sums, {}, None))["hash"] == card["hash"]


def test_the_judge_prompts_are_in_the_judge_material(monkeypatch: pytest.MonkeyPatch) -> None:
    before = cards.judge_material(judge_prompts.judge_card("j"))
    assert before["prompts"] == judge_prompts.judge_card("j")["prompts"] and len(before["prompts_sha256"]) == 64
    cards._judge_prompts_sha.cache_clear()
    original = judge_prompts.grading_request
    monkeypatch.setattr(judge_prompts, "grading_request", lambda q, r: original(q, r + " (edited prompt)"))
    try:
        assert cards.judge_material(judge_prompts.judge_card("j"))["prompts_sha256"] != before["prompts_sha256"]
    finally:
        cards._judge_prompts_sha.cache_clear()


def test_resume_under_xdist_refuses_an_edited_suite_naming_the_file(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy
) -> None:
    """Under xdist the workers collect and compare (the controller hands them the run's cards)."""
    run_toy(pytester, scripted, "-k", "t01 or t02")
    run_dir = only_run_dir(pytester.path / "out")
    suite = pytester.path / "suites" / "toy" / "suite.toml"
    suite.write_text(
        suite.read_text().replace('user = "{question}\\n{options}"', 'user = "EDITED {question}\\n{options}"')
    )
    result = run_toy(pytester, scripted, "--resume", str(run_dir), "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "suite file(s) changed since the run: suites/toy/suite.toml (sha256" in text and "Traceback" not in text
    assert len(read_run(run_dir)["records"]) == 2 and not any("EDITED" in t for t in user_texts(scripted))
