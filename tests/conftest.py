"""Shared fixtures: a scripted OpenAI-compatible server, a toy benchmark, real data, run readers."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest
# pytester's in-process runs restore sys.modules afterwards; numpy's C extension cannot be
# imported twice in one process, so the plugin's lazy scipy import must happen out here first.
import scipy.stats  # noqa: F401

from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer, by_marker, sequence

REPO = Path(__file__).resolve().parent.parent
SUITES = REPO / "suites"
TEST_TIMEOUT_S = 600  # a hung test fails instead of stalling CI (pytest-timeout)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of this suite gets the 600 s timeout unless it sets its own (the limit lives here,
    not in pyproject.toml, whose pytest table a suite run from the checkout reads too)."""
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT_S))

# Toy questions written for these tests (not benchmark data). The marker in each question
# tells the scripted server how to answer it.
TOY_QUESTIONS = [
    ("t01", "CORRECT", "B"),
    ("t02", "WRONG", "B"),
    ("t03", "THINK_CLOSED", "A"),
    ("t04", "THINK_ONLY_CLOSE", "A"),
    ("t05", "THINK_UNCLOSED", "A"),
    ("t06", "REASONING_FIELD", "A"),
    ("t07", "EMPTY", "A"),
    ("t08", "TRUNCATED", "A"),
    ("t09", "HTTP_500", "A"),
    ("t10", "RETRY_503", "A"),
    ("t11", "RATE_LIMITED", "A"),
    ("t12", "UNPARSEABLE", "A"),
]

TOY_SCRIPT = {
    "CORRECT": Reply(content="The option that fits is B.\nAnswer: B"),
    "WRONG": Reply(content="Answer: C"),
    "THINK_CLOSED": Reply(content="<think>Is it C? Answer: C</think>\nAnswer: A"),
    "THINK_ONLY_CLOSE": Reply(content="Hmm, maybe Answer: C\n</think>\n\nAnswer: A"),
    "THINK_UNCLOSED": Reply(content="<think>Let me weigh the options. Answer: C seems", finish_reason="length"),
    "REASONING_FIELD": Reply(content="Answer: A", reasoning_content="First guess. Answer: C"),
    "EMPTY": Reply(content=""),
    "TRUNCATED": Reply(content="Let me think step by step about each option", finish_reason="length"),
    "HTTP_500": Reply(status=500, error_message="upstream exploded"),
    "UNPARSEABLE": Reply(content="I am not sure about this one."),
}


def toy_script() -> Any:
    """by_marker for the static replies plus stateful ones (retry, rate limit)."""
    static = by_marker(TOY_SCRIPT, Reply(content="Answer: A"))
    retry = sequence(Reply(status=503), Reply(content="Answer: A"))
    limited = sequence(Reply(status=429, headers={"Retry-After": "0"}), Reply(content="Answer: A"))

    def script(call: Any) -> Reply:
        text = call.last_user_text
        if "RETRY_503" in text:
            return retry(call)
        if "RATE_LIMITED" in text:
            return limited(call)
        return static(call)

    return script


TOY_SUITE = """
[benchmark]
name = "toy"
title = "Toy benchmark for tests"
data_folder = "toy"

[templates.plain]
user = "{question}\\n{options}"

[tasks.mcq]
[tasks.mcq.data]
file = "toy.jsonl"
format = "jsonl"
id = "id"
question = "question"
choices = "options"
gold = "gold"
meta = ["topic"]

[tasks.mcq.standardized]
prompt.template = "plain"
prompt.format = { mode = "chat", system_role = "none", few_shot = 0 }
inference.decoding = { temperature = 0.0 }
inference.max_tokens = 64
inference.stop = []
extraction = { rule = "final_answer_letter", reasoning = "strip" }
scoring = { metric = "exact_match", denominator = "total" }
aggregation = { method = "micro", by = "topic" }

[tasks.mcq.released]
prompt.template = "plain"
prompt.format = { mode = "chat", system_role = "none", few_shot = 0 }
inference.decoding = { temperature = 0.0 }
inference.max_tokens = 64
inference.stop = []
extraction = { rule = "final_answer_letter", reasoning = "keep" }
scoring = { metric = "exact_match", denominator = "valid" }
aggregation = { method = "micro" }

[tasks.extra]
[tasks.extra.data]
file = "extra.jsonl"
format = "jsonl"
id = "id"
question = "question"
choices = "options"
gold = "gold"

[tasks.extra.standardized]
prompt.template = "plain"
prompt.format = { mode = "chat", system_role = "none", few_shot = 0 }
inference.max_tokens = 64
extraction = { rule = "final_answer_letter", reasoning = "strip" }
scoring = { metric = "exact_match", denominator = "total" }
aggregation = { method = "micro" }
"""


MCQ_SUITE = """
[benchmark]
name = "{name}"
title = "{title}"
data_folder = "{name}"

[templates.plain]
user = "{{question}}\\n{{options}}"

[tasks.mcq]
[tasks.mcq.data]
file = "{name}.jsonl"
format = "jsonl"
id = "id"
question = "question"
choices = "options"
gold = "gold"

[tasks.mcq.standardized]
prompt.template = "plain"
prompt.format = {{ mode = "chat", system_role = "none", few_shot = 0 }}
inference.decoding = {{ temperature = 0.0 }}
inference.max_tokens = 64
extraction = {{ rule = "final_answer_letter", reasoning = "strip" }}
scoring = {{ metric = "exact_match", denominator = "total" }}
aggregation = {{ method = "micro" }}
"""


def write_mcq_suite(root: Path, name: str, rows: list[dict[str, Any]], title: str = "Test benchmark") -> None:
    """A one-task MCQ suite ``name`` under ``root/suites`` with ``rows`` (id, question, options, gold)
    as its data under ``root/data``: the shape the fault, secret and scale tests need."""
    (root / "suites" / name).mkdir(parents=True, exist_ok=True)
    (root / "data" / name).mkdir(parents=True, exist_ok=True)
    (root / "suites" / name / "suite.toml").write_text(MCQ_SUITE.format(name=name, title=title))
    with (root / "data" / name / f"{name}.jsonl").open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")


def write_toy(root: Path) -> tuple[Path, Path]:
    """Write the toy suite under ``root/suites/toy`` and its data under ``root/data/toy``."""
    suite_dir = root / "suites" / "toy"
    data_dir = root / "data"
    (data_dir / "toy").mkdir(parents=True, exist_ok=True)
    suite_dir.mkdir(parents=True, exist_ok=True)
    (suite_dir / "suite.toml").write_text(textwrap.dedent(TOY_SUITE))
    options = ["first option", "second option", "third option", "fourth option"]
    with (data_dir / "toy" / "toy.jsonl").open("w") as fh:
        for qid, marker, gold in TOY_QUESTIONS:
            fh.write(json.dumps({"id": qid, "question": f"Toy question {marker}?", "options": options,
                                 "gold": gold, "topic": ["alpha", "beta"] if qid < "t05" else ["alpha"]}) + "\n")
    with (data_dir / "toy" / "extra.jsonl").open("w") as fh:
        fh.write(json.dumps({"id": "x1", "question": "Extra question CORRECT?", "options": options, "gold": "B"}) + "\n")
    return suite_dir, data_dir


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own per-user cache directory (the generation cache lives there), so
    a scripted answer cached by one test never answers another test's request."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


@pytest.fixture
def outside_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's pytest subprocesses run as a top-level pytest would, even when this suite itself runs under
    ``-n``: an inherited ``PYTEST_XDIST_WORKER`` would make the plugin take them for workers (no start-up fork)."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    with ScriptedServer(toy_script()) as server:
        yield server


@pytest.fixture
def toy(pytester: pytest.Pytester) -> tuple[Path, Path]:
    return write_toy(pytester.path)


# Record fields a hand-made record may leave out: filled so it passes the store's schema check.
RECORD_DEFAULTS: dict[str, Any] = {"benchmark": "toy", "task": "mcq", "question_id": "q1", "question_index": 0,
                                   "model": "m", "pipeline": "standardized", "pipeline_hash": "", "request": {},
                                   "raw_output": "", "valid": True, "gold": "A", "score": 0.0, "correct": False}


def complete_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the schema's required fields it lacks filled from :data:`RECORD_DEFAULTS`."""
    return {**RECORD_DEFAULTS, **record}


def write_run_dir(root: Path, name: str, records: list[dict[str, Any]]) -> Path:
    """A minimal run directory (run.json + records.jsonl) holding hand-made records (completed
    with :func:`complete_record`, so they are records under the schema)."""
    run = root / name
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": name}), encoding="utf-8")
    (run / "records.jsonl").write_text("".join(json.dumps(complete_record(r)) + "\n" for r in records),
                                       encoding="utf-8")
    return run


def only_run_dir(report_dir: Path) -> Path:
    runs = [p for p in report_dir.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def read_run(run_dir: Path) -> dict[str, Any]:
    return {
        "records": [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()],
        "summary": json.loads((run_dir / "summary.json").read_text()),
        "run": json.loads((run_dir / "run.json").read_text()),
    }


def real_data_dir() -> Path:
    """The real benchmark data directory, or a skip saying why there is none."""
    value = os.environ.get("BENCHAUDIT_DATA")
    if not value or not Path(value).expanduser().is_dir():
        pytest.skip("real benchmark data not available: set BENCHAUDIT_DATA to the datasets directory "
                    "(make test does this when ../shared/datasets exists)")
    return Path(value).expanduser()


def data_file(*parts: str) -> Path:
    """One real data file (e.g. ``data_file("cti-bench", "cti-mcq.tsv")``), or a skip."""
    path = real_data_dir().joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"real-data file missing: {path}")
    return path


def read_tsv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


@pytest.fixture(scope="session")
def real_data() -> Path:
    return real_data_dir()


@pytest.fixture(scope="session")
def data_dir(real_data: Path) -> Path:
    return real_data


def build_toy_run(root: Path) -> Path:
    """The toy suite under ``root`` and a finished run of it (12 + 1 records) in ``root/out``, made by a real
    pytest process against the scripted server; returns ``root``."""
    import subprocess
    import sys

    write_toy(root)
    with ScriptedServer(toy_script()) as server:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites/toy", "--data-dir",
                               "data", "--model", f"toy-model@{server.url}", "--report-dir", "out",
                               "--max-retries", "0", "--no-cache"], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return root


# A process that holds a run directory's writer lock, as the process writing a run does, until its stdin closes.
_HOLDER = """
import sys
from pytest_benchaudit.runs.store import WriterLock
lock = WriterLock.acquire(sys.argv[1])
print("locked", flush=True)
sys.stdin.read()
lock.release()
"""


@contextlib.contextmanager
def writer_lock_held(run_dir: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holds ``run_dir``'s writer lock within the block (it waits on its stdin: no timing)."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(run_dir)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=60)
