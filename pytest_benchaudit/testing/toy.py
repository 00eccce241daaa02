"""The toy benchmark: one builder for the small MCQ suites end-to-end tests run, and the scripted
answers of the standard toy suite.

:func:`mcq_suite_toml` writes a runnable suite as TOML from the few things tests vary (its name and
title, each task's data file and metadata, each layer's decoding, budget, reasoning handling,
denominator and grouping); :func:`write_suite` puts it and its rows where ``pytest suites/NAME
--data-dir data`` finds them. :func:`write_toy` is the standard toy suite: twelve questions whose
markers tell :func:`toy_script` how the scripted server answers each (right, wrong, thinking,
truncated, an HTTP 500, a 503 then an answer, a 429 then an answer, unparseable).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_benchaudit.testing.scripted_server import Call, Reply, Script, by_marker, sequence

__all__ = [
    "TOY_OPTIONS",
    "TOY_QUESTIONS",
    "TOY_SCRIPT",
    "layer_toml",
    "mcq_suite_toml",
    "task_toml",
    "toy_script",
    "toy_suite_toml",
    "write_mcq_suite",
    "write_suite",
    "write_toy",
]

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
TOY_OPTIONS = ["first option", "second option", "third option", "fourth option"]

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


def toy_script() -> Script:
    """by_marker for the static replies plus stateful ones (retry, rate limit): a fresh script each
    call, so one server's retries never use up another's."""
    static = by_marker(TOY_SCRIPT, Reply(content="Answer: A"))
    retry = sequence(Reply(status=503), Reply(content="Answer: A"))
    limited = sequence(Reply(status=429, headers={"Retry-After": "0"}), Reply(content="Answer: A"))

    def script(call: Call) -> Reply:
        text = call.last_user_text
        if "RETRY_503" in text:
            return retry(call)
        if "RATE_LIMITED" in text:
            return limited(call)
        return static(call)

    return script


def _value(value: Any) -> str:
    """One TOML value: strings and lists of strings as JSON writes them (a TOML subset), numbers as they are."""
    return json.dumps(value)


def layer_toml(
    task: str,
    layer: str,
    *,
    temperature: float | None = 0.0,
    max_tokens: int = 64,
    stop: Sequence[str] | None = None,
    reasoning: str = "strip",
    denominator: str = "total",
    by: str | None = None,
    template: str = "plain",
    why: Mapping[str, str] | None = None,
    notes: Sequence[str] | None = None,
) -> str:
    """One full layer of ``task``: the ``template`` chat prompt, greedy decoding at ``temperature`` (none
    written when ``None``), ``max_tokens``, ``stop`` (none written when ``None``), final_answer_letter with
    ``reasoning``, exact_match over ``denominator`` and a micro average (grouped ``by`` a metadata field);
    the layer's ``why`` (field -> reason) and ``notes`` when given."""
    lines = [
        f"[tasks.{task}.{layer}]",
        f"prompt.template = {_value(template)}",
        'prompt.format = { mode = "chat", system_role = "none", few_shot = 0 }',
    ]
    if temperature is not None:
        lines.append(f"inference.decoding = {{ temperature = {temperature!r} }}")
    lines.append(f"inference.max_tokens = {max_tokens}")
    if stop is not None:
        lines.append(f"inference.stop = {_value(list(stop))}")
    lines.append(f'extraction = {{ rule = "final_answer_letter", reasoning = {_value(reasoning)} }}')
    lines.append(f'scoring = {{ metric = "exact_match", denominator = {_value(denominator)} }}')
    grouping = f", by = {_value(by)}" if by is not None else ""
    lines.append(f'aggregation = {{ method = "micro"{grouping} }}')
    if why:
        lines.append("why = { " + ", ".join(f"{_value(k)} = {_value(v)}" for k, v in why.items()) + " }")
    if notes is not None:
        lines.append(f"notes = {_value(list(notes))}")
    return "\n".join(lines) + "\n"


def task_toml(task: str, file: str, layers: Mapping[str, Mapping[str, Any]], *, meta: Sequence[str] = ()) -> str:
    """Task ``task`` reading ``file`` (JSON lines: id, question, options, gold and the ``meta`` fields),
    with one :func:`layer_toml` per entry of ``layers`` (layer name -> its keyword arguments)."""
    text = (
        f"[tasks.{task}]\n[tasks.{task}.data]\nfile = {_value(file)}\nformat = \"jsonl\"\nid = \"id\"\n"
        "question = \"question\"\nchoices = \"options\"\ngold = \"gold\"\n"
    )
    if meta:
        text += f"meta = {_value(list(meta))}\n"
    return text + "".join("\n" + layer_toml(task, layer, **kwargs) for layer, kwargs in layers.items())


def mcq_suite_toml(
    name: str, *, title: str = "Test benchmark", tasks: Iterable[str] | None = None, extra: str = ""
) -> str:
    """A suite ``name`` with the ``plain`` template and ``tasks`` (each a :func:`task_toml`); by default the one
    task ``mcq`` reading ``NAME.jsonl`` with a standardized layer (greedy, 64 tokens, every question counted).
    ``extra`` (more TOML: templates, layers) is appended as it is."""
    if tasks is None:
        tasks = [task_toml("mcq", f"{name}.jsonl", {"standardized": {}})]
    head = (
        f"[benchmark]\nname = {_value(name)}\ntitle = {_value(title)}\ndata_folder = {_value(name)}\n\n"
        '[templates.plain]\nuser = "{question}\\n{options}"\n'
    )
    return head + "".join("\n" + task for task in tasks) + extra


def write_suite(root: Path, name: str, suite_toml: str, data: Mapping[str, Iterable[Mapping[str, Any]]]) -> Path:
    """``suite_toml`` as ``root/suites/NAME/suite.toml`` and each entry of ``data`` (file name -> rows) as
    JSON lines under ``root/data/NAME``; returns the suite's folder."""
    suite_dir = root / "suites" / name
    suite_dir.mkdir(parents=True, exist_ok=True)
    (root / "data" / name).mkdir(parents=True, exist_ok=True)
    (suite_dir / "suite.toml").write_text(suite_toml)
    for file, rows in data.items():
        with (root / "data" / name / file).open("w") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
    return suite_dir


def write_mcq_suite(root: Path, name: str, rows: list[dict[str, Any]], title: str = "Test benchmark") -> None:
    """A one-task MCQ suite ``name`` (:func:`mcq_suite_toml`'s default) under ``root/suites`` with ``rows``
    (id, question, options, gold) as its data under ``root/data``: the shape the fault, secret and scale
    tests need."""
    write_suite(root, name, mcq_suite_toml(name, title=title), {f"{name}.jsonl": rows})


def toy_suite_toml() -> str:
    """The toy suite: task ``mcq`` (the twelve toy questions, grouped by topic) with a standardized and a
    released layer that differ downstream only, and task ``extra`` (one question, standardized only)."""
    mcq = task_toml(
        "mcq",
        "toy.jsonl",
        {
            "standardized": {"stop": [], "by": "topic"},
            "released": {"stop": [], "reasoning": "keep", "denominator": "valid"},
        },
        meta=["topic"],
    )
    extra = task_toml("extra", "extra.jsonl", {"standardized": {"temperature": None}})
    return mcq_suite_toml("toy", title="Toy benchmark for tests", tasks=[mcq, extra])


def write_toy(root: Path) -> tuple[Path, Path]:
    """Write the toy suite under ``root/suites/toy`` and its data under ``root/data/toy``; returns
    (the suite's folder, the data directory)."""
    rows = [
        {
            "id": qid,
            "question": f"Toy question {marker}?",
            "options": TOY_OPTIONS,
            "gold": gold,
            "topic": ["alpha", "beta"] if qid < "t05" else ["alpha"],
        }
        for qid, marker, gold in TOY_QUESTIONS
    ]
    extra = [{"id": "x1", "question": "Extra question CORRECT?", "options": TOY_OPTIONS, "gold": "B"}]
    suite_dir = write_suite(root, "toy", toy_suite_toml(), {"toy.jsonl": rows, "extra.jsonl": extra})
    return suite_dir, root / "data"
