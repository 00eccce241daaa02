"""Fixtures of the multiverse tests: a toy benchmark run by pytest against the scripted server, and the
published AthenaBench and CTI-Bench runs imported as run directories.

The toy ("mvtoy", written for these tests, not benchmark data) has four models whose answers the
scripted server makes differ by model (the request's ``model``): one answers every question plainly,
one reasons in ``<think>`` spans (some left open), one writes a bare letter, one hedges ("A or B").
So the extraction rule, the reasoning mode and the denominator all move its scores, and the hedger's
order against the others flips with the denominator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer

GOLDS = {"q1": "A", "q2": "B", "q3": "C", "q4": "D", "q5": "A", "q6": "B", "q7": "C", "q8": "D"}
MODELS = ("steady", "thinker", "terse", "hedger")
SUITES = Path(__file__).resolve().parents[2] / "suites"

SUITE = """
[benchmark]
name = "mvtoy"
title = "Multiverse toy"
data_folder = "mvtoy"

[templates.plain]
user = "{question}\\n{options}"

[tasks.mcq]
[tasks.mcq.data]
file = "mvtoy.jsonl"
format = "jsonl"
id = "id"
question = "question"
choices = "options"
gold = "gold"

[tasks.mcq.released]
prompt.template = "plain"
prompt.format = { mode = "chat", system_role = "none", few_shot = 0 }
inference.decoding = { temperature = 0.0 }
inference.max_tokens = 64
inference.stop = []
extraction = { rule = "last_line_letter", reasoning = "keep" }
scoring = { metric = "exact_match", denominator = "valid" }
aggregation = { method = "micro" }

[tasks.mcq.standardized]
prompt.template = "plain"
prompt.format = { mode = "chat", system_role = "none", few_shot = 0 }
inference.decoding = { temperature = 0.0 }
inference.max_tokens = 64
inference.stop = []
extraction = { rule = "final_answer_letter", reasoning = "strip" }
scoring = { metric = "exact_match", denominator = "total" }
aggregation = { method = "micro" }
"""


def _reply(model: str, qid: str) -> str:
    gold = GOLDS[qid]
    wrong = "ABCD"[("ABCD".index(gold) + 1) % 4]
    n = int(qid[1:])
    if model == "steady":
        return f"The answer is clear.\nAnswer: {wrong if n == 8 else gold}"
    if model == "thinker":
        if n <= 4:
            return f"<think>Maybe Answer: {wrong}</think>\nAnswer: {gold}"
        if n <= 6:
            return f"<think>Thinking it over. Answer: {gold}"
        return "I am not sure about this one."
    if model == "terse":
        return wrong if n in (3, 6) else gold
    return f"Answer: {gold} or {wrong}" if n <= 6 else f"Answer: {gold}"  # the hedger


def script(call: Call) -> Reply:
    model = str(call.body.get("model"))
    qid = next((q for q in GOLDS if f"[{q}]" in call.last_user_text), "q1")
    return Reply(content=_reply(model, qid))


def write_toy(root: Path, multiverse: str = "") -> None:
    """The mvtoy suite under ``root/suites`` (with an optional ``[tasks.mcq.multiverse]`` table) and its data
    under ``root/data``."""
    (root / "suites" / "mvtoy").mkdir(parents=True, exist_ok=True)
    (root / "suites" / "mvtoy" / "suite.toml").write_text(textwrap.dedent(SUITE) + multiverse, encoding="utf-8")
    (root / "data" / "mvtoy").mkdir(parents=True, exist_ok=True)
    with (root / "data" / "mvtoy" / "mvtoy.jsonl").open("w", encoding="utf-8") as fh:
        for qid, gold in GOLDS.items():
            fh.write(
                json.dumps(
                    {
                        "id": qid,
                        "question": f"Toy question [{qid}]?",
                        "gold": gold,
                        "options": ["first", "second", "third", "fourth"],
                    }
                )
                + "\n"
            )


def run_toy(root: Path, url: str, *extra: str) -> Path:
    """A real pytest run of the toy (four models, released layer) into ``root/out``; its run directory."""
    out = root / "out"
    before = set(out.iterdir()) if out.is_dir() else set()
    args = [
        sys.executable,
        "-m",
        "pytest",
        "suites/mvtoy",
        "--data-dir",
        "data",
        "--pipeline",
        "released",
        "--report-dir",
        "out",
        "--max-retries",
        "0",
        "-p",
        "no:cacheprovider",
        "-q",
        *(a for m in MODELS for a in ("--model", f"{m}@{url}")),
        *extra,
    ]
    env = {**os.environ, "XDG_CACHE_HOME": str(root / "cache")}
    done = subprocess.run(args, cwd=root, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = [p for p in out.iterdir() if p.is_dir() and p not in before]
    return run


@pytest.fixture(scope="session")
def mvtoy() -> Callable[[Path, str], None]:
    """:func:`write_toy`: the mvtoy suite (with an optional multiverse table) and its data under a folder."""
    return write_toy


@pytest.fixture(scope="session")
def suites() -> Path:
    """The repository's suites/ (the published runs' suites)."""
    return SUITES


@pytest.fixture(scope="session")
def toy_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(folder holding suites/ and data/, the toy's run directory)."""
    root = tmp_path_factory.mktemp("mvtoy")
    write_toy(root)
    with ScriptedServer(script) as server:
        run = run_toy(root, server.url)
    yield root, run


@pytest.fixture(scope="session")
def toy_vary_run(toy_root: tuple[Path, Path]) -> Path:
    """The toy run again with an upstream variant (``--vary inference.max_tokens=32``): two generation sets."""
    root, _run = toy_root
    with ScriptedServer(script) as server:
        return run_toy(root, server.url, "--vary", "inference.max_tokens=32")


def _real_data() -> Path:
    value = os.environ.get("BENCHAUDIT_DATA")
    if not value or not Path(value).expanduser().is_dir():
        pytest.skip(
            "real benchmark data not available: set BENCHAUDIT_DATA to the datasets directory "
            "(make test does this when ../shared/datasets exists)"
        )
    return Path(value).expanduser()


@pytest.fixture(scope="session")
def athena_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """AthenaBench's 12 published runs imported as run directories (a folder of them)."""
    source = _real_data() / "athenabench" / "runs-mini"
    if not source.is_dir():
        pytest.skip(f"published AthenaBench runs missing: {source}")
    from pytest_benchaudit.importers import import_athenabench_runs

    out = tmp_path_factory.mktemp("athena-runs")
    import_athenabench_runs(source, out, SUITES, None, log=lambda *_a: None)
    return out
