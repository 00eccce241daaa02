"""``pytest --pipelines A,B``: every question x model under each layer in one run, and ``benchaudit audit`` on it.

Real pytest processes against the scripted loopback server.  The toy suite's two layers send the same
requests (they differ downstream only); the "lay" suite's differ upstream too (``inference.max_tokens``),
and its three models answer so that the two layers rank them differently (rho_gen).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import SUITES
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.toy import layer_toml, mcq_suite_toml, toy_script, write_suite, write_toy

# The shared one-task MCQ suite (testing.toy.mcq_suite_toml: its standardized layer, 64 tokens) with a
# released layer that differs upstream (16 tokens) and downstream (reasoning kept, valid denominator).
RELEASED_LAYER = layer_toml("mcq", "released", max_tokens=16, reasoning="keep", denominator="valid")

# How many of the 10 questions each model gets right under each budget: the order of the three models
# reverses between the layers (a: 9 -> 3, b: 6 -> 6, c: 3 -> 9), so rho_gen is -1.
RIGHT = {("a", 16): 9, ("b", 16): 6, ("c", 16): 3, ("a", 64): 3, ("b", 64): 6, ("c", 64): 9}


def lay_script(call: Any) -> Reply:
    text = call.last_user_text
    index = int(text.split("#", 1)[1].split(" ", 1)[0])
    gold = "B"
    right = index < RIGHT[(call.body["model"], call.body.get("max_tokens"))]
    return Reply(content=f"Answer: {gold if right else 'C'}")


def write_lay(root: Path) -> None:
    rows = [
        {
            "id": f"l{i:02d}",
            "question": f"Question #{i} of the test?",
            "options": ["one", "two", "three", "four"],
            "gold": "B",
        }
        for i in range(10)
    ]
    write_suite(
        root,
        "lay",
        mcq_suite_toml("lay", title="Two layers that differ upstream", extra="\n" + RELEASED_LAYER),
        {"lay.jsonl": rows},
    )


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "--data-dir",
            "data",
            "--max-retries",
            "0",
            "--no-cache",
            *args,
        ],
        cwd=root,
        capture_output=True,
        text=True,
    )


def _completions(server: ScriptedServer) -> list[Any]:
    return [c for c in server.calls if c.path.endswith("completions")]


@pytest.fixture(scope="module")
def lay_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A --pipelines released,standardized run of three scripted models on the lay suite."""
    root = tmp_path_factory.mktemp("lay")
    write_lay(root)
    with ScriptedServer(lay_script) as server:
        proc = _pytest(
            root,
            "suites/lay",
            "--pipelines",
            "released,standardized",
            "--report-dir",
            "out",
            *[a for m in "abc" for a in ("--model", f"{m}@{server.url}")],
        )
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert len(_completions(server)) == 60  # 10 questions x 3 models x 2 layers: nothing shared
    return only_run_dir(root / "out")


def test_both_layers_records_and_cards_in_one_run(lay_run: Path) -> None:
    run = read_run(lay_run)
    recs = run["records"]
    assert run["run"]["pipeline"] == "released" and run["run"]["pipelines"] == ["released", "standardized"]
    by_layer = {p: [r for r in recs if r["pipeline"] == p] for p in ("released", "standardized")}
    assert len(by_layer["released"]) == len(by_layer["standardized"]) == 30
    assert {r["variant"] for r in by_layer["released"]} == {""}
    assert {r["variant"] for r in by_layer["standardized"]} == {"standardized"}
    assert {r["item_id"].rsplit("[", 1)[1] for r in recs} >= {"a|released]", "a|standardized]"}
    cards = run["run"]["pipeline_cards"]
    assert cards["lay.mcq"]["pipeline"] == "released" and "variant" not in cards["lay.mcq"]
    layer = cards["lay.mcq|standardized"]
    assert layer["pipeline"] == "standardized"
    assert layer["variant"]["kind"] == "layer" and layer["variant"]["upstream_fields"] == ["inference.max_tokens"]
    assert layer["variant"]["needs_generations"] is True
    results = {(r["model"], r["variant"]): r for r in run["summary"]["results"]}
    assert results[("a", "")]["score"] == pytest.approx(0.9) and results[("a", "standardized")]["score"] == 0.3
    assert {v["kind"] for v in run["summary"]["variants"]} == {"layer"}


def test_layers_that_agree_upstream_ask_once_and_a_missing_layer_skips(tmp_path: Path) -> None:
    write_toy(tmp_path)
    counts = {}
    for name, args in (("one", ["--pipeline", "standardized"]), ("two", ["--pipelines", "released,standardized"])):
        with ScriptedServer(toy_script()) as server:
            proc = _pytest(tmp_path, "suites/toy", "--model", f"m@{server.url}", "--report-dir", name, "-rs", *args)
            counts[name] = len(_completions(server))
        assert proc.returncode == 1, proc.stdout[-3000:]
    # toy.mcq's layers differ downstream only: the two-layer run asks what the one-layer run asks
    assert counts["two"] == counts["one"]
    out = proc.stdout
    assert "SKIPPED" in out and "toy.extra defines no 'released' pipeline (available: standardized)" in out
    assert "toy — pipelines 'released', 'standardized' (one row per layer)" in out
    assert "mcq | released" in out and "mcq | standardized" in out
    run = read_run(only_run_dir(tmp_path / "two"))
    assert {(r["task"], r["pipeline"]) for r in run["records"]} == {
        ("mcq", "released"),
        ("mcq", "standardized"),
        ("extra", "standardized"),
    }
    mcq = [r for r in run["records"] if r["task"] == "mcq"]
    by_q: dict[str, set[str]] = {}
    for r in mcq:
        by_q.setdefault(r["question_id"], set()).add(r["raw_output"])
    assert all(len(outputs) == 1 for outputs in by_q.values())  # one generation read by both layers
    # -k selects one layer
    with ScriptedServer(toy_script()) as server:
        proc = _pytest(
            tmp_path,
            "suites/toy",
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "k",
            "--pipelines",
            "released,standardized",
            "-k",
            "mcq and standardized",
            "--collect-only",
            "-q",
        )
    ids = [line for line in proc.stdout.splitlines() if "::q" in line]
    assert len(ids) == 12 and all(i.endswith("[m|standardized]") for i in ids)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--pipeline", "released", "--pipelines", "released,standardized"], "give one of them"),
        (
            ["--pipelines", "released,standardised"],
            "--pipelines 'standardised': no collected task defines this layer (did you mean 'standardized'?)",
        ),
        (["--pipelines", "released"], "two or more layer names"),
        (["--pipelines", "released,released"], "listed twice"),
        (["--pipelines", "released,standardized", "--vary", "inference.max_tokens=5"], "--vary with --pipelines"),
    ],
)
def test_pipelines_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    write_toy(tmp_path)
    with ScriptedServer(toy_script()) as server:
        proc = _pytest(tmp_path, "suites/toy", "--model", f"m@{server.url}", "--report-dir", "out", *args)
        asked = _completions(server)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 4 and message in text and "Traceback" not in text, text[-2000:]
    assert not asked


def test_audit_of_a_two_layer_run(lay_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suites = lay_run.parent.parent / "suites"
    rc = main(
        ["audit", str(lay_run), "--out", str(tmp_path / "aud"), "--suites-dir", str(suites), "--resamples", "200"]
    )
    out, err = capsys.readouterr()
    assert rc == 0, err
    doc = json.loads((tmp_path / "aud" / "audit.json").read_text())
    assert doc["layers"] == {"from": ["released"], "toward": "standardized"}
    assert doc["runs"] == [str(lay_run)] and set(doc["layer_runs"]) == {"released", "standardized"}
    cmp = doc["compare"]
    assert cmp["sets"]["a"]["label"] == "released" and cmp["sets"]["b"]["label"] == "standardized"
    # set b is the standardized layer's own generations: a scores 3/10 there (re-scored it would be 9/10)
    scores = {(s["layer"], s["model"]): s["score"] for s in doc["scores"]}
    assert scores[("released", "a")] == pytest.approx(0.9) and scores[("standardized", "a")] == pytest.approx(0.3)
    (sens,) = cmp["sensitivity"]["benchmarks"]
    assert sens["rho_gen"] == pytest.approx(-1.0) and sens["rho_ext"] == pytest.approx(1.0)
    assert {r["kind"] for r in cmp["sensitivity"]["runs"]} == {"upstream", "downstream"}
    split = {r["model"]: r for r in doc["upstream_attribution"]}
    assert split["a"]["upstream_fields"] == ["inference.max_tokens"]
    assert split["a"]["downstream_pp"] == pytest.approx(0.0) and split["a"]["upstream_pp"] == pytest.approx(-60.0)
    assert split["c"]["total_pp"] == pytest.approx(60.0)
    (up,) = doc["upstream_differences"]
    assert up["regenerated"] and up["fields"][0]["field"] == "inference.max_tokens"
    assert doc["attribution"] and doc["ledger"] is not None and isinstance(doc["findings"], list)
    assert cmp["rank_shift"] and cmp["by_set"]["a"]["tau_b"] is not None
    assert doc["exports"] and all(Path(p).is_file() for p in doc["exports"])
    html = (tmp_path / "aud" / "report.html").read_text()
    assert "upstream (regenerated)" in html and "Sensitivity" in html
    assert "From released to standardized" in out and "-60.0" in out
    # --from / --toward name the run's layers
    assert (
        main(
            ["audit", str(lay_run), "--out", str(tmp_path / "x"), "--toward", "documented", "--suites-dir", str(suites)]
        )
        == 2
    )
    assert "the run's layers are released, standardized" in capsys.readouterr().err
    # the reverse direction works too, and a second audit into the same --out replaces its split
    assert (
        main(
            [
                "audit",
                str(lay_run),
                "--out",
                str(tmp_path / "aud"),
                "--from",
                "standardized",
                "--suites-dir",
                str(suites),
                "--resamples",
                "50",
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "aud" / "audit.json").read_text())["layers"]["toward"] == "released"


@pytest.mark.parametrize("command", ["show", "summarize", "card", "rescore", "export", "sweep", "compare"])
def test_offline_commands_on_a_two_layer_run(
    lay_run: Path, tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    suites = str(lay_run.parent.parent / "suites")
    argv = {
        "show": ["show", lay_run],
        "summarize": ["summarize", lay_run],
        "card": ["card", lay_run],
        "rescore": [
            "rescore",
            lay_run,
            "--set",
            "scoring.denominator=valid",
            "--suites-dir",
            suites,
            "--report-dir",
            tmp_path / "re",
        ],
        "export": ["export", lay_run, "--out", tmp_path / "exp", "--samples"],
        "sweep": ["sweep", lay_run, "--toward", "standardized", "--suites-dir", suites],
        "compare": [
            "compare",
            lay_run,
            "--pipelines",
            "released,standardized",
            "--out",
            tmp_path / "cmp",
            "--resamples",
            "50",
        ],
    }[command]
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 0 and "Traceback" not in out + err, err
    if command == "show":
        assert "mcq | released" in out and "mcq | standardized" in out
    if command == "summarize":  # both layers' results, each under its own card
        assert "6 results from 60 records" in out
    if command == "rescore":
        new = read_run(only_run_dir(tmp_path / "re"))
        assert {r["variant"] for r in new["records"]} == {"", "standardized"}
        assert {"lay.mcq", "lay.mcq|standardized"} <= set(new["run"]["pipeline_cards"])
    if command == "export":
        text = " ".join(p.read_text() for p in (tmp_path / "exp").rglob("*.json"))
        assert "lay.mcq|standardized" in text


def test_replay_and_resume_of_a_two_layer_run(lay_run: Path, tmp_path: Path) -> None:
    root = lay_run.parent.parent
    # replay: the stored generations answer both layers, no model asked
    proc = _pytest(
        root,
        "suites/lay",
        "--pipelines",
        "released,standardized",
        "--report-dir",
        str(tmp_path / "rp"),
        "--model",
        f"replay:{lay_run}#a",
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    replayed = read_run(only_run_dir(tmp_path / "rp"))
    assert len(replayed["records"]) == 20
    orig = {
        (r["question_id"], r["pipeline"]): r["raw_output"] for r in read_run(lay_run)["records"] if r["model"] == "a"
    }
    assert all(orig[(r["question_id"], r["pipeline"])] == r["raw_output"] for r in replayed["records"])
    # resume: a run cut short continues with only what is missing; another layer list is refused
    copy = tmp_path / "cut" / lay_run.name
    copy.parent.mkdir()
    lines = (lay_run / "records.jsonl").read_text().splitlines()
    copy.mkdir()
    (copy / "run.json").write_text((lay_run / "run.json").read_text())
    (copy / "records.jsonl").write_text("\n".join(lines[:25]) + "\n")
    with ScriptedServer(lay_script) as server:
        models = [a for m in "abc" for a in ("--model", f"{m}@{server.url}")]
        proc = _pytest(root, "suites/lay", "--pipelines", "released,standardized", "--resume", str(copy), *models)
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert len(_completions(server)) == 35
        bad = _pytest(root, "suites/lay", "--pipeline", "released", "--resume", str(copy), *models)
    assert bad.returncode == 4 and "resume it with the same layers" in bad.stdout + bad.stderr
    assert len(read_run(copy)["records"]) == 60


def test_two_layers_on_a_real_suite(tmp_path: Path, real_data: Path) -> None:
    """CyberMetric-80 under its released and standardized layers: both layers' records, and the audit."""
    with ScriptedServer(lambda call: Reply(content="ANSWER: A")) as server:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                str(SUITES / "cybermetric"),
                "-k",
                "cm80",
                "--limit",
                "4",
                "--data-dir",
                str(real_data),
                "--no-cache",
                "--max-retries",
                "0",
                "--pipelines",
                "released,standardized",
                "--report-dir",
                str(tmp_path / "out"),
                "--set",
                "inference.max_tokens=16",
                "--model",
                f"m@{server.url}",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    run_dir = only_run_dir(tmp_path / "out")
    run = read_run(run_dir)
    assert {r["pipeline"] for r in run["records"]} == {"released", "standardized"}
    assert len(run["records"]) == 8
    cards = run["run"]["pipeline_cards"]
    assert cards["cybermetric.cm80"]["pipeline"] == "released"
    assert cards["cybermetric.cm80|standardized"]["variant"]["upstream_fields"]  # the prompts differ
    assert (
        main(
            [
                "audit",
                str(run_dir),
                "--out",
                str(tmp_path / "aud"),
                "--suites-dir",
                str(SUITES),
                "--data-dir",
                str(real_data),
                "--resamples",
                "50",
            ]
        )
        == 0
    )
    doc = json.loads((tmp_path / "aud" / "audit.json").read_text())
    assert doc["upstream_attribution"] and doc["upstream_differences"] and (tmp_path / "aud" / "report.html").is_file()


def test_demo_explains_a_two_layer_run_and_its_audit(
    lay_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_benchaudit.report.demo import explain_layers
    from pytest_benchaudit.report.demo import main as demo_main
    from pytest_benchaudit.report.terminal import WIDTH

    assert (
        main(
            [
                "audit",
                str(lay_run),
                "--out",
                str(tmp_path / "aud"),
                "--suites-dir",
                str(lay_run.parent.parent / "suites"),
                "--resamples",
                "50",
            ]
        )
        == 0
    )
    capsys.readouterr()
    text = explain_layers(lay_run, tmp_path / "aud")
    assert "Same 10 questions (lay.mcq), same model (a), one run, two pipelines:" in text
    assert "  released     : 90.0% of all questions" in text and "  standardized : 30.0% of all questions" in text
    assert "difference   : -60.0 percentage points (standardized - released)" in text
    assert "Where the difference comes from" in text and "inference.max_tokens" in text
    assert str(tmp_path / "aud" / "report.html") in text and "benchaudit audit" in text
    assert (
        max(len(line) for line in text.splitlines() if str(tmp_path) not in line and str(lay_run) not in line) <= WIDTH
    )
    assert demo_main([str(lay_run)]) == 0 and "one run, two pipelines" in capsys.readouterr().out


def test_a_gate_holds_for_every_layer(tmp_path: Path) -> None:
    write_lay(tmp_path)
    with ScriptedServer(lay_script) as server:
        proc = _pytest(
            tmp_path,
            "suites/lay",
            "--pipelines",
            "released,standardized",
            "--report-dir",
            "out",
            "--model",
            f"a@{server.url}",
            "--gate",
            "lay.mcq>=0.5",
        )
    assert proc.returncode == 1 and "FAIL  lay.mcq>=0.5" in proc.stdout, proc.stdout[-2000:]
    assert "a|standardized" in proc.stdout.split("FAIL  lay.mcq>=0.5", 1)[1].splitlines()[0]
