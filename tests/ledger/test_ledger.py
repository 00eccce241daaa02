"""The reproducibility ledger: documented vs released layer, per benchmark and pipeline field."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from helpers import SUITES
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.dataset.suites import load_suite
from pytest_benchaudit.ledger.ledger_render import render
from pytest_benchaudit.ledger.ledger_rows import (
    CONTRADICTED,
    MATCHED,
    PIPELINE_FIELDS,
    UNDEFINED,
    UNREAD,
    build_ledger,
    moot_reason,
    suite_ledger,
)

# The suites whose cells and totals these tests pin down (others are added to suites/ and
# edited concurrently by their owners; they are checked only for consistency).
KNOWN = ("seceval", "mmlu_cs", "cybermetric")


@pytest.fixture(scope="module")
def suites_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("suites")
    shutil.copy(SUITES / "standardized.toml", root / "standardized.toml")
    for name in KNOWN:
        shutil.copytree(SUITES / name, root / name)
    return root


@pytest.fixture(scope="module")
def ledger(suites_dir: Path) -> dict:
    return build_ledger(suites_dir)


def row(ledger: dict, bench: str) -> dict:
    return next(r for r in ledger["benchmarks"] if r["benchmark"] == bench)


def status(ledger: dict, bench: str, field: str) -> str:
    return row(ledger, bench)["cells"][field]["status"]


def test_cybermetric_prompt_template_contradicted_readme_vs_code(ledger: dict) -> None:
    cell = row(ledger, "cybermetric")["cells"]["prompt.template"]
    assert cell["status"] == CONTRADICTED
    assert cell["tasks"] == {"cm80": CONTRADICTED, "cm500": CONTRADICTED, "cm2000": CONTRADICTED}
    value = cell["values"]["cm80"]["prompt.template"]
    assert (value["documented"], value["released"]) == ("documented", "released")
    # the names stand for texts: the ledger says which template fields differ and how
    assert value["content"]["system"]["released"] == "You are a security expert who answers questions."
    assert "<xml>answer</xml>" in value["content"]["system"]["documented"]
    assert 'documented "documented", released "released"' in cell["note"]
    assert "README.md 'Prompt' section" in cell["note"] and "CyberMetric_evaluator.py ask_llm()" in cell["note"]
    # documented (README make_messages): chat, a system message, no exemplars -> as released
    assert status(ledger, "cybermetric", "prompt.format") == MATCHED
    # the README asks for <xml>X</xml>; the released code reads only 'ANSWER: X'
    ext = row(ledger, "cybermetric")["cells"]["extraction.rule"]
    assert ext["status"] == CONTRADICTED
    assert ext["values"]["cm80"]["extraction.rule"] == {"documented": "xml_answer", "released": "answer_regex"}
    quirks = row(ledger, "cybermetric")["quirks"]
    assert row(ledger, "cybermetric")["quirks_source"] == "ledger"
    assert any("<xml>answer</xml>" in q and "ANSWER: X" in q for q in quirks)


def test_seceval_cells(ledger: dict) -> None:
    r = row(ledger, "seceval")
    assert r["cells"]["inference.max_tokens"]["status"] == UNDEFINED
    assert "HF backends" in r["cells"]["inference.max_tokens"]["note"]  # the released why
    # the README states chat mode (-c) and per-topic results, nothing else
    assert r["cells"]["prompt.format"]["status"] == UNDEFINED
    assert "-c flag" in r["cells"]["prompt.format"]["note"]
    assert r["cells"]["aggregation"]["status"] == UNDEFINED
    assert r["cells"]["dataset"]["status"] == MATCHED
    assert all(c["status"] != CONTRADICTED for c in r["cells"].values())
    assert r["quirks_source"] == "ledger"
    assert any("2,126" in q and "2,189" in q for q in r["quirks"])
    assert any("'AA'" in q for q in r["quirks"]) and any("empty" in q for q in r["quirks"])


def test_mmlu_cells_from_the_papers_evaluation_paragraph(ledger: dict) -> None:
    r = row(ledger, "mmlu_cs")
    # the documented layer states the split (test), which the released code uses too
    assert r["cells"]["dataset"]["status"] == MATCHED
    # arXiv 2009.03300: 5-shot completion prompts, the highest-probability letter, accuracy
    # what the paragraph leaves open is unread, not undefined: the rest of the paper was not read
    assert {f: c["status"] for f, c in r["cells"].items() if f != "dataset"} == {
        **{f: UNREAD for f in PIPELINE_FIELDS},
        "prompt.format": MATCHED,
        "scoring.metric": MATCHED,
        "extraction.rule": CONTRADICTED,
    }
    assert r["summary"] == (
        "1 of 9 pipeline fields cannot be reproduced from documentation alone; 6 more are "
        "unread (a document that may state them was not read)"
    )
    assert r["unread"] and "2009.03300" in r["unread"][0]
    fmt = r["cells"]["prompt.format"]["note"]
    assert "add up to 5 demonstration examples" in fmt and "evaluate.py --ntrain default 5" in fmt
    # the paper's argmax against the released bare-except fallback 'A'
    ext = r["cells"]["extraction.rule"]
    assert ext["values"]["mcq"]["extraction.rule"] == {
        "documented": "logprob_argmax",
        "released": "mmlu_logprob_argmax",
    }
    assert "we treat the highest probability option as the prediction" in ext["note"]
    assert "bare try/except" in ext["note"]
    # the template: the header is quoted, the option lines (Figure 1a) were not read
    tpl = r["cells"]["prompt.template"]
    assert tpl["status"] == UNREAD and "Figure 1a" in tpl["note"]
    # every unread cell says where it was looked for and what could not be read
    assert all(
        "looked in: README.md @ 4450500" in r["cells"][f]["note"]
        and "not read (may state it): arXiv 2009.03300" in r["cells"][f]["note"]
        for f in PIPELINE_FIELDS
        if r["cells"][f]["status"] == UNREAD
    )
    # the arg-max of first-token log-probabilities: temperature, top_p and seed cannot move it
    dec = r["cells"]["inference.decoding"]
    assert set(dec["moot"]) == {"inference.decoding.temperature", "inference.decoding.top_p", "inference.decoding.seed"}
    assert "moot, not counted: inference.decoding.seed" in dec["note"]
    assert any("C 30" in q for q in r["quirks"])


def test_cti_bench_mcq_template_contradicted() -> None:
    r = suite_ledger(load_suite(SUITES / "cti_bench" / "suite.toml"))
    # documented: the dataset's Prompt column alone; released: a system message on top
    assert r["cells"]["prompt.template"]["tasks"]["mcq"] == CONTRADICTED
    assert r["cells"]["prompt.template"]["status"] == CONTRADICTED
    assert r["not_reproducible"] == r["counts"][UNDEFINED] + r["counts"][CONTRADICTED]


def test_cti_bench_cells_from_the_paper() -> None:
    """CTIBench paper (section 4.1/4.2, Appendix C/D): zero-shot, temperature 0 / top_p 1, the
    expert-sentence prompts, accuracy / MAD / Correct-Plausible BFS; ATE's metric is named two ways."""
    r = suite_ledger(load_suite(SUITES / "cti_bench" / "suite.toml"))
    metric = r["cells"]["scoring.metric"]
    assert metric["tasks"] == {
        "mcq": MATCHED,
        "rcm": MATCHED,
        "rcm_2021": MATCHED,
        "vsp": MATCHED,
        "ate": UNDEFINED,
        "taa": CONTRADICTED,
    }
    assert metric["status"] == CONTRADICTED
    assert metric["values"]["taa"]["scoring.metric"] == {"documented": "actor_graph", "released": "cti_actor_graph"}
    assert "We use accuracy to evaluate the CTI-MCQ" in metric["note"]
    # temperature 0 is stated and matches; the unstated seed (and top_p) cannot matter at temperature 0,
    # so they do not make the column undefined: the reason is recorded instead
    suite = load_suite(SUITES / "cti_bench" / "suite.toml")
    doc = suite.pipeline("mcq", "documented").card()["fields"]
    assert doc["inference.decoding.temperature"] == 0.0 and doc["inference.decoding.top_p"] == 1.0
    assert doc["prompt.format.few_shot"] == 0 and doc["inference.decoding.seed"] == "unspecified"
    assert r["cells"]["inference.decoding"]["status"] == MATCHED
    assert set(r["cells"]["inference.decoding"]["moot"]) == {"inference.decoding.top_p", "inference.decoding.seed"}
    assert "temperature 0 is greedy decoding" in r["cells"]["inference.decoding"]["note"]
    assert "We set the temperature of LLMs at 0" in r["cells"]["inference.decoding"]["note"]
    # the paper's prompts: the expert sentence in front of the Prompt column, except CTI-VSP
    assert suite.templates["documented"].user.startswith(
        "You are a cybersecurity expert specializing in cyber threat intelligence. {prompt}"
    )
    assert suite.tasks["vsp"].layers["documented"]["prompt"]["template"] == "dataset_prompt"
    assert "Micro-F1" in suite.pipeline("ate", "documented").why["scoring.metric"]


def test_totals_add_up(ledger: dict) -> None:
    rows = ledger["benchmarks"]
    assert [r["benchmark"] for r in rows] == sorted(KNOWN)
    for r in rows:
        # the nine pipeline fields are counted, the dataset row apart
        assert sum(r["counts"].values()) == r["fields_total"] == len(PIPELINE_FIELDS) == 9
        assert r["not_reproducible"] == r["counts"][UNDEFINED] + r["counts"][CONTRADICTED]
        unread = (
            ""
            if not r["counts"][UNREAD]
            else (f"; {r['counts'][UNREAD]} more are unread (a document that may state them was not read)")
        )
        assert r["summary"] == (
            f"{r['not_reproducible']} of {r['fields_total']} pipeline fields cannot be "
            "reproduced from documentation alone" + unread
        )
        assert r["counts"] == {s: [r["cells"][f]["status"] for f in PIPELINE_FIELDS].count(s) for s in r["counts"]}
        assert r["dataset"] == r["cells"]["dataset"]["status"] == MATCHED
    t = ledger["totals"]
    # seceval has no paper (its README was read: undefined); the CyberMetric and MMLU papers were not read in full
    assert t["not_reproducible"] == sum(r["not_reproducible"] for r in rows) == 12
    assert t["fields_total"] == t["cells"] == 27
    assert t["counts"] == {MATCHED: 3, UNDEFINED: 9, CONTRADICTED: 3, UNREAD: 12}
    assert t["paper_counts"] == {MATCHED: 28, UNDEFINED: 36, CONTRADICTED: 8}
    assert t["dataset_counts"] == {MATCHED: 3, UNDEFINED: 0, CONTRADICTED: 0, UNREAD: 0}
    assert t["summary"] == "12 of 27 cells cannot be reproduced from documentation alone; 12 more are unread"


def test_all_formats_render(ledger: dict) -> None:
    table = render(ledger, "table")
    assert "CONTRADICTED" in table and "overall: 12 of 27 cells" in table
    assert "ours 3 matched / 9 undefined / 3 contradicted / 12 unread." in table
    assert (
        "Paper view, over the 15 cells read (12 unread left out): ours 3 matched (20%) / 9 undefined (60%) / "
        "3 contradicted (20%); paper, over its 72 cells: 28 matched (39%) / 36 undefined (50%) / "
        "8 contradicted (11%)."
    ) in table
    assert "data quirks (from ledger)" in table
    md = render(ledger, "markdown")
    assert "| cybermetric | CONTRADICTED | matched | unread |" in md and "| 2 of 9 +6 unread |" in md
    assert "**Overall: 12 of 27" in md
    assert json.loads(render(ledger, "json")) == json.loads(json.dumps(ledger))
    with pytest.raises(ValueError, match="unknown format"):
        render(ledger, "html")


def test_cli_ledger(suites_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", "--format", "json", "--suites-dir", str(suites_dir)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["totals"]["not_reproducible"] == 12 and data["fields"] == list(PIPELINE_FIELDS)
    assert main(["ledger", "--suites-dir", str(suites_dir), "--format", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("# Reproducibility ledger")
    assert main(["ledger", "--suites-dir", str(tmp_path)]) == 2
    assert "no */suite.toml found" in capsys.readouterr().err


def test_the_repository_suites_all_load() -> None:
    """Every suite in suites/ (including ones added after this test) has a ledger row."""
    ledger = build_ledger(SUITES)
    names = {r["benchmark"] for r in ledger["benchmarks"]}
    assert set(KNOWN) <= names
    assert len(names) == len(list(SUITES.glob("*/suite.toml")))


TOY = """
[benchmark]
name = "toy"
[templates.a]
user = "{question}"
[templates.b]
user = "{question}"
[templates.c]
system = "sys"
user = "{question}"
[tasks.one]
data = { file = "one.jsonl", question = "q", gold = "a" }
[tasks.one.documented]
prompt.template = "a"
inference.max_tokens = 5
inference.decoding = { temperature = 0.0 }
scoring = { metric = "exact_match", denominator = "total" }
extraction.rule = "final_answer_letter"
why = { "inference.max_tokens" = "README: five tokens." }
[tasks.one.released]
prompt.template = "b"
inference.max_tokens = 5
inference.decoding = { temperature = 0.0, top_logprobs = 5 }
scoring = { metric = "exact_match", denominator = "valid" }
why = { "scoring.denominator" = "code: only parsed answers." }
[tasks.two]
data = { file = "two.jsonl", question = "q", gold = "a" }
[tasks.two.documented]
prompt.template = "a"
inference.max_tokens = 5
[tasks.two.released]
prompt.template = "c"
inference.max_tokens = 5
"""


def test_rules_on_a_toy_suite(tmp_path: Path) -> None:
    path = tmp_path / "toy" / "suite.toml"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(TOY))
    r = suite_ledger(load_suite(path))
    cells = r["cells"]
    # same template content under another name: matched for task one; task two adds a system text
    assert cells["prompt.template"]["tasks"] == {"one": MATCHED, "two": CONTRADICTED}
    assert cells["prompt.template"]["status"] == CONTRADICTED
    assert "tasks differ: one matched, two contradicted" in cells["prompt.template"]["note"]
    assert '[two]' in cells["prompt.template"]["note"]
    assert cells["inference.max_tokens"]["status"] == MATCHED
    assert "documented why (inference.max_tokens): README: five tokens." in cells["inference.max_tokens"]["notes"]
    # top_logprobs is only a default in the documented layer: silent, not contradicted, so undefined;
    # top_p / seed unspecified are moot at the documented temperature 0 (not what makes it undefined)
    assert cells["inference.decoding"]["tasks"]["one"] == UNDEFINED
    assert set(cells["inference.decoding"]["moot"]) == {"inference.decoding.top_p", "inference.decoding.seed"}
    # stated "total" vs released "valid"
    assert cells["scoring.denominator"]["tasks"] == {"one": CONTRADICTED, "two": UNDEFINED}
    assert cells["scoring.denominator"]["values"]["one"]["scoring.denominator"] == {
        "documented": "total",
        "released": "valid",
    }
    # stated extraction rule, released code leaves it unspecified: contradicted, said so
    assert cells["extraction.rule"]["tasks"]["one"] == CONTRADICTED
    assert "endpoint's default" in cells["extraction.rule"]["note"]
    assert cells["scoring.metric"]["tasks"] == {"one": MATCHED, "two": UNDEFINED}
    assert cells["scoring.metric"]["status"] == UNDEFINED
    assert r["quirks"] == [] and r["quirks_source"] == "layer notes"


def test_missing_layer_and_bad_quirks(tmp_path: Path) -> None:
    path = tmp_path / "toy" / "suite.toml"
    path.parent.mkdir()
    path.write_text(
        textwrap.dedent("""
        [benchmark]
        name = "toy"
        [tasks.one]
        data = { file = "one.jsonl", question = "q", gold = "a" }
        [tasks.one.released]
        inference.max_tokens = 5
        notes = ["Data: two golds are empty.", "Quirk: unrelated to the files."]
    """)
    )
    r = suite_ledger(load_suite(path))
    assert all(c["status"] == UNDEFINED for f, c in r["cells"].items() if f != "dataset")
    assert "one has no documented layer (compared as empty)" in r["cells"]["inference.max_tokens"]["note"]
    assert r["quirks"] == ["Data: two golds are empty."]
    path.write_text(path.read_text() + '\n[ledger]\nquirks = "not a list"\n')
    from pytest_benchaudit.dataset.suites import SuiteError

    with pytest.raises(SuiteError, match=r"\[ledger\] quirks must be a list of strings"):
        suite_ledger(load_suite(path))


# --------------------------------------------------------------------------- the 72-cell view of the repository suites


def test_the_72_cell_view_with_totals_next_to_the_papers(capsys: pytest.CaptureFixture[str]) -> None:
    ledger = build_ledger(SUITES)
    rows = ledger["benchmarks"]
    assert len(rows) == 8 and ledger["fields"] == list(PIPELINE_FIELDS) and len(PIPELINE_FIELDS) == 9
    t = ledger["totals"]
    assert t["cells"] == 72 and sum(t["counts"].values()) == 72
    # 36 cells of the five benchmarks whose paper could not be read here are unread, not undefined;
    # the moot seed / top_p at a stated temperature 0 make AthenaBench's and CTI-Bench's decoding matched
    assert t["counts"] == {MATCHED: 10, UNDEFINED: 20, CONTRADICTED: 6, UNREAD: 36}
    assert t["paper_counts"] == {MATCHED: 28, UNDEFINED: 36, CONTRADICTED: 8}
    assert t["dataset_counts"] == {MATCHED: 8, UNDEFINED: 0, CONTRADICTED: 0, UNREAD: 0}  # the dataset row, apart
    assert main(["ledger", "--suites-dir", str(SUITES)]) == 0
    out = capsys.readouterr().out
    assert (
        "72 cells (8 benchmarks x 9 fields): ours 10 matched / 20 undefined / 6 contradicted / 36 unread. "
        "Paper view, over the 36 cells read (36 unread left out): ours 10 matched (28%) / 20 undefined (56%) / "
        "6 contradicted (17%); paper, over its 72 cells: 28 matched (39%) / 36 undefined (50%) / "
        "8 contradicted (11%)."
    ) in out
    assert "dataset (apart)" in out


def test_every_matched_or_contradicted_cell_cites_both_sides_and_every_undefined_says_where_looked() -> None:
    ledger = build_ledger(SUITES)
    for r in ledger["benchmarks"]:
        assert r["sources"], f"{r['benchmark']}: [ledger] sources lists no document"
        for field in PIPELINE_FIELDS:
            cell = r["cells"][field]
            where = f"{r['benchmark']}.{field}"
            if cell["status"] in (MATCHED, CONTRADICTED):
                assert cell["why"]["documented"], f"{where}: {cell['status']} without a documented citation"
                assert cell["why"]["released"], f"{where}: {cell['status']} without a released citation"
            else:
                assert "looked in: " in cell["note"], where
            if cell["status"] == UNREAD:
                assert r["unread"] and "not read (may state it): " in cell["note"], where


def test_documented_cells_read_from_the_documents() -> None:
    ledger = {r["benchmark"]: r for r in build_ledger(SUITES)["benchmarks"]}
    athena = ledger["athenabench"]["cells"]
    # readme.md: Combined = unweighted mean of the six columns -> the released macro mean
    assert athena["aggregation"]["status"] == MATCHED and "Combined" in athena["aggregation"]["note"]
    # readme + paper (arXiv 2511.01144 section 4.2, Table 1): CKT/RCM accuracy, RMS F1, ATE accuracy of
    # the parent technique id, VSP 1 - MAD/7.7; TAA 'accuracy' does not say whether aliases count
    assert athena["scoring.metric"]["tasks"] == {
        "mcq": MATCHED,
        "ate": MATCHED,
        "rms": MATCHED,
        "rcm": MATCHED,
        "vsp": MATCHED,
        "taa": UNDEFINED,
    }
    athena_suite = load_suite(SUITES / "athenabench" / "suite.toml")
    assert "1 - MAD/7.7" in athena_suite.pipeline("vsp", "documented").why["scoring.metric"]
    # temperature 0 is stated (section 4.1), top_p and seed are not, but cannot matter at temperature 0
    assert athena["inference.decoding"]["status"] == MATCHED
    assert set(athena["inference.decoding"]["moot"]) == {"inference.decoding.top_p", "inference.decoding.seed"}
    assert "decoding temperature to 0" in athena["inference.decoding"]["note"]
    redsage = ledger["redsage"]["cells"]
    # eval/README.md: instruct models run the '_em' tasks = exact match of the generated answer;
    # the released headline reads the letter with MCQAcc
    assert redsage["extraction.rule"]["status"] == CONTRADICTED and redsage["scoring.metric"]["status"] == MATCHED


def test_the_documented_pipeline_runs_documented_values(pytester: pytest.Pytester) -> None:
    """CyberMetric's README prompt and <xml>X</xml> answer format run as the documented layer;
    the fields it leaves open (metric, denominator) are supplied with --set."""
    from pytest_benchaudit.testing.data import real_data_dir
    from pytest_benchaudit.testing.runs import only_run_dir, read_run
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

    data = real_data_dir()
    if not (data / "cybermetric" / "CyberMetric-80-v1.json").is_file():
        pytest.skip("real CyberMetric-80 data missing under $BENCHAUDIT_DATA")
    with ScriptedServer(lambda call: Reply(content="<xml>B</xml>")) as server:
        skipped = pytester.runpytest(
            str(SUITES / "cybermetric"),
            "--data-dir",
            str(data),
            "-k",
            "cm80",
            "--model",
            f"m@{server.url}",
            "--pipeline",
            "documented",
            "--limit",
            "4",
            "--report-dir",
            "skip",
            "-rs",
        )
        ran = pytester.runpytest(
            str(SUITES / "cybermetric"),
            "--data-dir",
            str(data),
            "-k",
            "cm80",
            "--model",
            f"m@{server.url}",
            "--pipeline",
            "documented",
            "--limit",
            "4",
            "--set",
            "scoring.metric=exact_match",
            "--set",
            "scoring.denominator=total",
            "--report-dir",
            "out",
        )
        sent = [c.body for c in server.calls if c.path.endswith("/chat/completions")]
    skipped.assert_outcomes(skipped=4)
    assert ran.ret in (0, 1)  # the items ran (pass or fail by answer), none errored
    skipped.stdout.fnmatch_lines(["*scoring.metric*"])
    records = read_run(only_run_dir(pytester.path / "out"))["records"]
    assert len(records) == 4 and all(r["valid"] and r["prediction"] == "B" for r in records)
    assert sent and sent[0]["messages"][0]["content"].startswith("You are a helpful AI assistant.\nInstructions:")


def test_mmlu_documented_pipeline_runs_the_papers_argmax(pytester: pytest.Pytester) -> None:
    """The contradicted MMLU extraction cell, end to end: one scripted endpoint that answers every
    4th question without log-probabilities.  The documented layer (the paper's argmax) finds no
    prediction there; the released layer (evaluate.py's bare except) reads 'A' and scores it."""
    from pytest_benchaudit.testing.data import real_data_dir
    from pytest_benchaudit.testing.runs import only_run_dir, read_run
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

    data = real_data_dir()
    if not (data / "mmlu-computer-security" / "computer_security_test.csv").is_file():
        pytest.skip("real MMLU computer_security data missing under $BENCHAUDIT_DATA")
    seen: list[str] = []
    bare: set[str] = set()  # the prompts answered without log-probabilities (the same in both runs)
    phase = {"pick": True}  # every 4th prompt of the documented run is picked; the released run replays them

    def script(call) -> Reply:
        prompt = call.body.get("prompt", "")
        seen.append(prompt)
        if phase["pick"] and len(seen) % 4 == 0:
            bare.add(prompt)
        if prompt in bare:
            return Reply(content=" B", top_logprobs=None)
        return Reply(content=" B", top_logprobs={" B": -0.1, " A": -2.0, " C": -3.0, " D": -4.0})

    # what the paper leaves open is supplied with --set, as the released code does it
    open_fields = [
        "prompt.template=released",
        "inference.decoding.temperature=0",
        "inference.max_tokens=1",
        "inference.decoding.top_logprobs=100",
        "inference.stop=[]",
        "scoring.denominator=total",
        "aggregation.method=micro",
    ]
    common = [str(SUITES / "mmlu_cs"), "--data-dir", str(data), "--limit", "8", "--no-cache"]
    with ScriptedServer(script) as server:
        skipped = pytester.runpytest(
            *common, "--model", f"m@{server.url}", "--pipeline", "documented", "--report-dir", "skip", "-rs"
        )
        documented = pytester.runpytest(
            *common,
            "--model",
            f"m@{server.url}",
            "--pipeline",
            "documented",
            *[a for f in open_fields for a in ("--set", f)],
            "--report-dir",
            "doc",
        )
        phase["pick"] = False  # keep `bare`: the released run meets the same endpoint behaviour per question
        released = pytester.runpytest(
            *common, "--model", f"m@{server.url}", "--pipeline", "released", "--report-dir", "rel"
        )
        prompts = [
            c.body["prompt"]
            for c in server.calls
            if c.path.endswith("/completions") and not c.path.endswith("/chat/completions")
        ]
    skipped.assert_outcomes(skipped=8)
    skipped.stdout.fnmatch_lines(["*prompt.template*"])
    assert documented.ret in (0, 1) and released.ret in (0, 1)
    doc = read_run(only_run_dir(pytester.path / "doc"))["records"]
    rel = read_run(only_run_dir(pytester.path / "rel"))["records"]
    assert len(doc) == len(rel) == 8
    # 5-shot completion prompts, as the paper says (five 'Answer: X' exemplars before the question)
    assert prompts and all(p.count("\nAnswer:") == 6 for p in prompts)
    assert len(bare) == 2
    doc_missing = {r["item_id"] for r in doc if r["prediction"] is None}
    rel_a = {r["item_id"] for r in rel if r["prediction"] == "A"}
    assert len(doc_missing) == 2 and doc_missing <= rel_a  # documented: no prediction; released: 'A'
    assert all(not r["valid"] for r in doc if r["item_id"] in doc_missing)
    assert all(r["valid"] for r in rel)
    assert {r["prediction"] for r in doc if r["item_id"] not in doc_missing} == {"B"}


def test_cti_bench_documented_pipeline_sends_the_papers_prompt_and_decoding(pytester: pytest.Pytester) -> None:
    """CTI-MCQ as the paper documents it: the expert sentence in front of the Prompt column,
    temperature 0 and top_p 1; what the paper leaves open is supplied with --set."""
    from pytest_benchaudit.testing.data import real_data_dir
    from pytest_benchaudit.testing.runs import only_run_dir, read_run
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

    data = real_data_dir()
    if not (data / "cti-bench" / "cti-mcq.tsv").is_file():
        pytest.skip("real CTI-Bench data missing under $BENCHAUDIT_DATA")
    common = [str(SUITES / "cti_bench"), "--data-dir", str(data), "-k", "mcq and not rcm", "--limit", "3", "--no-cache"]
    open_fields = [
        "prompt.format.mode=chat",
        "prompt.format.system_role=none",
        "inference.max_tokens=2048",
        "inference.stop=[]",
        "extraction.rule=last_line_letter",
        "extraction.reasoning=keep",
        "scoring.denominator=total",
    ]
    with ScriptedServer(lambda call: Reply(content="Reasoning...\nB")) as server:
        skipped = pytester.runpytest(
            *common, "--model", f"m@{server.url}", "--pipeline", "documented", "--report-dir", "skip", "-rs"
        )
        ran = pytester.runpytest(
            *common,
            "--model",
            f"m@{server.url}",
            "--pipeline",
            "documented",
            *[a for f in open_fields for a in ("--set", f)],
            "--report-dir",
            "out",
        )
        sent = [c.body for c in server.calls if c.path.endswith("/chat/completions")]
    skipped.assert_outcomes(skipped=3)
    skipped.stdout.fnmatch_lines(["*prompt.format.mode*"])
    assert ran.ret in (0, 1)
    records = read_run(only_run_dir(pytester.path / "out"))["records"]
    assert len(records) == 3 and all(r["prediction"] == "B" for r in records)
    assert len(sent) == 3
    for body in sent:
        assert [m["role"] for m in body["messages"]] == ["user"]
        assert body["messages"][0]["content"].startswith(
            "You are a cybersecurity expert specializing in cyber threat intelligence. "
            "You are given a multiple-choice question (MCQ)"
        )
        assert body["temperature"] == 0.0 and body["top_p"] == 1.0 and "seed" not in body


# --------------------------------------------------------------------------- unread and moot


MOOT = """
[benchmark]
name = "moot"
[tasks.one]
data = { file = "one.jsonl", question = "q", gold = "a" }
[tasks.one.documented]
inference.decoding = { temperature = 0.0 }
[tasks.one.released]
inference.decoding = { temperature = 0.0, seed = 7, top_p = 0.5 }
"""


def _toy(tmp_path: Path, text: str) -> dict:
    path = tmp_path / "toy" / "suite.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return suite_ledger(load_suite(path))


def test_a_subfield_that_cannot_matter_does_not_make_its_stage_undefined(tmp_path: Path) -> None:
    # temperature 0 stated: the seed and top_p the documentation leaves open are moot, reason kept
    cell = _toy(tmp_path, MOOT)["cells"]["inference.decoding"]
    assert cell["status"] == MATCHED
    assert set(cell["moot"]) == {"inference.decoding.seed", "inference.decoding.top_p"}
    assert "moot, not counted: inference.decoding.seed (the documented temperature 0" in cell["note"]
    # metamorphic: whatever the documentation says of a moot seed, the cell does not move
    for seed in ("7", "42"):
        stated = _toy(
            tmp_path,
            MOOT.replace(
                "inference.decoding = { temperature = 0.0 }",
                f"inference.decoding = {{ temperature = 0.0, seed = {seed} }}",
                1,
            ),
        )
        assert stated["cells"]["inference.decoding"]["status"] == MATCHED
    # the same unstated seed at a stated temperature 0.7 does matter: undefined, nothing moot
    warm = _toy(tmp_path, MOOT.replace("temperature = 0.0", "temperature = 0.7"))["cells"]["inference.decoding"]
    assert warm["status"] == UNDEFINED and warm["moot"] == {}
    # no temperature stated: nothing is moot either
    assert moot_reason("inference.decoding.seed", {"inference.decoding.temperature": "unspecified"}) is None
    # the score is the arg-max of first-token log-probabilities: temperature itself is moot too
    assert moot_reason("inference.decoding.temperature", {"extraction.rule": "logprob_argmax"})
    assert moot_reason("inference.decoding.top_logprobs", {"extraction.rule": "logprob_argmax"}) is None


def test_unread_sources_turn_unspecified_into_unread_not_undefined(tmp_path: Path) -> None:
    silent = _toy(tmp_path, TOY)
    text = TOY + '\n[ledger]\nsources = ["README"]\nunread = ["the paper: abstract only"]\n'
    r = _toy(tmp_path, text)
    for field in PIPELINE_FIELDS:
        before, after = silent["cells"][field]["status"], r["cells"][field]["status"]
        # matched and contradicted cells were read and stay; only "read and silent" becomes "unread"
        assert after == (UNREAD if before == UNDEFINED else before), field
        if after == UNREAD:
            assert "not read (may state it): the paper: abstract only" in r["cells"][field]["note"]
    assert r["counts"][UNREAD] == silent["counts"][UNDEFINED] > 0 and r["counts"][UNDEFINED] == 0
    assert r["not_reproducible"] == silent["counts"][CONTRADICTED]
    assert "more are unread" in r["summary"] and r["unread"] == ["the paper: abstract only"]
    from pytest_benchaudit.dataset.suites import SuiteError

    with pytest.raises(SuiteError, match=r"\[ledger\] unread must be a list of strings"):
        _toy(tmp_path, TOY + '\n[ledger]\nunread = "the paper"\n')


def test_the_paper_view_counts_only_the_cells_read() -> None:
    ledger = build_ledger(SUITES)
    t = ledger["totals"]
    view = t["paper_view"]
    unread = sum(r["counts"][UNREAD] for r in ledger["benchmarks"])
    assert view["cells_unread"] == unread == t["counts"][UNREAD] > 0
    assert view["cells_read"] == t["cells"] - unread
    # hand count of the read cells, straight from the rows
    statuses = [r["cells"][f]["status"] for r in ledger["benchmarks"] for f in PIPELINE_FIELDS]
    assert view["ours_over_read"] == {s: statuses.count(s) for s in (MATCHED, UNDEFINED, CONTRADICTED)}
    assert sum(view["ours_share"].values()) == pytest.approx(1.0, abs=1e-3)
    assert view["paper_share"][MATCHED] == pytest.approx(28 / 72, abs=1e-4)
    line = render(ledger, "table")
    assert f"Paper view, over the {view['cells_read']} cells read ({unread} unread left out)" in line
    # the benchmarks whose paper could not be read here are the ones with unread cells
    assert {r["benchmark"] for r in ledger["benchmarks"] if r["unread"]} == {
        "cybermetric",
        "mmlu_cs",
        "redsage",
        "secbench",
        "secure",
    }
