"""The toy-suite builder (pytest_benchaudit.testing.toy), read back by the package's own suite and data loaders."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_benchaudit.dataset.suites import load_suite
from pytest_benchaudit.testing.toy import TOY_QUESTIONS, layer_toml, mcq_suite_toml, write_mcq_suite, write_toy


def test_the_toy_suite_loads_with_both_layers_and_the_extra_task(tmp_path: Path) -> None:
    suite_dir, data_dir = write_toy(tmp_path)
    suite = load_suite(suite_dir / "suite.toml")
    assert suite.name == "toy" and suite.title == "Toy benchmark for tests" and suite.data_folder == "toy"
    assert sorted(suite.layer_names("mcq")) == ["released", "standardized"]
    assert suite.layer_names("extra") == ["standardized"]
    std, rel = suite.pipeline("mcq", "standardized"), suite.pipeline("mcq", "released")
    fields = std.card()["fields"]
    assert fields["inference.max_tokens"] == 64 and fields["inference.stop"] == []
    assert fields["extraction.rule"] == "final_answer_letter" and fields["extraction.reasoning"] == "strip"
    assert fields["scoring.denominator"] == "total" and fields["aggregation.by"] == "topic"
    released = rel.card()["fields"]
    assert (released["extraction.reasoning"], released["scoring.denominator"]) == ("keep", "valid")
    # the two layers differ downstream only: the same requests
    assert {k: v for k, v in fields.items() if k.startswith(("prompt.", "inference."))} == {
        k: v for k, v in released.items() if k.startswith(("prompt.", "inference."))
    }
    rows = [json.loads(line) for line in (data_dir / "toy" / "toy.jsonl").read_text().splitlines()]
    assert [(r["id"], r["gold"]) for r in rows] == [(qid, gold) for qid, _marker, gold in TOY_QUESTIONS]
    assert all(marker in r["question"] for r, (_qid, marker, _gold) in zip(rows, TOY_QUESTIONS, strict=True))


def test_the_builder_writes_what_it_is_given(tmp_path: Path) -> None:
    extra = "\n" + layer_toml(
        "mcq",
        "released",
        temperature=None,
        max_tokens=8,
        stop=["\n"],
        reasoning="keep",
        denominator="valid",
        template="plain",
        why={"inference.max_tokens": "eight"},
        notes=["a note"],
    )
    (tmp_path / "suites" / "b").mkdir(parents=True)
    (tmp_path / "suites" / "b" / "suite.toml").write_text(mcq_suite_toml("b", title="B \"quoted\"", extra=extra))
    suite = load_suite(tmp_path / "suites" / "b" / "suite.toml")
    assert suite.title == 'B "quoted"' and sorted(suite.layer_names("mcq")) == ["released", "standardized"]
    rel = suite.pipeline("mcq", "released")
    fields = rel.card()["fields"]
    assert fields["inference.max_tokens"] == 8 and fields["inference.stop"] == ["\n"]
    assert rel.why == {"inference.max_tokens": "eight"} and "inference.decoding.temperature" not in rel.why
    write_mcq_suite(tmp_path, "c", [{"id": "q", "question": "Q?", "options": ["x", "y"], "gold": "A"}])
    written = (tmp_path / "data" / "c" / "c.jsonl").read_text()
    assert written == '{"id": "q", "question": "Q?", "options": ["x", "y"], "gold": "A"}\n'
    assert load_suite(tmp_path / "suites" / "c" / "suite.toml").layer_names("mcq") == ["standardized"]
