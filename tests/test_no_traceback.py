"""Issue 12: never a traceback, never a silently wrong record (one test per numbered case).

Each test reproduces the case as a new user met it (real pytest runs through pytester, the real
scripted server on 127.0.0.1, real ``benchaudit`` commands) and checks the new behaviour: one
line naming what and where, the right exit status, and no record lost or made up.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.runs.store import BadRecord, EmptyRun, read_records
from pytest_benchaudit.testing.data import data_file
from pytest_benchaudit.testing.runs import build_toy_run, complete_record, only_run_dir, read_run, write_run_dir
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.toy import toy_script, write_mcq_suite, write_toy

# A `documented` layer as a paper leaves it: the prompt and budget said, the reading and counting not.
DOCUMENTED = """
[tasks.mcq.documented]
prompt.template = "plain"
prompt.format = { mode = "chat", system_role = "none", few_shot = 0 }
inference.decoding = { temperature = 0.0 }
inference.max_tokens = 64
inference.stop = []
scoring = { metric = "exact_match" }
"""


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and "INTERNALERROR" not in text, text[-3000:]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``benchaudit ARGV`` in-process: (exit status, stdout, stderr), never a traceback."""
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    no_traceback(out + err)
    return rc, out, err


@pytest.fixture(scope="module")
def built_toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Once per module: the toy suite (with a `documented` layer for mcq) and a finished run of both
    tasks against the scripted server, made by a real pytest process."""
    return build_toy_run(tmp_path_factory.mktemp("toy"), suite_extra=DOCUMENTED)


@pytest.fixture
def toy_root(built_toy: Path, tmp_path: Path) -> Path:
    """A private copy of :func:`built_toy` (tests change their run directories)."""
    shutil.copytree(built_toy, tmp_path / "root")
    return tmp_path / "root"


@pytest.fixture
def toy_run(toy_root: Path) -> Path:
    return only_run_dir(toy_root / "out")


# ----------------------------------------------------------------------------- case 1


def test_case1_rescore_skips_tasks_whose_layer_leaves_scoring_fields_unspecified(
    toy_run: Path, toy_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suites = toy_root / "suites"
    # Every task unscorable (mcq: fields unspecified; extra: no such layer): one error, the reasons, no run dir.
    before = set(toy_run.parent.iterdir())
    rc, _, err = cli(capsys, "rescore", toy_run, "--pipeline", "documented", "--suites-dir", suites)
    assert rc == 2 and set(toy_run.parent.iterdir()) == before
    assert "toy.mcq under 'documented': extraction.rule, extraction.reasoning, scoring.denominator unspecified" in err
    assert "(12 records)" in err and "toy.extra defines no 'documented' pipeline" in err
    # Supplied with --set, the same layer re-scores.
    rc, out, _ = cli(
        capsys,
        "rescore",
        toy_run,
        "--pipeline",
        "documented",
        "--suites-dir",
        suites,
        "--set",
        "extraction.rule=final_answer_letter",
        "--set",
        "extraction.reasoning=strip",
        "--set",
        "scoring.denominator=total",
    )
    assert rc == 0 and "skipped 1 records: toy.extra defines no 'documented' pipeline" in out
    new = Path(out.strip().splitlines()[-1].split(": ", 1)[1])
    run = read_run(new)
    assert {r["task"] for r in run["records"]} == {"mcq"} and len(run["records"]) == 12
    assert run["summary"]["skipped"] == [
        {
            "task": "toy.extra",
            "records": 1,
            "reason": "toy.extra defines no 'documented' pipeline (available: standardized)",
        }
    ]


def test_case1_sweep_toward_a_layer_skips_unspecified_variants_naming_them(
    toy_run: Path, toy_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = cli(
        capsys, "sweep", toy_run, "--toward", "documented", "--suites-dir", toy_root / "suites", "--json"
    )
    assert rc == 0
    for field in ("extraction.rule", "extraction.reasoning", "scoring.denominator"):
        assert f"toy.mcq: {field} is unspecified (--toward documented): that variant is skipped (12 records)" in err
    assert all(
        "unspecified" not in row["variant"] or row["variant"].startswith("aggregation") for row in json.loads(out)
    )


def test_case1_rescore_of_an_imported_cti_bench_run_under_released(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    responses = data_file("cti-bench", "responses", "cti-mcq-responses.tsv").parent
    suites = Path(__file__).resolve().parent.parent / "suites"
    rc, _, _ = cli(
        capsys,
        "import",
        "cti-bench-responses",
        responses,
        "--report-dir",
        tmp_path / "imp",
        "--suites-dir",
        suites,
        "--data-dir",
        responses.parent.parent,
    )
    assert rc == 0
    run = sorted((tmp_path / "imp").iterdir())[0]
    rc, out, _ = cli(
        capsys,
        "rescore",
        run,
        "--pipeline",
        "released",
        "--suites-dir",
        suites,
        "--report-dir",
        tmp_path / "rs",
        "--data-dir",
        responses.parent.parent,
    )
    assert rc == 0
    new = only_run_dir(tmp_path / "rs")
    skipped = read_run(new)["summary"]["skipped"]
    # Whatever the released layer leaves unspecified is skipped with the field named and counted.
    assert all("unspecified" in s["reason"] and s["records"] > 0 for s in skipped)
    assert all(f"skipped {s['records']} records: {s['reason']}" in out for s in skipped)
    rc, _, err = cli(
        capsys, "sweep", run, "--toward", "released", "--suites-dir", suites, "--data-dir", responses.parent.parent
    )
    assert rc == 0


def _athena_run(tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str = "gpt-4o") -> tuple[Path, Path]:
    """(one imported AthenaBench run of ``model``: six tasks, TAA alone reading alias graphs; the suites)."""
    runs_mini = data_file("athenabench", "athena-cti-taa.jsonl").parent / "runs-mini"
    suites = Path(__file__).resolve().parent.parent / "suites"
    rc, _, _ = cli(
        capsys,
        "import",
        "athenabench-runs",
        runs_mini,
        "--report-dir",
        tmp_path / "imp",
        "--suites-dir",
        suites,
        "--data-dir",
        runs_mini.parent.parent,
    )
    assert rc == 0
    return next(p for p in (tmp_path / "imp").iterdir() if p.name.endswith(f"-{model}")), suites


def test_rescore_set_a_metric_that_reads_resources_scores_the_tasks_that_declare_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--set scoring.metric=actor_graph`` on a run of six tasks: TAA (which declares the alias graphs)
    re-scored, the five others skipped with the metric and the task named (was: a KeyError traceback)."""
    run, suites = _athena_run(tmp_path, capsys)
    data = data_file("athenabench", "athena-cti-taa.jsonl").parent.parent
    rc, out, err = cli(
        capsys,
        "rescore",
        run,
        "--set",
        "scoring.metric=actor_graph",
        "--suites-dir",
        suites,
        "--data-dir",
        data,
        "--report-dir",
        tmp_path / "rs",
    )
    assert rc == 0, err
    stored = [json.loads(line) for line in (run / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    per_task = {t: sum(1 for r in stored if r["task"] == t) for t in {r["task"] for r in stored}}
    new = only_run_dir(tmp_path / "rs")
    skipped = {s["task"]: s for s in read_run(new)["summary"]["skipped"]}
    assert sorted(skipped) == [f"athenabench.{t}" for t in ("ate", "mcq", "rcm", "rms", "vsp")]
    for key, skip in skipped.items():
        task = key.split(".")[1]
        assert skip["records"] == per_task[task]  # a hand count of the stored records
        assert f"metric 'actor_graph' cannot score {key}" in skip["reason"]
        assert f"[tasks.{task}.resources]" in skip["reason"]
        assert f"skipped {per_task[task]} records: {skip['reason']}" in out
    # Metamorphic: TAA's own metric, set again, re-scores each TAA record exactly as the import scored it.
    rescored = {r["question_id"]: r for r in read_records(new)}
    taa = {r["question_id"]: r for r in stored if r["task"] == "taa"}
    assert rescored.keys() == taa.keys() and len(taa) == per_task["taa"] > 0
    assert all(rescored[q]["score"] == taa[q]["score"] for q in taa)


def test_sweep_of_a_metric_that_reads_resources_skips_the_tasks_that_do_not_declare_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, suites = _athena_run(tmp_path, capsys)
    rc, out, err = cli(
        capsys,
        "sweep",
        run,
        "--vary",
        "scoring.metric=actor_graph",
        "--suites-dir",
        suites,
        "--data-dir",
        data_file("athenabench", "athena-cti-taa.jsonl").parent.parent,
        "--json",
    )
    assert rc == 0, err
    for task in ("ate", "mcq", "rcm", "rms", "vsp"):
        assert f"athenabench.{task}: metric 'actor_graph' cannot score athenabench.{task}" in err
    rows = json.loads(out)
    assert {r["task"] for r in rows} == {"taa"}
    # Metamorphic: TAA's own metric as a variant moves no score.
    assert rows and all(r["delta_pp"] == 0 for r in rows if r.get("delta_pp") is not None)


def test_rescore_set_a_metric_no_task_of_the_run_can_take_is_one_error_naming_metric_and_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, suites = _athena_run(tmp_path, capsys)
    # the same run without its TAA records: no task left that declares the alias graphs
    lines = (run / "records.jsonl").read_text(encoding="utf-8").splitlines()
    (run / "records.jsonl").write_text(
        "".join(line + "\n" for line in lines if json.loads(line)["task"] != "taa"), encoding="utf-8"
    )
    rc, out, err = cli(
        capsys,
        "rescore",
        run,
        "--set",
        "scoring.metric=cti_actor_graph",
        "--suites-dir",
        suites,
        "--data-dir",
        data_file("athenabench", "athena-cti-taa.jsonl").parent.parent,
        "--report-dir",
        tmp_path / "rs",
    )
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "nothing re-scored" in err and "metric 'cti_actor_graph' cannot score athenabench.mcq" in err
    assert not (tmp_path / "rs").exists() or not any((tmp_path / "rs").iterdir())  # nothing half-written


# ----------------------------------------------------------------------------- case 7


def _corrupt(run: Path, *lines: str) -> None:
    with (run / "records.jsonl").open("a") as fh:
        fh.write("".join(line + "\n" for line in lines))


def test_case7_lines_that_are_json_but_not_records_name_file_line_and_field(tmp_path: Path) -> None:
    run = write_run_dir(tmp_path, "r", [{"question_id": "q1"}])
    _corrupt(run, "[1,2,3]")
    array = r"records.jsonl:2: not a record \(a JSON object is expected, this is an array\)"
    with pytest.raises(BadRecord, match=array):
        list(read_records(run))
    run2 = write_run_dir(tmp_path, "r2", [{"question_id": "q1"}])
    _corrupt(run2, '{"benchmark": "seceval"}')
    missing = r"records.jsonl:2: not a record: field 'task': Field required \(and \d+ more\)"
    with pytest.raises(BadRecord, match=missing):
        list(read_records(run2))
    seen: list[str] = []
    recs = list(read_records(run2, skip_bad=True, on_skipped=seen.append))
    assert len(recs) == 1 and len(seen) == 1 and "skipped 1 line(s) that are not records" in seen[0]


@pytest.mark.parametrize(
    "bad", ["[1,2,3]", '{"benchmark": "seceval"}', '{"benchmark": "toy", "task": 3}', "null", "{not json"]
)
@pytest.mark.parametrize(
    "command", ["summarize", "rescore", "sweep", "compare", "export", "audit-gold", "judge-agreement"]
)
def test_case7_every_command_reports_a_bad_line_in_one_line(
    command: str, bad: str, toy_run: Path, toy_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _corrupt(toy_run, bad)
    extra = {
        "sweep": ["--vary", "scoring.denominator=valid", "--suites-dir", toy_root / "suites"],
        "rescore": ["--suites-dir", toy_root / "suites"],
        "compare": ["--out", toy_root / "cmp"],
        "export": ["--out", toy_root / "exp"],
    }.get(command, [])
    rc, _, err = cli(capsys, command, toy_run, *extra)
    assert rc == 1 and len(err.strip().splitlines()) == 1, err
    assert "records.jsonl:14: " in err
    # --skip-bad-records goes on and says how many lines it skipped.
    rc, _, err = cli(capsys, command, toy_run, *extra, "--skip-bad-records")
    assert "skipped 1 line(s) that are not records" in err
    assert rc in (0, 2)  # judge-agreement: this run has no judge (a usage error); the rest work


# ----------------------------------------------------------------------------- case 12


@pytest.mark.parametrize(
    "command", ["show", "summarize", "rescore", "sweep", "export", "compare", "audit-gold", "judge-agreement"]
)
def test_case12_an_empty_run_is_an_error_with_its_reason(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run_dir(tmp_path, "empty", [])
    (run / "summary.json").write_text(json.dumps({"results": [], "benchmarks": [], "gates": []}))
    extra = {
        "sweep": ["--vary", "scoring.denominator=valid"],
        "compare": ["--out", tmp_path / "cmp"],
        "export": ["--out", tmp_path / "exp"],
    }.get(command, [])
    rc, _, err = cli(capsys, command, run, *extra)
    assert rc == 1 and "records.jsonl: no records (every item was skipped or deselected" in err
    assert not (tmp_path / "exp").exists() and not (tmp_path / "cmp" / "compare.json").exists()


def test_case12_export_computes_from_the_records_not_a_stale_summary(
    toy_run: Path, toy_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = json.loads((toy_run / "summary.json").read_text())
    for result in summary["results"]:
        result["n"], result["score"] = 999, 0.999  # stale: what a killed or edited run may leave
    (toy_run / "summary.json").write_text(json.dumps(summary))
    rc, _, _ = cli(capsys, "export", toy_run, "--out", toy_root / "exp", "--samples")
    assert rc == 0
    (agg,) = [p for p in (toy_root / "exp").rglob("*.json")]
    results = {r["evaluation_name"]: r for r in json.loads(agg.read_text())["evaluation_results"]}
    mcq = next(r for name, r in results.items() if "mcq" in name)
    assert mcq["score_details"]["score"] != 0.999
    samples = next((toy_root / "exp").rglob("*_samples.jsonl")).read_text().splitlines()
    assert len(samples) == 13


def test_case12_summarize_replaces_summary_atomically(toy_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = cli(capsys, "summarize", toy_run)
    assert rc == 0 and "2 results from 13 records" in out
    assert sorted(p.name for p in toy_run.iterdir()) == ["records.jsonl", "run.json", "summary.json"]
    (toy_run / "summary.json").unlink()
    (toy_run / "summary.json").mkdir()  # cannot be replaced: one error, nothing half-written
    rc, _, err = cli(capsys, "summarize", toy_run)
    assert rc == 1 and "cannot write" in err and "summary.json" in err


def test_case12_empty_run_reader_raises_empty_run(tmp_path: Path) -> None:
    from pytest_benchaudit.runs.store import load_run

    run = write_run_dir(tmp_path, "e", [])
    assert load_run(run) == ({"run_id": "e"}, [])
    with pytest.raises(EmptyRun):
        load_run(run, require_records=True)
    assert complete_record({})["question_index"] == 0


# ----------------------------------------------------------------------------- cases 2, 3, 9: before any item


def run_toy(pytester: pytest.Pytester, server: ScriptedServer, *args: str) -> pytest.RunResult:
    """A real pytest run of the toy suite (with its `documented` layer) against ``server``."""
    if not (pytester.path / "suites" / "toy").is_dir():
        write_toy(pytester.path)
        with (pytester.path / "suites" / "toy" / "suite.toml").open("a") as fh:
            fh.write(DOCUMENTED)
    result = pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{server.url}",
        "--report-dir",
        "out",
        "--max-retries",
        "0",
        *args,
    )
    no_traceback(result.stdout.str() + result.stderr.str())
    return result


def usage_error(result: pytest.RunResult) -> str:
    """The ERROR lines of a run stopped with exit status 4."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    return result.stderr.str() + result.stdout.str()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--set", "prompt.template=foo"],
            "toy.mcq under 'standardized': prompt.template 'foo' is not a template of toy; allowed: plain",
        ),
        (
            ["--set", "prompt.format.few_shot=3"],
            "toy.mcq under 'standardized': prompt.format.few_shot=3 but only 0 few-shot examples are available",
        ),
        (
            ["--set", "aggregation.by=topik"],
            "toy.mcq under 'standardized': aggregation.by 'topik' is not a metadata "
            "field of its questions (did you mean 'topic'?); allowed: topic, or null",
        ),
        (
            ["--vary", "prompt.template=plain,foo"],
            "toy.mcq under 'standardized': prompt.template 'foo' is not a template of toy",
        ),
        (["--max-retries", "-1"], "--max-retries -1: must be 0 or more"),
        (["--request-timeout", "0"], "--request-timeout 0: must be more than 0 seconds"),
    ],
)
def test_case2_bad_pipeline_values_are_one_usage_error_before_any_item(
    pytester: pytest.Pytester, scripted: ScriptedServer, args: list[str], expected: str
) -> None:
    result = run_toy(pytester, scripted, *args)
    text = usage_error(result)
    assert expected in text and text.count(expected) == 1
    assert len(text.splitlines()) < 12 and not scripted.calls and not (pytester.path / "out").exists()


def test_case2_under_xdist_too(pytester: pytest.Pytester, scripted: ScriptedServer) -> None:
    result = run_toy(pytester, scripted, "-n", "2", "--set", "prompt.template=foo")
    text = usage_error(result)
    assert text.count("toy.mcq under 'standardized': prompt.template 'foo' is not a template of toy") == 1
    assert not scripted.calls


def test_case3_a_misspelled_layer_is_a_usage_error_naming_the_nearest(
    pytester: pytest.Pytester, scripted: ScriptedServer
) -> None:
    text = usage_error(run_toy(pytester, scripted, "--pipeline", "relesed"))
    assert (
        "--pipeline 'relesed': no collected task defines this layer (did you mean 'released'?); layers of the "
        "selected suites: documented, released, standardized"
    ) in text
    # A layer some tasks define still runs there and skips the others with the reason.
    result = run_toy(pytester, scripted, "--pipeline", "released")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 skipped*"])


@pytest.mark.parametrize(
    ("gate", "expected"),
    [
        ("secevall>=0.7", "--gate 'secevall>=0.7': no collected benchmark 'secevall'; benchmarks: toy"),
        ("toi>=0.7", "--gate 'toi>=0.7': no collected benchmark 'toi' (did you mean 'toy'?)"),
        ("toy.mcqq>=0.5", "--gate 'toy.mcqq>=0.5': toy has no task 'mcqq' (did you mean 'mcq'?); tasks: extra, mcq"),
        (
            "toy>=70",
            "--gate 'toy>=70': 70 is outside the range of score (0 to 1); a fraction is meant: did you mean "
            "0.7 for 70%?",
        ),
        ("toy.mcq:invalid<=5", "--gate 'toy.mcq:invalid<=5': 5 is outside the range of invalid (0 to 1)"),
    ],
)
def test_case9_gate_targets_and_ranges_are_checked_before_any_item(
    pytester: pytest.Pytester, scripted: ScriptedServer, gate: str, expected: str
) -> None:
    text = usage_error(run_toy(pytester, scripted, "--gate", gate))
    assert expected in text and not scripted.calls


def test_case9_a_good_gate_still_decides_the_exit_status(pytester: pytest.Pytester, scripted: ScriptedServer) -> None:
    assert run_toy(pytester, scripted, "--gate", "toy.mcq>=0.3").ret == pytest.ExitCode.OK
    assert run_toy(pytester, scripted, "--gate", "toy.mcq>=0.99").ret == pytest.ExitCode.TESTS_FAILED


# ----------------------------------------------------------------------------- case 10


def test_case10_a_partial_object_merges_into_the_layer(pytester: pytest.Pytester, scripted: ScriptedServer) -> None:
    result = run_toy(pytester, scripted, "-k", "mcq", "--set", 'inference={"max_tokens": 5}')
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    run = read_run(only_run_dir(pytester.path / "out"))
    card = run["run"]["pipeline_cards"]["toy.mcq"]
    assert card["fields"]["inference.max_tokens"] == 5
    assert card["fields"]["inference.decoding.temperature"] == 0.0 and card["fields"]["inference.stop"] == []
    assert card["overrides"] == {"inference.max_tokens": 5}
    params = run["records"][0]["request"]["params"]
    assert params["max_tokens"] == 5 and params["temperature"] == 0.0


# ----------------------------------------------------------------------------- case 4


def test_case4_a_benchmark_folder_that_is_a_symlink_collects(pytester: pytest.Pytester) -> None:
    real = data_file("athenabench", "athena-cti-taa.jsonl").parent.parent
    (pytester.path / "data").mkdir()
    for folder in ("athenabench", "cti-bench"):  # athena's TAA reads cti-bench's alias graphs
        (pytester.path / "data" / folder).symlink_to(real / folder, target_is_directory=True)
    suites = Path(__file__).resolve().parent.parent / "suites"
    result = pytester.runpytest(suites / "athenabench", "--data-dir", "data", "-k", "taa", "--collect-only", "-q")
    no_traceback(result.stdout.str() + result.stderr.str())
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["50/* tests collected*"])


@pytest.mark.parametrize("where", ['data_folder = "../elsewhere"', 'data_folder = "/etc"'])
def test_case4_suite_configs_still_cannot_leave_the_data_directory(pytester: pytest.Pytester, where: str) -> None:
    write_toy(pytester.path)
    path = pytester.path / "suites" / "toy" / "suite.toml"
    path.write_text(path.read_text().replace('data_folder = "toy"', where))
    result = pytester.runpytest("suites/toy", "--data-dir", "data", "--collect-only", "-q")
    no_traceback(result.stdout.str() + result.stderr.str())
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*data_folder*is outside the data directory*"])


# ----------------------------------------------------------------------------- case 8


def test_case8_a_report_dir_that_cannot_be_created_is_one_usage_error(
    pytester: pytest.Pytester, scripted: ScriptedServer
) -> None:
    write_toy(pytester.path)
    (pytester.path / "blocked").write_text("a file where the report folder should go")
    for report_dir in ("blocked", "blocked/deeper"):
        result = pytester.runpytest(
            "suites/toy", "--data-dir", "data", "--model", f"m@{scripted.url}", "--report-dir", report_dir
        )
        no_traceback(result.stdout.str() + result.stderr.str())
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: --report-dir {report_dir}: *blocked is a file, not a folder*"])
    assert not scripted.calls


def test_case8_the_store_refuses_to_create_a_run_where_it_cannot(tmp_path: Path) -> None:
    from pytest_benchaudit.common.errors import RunDirError
    from pytest_benchaudit.runs.store import RunDirectory, check_report_dir

    (tmp_path / "f").write_text("")
    with pytest.raises(RunDirError, match="cannot create the run directory"):
        RunDirectory(tmp_path / "f")
    check_report_dir(tmp_path / "new" / "reports")  # creatable: no error, nothing created
    assert not (tmp_path / "new").exists()


# ----------------------------------------------------------------------------- case 11


def test_case11_replaying_past_the_stored_items_skips_them_as_not_in_the_run(
    pytester: pytest.Pytester, scripted: ScriptedServer
) -> None:
    first = run_toy(pytester, scripted, "-k", "mcq", "--limit", "5")
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    stored = only_run_dir(pytester.path / "out")
    result = pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "-k",
        "mcq",
        "--limit",
        "8",
        "--model",
        f"replay:{stored}",
        "--report-dir",
        "replayed",
        "-rs",
    )
    no_traceback(result.stdout.str() + result.stderr.str())
    result.stdout.fnmatch_lines(["*toy.mcq t06: not in the replayed run*nothing stored to replay*"])
    outcomes = result.parseoutcomes()
    assert outcomes["skipped"] == 3 and outcomes.get("passed", 0) + outcomes.get("failed", 0) == 5
    records = read_run(only_run_dir(pytester.path / "replayed"))["records"]
    assert len(records) == 5 and not any("changed" in (r["error"] or "") for r in records)


# ----------------------------------------------------------------------------- case 6


def test_case6_resume_refuses_another_model_limit_suite_or_data(
    pytester: pytest.Pytester, scripted: ScriptedServer
) -> None:
    run_toy(pytester, scripted, "-k", "mcq", "--limit", "3")
    run = only_run_dir(pytester.path / "out")
    records = (run / "records.jsonl").read_text()

    def resume(*args: str, model: str = "toy-model", suites: tuple[str, ...] = ("suites/toy",)) -> pytest.RunResult:
        result = pytester.runpytest(
            *suites,
            "--data-dir",
            "data",
            "--model",
            f"{model}@{scripted.url}",
            "--max-retries",
            "0",
            "--resume",
            str(run),
            *args,
        )
        no_traceback(result.stdout.str() + result.stderr.str())
        return result

    text = usage_error(resume("-k", "mcq", "--limit", "3", model="other-model"))
    assert "the run used --model toy-model, this invocation other-model; resume it with the same models" in text
    text = usage_error(resume("-k", "mcq", "--limit", "5"))
    assert "the run used --limit 3, this invocation 5; resume it with the same --limit" in text
    write_mcq_suite(
        pytester.path, "other", [{"id": "o1", "question": "Q CORRECT?", "options": ["a", "b"], "gold": "B"}]
    )
    text = usage_error(resume("--limit", "3", suites=("suites/toy", "suites/other")))
    assert "the run has no other.mcq (its tasks: toy.extra, toy.mcq); resume it with the same suites" in text
    data = pytester.path / "data" / "toy" / "toy.jsonl"
    data.write_text(data.read_text().replace("Toy question", "Edited question"))
    text = usage_error(resume("-k", "mcq", "--limit", "3"))
    assert "data file(s) changed since the run: toy/toy.jsonl" in text
    text = usage_error(resume("-k", "mcq", "--limit", "3", "-n", "2"))  # the workers check under xdist
    assert text.count("data file(s) changed since the run: toy/toy.jsonl") == 1
    assert (run / "records.jsonl").read_text() == records  # nothing appended by a refused resume


# ----------------------------------------------------------------------------- case 5


def _completions(server: ScriptedServer) -> int:
    return sum(1 for c in server.calls if c.path.endswith("completions"))


def test_case5_the_cache_never_answers_for_another_model_behind_the_same_url(pytester: pytest.Pytester) -> None:
    write_toy(pytester.path)
    with ScriptedServer(toy_script(), model_id="model-a") as first:
        port = first.port
        args = [
            "suites/toy",
            "--data-dir",
            "data",
            "-k",
            "mcq",
            "--model",
            f"m@{first.url}",
            "--max-retries",
            "0",
            "--cache-dir",
            "cache",
        ]
        pytester.runpytest(*args, "--report-dir", "a")
        asked_a = _completions(first)
        pytester.runpytest(*args, "--report-dir", "a2")  # the same model again: all but errors from the cache
        errors = sum(1 for r in read_run(only_run_dir(pytester.path / "a"))["records"] if r["error"])
        assert _completions(first) == asked_a + errors
    a2 = read_run(only_run_dir(pytester.path / "a2"))
    answered_before = {
        r["question_id"] for r in read_run(only_run_dir(pytester.path / "a"))["records"] if r["error"] is None
    }
    assert {r["question_id"] for r in a2["records"] if r["from_cache"]} == answered_before
    assert not any(r["from_cache"] for r in read_run(only_run_dir(pytester.path / "a"))["records"])
    # Restarted with another model behind the same URL: nothing comes from the old model's answers.
    with ScriptedServer(toy_script(), model_id="model-b", port=port) as second:
        result = pytester.runpytest(*args, "--report-dir", "b")
        no_traceback(result.stdout.str())
        assert _completions(second) > 0
    b = read_run(only_run_dir(pytester.path / "b"))
    assert not any(r["from_cache"] for r in b["records"])
    assert b["run"]["models"][0]["served_model_ids"] == ["model-b"]


def test_case5_cache_expiry(pytester: pytest.Pytester, scripted: ScriptedServer) -> None:
    write_toy(pytester.path)
    args = ["suites/toy", "--data-dir", "data", "-k", "t01", "--model", f"m@{scripted.url}", "--cache-dir", "cache"]
    pytester.runpytest(*args, "--report-dir", "a")
    asked = _completions(scripted)
    pytester.runpytest(*args, "--report-dir", "b", "--cache-expiry", "1h")
    assert _completions(scripted) == asked  # fresh enough
    import sqlite3

    with sqlite3.connect(pytester.path / "cache" / "generations.sqlite") as conn:
        conn.execute("UPDATE generations SET created = created - 7200")
    pytester.runpytest(*args, "--report-dir", "c", "--cache-expiry", "1h")
    assert _completions(scripted) == asked + 1  # expired: asked again, and stored afresh
    assert not read_run(only_run_dir(pytester.path / "c"))["records"][0]["from_cache"]
    result = pytester.runpytest(*args, "--cache-expiry", "soon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--cache-expiry 'soon': expected a duration above 0 such as 3600, 30m, 12h*"])


# ----------------------------------------------------------------------------- case 14


@pytest.fixture
def fake_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``vllm`` first on PATH that runs the scripted stand-in; returns its launch log."""
    import os
    import stat

    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pytest_benchaudit.testing.fake_vllm "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_VLLM_LAUNCH_LOG", str(tmp_path / "launches.jsonl"))
    monkeypatch.delenv("BENCHAUDIT_VLLM_ARGS", raising=False)
    return tmp_path / "launches.jsonl"


def test_case14_a_launched_server_requires_its_per_run_key(fake_vllm: Path) -> None:
    import urllib.error
    import urllib.request

    from pytest_benchaudit.common.secrets import redact
    from pytest_benchaudit.inference.launch.vllm import VllmServer

    server = VllmServer("org/tiny", startup_timeout=60)
    url = server.start()
    try:
        assert url.startswith("http://127.0.0.1:")
        (launch,) = [json.loads(line) for line in fake_vllm.read_text().splitlines()]
        assert launch["host"] == "127.0.0.1" and launch["api_key"] == server.api_key and len(server.api_key) >= 32
        assert server.api_key not in " ".join(server.command)  # the key is not on the command line (ps)
        with pytest.raises(urllib.error.HTTPError) as refused:  # another local process, without the key
            urllib.request.urlopen(f"{url}/models", timeout=60)
        assert refused.value.code == 401
        ok = urllib.request.Request(f"{url}/models", headers={"Authorization": f"Bearer {server.api_key}"})
        with urllib.request.urlopen(ok, timeout=60) as response:
            assert response.status == 200
        assert server.api_key not in redact(f"key={server.api_key}")
    finally:
        server.stop()
    assert VllmServer("org/tiny").api_key != server.api_key  # a new key each launch


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]])
def test_case14_runs_and_workers_use_the_key_and_never_write_it(
    pytester: pytest.Pytester, fake_vllm: Path, xdist: list[str]
) -> None:
    write_toy(pytester.path)
    result = pytester.runpytest_subprocess(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        "vllm:org/tiny",
        "--report-dir",
        "out",
        "-k",
        "mcq",
        "--junitxml",
        "junit.xml",
        *xdist,
    )
    no_traceback(result.stdout.str() + result.stderr.str())
    (launch,) = [json.loads(line) for line in fake_vllm.read_text().splitlines()]
    key = launch["api_key"]
    assert key
    run = only_run_dir(pytester.path / "out")
    records = read_run(run)["records"]
    assert len(records) == 12 and all(r["error"] is None for r in records)  # every request carried the key
    written = [p.read_text() for p in run.iterdir()] + [(pytester.path / "junit.xml").read_text()]
    assert not any(key in text for text in written + [result.stdout.str(), result.stderr.str()])


# ----------------------------------------------------------------------------- case 13


def test_case13_pytest_help_lists_every_model_form(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    text = " ".join(result.stdout.str().split())
    for form in (
        "'local'",
        "'vllm:HF_ID'",
        "'ID@URL'",
        "'ID@URL1,URL2,...'",
        "'replay:RUN_DIR'",
        "'replay:RUN_DIR#MODEL'",
        "'NAME'",
        "--cache-expiry",
    ):
        assert form in text, form


def test_case13_card_outside_the_repo_finds_the_shipped_suites_or_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no suites/ here
    rc, out, _ = cli(capsys, "card", "seceval", "--task", "mcq")
    assert rc == 0 and json.loads(out)["seceval.mcq"]["benchmark"] == "seceval"
    rc, _, err = cli(capsys, "card", "secevl")
    assert rc == 2 and "no suite 'secevl' in " in err and "(did you mean 'seceval'?)" in err
    rc, _, err = cli(capsys, "card", "seceval", "--suites-dir", tmp_path / "nowhere")
    assert rc == 2 and f"{tmp_path / 'nowhere'} is not a folder" in err and "pass --suites-dir DIR" in err


def test_case13_fetch_prints_the_real_folder_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_benchaudit.dataset.fetch import fetch_suite
    from pytest_benchaudit.dataset.suites import load_suite

    suite = load_suite(Path(__file__).resolve().parent.parent / "suites" / "mmlu_cs" / "suite.toml")
    origin = tmp_path / "origin"
    errors = fetch_suite(suite, tmp_path / "data", origin=origin.as_uri())  # nothing there: errors, named
    out = capsys.readouterr()
    assert errors and "mmlu-computer-security/" in out.out + out.err and "mmlu_cs/" not in out.out


def test_case13_run_directories_carry_a_benchmark_and_model_slug(
    pytester: pytest.Pytester, scripted: ScriptedServer
) -> None:
    run_toy(pytester, scripted, "-k", "mcq")
    assert only_run_dir(pytester.path / "out").name.endswith("-toy-toy-model")
    from pytest_benchaudit.runs.store import run_slug

    assert run_slug(["seceval", "cti_bench", "seceval"], ["a@x", "b"]) == "2-benchmarks-2-models"
    assert run_slug(["seceval"], ["gpt-5.4@http://h/v1"]) == "seceval-gpt-5.4_http_h_v1"


def test_case13_a_subset_is_labelled_as_one(pytester: pytest.Pytester, scripted: ScriptedServer) -> None:
    result = run_toy(pytester, scripted, "-k", "t01 or t02")
    result.stdout.fnmatch_lines(
        ["subset: mcq toy-model: 2 of 12 questions (-k, --lf or --limit): not the full task's score"]
    )
    full = run_toy(pytester, scripted, "-k", "extra")
    assert "subset:" not in full.stdout.str()


def test_case13_a_judge_failure_shows_its_reason(pytester: pytest.Pytester) -> None:
    write_toy(pytester.path)
    with (
        ScriptedServer(lambda call: Reply(content="Answer: B")) as m,
        ScriptedServer(lambda call: Reply(status=500, error_message="judge exploded")) as jdg,
    ):
        result = pytester.runpytest(
            "suites/toy",
            "--data-dir",
            "data",
            "--model",
            f"m@{m.url}",
            "--judge",
            f"j@{jdg.url}",
            "-k",
            "t01",
            "--set",
            "extraction.rule=judge",
            "--no-cache",
            "--max-retries",
            "0",
            "--report-dir",
            "out",
        )
    no_traceback(result.stdout.str())
    result.stdout.fnmatch_lines(["*INVALID (judge_error): HTTP 500: judge exploded*"])


def test_case13_ranks_print_as_integers_unless_tied() -> None:
    from pytest_benchaudit.report.terminal import _render_rankings

    text = _render_rankings(
        {"ranks": {"toy.mcq": {"a": 1.0, "b": 2.0}, "toy.extra": {"a": 1.5, "b": 1.5}}, "tau_b": []}
    )
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.startswith("toy.")}
    assert rows == {"toy.mcq": ["1", "2"], "toy.extra": ["1.5", "1.5"]}


# Deletes the run directory once three items have reported: the folder a user (or a cleanup job)
# removes while a run is still going.
VANISH_PLUGIN = """
import shutil
import pytest

_seen = [0]

@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    if report.when == "call":
        _seen[0] += 1
        if _seen[0] == 3:
            controller = _config.pluginmanager.get_plugin("benchaudit-controller")
            shutil.rmtree(controller.run_dir.path)

def pytest_configure(config):
    global _config
    _config = config
"""


def test_a_run_directory_removed_during_the_run_is_one_line(pytester: pytest.Pytester) -> None:
    write_toy(pytester.path)
    pytester.makepyfile(vanish=VANISH_PLUGIN)
    pytester.syspathinsert()
    with ScriptedServer(toy_script()) as server:
        result = pytester.runpytest(
            "suites/toy",
            "--data-dir",
            "data",
            "--model",
            f"toy-model@{server.url}",
            "--report-dir",
            "out",
            "-p",
            "vanish",
            "-k",
            "mcq",
        )
    out = result.stdout.str() + result.stderr.str()
    no_traceback(out)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "benchaudit: cannot finish the run directory" in out and "no summary was written" in out
    assert "STOPPED: the run directory could not be finished; the run directory is gone" in out


@pytest.mark.parametrize(
    ("option", "where"),
    [("--junitxml", "afile/junit.xml"), ("--junitxml", "afile/deeper/j.xml"), ("--cache-dir", "afile/cache")],
)
def test_an_unwritable_output_path_is_a_usage_error_before_any_question(
    pytester: pytest.Pytester, option: str, where: str
) -> None:
    """pytest writes the JUnit file after the last item: a path it cannot write (a file in the way of
    its folder) is one usage error at start-up, nothing asked, as is a --cache-dir that cannot be
    made.  (A folder given as the JUnit file pytest refuses itself.)"""
    write_toy(pytester.path)
    (pytester.path / "afile").write_text("in the way")
    with ScriptedServer(toy_script()) as server:
        result = pytester.runpytest_subprocess(
            "suites/toy", "--data-dir", "data", "--model", f"m@{server.url}", "--report-dir", "out", f"{option}={where}"
        )
        asked = [c for c in server.calls if c.path.endswith("completions")]
    out = result.stdout.str() + result.stderr.str()
    no_traceback(out)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and asked == []
    result.stderr.fnmatch_lines(
        [f"ERROR: {option} *{where}: *afile is a file, not a folder; nothing can be written there"]
    )
    assert not (pytester.path / "out").exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc (no entry can be created there)")
@pytest.mark.parametrize(
    "option",
    [
        "--junitxml=/proc/nope/j.xml",
        "--junitxml=/proc/j.xml",
        "--report-dir=/proc/nope/reports",
        "--cache-dir=/proc/nope/cache",
    ],
)
def test_an_output_path_that_cannot_be_created_is_a_usage_error_before_any_question(
    pytester: pytest.Pytester, option: str
) -> None:
    """/proc/nope: its parent exists and passes every permission check (as root too), yet nothing can
    be created in it.  The start-up check tries what the end of the run does (the folder, then a
    file in it): one usage error naming the option, no question asked, no traceback at the end."""
    write_toy(pytester.path)
    with ScriptedServer(toy_script()) as server:
        result = pytester.runpytest_subprocess(
            "suites/toy",
            "--data-dir",
            "data",
            "--model",
            f"m@{server.url}",
            "-k",
            "t01",
            *(["--report-dir", "out"] if "report-dir" not in option else []),
            option,
        )
        asked = [c for c in server.calls if c.path.endswith("completions")]
    out = result.stdout.str() + result.stderr.str()
    no_traceback(out)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and asked == [], out[-2000:]
    name, _, value = option.partition("=")
    result.stderr.fnmatch_lines(
        [f"ERROR: {name} {value}: cannot create * No such file or directory; nothing can be written there"]
    )


def test_the_output_check_leaves_nothing_behind(tmp_path: Path) -> None:
    """The start-up check creates the missing folders and a file to see that it can, then removes
    what it made; what was there stays."""
    from pytest_benchaudit.pytest_plugin.outputs import check_output_file, check_output_folder

    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "old.txt").write_text("x")
    check_output_folder(tmp_path / "kept" / "new" / "deeper", "--report-dir")
    check_output_file(tmp_path / "also" / "j.xml", "--junitxml")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["kept", "kept/old.txt"]


def test_benchmarks_without_data_are_skipped_with_how_to_fetch_them(pytester: pytest.Pytester) -> None:
    """`pytest suites/` where some benchmarks' data is missing: each of those is skipped with one line
    saying how to get it (its tasks share the reason), the others run; no collection error."""
    write_toy(pytester.path)
    repo_suites = Path(__file__).resolve().parent.parent / "suites"
    with ScriptedServer(toy_script()) as server:
        result = pytester.runpytest_subprocess(
            "suites/toy",
            str(repo_suites / "seceval"),
            str(repo_suites / "secure"),
            "--data-dir",
            "data",
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
            "--no-cache",
            "-rs",
            "--max-retries",
            "0",
        )
    out = result.stdout.str() + result.stderr.str()
    no_traceback(out)
    outcomes = result.parseoutcomes()
    assert "error" not in outcomes and "errors" not in outcomes, outcomes
    assert outcomes["skipped"] == 1 + 6 and outcomes["passed"] + outcomes["failed"] == 13  # the toy suite ran
    lines = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert len(lines) == 2, lines  # one line per benchmark
    for bench, count in (("seceval", 1), ("secure", 6)):
        (line,) = [ln for ln in lines if f": {bench}: data not found: no '{bench}/' folder in data" in ln]
        assert line.startswith(f"SKIPPED [{count}] ")
        assert f"`benchaudit fetch {bench} --data-dir data` downloads it" in line
        assert "point --data-dir / $BENCHAUDIT_DATA at a directory that holds" in line


# ----------------------------------------------------------------------------- undecodable suites, symlink loops


def test_an_undecodable_byte_in_a_suite_file_is_one_error_naming_the_line(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Latin-1 'é' in suite.toml: before, a UnicodeDecodeError traceback from the collector, validate
    and card; now one message naming the file, the line and the byte."""
    write_toy(pytester.path)
    suite = pytester.path / "suites" / "toy" / "suite.toml"
    lines = suite.read_bytes().split(b"\n")
    suite.write_bytes(b"\n".join([*lines[:3], b"# caf\xe9", *lines[3:]]))
    said = f"{suite}: line 4: byte 0xe9 is not UTF-8 (TOML files are UTF-8 text; save the file as UTF-8)"
    with ScriptedServer(toy_script()) as server:
        result = pytester.runpytest_subprocess(
            "suites/toy", "--data-dir", "data", "--model", f"m@{server.url}", "--report-dir", "out"
        )
        assert not [c for c in server.calls if c.path.endswith("completions")]
    out = result.stdout.str() + result.stderr.str()
    no_traceback(out)
    assert result.ret == pytest.ExitCode.INTERRUPTED and said in out
    capsys.readouterr()
    assert main(["validate", str(pytester.path / "suites")]) == 2
    assert f"invalid: {said}" in capsys.readouterr().err
    assert main(["card", "toy", "--suites-dir", str(pytester.path / "suites")]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def test_a_data_file_in_a_symlink_loop_is_one_error_naming_it(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """toy.jsonl -> loop -> toy.jsonl: before, pathlib's RuntimeError('Symlink loop') as a traceback
    from collection and `benchaudit card`; now one message naming the file."""
    write_toy(pytester.path)
    folder = pytester.path / "data" / "toy"
    (folder / "toy.jsonl").unlink()
    (folder / "toy.jsonl").symlink_to("loop")
    (folder / "loop").symlink_to("toy.jsonl")
    said = f"{folder / 'toy.jsonl'}: the data file cannot be read: a loop of symbolic links"
    with ScriptedServer(toy_script()) as server:
        result = pytester.runpytest_subprocess(
            "suites/toy", "--data-dir", "data", "--model", f"m@{server.url}", "--report-dir", "out", "-k", "mcq"
        )
        assert not [c for c in server.calls if c.path.endswith("completions")]
    out = result.stdout.str() + result.stderr.str()
    no_traceback(out)
    assert result.ret == pytest.ExitCode.INTERRUPTED and said in out, out[-2000:]
    capsys.readouterr()
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
                str(pytester.path / "data"),
            ]
        )
        == 2
    )
    assert said in capsys.readouterr().err


def test_fetch_refuses_a_target_in_a_symlink_loop(tmp_path: Path) -> None:
    import httpx

    from pytest_benchaudit.dataset.fetch import FetchError, FetchFile, FetchPlan, fetch_file

    (tmp_path / "a.json").symlink_to("b.json")
    (tmp_path / "b.json").symlink_to("a.json")
    plan = FetchPlan(benchmark="toy", data_folder="toy", base_url="http://127.0.0.1:9/", files=())
    with httpx.Client() as client, pytest.raises(FetchError, match=r"toy/a.json: .*a.json cannot be written: "):
        fetch_file(client, plan, FetchFile(name="a.json", path="a.json", sha256=None), tmp_path)
