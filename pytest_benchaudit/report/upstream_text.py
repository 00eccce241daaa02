"""The audit's upstream differences on the terminal: each line said once, with the tasks it holds for.

``benchaudit audit`` lists, per task, the upstream fields whose change needs new generations, the
fields whose change has no effect expected (and why), and those that render byte-identical requests.
One reason usually holds for many tasks at once (a layer sets ``top_p`` and ``seed`` the same way
for every task of a benchmark), and said per task it buried the differences under its repeats (the
same two sentences for each of six tasks: 383 lines for 17 runs).  :func:`upstream_lines` says each
distinct line once and names its tasks (``athenabench ate, mcq, rcm``); nothing is dropped: every
(task, field, reason) of the rows is in exactly one line.  audit.json keeps the rows per task.  Pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from pytest_benchaudit.audit.audit_documents import UpstreamDifference, UpstreamField

__all__ = ["tasks_text", "upstream_lines"]


def tasks_text(keys: Iterable[str]) -> str:
    """``athenabench.mcq`` for one task; ``athenabench ate, mcq; cti_bench vsp`` for several (by benchmark,
    in the order first named)."""
    keys = list(dict.fromkeys(keys))
    if len(keys) == 1:
        return keys[0]
    by_bench: dict[str, list[str]] = {}
    for key in keys:
        bench, _, task = key.partition(".")
        by_bench.setdefault(bench, []).append(task or bench)
    return "; ".join(f"{bench} {', '.join(tasks)}" for bench, tasks in by_bench.items())


def _listed(entries: Sequence[UpstreamField], toward: str) -> str:
    return ", ".join(f"{d['field']} {json.dumps(d.get('stored'))} -> {json.dumps(d.get(toward))}" for d in entries)


def _grouped(pairs: Iterable[tuple[tuple[str, ...], str]]) -> list[tuple[tuple[str, ...], list[str]]]:
    """(key, tasks) in the order each key was first met; each task once per key."""
    out: dict[tuple[str, ...], list[str]] = {}
    for key, task in pairs:
        tasks = out.setdefault(key, [])
        if task not in tasks:
            tasks.append(task)
    return list(out.items())


def upstream_lines(
    differences: Sequence[UpstreamDifference], same_requests: Sequence[UpstreamDifference], toward: str
) -> list[str]:
    """The lines ``benchaudit audit`` prints for audit.json's ``upstream_differences`` and
    ``upstream_same_requests`` (values shown as ``stored -> toward``): the fields that need new
    generations, then each field with no effect expected and its reason, then each that renders the
    same requests, then the tasks with no upstream difference; each line once, with its tasks."""
    lines = [
        f"upstream: {tasks_text(tasks)}: {listed or '-'}: {note}"
        for (listed, note), tasks in _grouped(
            ((_listed(r["fields"], toward), r["note"]), r["task"]) for r in differences
        )
    ]
    lines += [
        f"no effect expected: {listed} on {tasks_text(tasks)}: {reason}"
        for (listed, reason), tasks in _grouped(
            ((_listed([d], toward), str(d.get("reason", ""))), r["task"])
            for r in differences
            for d in r.get("no_effect", [])
        )
    ]
    lines += [
        f"same requests: {listed} on {tasks_text(tasks)}: byte-identical when rendered"
        for (listed,), tasks in _grouped(
            ((_listed([d], toward),), r["task"]) for r in differences for d in r.get("same_request", [])
        )
    ]
    for (same, moot), tasks in _grouped(
        ((_listed(r.get("same_request", []), toward), _listed(r.get("no_effect", []), toward)), r["task"])
        for r in same_requests
    ):
        lines.append(
            f"no upstream difference: {tasks_text(tasks)}: {same or '-'} render byte-identical requests"
            + (f"; {moot}: no effect expected" if moot else "")
        )
    return lines
