"""The example plugin (examples/benchaudit-example) as a user installs it: a real distribution built by pip
and installed (with its entry point) into a folder of its own, then, from an empty directory, its suite run
against the scripted server and every command on that run, in subprocesses that find it on PYTHONPATH only.

The scripted model answers ``<<B>>`` then ``Answer: C`` to every question: the example's rule
``quiz_marked`` reads B, the standardized layer's ``final_answer_letter`` reads C, so each score is a
count of gold letters in the generated file, counted here with a regex (not with the plugin's reader).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "benchaudit-example"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example's wheel built and installed by pip into a folder (its dist-info holds the entry point)."""
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-compile",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(EXAMPLE),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode and re.search(
        r"No matching distribution|Could not find a version|connection", done.stderr, re.IGNORECASE
    ):
        pytest.skip(f"pip cannot fetch the example's build backend (setuptools>=77) here: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (target / "benchaudit_example-0.1.0.dist-info" / "entry_points.txt").is_file()
    return target


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(lambda call: Reply(content="<<B>>\nAnswer: C"), model_id="m") as srv:
        yield srv


@pytest.fixture(scope="module")
def env(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    data = tmp_path_factory.mktemp("data")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHAUDIT_", "PYTEST_"))}
    env.update(PYTHONPATH=str(installed), BENCHAUDIT_DATA=str(data), XDG_CACHE_HOME=str(tmp_path_factory.mktemp("c")))
    subprocess.run([sys.executable, "-m", "benchaudit_example.generate"], env=env, check=True, capture_output=True)
    return env


def gold_counts(env: dict[str, str]) -> dict[str, int]:
    text = (Path(env["BENCHAUDIT_DATA"]) / "quiz" / "questions.quiz").read_text(encoding="utf-8")
    golds = re.findall(r"^answer = ([A-D])$", text, re.MULTILINE)
    return {letter: golds.count(letter) for letter in "ABCD"} | {"n": len(golds)}


def run(args: list[str], env: dict[str, str], cwd: Path, expect: int | tuple[int, ...] = 0) -> str:
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode in ((expect,) if isinstance(expect, int) else expect), (
        done.stdout[-3000:] + done.stderr[-3000:]
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout + done.stderr


def summary_score(run_dir: Path) -> tuple[float, str]:
    summary = json.loads((run_dir / "summary.json").read_text())
    [result] = summary["results"]
    return result["score"], result["metric"]


def test_the_example_runs_from_an_empty_directory_and_every_command_knows_it(
    env: dict[str, str], server: ScriptedServer, tmp_path: Path
) -> None:
    counts = gold_counts(env)
    n = counts["n"]
    assert n == 18
    out = run([str(BIN / "benchaudit"), "plugins"], env, tmp_path)
    assert "example: benchaudit-example 0.1.0 (benchaudit_example.plugin)" in out
    assert re.search(r"rules\s+quiz_marked", out) and re.search(r"metrics\s+quiz_points", out)
    assert re.search(r"readers\s+quiz", out) and re.search(r"suites\s+quiz", out)

    # the released layer: the plugin's reader, rule (B) and metric (1 right, -1/3 wrong)
    out = run(
        [
            str(BIN / "pytest"),
            "suites/quiz",
            "--pipeline",
            "released",
            "--model",
            f"m@{server.url}",
            "-p",
            "no:cacheprovider",
        ],
        env,
        tmp_path,
        expect=(0, 1),
    )
    assert "suites/quiz → " in out and "the suite of plugin 'example' (benchaudit-example 0.1.0)" in out
    [released] = list((tmp_path / "reports").iterdir())
    score, metric = summary_score(released)
    assert metric == "quiz_points"
    assert score == pytest.approx((counts["B"] - (n - counts["B"]) / 3) / n)

    # the standardized layer reads the final line (C); re-scored with the plugin's rule it reads B
    out = run(
        [str(BIN / "pytest"), "suites/quiz", "--model", f"m@{server.url}", "-p", "no:cacheprovider"],
        env,
        tmp_path,
        expect=(0, 1),
    )
    [standardized] = [p for p in (tmp_path / "reports").iterdir() if p != released]
    assert summary_score(standardized) == (pytest.approx(counts["C"] / n), "exact_match")
    out = run(
        [str(BIN / "benchaudit"), "rescore", str(standardized), "--set", "extraction.rule=quiz_marked"], env, tmp_path
    )
    [rescored] = [p for p in (tmp_path / "reports").iterdir() if p not in (released, standardized)]
    assert summary_score(rescored) == (pytest.approx(counts["B"] / n), "exact_match")

    card = json.loads(run([str(BIN / "benchaudit"), "card", str(released)], env, tmp_path))
    assert card["quiz.ports"]["fields"]["extraction.rule"] == "quiz_marked"
    assert card["quiz.ports"]["fields"]["scoring.metric"] == "quiz_points"
    assert "suite(s) valid" in run([str(BIN / "benchaudit"), "validate"], env, tmp_path)
    ledger = json.loads(run([str(BIN / "benchaudit"), "ledger", "--format", "json"], env, tmp_path))
    assert "quiz" in json.dumps(ledger)
    out = run([str(BIN / "benchaudit"), "diagnose", str(released)], env, tmp_path)
    assert "no suite" not in out and "not checked" not in out, out
    run([str(BIN / "benchaudit"), "audit", str(released), "--out", str(tmp_path / "audit")], env, tmp_path)
    assert json.loads((tmp_path / "audit" / "audit.json").read_text())

    # turned off, its suite, rule and metric are gone (one line each, never a traceback)
    out = run([str(BIN / "benchaudit"), "card", "quiz", "--disable-plugin", "example"], env, tmp_path, expect=2)
    assert "no suite 'quiz'" in out
    env_off = env | {"BENCHAUDIT_DISABLE_PLUGINS": "example"}
    out = run([str(BIN / "benchaudit"), "rescore", str(released)], env_off, tmp_path, expect=2)
    assert "quiz" in out and len(out.strip().splitlines()) == 1, out
