"""The dataset and task-level checks of ``diagnose``: gold labels, duplicates, sizes, similar tasks, the ledger.

Group checks look at one benchmark x task x model x pipeline; the task-level ones at all groups
(metric differences between similar tasks, dataset size against the documentation, the ledger).
Wording is a hypothesis, never a verdict, as in :mod:`.answer_checks`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from pytest_benchaudit.diagnose.answer_checks import (
    _SEPARATORS,
)
from pytest_benchaudit.diagnose.core import (
    Effect,
    Finding,
    Group,
    Resources,
    json_dict,
    json_list,
    make_finding,
    recompute_without,
    rescore_effect,
)
from pytest_benchaudit.diagnose.failure_modes import DOCUMENTED_SIZES
from pytest_benchaudit.pipeline.record_documents import RecordRow
from pytest_benchaudit.pipeline.stages import DOWNSTREAM_STAGES
from pytest_benchaudit.scoring.metrics import METRIC_INFO

if TYPE_CHECKING:
    from pytest_benchaudit.ledger.ledger_documents import LedgerRow, TemplateContrast

__all__ = ["check_duplicates", "check_gold", "cross_task_checks", "ledger_checks", "size_checks"]


# --------------------------------------------------------------------------- dataset


def check_gold(group: Group, resources: Resources | None) -> list[Finding]:
    """FM11: blank gold labels; MCQ golds with a letter that is not an option, or a repeated letter."""
    bad: dict[str, str] = {}
    for rec in group.records:
        gold = str(rec.get("gold") or "").strip()
        qid = str(rec["question_id"])
        labels = {str(x).upper() for x in rec.get("question_labels") or ()}
        compact = _SEPARATORS.sub("", gold).upper()
        if not gold:
            bad[qid] = "empty"
        elif labels and all(len(x) == 1 for x in labels):
            if any(ch not in labels for ch in compact):
                bad[qid] = "not an option"
            elif len(set(compact)) < len(compact):
                bad[qid] = "repeated letter"
    if not bad:
        return []
    kinds = dict(Counter(bad.values()))
    effect = recompute_without(group, set(bad), f"recomputed without the {len(bad)} questions")
    hyp = (
        f"{len(bad)} questions have a gold label that is {', '.join(f'{k} ({v})' for k, v in kinds.items())}, so "
        f"their scores may reward or punish answers for the label rather than the question."
    )
    return [
        make_finding(
            group,
            "FM11-empty-or-unmatchable-gold",
            hyp,
            {"n": len(group.records), "n_bad_gold": len(bad), "kinds": kinds, "question_ids": sorted(bad)[:5]},
            effect,
        )
    ]


def _prompt_text(rec: RecordRow) -> str:
    req = rec["request"]
    text: JsonValue = req.get("prompt") or ""
    if not text:
        users = [
            m.get("content", "") for m in map(json_dict, json_list(req.get("messages"))) if m.get("role") == "user"
        ]
        text = users[-1] if users else ""
    return " ".join(str(text).casefold().split())


def check_duplicates(group: Group, resources: Resources | None) -> list[Finding]:
    """FM12: question ids whose prompt text is identical (whitespace and case folded)."""
    by_text: dict[str, list[RecordRow]] = defaultdict(list)
    for rec in group.records:
        text = _prompt_text(rec)
        if text:
            by_text[text].append(rec)
    dups = [recs for recs in by_text.values() if len({str(r["question_id"]) for r in recs}) > 1]
    if not dups:
        return []
    conflicting = sum(1 for recs in dups if len({str(r.get("gold", "")).strip().casefold() for r in recs}) > 1)
    drop = {str(r["question_id"]) for recs in dups for r in recs[1:]}
    effect = recompute_without(group, drop, "recomputed keeping the first of each duplicate group")
    hyp = (
        f"{len(dups)} prompts occur under more than one question id ({len(drop)} extra copies, {conflicting} "
        f"groups with different golds), so those questions may weigh twice in the score."
    )
    return [
        make_finding(
            group,
            "FM12-duplicate-questions",
            hyp,
            {
                "n": len(group.records),
                "n_duplicate_groups": len(dups),
                "n_extra_copies": len(drop),
                "n_groups_conflicting_gold": conflicting,
                "question_ids": [str(r["question_id"]) for r in dups[0]][:5],
            },
            effect,
        )
    ]


# --------------------------------------------------------------------------- task-level checks


def cross_task_checks(groups: Sequence[Group]) -> list[Finding]:
    """FM08 / FM09 / FM10: tasks of the same name in different benchmarks whose metrics differ."""
    metrics: dict[tuple[str, str], str] = {}
    for g in groups:
        metrics.setdefault((g.benchmark, g.task), str(g.fields.get("scoring.metric", "")))
    out: list[Finding] = []
    for (bench, task), metric in sorted(metrics.items()):
        for (other_bench, other_task), other in sorted(metrics.items()):
            if other_task != task or other_bench == bench or other == metric:
                continue
            a, b = METRIC_INFO.get(metric), METRIC_INFO.get(other)
            if a is None or b is None:
                continue
            ev: dict[str, Any] = {"metric": metric, "other_task": f"{other_bench}.{other_task}", "other_metric": other}
            none = Effect(
                "none",
                None,
                "not a score change of either task: re-score one of them with the other's "
                "metric (--set scoring.metric=...) before comparing the two",
            )
            if a.lower_is_better != b.lower_is_better or (a.kind == b.kind == "continuous"):
                ev.update(lower_is_better=a.lower_is_better, other_lower_is_better=b.lower_is_better)
                hyp = (
                    f"{bench}.{task} is scored with {metric} ({'lower' if a.lower_is_better else 'higher'} is "
                    f"better) and {other_bench}.{other_task} with {other} ({'lower' if b.lower_is_better else 'higher'} "
                    f"is better), so comparing or averaging the two may mix directions or scales."
                )
                out.append(
                    make_finding(None, "FM08-metric-direction-or-scale", hyp, ev, none, benchmark=bench, task=task)
                )
            elif a.kind != b.kind:
                hyp = (
                    f"{bench}.{task} gives {a.kind} credit ({metric}) where {other_bench}.{other_task} gives "
                    f"{b.kind} credit ({other}), so their scores may not measure the same thing."
                )
                out.append(
                    make_finding(None, "FM09-partial-vs-binary-credit", hyp, ev, none, benchmark=bench, task=task)
                )
            elif "alias" in a.description and "alias" in b.description:
                hyp = (
                    f"{bench}.{task} ({metric}) and {other_bench}.{other_task} ({other}) both resolve actor aliases "
                    f"but by different rules, so the same answer may be right in one and wrong in the other."
                )
                out.append(make_finding(None, "FM10-alias-handling", hyp, ev, none, benchmark=bench, task=task))
    return out


def size_checks(groups: Sequence[Group]) -> list[Finding]:
    """FM13: distinct questions of a task against the size its documentation states (unless the run used --limit)."""
    seen: dict[tuple[str, str], tuple[int, bool]] = {}
    for g in groups:
        argv = [str(a) for a in g.meta.get("argv") or ()]
        # Fewer questions than documented is only evidence for a full pytest run: a selection
        # (--limit, -k, a node id) or an import that cannot say what it left out proves nothing.
        full = bool(argv) and not any(a.startswith(("--limit", "-k")) or "::" in a for a in argv)
        n = len({str(r["question_id"]) for r in g.records})
        prev = seen.get((g.benchmark, g.task), (0, True))
        seen[(g.benchmark, g.task)] = (max(prev[0], n), prev[1] and full)
    out = []
    for (bench, task), (n, full) in sorted(seen.items()):
        doc = DOCUMENTED_SIZES.get((bench, task))
        if doc is None or n == doc[0] or (n < doc[0] and not full):
            continue
        hyp = (
            f"The runs hold {n} distinct questions of {bench}.{task} where the documentation states {doc[0]} "
            f"({doc[1]}), so the released data may not be the set the published numbers describe."
        )
        out.append(
            make_finding(
                None,
                "FM13-dataset-size-vs-documentation",
                hyp,
                {"n_questions": n, "documented": doc[0], "source": doc[1]},
                Effect("none", None, "not computable: the documented set is not available"),
                benchmark=bench,
                task=task,
            )
        )
    return out


def _clip(value: Any, width: int = 90) -> str:
    if value is None or value == "" or value == []:
        return "none"
    text = repr(value)
    return text if len(text) <= width else text[: width - 4] + "...'"


def _content_text(content: Mapping[str, TemplateContrast]) -> str:
    """'its system message (documented none, released '...'); its user text (...)' for a template difference."""
    names = {
        "system": "system message",
        "user": "user text",
        "header": "header",
        "answer": "exemplar answer",
        "fixed_shots": "fixed examples",
        "option_format": "option format",
        "option_separator": "option separator",
    }
    return "; ".join(
        f"its {names.get(k, k)} (documented {_clip(v.get('documented'))}, released {_clip(v.get('released'))})"
        for k, v in content.items()
    )


def ledger_checks(
    groups: Sequence[Group], ledger_rows: Mapping[str, LedgerRow], resources: Resources | None
) -> list[Finding]:
    """FM15: released-layer runs, for fields the ledger marks contradicted (documented value != released)."""
    out: list[Finding] = []
    upstream_done: set[tuple[str, str, str]] = set()
    for g in groups:
        if g.card.get("pipeline") != "released":
            continue
        row = ledger_rows.get(g.benchmark)
        if row is None:
            continue
        for cell in row["cells"].values():
            for leaf, values in (cell["values"].get(g.task) or {}).items():
                doc, rel = values["documented"], values["released"]
                content = values.get("content") or {}
                ev: dict[str, Any]
                if content:  # template names are the suite's keys: say what differs in the text instead
                    difference: dict[str, JsonValue] = {
                        k: {"documented": v["documented"], "released": v["released"]} for k, v in content.items()
                    }
                    ev = {"difference": difference, "template_names": {"documented": doc, "released": rel}}
                    hyp = (
                        f"The documented {leaf} of {g.benchmark}.{g.task} differs from the released one in "
                        f"{_content_text(content)}, so this run (released layer) may not reproduce the documented "
                        f"number."
                    )
                else:
                    ev = {"documented": doc, "released": rel}
                    hyp = (
                        f"The documentation of {g.benchmark} gives {leaf} = {doc!r} where the released code uses "
                        f"{rel!r}, so this run (released layer) may not reproduce the documented number."
                    )
                if leaf.split(".")[0] in DOWNSTREAM_STAGES:
                    effect = rescore_effect(g, [(leaf, doc)], resources)
                    out.append(make_finding(g, "FM15-documented-vs-released", hyp, ev, effect, field_name=leaf))
                elif (g.benchmark, g.task, leaf) not in upstream_done:
                    upstream_done.add((g.benchmark, g.task, leaf))
                    out.append(
                        make_finding(
                            None,
                            "FM15-documented-vs-released",
                            hyp,
                            ev,
                            Effect(
                                "none",
                                None,
                                "needs new generations under the documented value; "
                                "no honest estimate from these records",
                            ),
                            benchmark=g.benchmark,
                            task=g.task,
                            field_name=leaf,
                        )
                    )
    return out
