"""The reproducibility ledger: what each benchmark's documentation pins down of its pipeline.

One row per benchmark (every ``suites/*/suite.toml``), one column per pipeline field in
:data:`PIPELINE_FIELDS` (the nine the paper classifies: 8 benchmarks x 9 fields = 72 cells),
and the dataset provenance reported apart.  The ``documented`` layer is what the benchmark's
paper, README and dataset card say (each value cites where); ``[ledger] sources`` lists the
documents read, named in every undefined cell.  A cell compares the benchmark's ``documented`` layer (what its
README/paper says) with its ``released`` layer (what its released code does):

``matched``
    the documentation states the value and the released code uses the same one;
``undefined``
    the documentation leaves it unspecified: it cannot be reproduced from the
    documentation alone;
``contradicted``
    the documentation states a value and the released code does something else;
``unread``
    the documents read leave it unspecified, but a document that exists and may state it could
    not be read here (the suite's ``[ledger] unread`` lists it, e.g. a paper of which only the
    abstract was available): not "silent", only "not read".

Rules
-----

*Leaves.*  A stage-level column (``prompt.format``, ``inference.decoding``, ``dataset``,
``aggregation``) is decided over all of its sub-fields ("leaves") together; a leaf column
(``prompt.template``, ``inference.max_tokens``, ...) is its own single leaf.  For one task,
with ``d`` the documented value of a leaf and ``r`` the released value:

1. ``d`` is ``"unspecified"``                         -> undefined (whatever ``r`` is:
   documentation and code both silent is still not reproducible from documentation);
2. ``d == r``                                        -> matched (for ``prompt.template``
   two template *names* match when their templates have the same content);
3. the documented layer states ``d`` explicitly      -> contradicted (a released value of
   ``"unspecified"`` counts as a value here: the code sends nothing, the endpoint's
   default applies, which is not what the documentation says);
4. otherwise ``d`` is only a model default (``None``, e.g. ``inference.decoding.top_logprobs``
   or ``aggregation.by`` left out of the documented layer) that the released code changes
   -> undefined: the documentation is silent about it.

``dataset.source``, ``dataset.revision`` and ``dataset.files`` are filled from the suite's
``[benchmark]`` table and the task's data mapping for every layer, so they count as stated.

*Moot leaves.*  A leaf that cannot change the result under the documented values of the
others is left out of its column (the reason is kept in the cell's ``moot`` and notes): a seed
or ``top_p`` when the documentation states temperature 0 (greedy decoding picks the same
tokens), and temperature, ``top_p`` and seed when the documented extraction rule is the arg-max
of the first token's log-probabilities (decoding does not change them).  A column whose leaves
are all moot is matched.

*Unread.*  In a suite whose ``[ledger] unread`` lists documents, every leaf that would be
undefined is ``unread`` instead: those documents may state it.

*Stage columns.*  Any contradicted leaf makes the column contradicted, else any unread leaf
makes it unread, else any undefined leaf makes it undefined, else it is matched.

*Benchmarks with several tasks.*  The benchmark cell is ``contradicted`` if any task
contradicts, else ``unread`` or ``undefined`` in that order if any task is, else ``matched``; the per-task
statuses are kept in the JSON output, and the note names the tasks when they differ.

*Missing layers.*  A task without a ``documented`` layer is compared as if it had an empty one
(every field undefined); a task without a ``released`` layer likewise against an empty one.

*Totals.*  Per benchmark: "N of 9 pipeline fields cannot be reproduced from documentation
alone", N = undefined + contradicted columns (unread ones said apart); overall, the counts over
all cells, the dataset row's counts apart, and the paper view: our counts over the cells
actually read (not unread) as shares, next to the paper's shares of its 72 cells
(:data:`PAPER_COUNTS`).  The paper's cells are not published one by one, so the two are compared
as shares only, with the number of unread cells said.

*Notes.*  Each cell carries the ``why`` texts of the documented and released layers for the field
(the field's own key and its sub-fields' keys), and, when contradicted, both values.

*Peer layers.*  A suite's layers for a general harness (``inspect_evals``, ``lm_eval`` and their
variants) are not cells: the row's ``peers`` lists, per such layer, every field where it differs from
``released`` with both values and the peer layer's ``why`` (:mod:`.ledger_peers`); absent when the
suite has none.

*Data quirks.*  A suite lists its data quirks in a suite-level table::

    [ledger]
    quirks = ["README says 2,126 questions; the released data has 2,189.", ...]

Without that table the ledger falls back to the layers' ``notes`` that mention data, datasets
or gold labels (marked as such in the output).

This module reads suite configs only: no model, no network, no benchmark data.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from pydantic import JsonValue

from pytest_benchaudit.dataset.suites import SUITE_FILENAME, Suite, SuiteError, load_suite
from pytest_benchaudit.ledger.ledger_documents import (
    LeafValues,
    LedgerCell,
    LedgerDocument,
    LedgerRow,
    PaperView,
    TemplateContrast,
)
from pytest_benchaudit.ledger.ledger_peers import peer_differences
from pytest_benchaudit.pipeline.stages import UNSPECIFIED, Pipeline, is_unspecified
from pytest_benchaudit.scoring.names import check_suite_names, rules_reading

__all__ = [
    "LEDGER_VERSION",
    "LEDGER_FIELDS",
    "PIPELINE_FIELDS",
    "DATASET_FIELD",
    "PAPER_COUNTS",
    "STATUSES",
    "UNREAD",
    "LEDGER_KEY",
    "moot_reason",
    "paper_view",
    "suite_unread",
    "build_ledger",
    "suite_ledger",
    "suite_quirks",
    "suite_sources",
]

LEDGER_VERSION = "benchaudit.ledger/2"
DATASET_FIELD = "dataset"
# The nine pipeline fields the paper classifies (8 benchmarks x 9 fields = 72 cells);
# dataset provenance is reported apart (DATASET_FIELD).
PIPELINE_FIELDS = (
    "prompt.template",
    "prompt.format",
    "inference.decoding",
    "inference.max_tokens",
    "inference.stop",
    "extraction.rule",
    "scoring.metric",
    "scoring.denominator",
    "aggregation",
)
LEDGER_FIELDS = (DATASET_FIELD, *PIPELINE_FIELDS)
MATCHED, UNDEFINED, CONTRADICTED, UNREAD = "matched", "undefined", "contradicted", "unread"
# The paper's classification of the same 72 cells, shown next to ours (it has no "unread").
PAPER_COUNTS = {"matched": 28, "undefined": 36, "contradicted": 8}
STATUSES = (MATCHED, UNDEFINED, CONTRADICTED, UNREAD)
# The rules whose score is the arg-max of the first token's log-probabilities: decoding cannot move it.
_LOGPROB_RULES = rules_reading("logprobs")  # as each rule declares (scoring.declarations)
# The suite-level table a suite lists its data quirks in: [ledger] quirks = [...]
LEDGER_KEY = "ledger"
_SUITE_FILLED = frozenset({"dataset.source", "dataset.revision", "dataset.files"})
_DATA_NOTE = re.compile(r"\b(data|dataset|datasets|golds?)\b", re.IGNORECASE)


# ----------------------------------------------------------------------------- comparison
class _FieldComparison(TypedDict):
    """One task's comparison of one ledger field (internal: the row's cell combines the tasks')."""

    status: str
    differing: dict[str, tuple[JsonValue, JsonValue]]  # contradicted leaf -> (documented, released)
    moot: dict[str, str]
    why: dict[str, dict[str, str]]
    missing: list[str]


def _leaves(pipe: Pipeline, field: str) -> dict[str, JsonValue]:
    fields = pipe.card()["fields"]
    return {k: v for k, v in fields.items() if k == field or k.startswith(field + ".")}


def _stated(raw: dict[str, Any], path: str) -> bool:
    """Whether a raw layer table sets ``path`` (dotted) to a value other than 'unspecified'."""
    if path in _SUITE_FILLED:
        return True
    node: Any = raw
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return not is_unspecified(node)


def _same(suite: Suite, leaf: str, d: JsonValue, r: JsonValue) -> bool:
    if d == r:
        return True
    if (
        leaf == "prompt.template"
        and isinstance(d, str)
        and isinstance(r, str)
        and d in suite.templates
        and r in suite.templates
    ):
        return suite.templates[d] == suite.templates[r]
    return False


def moot_reason(leaf: str, documented: Mapping[str, JsonValue]) -> str | None:
    """Why ``leaf`` cannot matter under the other documented values (``documented``: the card's
    fields), or None when it can.  Only leaves of a stage column are ever moot."""
    rule = documented.get("extraction.rule")
    temperature = documented.get("inference.decoding.temperature")
    if (
        leaf in ("inference.decoding.temperature", "inference.decoding.top_p", "inference.decoding.seed")
        and rule in _LOGPROB_RULES
    ):
        return (
            f"the documented extraction.rule {rule!r} takes the arg-max of the first token's "
            f"log-probabilities, which decoding does not change"
        )
    if (
        leaf in ("inference.decoding.top_p", "inference.decoding.seed")
        and not isinstance(temperature, bool)
        and isinstance(temperature, (int, float))
        and temperature == 0
    ):
        return "the documented temperature 0 is greedy decoding: the same tokens whatever this is"
    return None


def _template_difference(suite: Suite, leaf: str, d: JsonValue, r: JsonValue) -> dict[str, TemplateContrast]:
    """For two ``prompt.template`` names: the template fields whose content differs (what the
    names stand for), ``{field: {"documented": ..., "released": ...}}``; empty for other leaves."""
    if (
        leaf != "prompt.template"
        or not isinstance(d, str)
        or not isinstance(r, str)
        or d not in suite.templates
        or r not in suite.templates
    ):
        return {}
    a, b = suite.templates[d].model_dump(mode="json"), suite.templates[r].model_dump(mode="json")
    return {k: TemplateContrast(documented=a.get(k), released=b.get(k)) for k in a if a.get(k) != b.get(k)}


def _with_layer(suite: Suite, task: str, layer: str) -> tuple[Suite, bool]:
    """``suite`` with an empty ``layer`` added to ``task`` when it has none (and whether it had)."""
    spec = suite.tasks[task]
    if layer in spec.layers:
        return suite, True
    spec = dataclasses.replace(spec, layers={**spec.layers, layer: {}})
    return dataclasses.replace(suite, tasks={**suite.tasks, task: spec}), False


def _compare_task(suite: Suite, task: str, unread: bool = False) -> dict[str, _FieldComparison]:
    """Per field: status, contradicting leaf values, moot leaves, why texts, for one task.

    ``unread``: documents that may state the field were not read, so "unspecified" is unread.
    """
    s_doc, has_doc = _with_layer(suite, task, "documented")
    s_rel, has_rel = _with_layer(suite, task, "released")
    doc, rel = s_doc.pipeline(task, "documented"), s_rel.pipeline(task, "released")
    raw_doc = s_doc.tasks[task].layers["documented"]
    doc_fields = doc.card()["fields"]
    silent = UNREAD if unread else UNDEFINED
    out: dict[str, _FieldComparison] = {}
    for field in LEDGER_FIELDS:
        d_leaves, r_leaves = _leaves(doc, field), _leaves(rel, field)
        statuses: list[str] = []
        differing: dict[str, tuple[JsonValue, JsonValue]] = {}
        moot: dict[str, str] = {}
        for leaf, d in d_leaves.items():
            r = r_leaves.get(leaf, UNSPECIFIED)
            reason = moot_reason(leaf, doc_fields) if len(d_leaves) > 1 else None
            if reason is not None:
                moot[leaf] = reason
            elif is_unspecified(d):
                statuses.append(silent)
            elif _same(suite, leaf, d, r):
                statuses.append(MATCHED)
            elif _stated(raw_doc, leaf):
                statuses.append(CONTRADICTED)
                differing[leaf] = (d, r)
            else:
                statuses.append(silent)
        status = _combine(statuses) if statuses or not moot else MATCHED
        why = {
            "documented": {k: v for k, v in doc.why.items() if k == field or k.startswith(field + ".")},
            "released": {k: v for k, v in rel.why.items() if k == field or k.startswith(field + ".")},
        }
        out[field] = {
            "status": status,
            "differing": differing,
            "moot": moot,
            "why": why,
            "missing": [n for n, has in (("documented", has_doc), ("released", has_rel)) if not has],
        }
    return out


def _combine(statuses: list[str]) -> str:
    if CONTRADICTED in statuses:
        return CONTRADICTED
    if UNREAD in statuses:
        return UNREAD
    if UNDEFINED in statuses or not statuses:
        return UNDEFINED
    return MATCHED


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# ----------------------------------------------------------------------------- quirks
def _suite_table(suite: Suite, key: str) -> Any:
    """A top-level table of the suite's own TOML file (not merged from ``extends``)."""
    return suite.own_tables.get(key)


def suite_quirks(suite: Suite) -> tuple[list[str], str]:
    """The suite's data quirks and where they came from (``"ledger"`` or ``"layer notes"``)."""
    table = _suite_table(suite, LEDGER_KEY)
    if table is not None:
        quirks = table.get("quirks", []) if isinstance(table, dict) else None
        if not isinstance(quirks, list) or not all(isinstance(q, str) for q in quirks):
            raise SuiteError(f"{suite.path}: [{LEDGER_KEY}] quirks must be a list of strings")
        unknown = set(table) - {"quirks", "sources", "unread"}
        if unknown:
            raise SuiteError(
                f"{suite.path}: [{LEDGER_KEY}] has unknown keys {', '.join(sorted(unknown))} "
                "(known: quirks, sources, unread)"
            )
        return list(quirks), LEDGER_KEY
    notes: dict[str, None] = {}
    for spec in suite.tasks.values():
        for layer in spec.layers.values():
            for note in layer.get("notes", []):
                if isinstance(note, str) and _DATA_NOTE.search(note):
                    notes[note] = None
    return list(notes), "layer notes"


def _string_list(suite: Suite, key: str) -> list[str]:
    table = _suite_table(suite, LEDGER_KEY)
    values = table.get(key, []) if isinstance(table, dict) else []
    if not isinstance(values, list) or not all(isinstance(x, str) for x in values):
        raise SuiteError(f"{suite.path}: [{LEDGER_KEY}] {key} must be a list of strings")
    return list(values)


def suite_sources(suite: Suite) -> list[str]:
    """The documents read for the ``documented`` layer (``[ledger] sources``): where an
    undefined cell was looked for, besides the layer's own ``why`` for that field."""
    return _string_list(suite, "sources")


def suite_unread(suite: Suite) -> list[str]:
    """The documents that exist but could not be read here (``[ledger] unread``): while any is
    listed, a field the documents read leave unspecified is ``unread``, not ``undefined``."""
    return _string_list(suite, "unread")


# ----------------------------------------------------------------------------- ledger
def suite_ledger(suite: Suite) -> LedgerRow:
    """One benchmark's row: a cell per field, counts, and its data quirks."""
    sources, unread = suite_sources(suite), suite_unread(suite)
    per_task = {task: _compare_task(suite, task, bool(unread)) for task in suite.tasks}
    cells: dict[str, LedgerCell] = {}
    for field in LEDGER_FIELDS:
        task_status = {task: per_task[task][field]["status"] for task in suite.tasks}
        status = _combine(list(task_status.values()))
        notes: list[str] = []
        values: dict[str, dict[str, LeafValues]] = {}
        if len(set(task_status.values())) > 1:
            notes.append("tasks differ: " + ", ".join(f"{t} {s}" for t, s in task_status.items()))
        contradictions: dict[str, list[str]] = {}
        for task, cmp in ((t, per_task[t][field]) for t in suite.tasks):
            for leaf, (d, r) in cmp["differing"].items():
                values.setdefault(task, {})[leaf] = {"documented": d, "released": r}
                content = _template_difference(suite, leaf, d, r)
                if content:
                    values[task][leaf]["content"] = content
                text = f"{leaf}: documented {_show(d)}, released {_show(r)}"
                if is_unspecified(r):
                    text += " (nothing set: the endpoint's default applies)"
                contradictions.setdefault(text, []).append(task)
            for layer in cmp["missing"]:
                notes.append(f"{task} has no {layer} layer (compared as empty)")
        for text, tasks in contradictions.items():
            scope = "" if len(tasks) == len(suite.tasks) else f" [{', '.join(tasks)}]"
            notes.append(f"contradicted: {text}{scope}")
        why: dict[str, dict[str, str]] = {"documented": {}, "released": {}}
        for task in suite.tasks:
            for layer in ("documented", "released"):
                for key, text in per_task[task][field]["why"][layer].items():
                    why[layer].setdefault(key, text)
        moot: dict[str, str] = {}
        for task in suite.tasks:
            for leaf, reason in per_task[task][field]["moot"].items():
                moot.setdefault(leaf, reason)
        notes.extend(f"moot, not counted: {leaf} ({reason})" for leaf, reason in moot.items())
        for layer in ("documented", "released"):
            for key, text in why[layer].items():
                notes.append(f"{layer} why ({key}): {text}")
        if status in (UNDEFINED, UNREAD) and sources and field != DATASET_FIELD:
            notes.append("looked in: " + "; ".join(sources))
        if status == UNREAD:
            notes.append("not read (may state it): " + "; ".join(unread))
        notes = list(dict.fromkeys(notes))
        cells[field] = {
            "status": status,
            "tasks": task_status,
            "values": values,
            "moot": moot,
            "why": why,
            "notes": notes,
            "note": " | ".join(notes),
        }
    # The nine pipeline fields are counted; the dataset row is reported apart.
    counts = {s: sum(1 for f in PIPELINE_FIELDS if cells[f]["status"] == s) for s in STATUSES}
    n = counts[UNDEFINED] + counts[CONTRADICTED]
    summary = f"{n} of {len(PIPELINE_FIELDS)} pipeline fields cannot be reproduced from documentation alone"
    if counts[UNREAD]:
        summary += f"; {counts[UNREAD]} more are unread (a document that may state them was not read)"
    quirks, source = suite_quirks(suite)
    row: LedgerRow = {
        "benchmark": suite.name,
        "title": suite.title,
        "suite": str(suite.path),
        "tasks": list(suite.tasks),
        "cells": cells,
        "counts": counts,
        "dataset": cells[DATASET_FIELD]["status"],
        "not_reproducible": n,
        "fields_total": len(PIPELINE_FIELDS),
        "summary": summary,
        "sources": sources,
        "unread": unread,
        "quirks": quirks,
        "quirks_source": source,
    }
    peers = peer_differences(suite)
    if peers:  # only where the suite has peer layers: other benchmarks' rows stay as they were
        row["peers"] = peers
    return row


def paper_view(counts: dict[str, int]) -> PaperView:
    """Our counts over the cells actually read (every status but unread) next to the paper's.

    The paper classifies its 72 cells without publishing them one by one, so the only fair
    comparison is of shares: ours over the cells read, the paper's over its 72.
    """
    read = {s: counts[s] for s in (MATCHED, UNDEFINED, CONTRADICTED)}
    n_read, n_paper = sum(read.values()), sum(PAPER_COUNTS.values())
    return {
        "cells_read": n_read,
        "cells_unread": counts[UNREAD],
        "ours_over_read": read,
        "ours_share": {s: (round(v / n_read, 4) if n_read else None) for s, v in read.items()},
        "paper_counts": dict(PAPER_COUNTS),
        "paper_share": {s: round(v / n_paper, 4) for s, v in PAPER_COUNTS.items()},
    }


def build_ledger(suites_dir: Path, more_dirs: Sequence[Path] = ()) -> LedgerDocument:
    """The ledger of every ``suites_dir/*/suite.toml`` and, after them, of every suite in ``more_dirs``
    (the plugins' suites) whose name ``suites_dir`` does not hold.

    Each suite is loaded once and checked as a run would check it (schema, then the rule and
    metric names its layers use), so a typo fails here instead of reading as a ledger cell.
    Raises :class:`SuiteError` or :class:`ConfigError`.
    """
    paths = sorted(suites_dir.glob(f"*/{SUITE_FILENAME}"))
    if not paths:
        raise SuiteError(f"{suites_dir}: no */{SUITE_FILENAME} found")
    for folder in more_dirs:
        names = {p.parent.name for p in paths}
        paths += [p for p in sorted(folder.glob(f"*/{SUITE_FILENAME}")) if p.parent.name not in names]
    rows = []
    for path in paths:
        suite = load_suite(path)
        check_suite_names(suite)
        rows.append(suite_ledger(suite))
    counts = {s: sum(r["counts"][s] for r in rows) for s in STATUSES}
    n = sum(r["not_reproducible"] for r in rows)
    m = sum(r["fields_total"] for r in rows)
    dataset = {s: sum(1 for r in rows if r["dataset"] == s) for s in STATUSES}
    summary = f"{n} of {m} cells cannot be reproduced from documentation alone"
    if counts[UNREAD]:
        summary += f"; {counts[UNREAD]} more are unread"
    return {
        "ledger_version": LEDGER_VERSION,
        "compares": ["documented", "released"],
        "fields": list(PIPELINE_FIELDS),
        "dataset_field": DATASET_FIELD,
        "statuses": list(STATUSES),
        "benchmarks": rows,
        "totals": {
            "benchmarks": len(rows),
            "cells": m,
            "counts": counts,
            "paper_counts": dict(PAPER_COUNTS),
            "dataset_counts": dataset,
            "not_reproducible": n,
            "fields_total": m,
            "summary": summary,
            "paper_view": paper_view(counts),
        },
    }
