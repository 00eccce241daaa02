"""report/upstream_text.py: the audit's upstream differences said once each, with their tasks (issue 33, item 16).

The rows are audit.json's ``upstream_differences`` / ``upstream_same_requests``.  Checked: AthenaBench's
shape (the same two "no effect expected" reasons on six tasks: two lines, not twelve), and, on any rows
(hypothesis), that nothing is lost or made up: every (task, field, reason) of the rows is in exactly one
line, and the lines do not depend on the order of the rows' tasks.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_benchaudit.report.upstream_text import tasks_text, upstream_lines

SEED = "temperature is 0 on both sides (greedy decoding): the request's seed changes nothing the model generates"
TOP_P = "temperature is 0 on both sides (greedy decoding): the request's top_p changes nothing the model generates"
NOTE = "needs new generations: not re-scored, not estimated"


def _field(name: str, stored: Any, target: Any, reason: str | None = None) -> dict[str, Any]:
    return {"field": name, "stored": stored, "standardized": target, **({"reason": reason} if reason else {})}


def _athena() -> list[dict[str, Any]]:
    """The rows of the AthenaBench audit (released -> standardized), as audit.json holds them."""
    rows = []
    for task in ("ate", "mcq", "rcm", "rms", "taa", "vsp"):
        fields = [_field("inference.max_tokens", "unspecified", 2048)]
        if task == "mcq":
            fields.append(_field("prompt.template", "released", "standard_mcq"))
        rows.append(
            {
                "task": f"athenabench.{task}",
                "fields": fields,
                "note": NOTE,
                "no_effect": [
                    _field("inference.decoding.seed", "unspecified", 42, SEED),
                    _field("inference.decoding.top_p", "unspecified", 1.0, TOP_P),
                ],
                "same_request": [] if task == "mcq" else [_field("prompt.template", "released", "dataset_prompt")],
            }
        )
    return rows


def test_athenabench_says_each_reason_once_with_its_tasks() -> None:
    lines = upstream_lines(_athena(), [], "standardized")  # type: ignore[arg-type]
    assert lines == [
        f'upstream: athenabench ate, rcm, rms, taa, vsp: inference.max_tokens "unspecified" -> 2048: {NOTE}',
        f'upstream: athenabench.mcq: inference.max_tokens "unspecified" -> 2048, prompt.template "released" -> '
        f'"standard_mcq": {NOTE}',
        f'no effect expected: inference.decoding.seed "unspecified" -> 42 on athenabench ate, mcq, rcm, rms, taa, '
        f"vsp: {SEED}",
        f'no effect expected: inference.decoding.top_p "unspecified" -> 1.0 on athenabench ate, mcq, rcm, rms, taa, '
        f"vsp: {TOP_P}",
        'same requests: prompt.template "released" -> "dataset_prompt" on athenabench ate, rcm, rms, taa, vsp: '
        "byte-identical when rendered",
    ]  # 5 lines where each task's own block made 23


def test_tasks_text_groups_by_benchmark() -> None:
    assert tasks_text(["a.x"]) == "a.x"
    assert tasks_text(["a.x", "b.y", "a.z", "a.x"]) == "a x, z; b y"


FIELDS = st.sampled_from(["inference.decoding.seed", "inference.decoding.top_p", "inference.stop", "prompt.template"])
REASONS = st.sampled_from(["r1", "r2"])
ROWS = st.lists(
    st.tuples(
        st.sampled_from(["b1.t1", "b1.t2", "b2.t1", "b2.t3"]),
        st.lists(st.tuples(FIELDS, REASONS), max_size=3, unique_by=lambda x: x[0]),
        st.lists(FIELDS, max_size=2, unique=True),
    ),
    max_size=4,
    unique_by=lambda x: x[0],
)


def _rows(spec: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "task": task,
            "fields": [_field("inference.max_tokens", 5, 64)],
            "note": NOTE,
            "no_effect": [_field(f, 0, 1, r) for f, r in moot],
            "same_request": [_field(f, "a", "b") for f in same],
        }
        for task, moot, same in spec
    ]


def _triples(lines: list[str], kind: str) -> set[tuple[str, str, str]]:
    """(task, field, reason) read back from the lines of one kind."""
    out = set()
    for line in lines:
        m = re.match(rf"{kind}: (\S+) .*? on (.+?): (.+)$", line)
        if not m:
            continue
        field, where, reason = m.groups()
        for part in where.split("; "):
            if " " in part:
                bench, tasks = part.split(" ", 1)
                keys = [f"{bench}.{t}" for t in tasks.split(", ")]
            else:
                keys = [part]
            out |= {(k, field, reason) for k in keys}
    return out


@settings(max_examples=200, deadline=None)
@given(ROWS, st.randoms())
def test_every_task_field_and_reason_is_in_exactly_one_line(spec: list[Any], rnd: Any) -> None:
    rows = _rows(spec)
    lines = upstream_lines(rows, [], "standardized")  # type: ignore[arg-type]
    want = {(r["task"], d["field"], d["reason"]) for r in rows for d in r["no_effect"]}
    assert _triples(lines, "no effect expected") == want
    same = {(r["task"], d["field"], "byte-identical when rendered") for r in rows for d in r["same_request"]}
    assert _triples(lines, "same requests") == same
    assert len(lines) == len(set(lines))  # each line once
    # one line per distinct (field, reason): never the same reason twice
    assert len([x for x in lines if x.startswith("no effect expected")]) == len({(f, r) for _, f, r in want})
    shuffled = rows[:]
    rnd.shuffle(shuffled)
    assert sorted(_triples(upstream_lines(shuffled, [], "standardized"), "no effect expected")) == sorted(want)  # type: ignore[arg-type]
