"""CTI-Bench (RCM, RCM-2021, VSP, ATE, TAA) and AthenaBench (six tasks): rules, metrics, suites.

Released rules and metrics are checked against the benchmarks' own released outputs:
AthenaBench ``runs-mini/*-scored.jsonl`` (12 models' raw responses with per-item scores) and
CTI-Bench ``responses/*.tsv`` (extracted answers whose notebook figures are known).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import pytest

from helpers import SUITES
from pytest_benchaudit.dataset.suites import load_suite
from pytest_benchaudit.pipeline.types import Extraction, Generation, Question
from pytest_benchaudit.scoring import extract
from pytest_benchaudit.scoring import metrics as scoring
from pytest_benchaudit.scoring.tasks import cvss, cwe
from pytest_benchaudit.testing.data import data_file, read_tsv, real_data_dir
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

GEN = Generation(text="")


def q(gold: str = "", **kw) -> Question:
    return Question(benchmark="b", task="t", id="1", index=0, gold=gold, **kw)


def run_rule(name: str, text: str, question: Question | None = None):
    return extract.RULES[name](text, question or q(), GEN)


# A toy alias/related graph written for these tests (not benchmark data).
TOY_GRAPHS = {
    "aliases": {"apt28": ["fancy bear", "sofacy"], "sidecopy": ["nan"], "patchwork": ["nan"], "lonely": []},
    "related": {"apt28": ["apt29"], "nan": ["x"]},
}


# --------------------------------------------------------------------------- registry


def test_families_register_rules_and_metrics():
    for name in (
        "cwe_last_match",
        "athena_cwe",
        "cwe_final_answer",
        "cvss_last_vector",
        "athena_cvss31",
        "cvss_final_vector",
        "athena_mcq_letter",
        "athena_technique",
        "athena_mitigations",
        "technique_ids_final_line",
        "technique_final_answer",
        "mitigation_ids_final_line",
        "athena_actor_line",
        "actor_final_line",
    ):
        assert name in extract.RULES, name
    info = scoring.METRIC_INFO
    assert info["cvss_abs_diff_cti"].lower_is_better and info["cvss_abs_diff_cti"].kind == "continuous"
    assert info["cvss_abs_diff"].lower_is_better and info["cvss_abs_diff"].invalid_value == 10.0
    assert not info["cvss_closeness_athena"].lower_is_better
    assert info["technique_set_f1"].kind == "continuous" and info["mitigation_set_f1"].kind == "continuous"
    assert info["cti_actor_graph"].resources == ("aliases", "related") == info["actor_graph"].resources


# --------------------------------------------------------------------------- CWE


def test_cti_rcm_last_match_and_raw_text_rule():
    assert run_rule("cwe_last_match", "CWE-79 fits.\nCWE-352\nNot CWE-20 though.")[0] == "CWE-20"
    assert run_rule("cwe_last_match", "cwe-79 lower case is not matched")[0] == "cwe-79 lower case is not matched"
    assert run_rule("cwe_last_match", "I cannot tell.")[0] is None


def test_athena_cwe_bottom_up_ignorecase():
    assert run_rule("athena_cwe", "Maybe CWE-20.\n\nAnswer: cwe-352\n")[0] == "CWE-352"
    assert run_rule("athena_cwe", "Answer:\nCWE-79")[0] == "CWE-79"
    assert run_rule("athena_cwe", "no id")[0] is None


def test_cwe_final_answer_prefers_answer_line():
    text = "Answer: CWE-352\nNote: CWE-20 was also considered."
    assert run_rule("cwe_final_answer", text)[0] == "CWE-352"
    assert run_rule("cwe_last_match", text)[0] == "CWE-20"  # the released rule takes the note's id
    assert run_rule("cwe_final_answer", "It is CWE-0079\nbecause...")[0] == "CWE-79"  # fallback, normalised
    assert scoring.METRICS["exact_match"]("CWE-352", q("cwe-352"), {}).correct


# --------------------------------------------------------------------------- CVSS

VEC = "AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"


def test_cti_vsp_rule_and_prefix_quirk():
    text = f"First guess {VEC.replace('A:H', 'A:N')}\nFinal: CVSS:3.1/{VEC}"
    assert run_rule("cvss_last_vector", text)[0] == VEC  # letters-only match, prefix dropped
    assert run_rule("cvss_last_vector", "AV:X/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H")[0] is None  # does not parse
    s = scoring.METRICS["cvss_abs_diff_cti"](VEC, q(f"CVSS:3.1/{VEC}"), {})
    assert s.value == 0 and s.correct
    s = scoring.METRICS["cvss_abs_diff_cti"]("AV:L/AC:L/PR:L/UI:N/S:U/C:N/I:N/A:H", q(f"CVSS:3.1/{VEC}"), {})
    assert s.value == pytest.approx(9.8 - 5.5)


def test_cvss_v30_prefix_changes_no_base_score():
    """The CTI-Bench 'CVSS:3.0/' quirk: with the cvss library it moves no base score at all."""
    letters = itertools.product("NALP", "LH", "NLH", "NR", "UC", "NLH", "NLH", "NLH")
    names = ("AV", "AC", "PR", "UI", "S", "C", "I", "A")
    for values in letters:
        v = "/".join(f"{n}:{x}" for n, x in zip(names, values))
        assert cvss.base_score("CVSS:3.0/" + v) == cvss.base_score("CVSS:3.1/" + v), v


def test_athena_vsp_requires_prefix_and_parse():
    assert run_rule("athena_cvss31", f"Answer: CVSS:3.1/{VEC}")[0] == f"CVSS:3.1/{VEC}"
    assert run_rule("athena_cvss31", f"Answer: {VEC}")[0] is None  # bare vector not read
    assert run_rule("athena_cvss31", f"Answer: **CVSS:3.1/{VEC}**")[0] is None  # '**' glued on: unparseable
    s = scoring.METRICS["cvss_closeness_athena"](
        f"CVSS:3.1/{VEC}", q("CVSS:3.1/AV:N/AC:L/PR:L/UI:R/S:C/C:L/I:L/A:N"), {}
    )
    assert s.value == pytest.approx(1 - (9.8 - 5.4) / 7.7)


def test_standardized_vsp_accepts_any_prefix_and_scores_worst_case_when_invalid():
    for text in (f"Answer: {VEC}", f"CVSS:3.0/{VEC}", f"**cvss:3.1/{VEC.lower()}**"):
        assert run_rule("cvss_final_vector", text)[0] == f"CVSS:3.1/{VEC}", text
    assert run_rule("cvss_final_vector", "AV:N only")[0] is None
    invalid = Extraction(invalid_reason="unparseable")
    assert scoring.score("cvss_abs_diff", invalid, q(f"CVSS:3.1/{VEC}")).value == 10.0
    assert scoring.METRICS["cvss_abs_diff"](f"CVSS:3.1/{VEC}", q(f"CVSS:3.1/{VEC}"), {}).correct


# --------------------------------------------------------------------------- ATT&CK


def test_athena_mcq_article_a_quirk_and_neighbour_line():
    text = "The best fit is option C.\nAnswer: C\nThis is a judgement call."
    assert run_rule("athena_mcq_letter", text)[0] == "A"  # the article "a" on the last line
    assert run_rule("final_answer_letter", text, q(choices={k: k for k in "ABCDE"}))[0] == "C"
    assert run_rule("athena_mcq_letter", "Final answer:\nE")[0] == "E"
    assert run_rule("athena_mcq_letter", "Prediction - b")[0] == "B"


def test_athena_ate_and_rms_rules():
    assert run_rule("athena_technique", "T1059 maybe\nAnswer: t1218.001")[0] == "T1218"
    assert scoring.METRICS["technique_parent_exact"]("T1218", q("T1218.001"), {}).correct
    text = "Answer: M1038, M1042\nThese help."
    assert run_rule("athena_mitigations", text)[0] is None  # only the last line is read
    assert run_rule("mitigation_ids_final_line", text)[0] == "M1038, M1042"
    s = scoring.METRICS["mitigation_set_f1"]("M1038, M1042", q("M1021, M1038"), {})
    assert s.value == pytest.approx(0.5) and not s.correct


def test_cti_ate_final_line_parents_and_f1():
    text = "T1071 is used...\nT1055.012 also.\nT1071, T1573.002, T1083"
    assert run_rule("technique_ids_final_line", text)[0] == "T1071, T1083, T1573"
    assert run_rule("technique_ids_final_line", "Uses T1071 and T1083.\nThat is all.")[0] == "T1071, T1083"
    s = scoring.METRICS["technique_set_f1"]("T1071, T1083, T1573", q("T1071, T1573, T1083, T1070"), {})
    assert s.value == pytest.approx(2 * 1 * 0.75 / 1.75) and not s.correct
    assert scoring.METRICS["technique_set_f1"]("T1071, T1573", q("T1573, T1071"), {}).correct
    assert run_rule("technique_final_answer", "Answer: T1059 or T1218")[0] is None  # a hedge


# --------------------------------------------------------------------------- actors


def test_actor_rules():
    assert run_rule("athena_actor_line", 'Reasoning...\nAnswer:  "Fancy   Bear"')[0] == "Fancy Bear"
    assert run_rule("actor_final_line", "Reasoning...\n**Answer:** APT28.\n")[0] == "APT28"


def test_cti_taa_released_bfs_quirks_vs_standardized():
    cti, std = scoring.METRICS["cti_actor_graph"], scoring.METRICS["actor_graph"]
    s = cti("Sofacy", q("APT28 "), TOY_GRAPHS)
    assert s.correct and s.extras == {"plausible": 1.0, "combined": 1.0}
    s = cti("APT29", q("apt28"), TOY_GRAPHS)
    assert s.value == 0 and s.extras == {"plausible": 1.0, "combined": 0.5}
    # released: the start node is never compared, so an identical name without aliases is "I"
    assert not cti("lonely", q("Lonely"), TOY_GRAPHS).correct
    assert std("lonely", q("Lonely"), TOY_GRAPHS).correct
    # released: the string "nan" is a node linking unrelated actors; standardized drops it
    assert cti("Patchwork", q("SideCopy"), TOY_GRAPHS).correct
    assert not std("Patchwork", q("SideCopy"), TOY_GRAPHS).extras["plausible"]
    with pytest.raises(KeyError, match="resource"):
        scoring.score("actor_graph", Extraction(prediction="x"), q("y"), {})


# --------------------------------------------------------------------------- real data: CTI-Bench


@pytest.fixture(scope="module")
def cti_graphs() -> dict:
    return {
        name: json.loads(data_file("cti-bench", "taa-lookups", f"{stem}.json").read_text())
        for name, stem in (("aliases", "alias_dict"), ("related", "related_dict"))
    }


def _released_rcm(path: Path, model: str) -> float:
    vals = []
    for row in read_tsv(path):
        pred, _ = cwe.cwe_last_match(row[model], q(), GEN)
        if pred is not None:
            vals.append(scoring.METRICS["exact_match"](pred, q(row["GT"]), {}).value)
    return 100 * sum(vals) / len(vals)


def test_cti_released_figures_reproduced(cti_graphs):
    """The notebook's printed ChatGPT-4 figures: RCM 72.0, RCM-2021 68.0, VSP MAD 1.31, TAA (52, 86)."""
    assert _released_rcm(data_file("cti-bench", "responses", "cti-rcm-responses.tsv"), "ChatGPT-4") == pytest.approx(
        72.0
    )
    assert _released_rcm(
        data_file("cti-bench", "responses", "cti-rcm-2021-responses.tsv"), "ChatGPT-4"
    ) == pytest.approx(68.0)
    diffs = []
    for row in read_tsv(data_file("cti-bench", "responses", "cti-vsp-responses.tsv")):
        pred, _ = cvss.cvss_last_vector(row["ChatGPT-4"], q(), GEN)
        if pred is not None:
            diffs.append(scoring.METRICS["cvss_abs_diff_cti"](pred, q(row["GT"]), {}).value)
    assert len(diffs) == 1000 and sum(diffs) / len(diffs) == pytest.approx(1.31)
    rows = read_tsv(data_file("cti-bench", "responses", "cti-taa-responses.tsv"))
    scores = [scoring.METRICS["cti_actor_graph"](r["ChatGPT-4"], q(r["GT"]), cti_graphs) for r in rows]
    assert 100 * sum(s.value for s in scores) / len(rows) == pytest.approx(52.0)
    assert 100 * sum(s.extras["plausible"] for s in scores) / len(rows) == pytest.approx(86.0)


# --------------------------------------------------------------------------- real data: AthenaBench runs

ATHENA_RULES = {
    "MCQ3k": "athena_mcq_letter",
    "ATE": "athena_technique",
    "RMS": "athena_mitigations",
    "RCM": "athena_cwe",
    "VSP": "athena_cvss31",
    "TAA": "athena_actor_line",
}
ATHENA_METRICS = {
    "MCQ3k": "exact_match",
    "ATE": "technique_parent_exact",
    "RMS": "mitigation_set_f1",
    "RCM": "exact_match",
    "VSP": "cvss_closeness_athena",
    "TAA": "actor_graph",
}


def _released_item(task: str, row: dict) -> float | None:
    """The released per-item number on our scale (None: excluded from the denominator)."""
    if task == "VSP":
        return 1 - row["score"] / 7.7 if row["success"] else None
    if task == "TAA":
        return float(row["score"]["correct"])
    return float(row["score"])


@pytest.fixture(scope="module")
def athena_agreement(cti_graphs) -> dict[str, Counter]:
    runs = real_data_dir() / "athenabench" / "runs-mini"
    if not runs.is_dir():
        pytest.skip(f"real-data folder missing: {runs}")
    out: dict[str, Counter] = {}
    for path in sorted(runs.rglob("*-scored.jsonl")):
        task = path.name.split("-")[0]
        c = out.setdefault(task, Counter())
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            question = q(row["answer"])
            ex = extract.extract(ATHENA_RULES[task], Generation(text=row["response"] or ""), question, "keep")
            ours = scoring.score(ATHENA_METRICS[task], ex, question, cti_graphs)
            mine = None if (task == "VSP" and not ex.valid) else ours.value
            theirs = _released_item(task, row)
            c["rows"] += 1
            c["prediction"] += (
                (ex.prediction or "") == row["prediction"]
                or (not ex.valid and not row["success"])
                or (not ex.valid and row["prediction"] in ("", "X"))
            )
            c["score"] += (mine is None and theirs is None) or (
                mine is not None and theirs is not None and abs(mine - theirs) < 1e-9
            )
    return out


@pytest.mark.parametrize("task", ["MCQ3k", "ATE", "RMS", "RCM", "VSP"])
def test_athena_released_rules_and_metrics_match_every_released_score(athena_agreement, task):
    c = athena_agreement[task]
    assert c["rows"] == {"MCQ3k": 3600, "ATE": 1200, "RMS": 1200, "RCM": 2400, "VSP": 2400}[task]
    assert c["score"] == c["rows"], c
    assert c["prediction"] == c["rows"], c


def test_athena_taa_with_cti_bench_graphs_agrees_mostly(athena_agreement):
    c = athena_agreement["TAA"]
    assert c["rows"] == 600 and c["prediction"] == 600
    # AthenaBench's own alias tables are not public: 16 rows differ (aliases CTI-Bench lacks).
    assert c["score"] >= 580, c


def test_athena_vsp_aggregate_is_over_valid_rows(athena_agreement):
    rows = [
        json.loads(x)
        for x in data_file("athenabench", "runs-mini", "Qwen", "Qwen3-4B-Instruct-2507", "VSP-scored.jsonl")
        .read_text()
        .splitlines()
    ]
    exs = [extract.extract("athena_cvss31", Generation(text=r["response"]), q(r["answer"]), "keep") for r in rows]
    assert sum(not e.valid for e in exs) == 90  # the released 90/200 invalid
    vals = [scoring.score("cvss_closeness_athena", e, q(r["answer"])).value for e, r in zip(exs, rows) if e.valid]
    assert 100 * sum(vals) / len(vals) == pytest.approx(78.2, abs=0.05)


# --------------------------------------------------------------------------- suites


def test_suite_layers_and_resources():
    cti = load_suite(SUITES / "cti_bench" / "suite.toml")
    assert set(cti.tasks) == {"mcq", "rcm", "rcm_2021", "vsp", "ate", "taa"}
    for task in ("rcm", "rcm_2021", "vsp", "ate", "taa"):
        assert set(cti.layer_names(task)) >= {"documented", "released", "standardized"}
        assert cti.pipeline(task, "released").aggregation.method == "unspecified"
    assert cti.pipeline("vsp", "released").scoring.denominator == "valid"
    assert cti.pipeline("ate", "released").scoring.metric == "unspecified"
    assert cti.tasks["taa"].resources == {
        "aliases": "taa-lookups/alias_dict.json",
        "related": "taa-lookups/related_dict.json",
    }
    athena = load_suite(SUITES / "athenabench" / "suite.toml")
    assert athena.data_folder == "athenabench"
    assert {athena.pipeline(t, "released").aggregation.method for t in athena.tasks} == {"macro"}
    assert all(athena.pipeline(t, "released").prompt.format.system_role == "none" for t in athena.tasks)
    assert athena.pipeline("vsp", "released").scoring.denominator == "valid"


def _script(call) -> Reply:
    text = call.last_user_text
    if "multiple-choice question" in text:
        return Reply(content="Answer: B")
    if "mitigation" in text:
        return Reply(content="Answer: M1038, M1042")
    if "CVSS" in text:
        return Reply(content=f"Answer: CVSS:3.1/{VEC}")
    if "CWE" in text:
        return Reply(content="Answer: CWE-79")
    if "technique" in text.lower():
        return Reply(content="Answer: T1071, T1573")
    return Reply(content="Answer: APT29")


def _run_suite(pytester: pytest.Pytester, real_data: Path, name: str, *extra: str) -> tuple[pytest.RunResult, dict]:
    with ScriptedServer(_script) as server:
        result = pytester.runpytest(
            str(SUITES / name),
            "--data-dir",
            str(real_data),
            "--limit",
            "2",
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
            "-p",
            "no:randomly",
            *extra,
        )
    return result, read_run(only_run_dir(pytester.path / "out"))


def test_cti_bench_end_to_end(pytester: pytest.Pytester, real_data: Path) -> None:
    result, out = _run_suite(pytester, real_data, "cti_bench")
    results = {r["task"]: r for r in out["summary"]["results"]}
    assert set(results) == {"mcq", "rcm", "rcm_2021", "vsp", "ate", "taa"}
    expected = {
        "mcq": "exact_match",
        "rcm": "exact_match",
        "rcm_2021": "exact_match",
        "vsp": "cvss_abs_diff",
        "ate": "technique_set_f1",
        "taa": "actor_graph",
    }
    for task, metric in expected.items():
        assert results[task]["metric"] == metric
        assert results[task]["lower_is_better"] is (task == "vsp")
        assert results[task]["n"] == 2
    assert "plausible" in results["taa"]["extras"]
    assert "cti-bench/taa-lookups/alias_dict.json" in out["run"]["dataset_checksums"]


def test_athenabench_end_to_end(pytester: pytest.Pytester, real_data: Path) -> None:
    result, out = _run_suite(pytester, real_data, "athenabench", "--pipeline", "released", "-rs")
    results = {r["task"]: r for r in out["summary"]["results"]}
    expected = {
        "mcq": "exact_match",
        "ate": "technique_parent_exact",
        "rms": "mitigation_set_f1",
        "rcm": "exact_match",
        "vsp": "cvss_closeness_athena",
        "taa": "actor_graph",
    }
    assert set(results) == set(expected)
    for task, metric in expected.items():
        assert results[task]["metric"] == metric and results[task]["lower_is_better"] is False
    assert results["vsp"]["denominator"] == "valid"
    # TAA is scored with CTI-Bench's lookups, read from the cti-bench data folder
    assert "cti-bench/taa-lookups/related_dict.json" in out["run"]["dataset_checksums"]
    assert set(results["taa"]["extras"]) == {"plausible", "combined"}
    # released: the combined score is the unweighted mean of the six task numbers
    (bench,) = out["summary"]["benchmarks"]
    assert bench["method"] == "macro"
    assert bench["score"] == pytest.approx(sum(r["score"] for r in results.values()) / 6)
