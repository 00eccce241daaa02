"""Where stored cards and a suite's layer differ: upstream fields judged by what is sent, downstream by value.

:func:`upstream_differences` is ``audit.json``'s ``upstream`` rows (and the ledger's): per task, the
dataset/prompt/inference fields in which the stored card and the layer differ, each task's questions
rendered under both pipelines (:mod:`.upstream` compares the requests).  :func:`downstream_differs`
tells :mod:`.whole` which re-scored variants (extraction only, every downstream field) the sensitivity
table needs.  Apart from :mod:`.whole` (which re-exports :func:`upstream_differences`) because they read
suites and questions while the audit itself only orchestrates.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pytest_benchaudit.audit.audit_documents import UpstreamDifference, UpstreamField
from pytest_benchaudit.pipeline.record_documents import Cards, PipelineCard

if TYPE_CHECKING:  # imported where used: rendering requests loads the prompt layer
    from pytest_benchaudit.audit.upstream import FieldVerdict

__all__ = ["downstream_differs", "upstream_differences"]


def upstream_differences(
    cards: Cards,
    layer: str,
    suites_dir: Path,
    data_dir: str | None = None,
    done: dict[tuple[str, str], UpstreamDifference | None] | None = None,
) -> list[UpstreamDifference]:
    """Per task: the dataset/prompt/inference fields in which the stored card and ``layer`` differ,
    judged by what is sent (:mod:`pytest_benchaudit.audit.upstream`): each task's questions are
    rendered under both pipelines and their requests compared byte for byte.

    A row lists under ``fields`` only the fields that need new generations; ``no_effect`` the fields
    whose requests differ only where it changes nothing (``top_p``/``seed`` at temperature 0), with
    the reason; ``same_request`` the fields that render byte-identical requests.  A task none of whose
    fields needs new generations has ``fields == []`` and ``differs = False``: it is no upstream
    difference.  Where the questions cannot be read (no data directory), the fields are compared by
    value and the row says so.  ``done``: rows already computed, keyed (task, card hash), reused.
    """
    rows: list[UpstreamDifference] = []
    done = {} if done is None else done
    for key, card in sorted(cards.items()):
        if "|" in key:
            continue
        memo = (key, str(card.get("hash")))
        if memo not in done:
            done[memo] = _upstream_row(key, card, layer, suites_dir, data_dir)
        row = done[memo]
        if row is not None:
            rows.append(row)
    return rows


def _upstream_row(
    key: str, card: PipelineCard, layer: str, suites_dir: Path, data_dir: str | None
) -> UpstreamDifference | None:
    """One task's row of :func:`upstream_differences`, or None when no upstream field's value differs."""
    from pytest_benchaudit.audit.upstream import compare_sent, upstream_fields
    from pytest_benchaudit.dataset.readers import load_questions, resolve_data_dir
    from pytest_benchaudit.dataset.suites import SuiteError, load_suite, suite_path
    from pytest_benchaudit.pipeline.stages import PipelineError
    from pytest_benchaudit.prompt.templates import TemplateError
    from pytest_benchaudit.rescore.records import pipeline_from_card

    bench, _, task = key.partition(".")
    try:
        suite = load_suite(suite_path(suites_dir, bench))
        pipeline = suite.pipeline(task, layer)
    except (SuiteError, PipelineError, KeyError, OSError) as err:
        return {"task": key, "fields": [], "differs": None, "note": f"no {layer!r} layer to compare with ({err})"}
    stored, target = card.get("fields", {}), pipeline.card()["fields"]
    names = upstream_fields(stored, target)
    if not names:
        return None

    def value_row(why: str) -> UpstreamDifference:
        return {
            "task": key,
            "differs": True,
            "compared": "by value",
            "fields": [{"field": f, "stored": stored.get(f), layer: target.get(f)} for f in names],
            "no_effect": [],
            "same_request": [],
            "note": f"needs new generations: not re-scored, not estimated (requests not rendered: {why}; "
            "fields compared by value)",
        }

    try:
        data_path, origin = resolve_data_dir(data_dir)
        questions, _path = load_questions(suite, task, data_path, origin)
        shots = load_questions(suite, task, data_path, origin, few_shot=True)[0] if suite.tasks[task].few_shot else []
        sent = compare_sent(pipeline_from_card(card), pipeline, suite.templates, questions, shots)
    except (SuiteError, OSError) as err:
        return value_row(str(err))
    except (TemplateError, PipelineError, KeyError, TypeError, ValueError) as err:
        return value_row(f"{type(err).__name__}: {err}")

    def entry(v: FieldVerdict) -> UpstreamField:
        return {
            "field": v.field,
            "stored": v.stored,
            layer: v.target,
            "reason": v.reason,
            "questions_identical": v.n_identical,
            "questions": v.n_questions,
        }

    if not sent.fields:  # the cards differed only in a field one of them predates (its default applies)
        return None
    needs = sent.by_verdict("needs_generations")
    row: UpstreamDifference = {
        "task": key,
        "differs": bool(needs),
        "compared": "rendered requests",
        "fields": [entry(v) for v in needs],
        "no_effect": [entry(v) for v in sent.by_verdict("no_effect")],
        "same_request": [entry(v) for v in sent.by_verdict("same_request")],
        "requests": {
            "questions": sent.n_questions,
            "identical": sent.n_identical,
            "how": "each question rendered under the stored pipeline and under the layer "
            "(prompt.templates.render_request); requests compared by their canonical JSON",
        },
        "note": (
            "needs new generations: not re-scored, not estimated"
            if needs
            else "no upstream difference: the two layers send the same requests, or differ only where it "
            "changes nothing"
        ),
    }
    return row


def downstream_differs(cards: Cards, layer: str, suites_dir: Path) -> set[str]:
    """Which downstream fields of the stored cards differ from ``layer``'s, over the tasks: ``extraction``
    (some extraction.* field), ``more`` (some scoring/aggregation field).  Only fields both cards name
    count (a card written before a field existed does not name it); a task without the layer is not
    counted (re-scoring says why it is skipped)."""
    from pytest_benchaudit.dataset.suites import SuiteError, load_suite, suite_path
    from pytest_benchaudit.pipeline.stages import PipelineError

    found: set[str] = set()
    for key, card in cards.items():
        if "|" in key:
            continue
        bench, _, task = key.partition(".")
        try:
            target = load_suite(suite_path(suites_dir, bench)).pipeline(task, layer).card()["fields"]
        except (SuiteError, PipelineError, KeyError, OSError):
            continue
        stored = card.get("fields", {})
        for f in set(stored) & set(target):
            stage = f.split(".", 1)[0]
            if stage in ("extraction", "scoring", "aggregation") and stored[f] != target[f]:
                found.add("extraction" if stage == "extraction" else "more")
    return found
