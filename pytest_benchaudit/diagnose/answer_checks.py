"""The checks of ``diagnose``: one function per failure mode of :mod:`.failure_modes`.

A group check takes one :class:`.core.Group` (one benchmark x task x model x
pipeline) and returns its findings (none when the evidence is absent).  Task-level checks
(metric differences between similar tasks, dataset size, the ledger) look at all groups.
Each check's rule is written in its docstring and in docs/failure-modes.md; wording of every
sentence is a hypothesis ("may", "suggests"), never a verdict.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable

from pydantic import JsonValue

from pytest_benchaudit.diagnose.core import (
    MAX_IDS,
    Effect,
    Finding,
    Group,
    Resources,
    json_dict,
    json_list,
    make_finding,
    question_ids,
    recompute_as_invalid,
    recovery_estimate,
    rescore_effect,
)
from pytest_benchaudit.pipeline.record_documents import RecordRow
from pytest_benchaudit.pipeline.stages import is_unspecified
from pytest_benchaudit.scoring.extract import answer_text_of, strip_reasoning
from pytest_benchaudit.scoring.metrics import METRIC_INFO
from pytest_benchaudit.scoring.names import metric_answers, rules_reading, strict_rule

__all__ = [
    "Check",
    "check_echoed_options",
    "check_free_text_near_miss",
    "check_judge",
    "check_letters_anywhere",
    "check_provider_minimum",
    "check_reasoning_kept",
    "check_seed",
    "check_stop_in_reasoning",
    "check_truncation",
    "check_valid_denominator",
]

Check = Callable[[Group, "Resources | None"], list[Finding]]
_THINK = re.compile(r"</?think>", re.IGNORECASE)
_BUDGET_ERROR = re.compile(r"max_(?:completion_)?tokens|max_new_tokens|token limit", re.IGNORECASE)
_OPTION_LINE = re.compile(r"^\s*(?:\*\*)?\(?([A-Z])(?:\)|\.|:)\s+\S", re.MULTILINE)
_SEPARATORS = re.compile(r"[\s,;/&+]+")
_ID_GOLD = re.compile(r"^(?:CWE-\d+|T\d{4}(?:\.\d{3})?|M\d{4}|CVSS:.*|AV:.*|[\d.]+)$", re.IGNORECASE)
# Rules that never read a letter out of a word: FM06 does not apply to them (the strict readers; the
# log-prob and judge rules read no text at all, their failure without log-probabilities is BA05's).
# What each rule reads is declared on its definition (scoring.declarations), read here by name.
_NO_TEXT_RULES = rules_reading("logprobs", "continuations", "judge")
_STRICT_RULES = {strict_rule("label"), strict_rule("labels"), *_NO_TEXT_RULES}


def _invalid(group: Group) -> list[RecordRow]:
    return [r for r in group.records if not r.get("valid")]


# Invalid reasons that mean the request itself failed: no answer came back to be read.
FAILED_REQUEST = frozenset({"inference_error", "endpoint_down"})


def _reasons(records: list[RecordRow], failed: bool) -> str:
    """'inference_error 77' over the failed requests (``failed``) or over the other invalid records."""
    counts = Counter(
        str(r.get("invalid_reason")) for r in records if (r.get("invalid_reason") in FAILED_REQUEST) == failed
    )
    return ", ".join(f"{k} {v}" for k, v in counts.most_common())


def _pct(k: int, n: int) -> str:
    return f"{k} of {n} ({100 * k / n:.0f}%)" if n else f"{k} of 0"


# --------------------------------------------------------------------------- scoring / extraction


def check_valid_denominator(group: Group, resources: Resources | None) -> list[Finding]:
    """FM01: ``scoring.denominator = valid`` with invalid records; re-scored with ``total``."""
    bad = _invalid(group)
    if group.fields.get("scoring.denominator") != "valid" or not bad:
        return []
    n = len(group.records)
    reasons = dict(Counter(str(r.get("invalid_reason")) for r in bad).most_common())
    failed = sum(1 for r in bad if r.get("invalid_reason") in FAILED_REQUEST)
    effect = rescore_effect(group, [("scoring.denominator", "total")], resources)
    what = " and ".join(
        part
        for part in (
            f"{failed} requests failed (no answer came back: {_reasons(bad, True)})" if failed else "",
            f"{len(bad) - failed} answers could not be read ({_reasons(bad, False)})" if len(bad) > failed else "",
        )
        if part
    )
    hyp = (
        f"{_pct(len(bad), n)} items are invalid: {what}; the valid-only denominator leaves them out, so the "
        f"headline may describe only the items that were answered and parsed rather than the task."
    )
    return [
        make_finding(
            group,
            "FM01-valid-only-denominator",
            hyp,
            {"n": n, "n_invalid": len(bad), "invalid_reasons": reasons, "question_ids": question_ids(bad)},
            effect,
        )
    ]


def check_reasoning_kept(group: Group, resources: Resources | None) -> list[Finding]:
    """FM05: ``extraction.reasoning = keep`` and think tags in the raw outputs; re-scored with ``strip``."""
    if group.fields.get("extraction.reasoning") != "keep":
        return []
    tagged = [r for r in group.records if _THINK.search(r.get("raw_output") or "")]
    if not tagged:
        return []
    effect = rescore_effect(group, [("extraction.reasoning", "strip")], resources)
    hyp = (
        f"{_pct(len(tagged), len(group.records))} outputs carry <think> tags that reach the extraction rule, "
        f"which may then read an answer from the reasoning instead of the final reply."
    )
    return [
        make_finding(
            group,
            "FM05-reasoning-left-in-text",
            hyp,
            {"n": len(group.records), "n_with_think_tags": len(tagged), "question_ids": question_ids(tagged)},
            effect,
        )
    ]


def _labelled(group: Group) -> bool:
    return bool(group.records) and all(r.get("question_labels") for r in group.records)


def _strict_rule(group: Group) -> str:
    multi = metric_answers(str(group.fields.get("scoring.metric", ""))) == "labels" or any(
        len(_SEPARATORS.sub("", str(r.get("gold", "")))) > 1 for r in group.records
    )
    return strict_rule("labels" if multi else "label")


def _answer_text(rec: RecordRow, reasoning: str) -> str:
    return answer_text_of(rec.get("raw_output") or "", reasoning, rec.get("reasoning"))


def check_letters_anywhere(group: Group, resources: Resources | None) -> list[Finding]:
    """FM06: a valid MCQ prediction letter that never stands alone, upper-case, in the text read."""
    rule = str(group.fields.get("extraction.rule", ""))
    if not _labelled(group) or rule in _STRICT_RULES:
        return []
    reasoning = str(group.fields.get("extraction.reasoning", "keep"))
    hits = []
    for rec in group.records:
        pred = str(rec.get("prediction") or "")
        if not rec.get("valid") or not pred:
            continue
        text = _answer_text(rec, reasoning)
        letters = set(_SEPARATORS.sub("", pred).upper())
        if any(not re.search(rf"(?<![A-Za-z0-9]){re.escape(ch)}(?![A-Za-z0-9])", text) for ch in letters):
            hits.append(rec)
    if not hits:
        return []
    strict = _strict_rule(group)
    # The effect is that of the flagged items read by the strict rule (the others keep their
    # reading), as the sentence is about them; the whole-rule swap is kept as evidence.
    effect = rescore_effect(group, [("extraction.rule", strict)], resources, only={str(r["question_id"]) for r in hits})
    whole = rescore_effect(group, [("extraction.rule", strict)], resources)
    n_correct = sum(1 for r in hits if r.get("correct"))
    hyp = (
        f"In {_pct(len(hits), len(group.records))} answers the rule '{rule}' read a letter that never stands alone "
        f"in the text (inside a word such as 'DEP', or a lower-case article), so it may be scoring letters the "
        f"model did not choose ({n_correct} of them scored correct)."
    )
    return [
        make_finding(
            group,
            "FM06-letters-read-anywhere",
            hyp,
            {
                "n": len(group.records),
                "n_letter_not_standalone": len(hits),
                "n_scored_correct": n_correct,
                "rule": rule,
                "strict_rule": strict,
                "whole_rule_effect_pp": whole.pp,
                "question_ids": question_ids(hits),
            },
            effect,
        )
    ]


def check_echoed_options(group: Group, resources: Resources | None) -> list[Finding]:
    """FM07: the output repeats the option list and the answer scored comes from that list.

    From the list means: the text's last non-empty line is one of the echoed option lines (a
    last-line or bottom-up rule reads its label), or the prediction holds three or more of the
    echoed labels (a rule reading letters anywhere).  The effect counts these items invalid.
    """
    rule = str(group.fields.get("extraction.rule", ""))
    if not _labelled(group) or rule in _NO_TEXT_RULES:
        return []
    reasoning = str(group.fields.get("extraction.reasoning", "keep"))
    hits = []
    for rec in group.records:
        pred = set(_SEPARATORS.sub("", str(rec.get("prediction") or "")).upper())
        if not rec.get("valid") or not pred:
            continue
        text = _answer_text(rec, reasoning)
        labels = {str(x) for x in rec.get("question_labels") or ()}
        echoed = {m for m in _OPTION_LINE.findall(text) if m in labels}
        if len(echoed) < min(3, len(labels)):
            continue
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if (lines and _OPTION_LINE.match(lines[-1])) or len(pred & echoed) >= 3:
            hits.append(rec)
    if not hits:
        return []
    n_correct = sum(1 for r in hits if r.get("correct"))
    effect = recompute_as_invalid(
        group, {str(r["question_id"]) for r in hits}, f"recomputed with the {len(hits)} items counted as unreadable"
    )
    hyp = (
        f"{_pct(len(hits), len(group.records))} outputs repeat the option list and the answer '{rule}' read "
        f"comes from that list ({n_correct} scored correct), so the echo itself may be what was scored."
    )
    return [
        make_finding(
            group,
            "FM07-echoed-options-scored",
            hyp,
            {
                "n": len(group.records),
                "n_echo_scored": len(hits),
                "n_scored_correct": n_correct,
                "rule": rule,
                "question_ids": question_ids(hits),
            },
            effect,
        )
    ]


def check_free_text_near_miss(group: Group, resources: Resources | None) -> list[Finding]:
    """BA02: free-text task, valid wrong predictions that contain the gold name (or are contained in it)."""
    info = METRIC_INFO.get(str(group.fields.get("scoring.metric", "")))
    if info is None or info.kind != "binary" or info.needs_judge or not group.records:
        return []
    if any(r.get("question_labels") or _ID_GOLD.match(str(r.get("gold", "")).strip()) for r in group.records):
        return []
    hits, pairs = [], []
    for rec in group.records:
        if not rec.get("valid") or rec.get("correct"):
            continue
        pred, gold = (" ".join(str(rec.get(k) or "").casefold().split()) for k in ("prediction", "gold"))
        if len(pred) >= 3 and len(gold) >= 3 and pred != gold and (gold in pred or pred in gold):
            hits.append(rec)
            pairs.append(
                {
                    "question_id": str(rec["question_id"]),
                    "prediction": str(rec["prediction"])[:60],
                    "gold": str(rec["gold"])[:60],
                }
            )
    if not hits:
        return []
    n = len(group.records)
    pp = round(100.0 * len(hits) / n, 2)
    effect = Effect(
        "estimate",
        pp,
        f"upper bound {pp:+.1f} pp if every such answer names the gold; fixing it means "
        f"an alias-aware scoring.metric (or extraction.rule), re-scored offline",
    )
    hyp = (
        f"{_pct(len(hits), n)} answers scored wrong contain the gold name or are contained in it (e.g. "
        f"'{pairs[0]['prediction']}' for '{pairs[0]['gold']}'), which suggests name variants the metric does "
        f"not resolve, or answer sentences the extraction rule kept whole."
    )
    return [
        make_finding(
            group,
            "BA02-free-text-near-miss",
            hyp,
            {"n": n, "n_near_miss": len(hits), "examples": pairs[:3], "question_ids": question_ids(hits)},
            effect,
        )
    ]


def check_judge(group: Group, resources: Resources | None) -> list[Finding]:
    """BA01: judge verdicts that needed the fallback parser, or failed (the item is then invalid)."""
    status = Counter(str(j["parse_status"]) for r in group.records if (j := r.get("judge")))
    fallback, failed = status.get("fallback", 0), status.get("failed", 0)
    if not fallback and not failed:
        return []
    judged = [r for r in group.records if (j := r.get("judge")) and j["parse_status"] in ("fallback", "failed")]
    effect = (
        recovery_estimate(group, failed)
        if failed
        else Effect("none", None, "fallback verdicts are scored; no estimate without new judge calls")
    )
    effect.text = effect.text.replace("needs new generations", "needs new judge calls")
    hyp = (
        f"{fallback} judge answers needed the fallback parser and {failed} gave no verdict, of "
        f"{sum(status.values())} judged items, so the judge's prompt or model may not hold to the strict "
        f"JSON format and its verdicts deserve a human check."
    )
    return [
        make_finding(
            group,
            "BA01-judge-fallback-or-failure",
            hyp,
            {
                "n_judged": sum(status.values()),
                "n_fallback": fallback,
                "n_failed": failed,
                "question_ids": question_ids(judged),
            },
            effect,
        )
    ]


# --------------------------------------------------------------------------- inference (upstream)


def check_stop_in_reasoning(group: Group, resources: Resources | None) -> list[Finding]:
    """FM02: a stop sequence is set and outputs end, finish_reason 'stop', inside an unclosed <think>."""
    stop = group.fields.get("inference.stop")
    if not stop or is_unspecified(stop):
        return []
    hits = [
        r for r in group.records if r.get("finish_reason") == "stop" and strip_reasoning(r.get("raw_output") or "")[1]
    ]
    if not hits:
        return []
    n_invalid = sum(1 for r in hits if not r.get("valid"))
    hyp = (
        f"{_pct(len(hits), len(group.records))} generations stopped inside an unclosed <think> span while "
        f"inference.stop is {stop!r}, which suggests the stop sequence cut the reasoning before any answer."
    )
    return [
        make_finding(
            group,
            "FM02-stop-inside-reasoning",
            hyp,
            {
                "n": len(group.records),
                "n_stopped_in_reasoning": len(hits),
                "n_invalid": n_invalid,
                "stop": stop,
                "question_ids": question_ids(hits),
            },
            recovery_estimate(group, n_invalid),
        )
    ]


def check_truncation(group: Group, resources: Resources | None) -> list[Finding]:
    """FM03: generations that ended at the token budget (finish_reason 'length')."""
    hits = [r for r in group.records if r.get("finish_reason") == "length"]
    if not hits:
        return []
    n_invalid = sum(1 for r in hits if not r.get("valid"))
    budget = group.fields.get("inference.max_tokens")
    hyp = (
        f"{_pct(len(hits), len(group.records))} generations ended at the token budget "
        f"(inference.max_tokens {budget!r}), {n_invalid} of them without a readable answer, so the budget may "
        f"be cutting answers short."
    )
    return [
        make_finding(
            group,
            "FM03-token-budget-truncation",
            hyp,
            {
                "n": len(group.records),
                "n_truncated": len(hits),
                "n_truncated_invalid": n_invalid,
                "max_tokens": budget,
                "question_ids": question_ids(hits),
            },
            recovery_estimate(group, n_invalid),
        )
    ]


def check_provider_minimum(group: Group, resources: Resources | None) -> list[Finding]:
    """FM04: error payloads naming the token limit, or requests raised to a provider minimum."""
    errors = [r for r in group.records if r.get("error") and _BUDGET_ERROR.search(str(r["error"]))]
    raised = [
        r
        for r in group.records
        if any("provider minimum" in str(a) for a in json_list(r["request"].get("adjustments")))
    ]
    if not errors and not raised:
        return []
    n_invalid = sum(1 for r in errors if not r.get("valid"))
    budget = group.fields.get("inference.max_tokens")
    hyp = (
        f"{len(errors)} requests failed with an error about the token limit and {len(raised)} were raised to a "
        f"provider minimum, so inference.max_tokens {budget!r} may sit below what the provider accepts and the "
        f"run may not have used the pipeline's budget."
    )
    return [
        make_finding(
            group,
            "FM04-budget-below-provider-minimum",
            hyp,
            {
                "n": len(group.records),
                "n_token_limit_errors": len(errors),
                "n_raised_to_minimum": len(raised),
                "max_tokens": budget,
                "question_ids": question_ids(errors or raised),
            },
            recovery_estimate(group, n_invalid),
        )
    ]


def _flips(group: Group) -> tuple[list[str], int]:
    """The question ids whose verdicts differ between their repeats, and how many questions were asked twice or more."""
    verdicts: dict[str, set[bool]] = {}
    counts: Counter[str] = Counter()
    for r in group.records:
        qid = str(r["question_id"])
        verdicts.setdefault(qid, set()).add(bool(r.get("correct")))
        counts[qid] += 1
    asked = [q for q, n in counts.items() if n > 1]
    return [q for q in asked if len(verdicts[q]) > 1], len(asked)


def _positive(value: JsonValue) -> bool:
    """A temperature above 0 (a missing or null one is not)."""
    return isinstance(value, (int, float)) and value > 0


def check_seed(group: Group, resources: Resources | None) -> list[Finding]:
    """FM14: sampled requests (temperature above 0 or not sent) without a seed.

    Asked once per question: the spread cannot be seen (no estimate).  Asked K times
    (``inference.repeats``, records with ``repeat`` >= 1): the spread is measured: the headline's
    sampling SD across repeat indices and the questions whose verdict flips between repeats."""
    params = [json_dict(r["request"].get("params")) for r in group.records]
    sampled = [p for p in params if "temperature" not in p or _positive(p.get("temperature"))]
    if not sampled or any("seed" in p for p in sampled):
        return []
    temps = sorted({str(p.get("temperature", "not sent (provider default)")) for p in sampled})
    base = {"n": len(group.records), "n_sampled_without_seed": len(sampled), "temperature": temps}
    repeated = any(int(r.get("repeat") or 0) >= 1 for r in group.records)
    if not repeated:
        per_question = Counter(str(r["question_id"]) for r in group.records)
        if max(per_question.values()) > 1:
            return []  # the same question twice without repeat numbers (a merged file): not a sample of repeats
        hyp = (
            f"{_pct(len(sampled), len(group.records))} requests were sampled (temperature {', '.join(temps)}) "
            f"without a seed and with one generation per question, so the score may move on a rerun by an "
            f"amount these records cannot show."
        )
        return [
            make_finding(
                group,
                "FM14-sampling-without-seed",
                hyp,
                base,
                Effect("none", None, "needs repeated generations; one sample per question gives no estimate"),
            )
        ]
    res = group.result()
    flipped, asked = _flips(group)
    sd = res.get("sampling_sd")
    lib = bool(res.get("lower_is_better"))
    k = int(res["repeats"])

    def amount(x: float) -> str:
        return f"{x:.3f} {res.get('metric') or 'metric'} units" if lib else f"{100 * x:.1f} pp"

    spread = "no sampling SD (fewer than two repeats with a score)" if sd is None else f"a sampling SD of {amount(sd)}"
    # The SD is that of a one-repeat headline; the mean of K repeats moves by about SD / sqrt(K).
    rerun = (
        ""
        if sd is None
        else f", so a score asked once may move by about {amount(sd)} on a rerun and the "
        f"mean of {k} repeats by about {amount(sd / math.sqrt(k))}"
    )
    hyp = (
        f"{_pct(len(sampled), len(group.records))} requests were sampled (temperature {', '.join(temps)}) without a "
        f"seed; measured over {k} repeats per question, the headline shows {spread} across repeats and "
        f"{_pct(len(flipped), asked)} questions flip their verdict between repeats{rerun}."
    )
    evidence = {
        **base,
        "repeats": res["repeats"],
        "sampling_sd": sd,
        "retest_agreement": res.get("retest_agreement"),
        "n_questions": asked,
        "n_flipped": len(flipped),
        "flip_share": round(len(flipped) / asked, 6) if asked else None,
        "question_ids": flipped[:MAX_IDS],
    }
    return [
        make_finding(
            group,
            "FM14-sampling-without-seed",
            hyp,
            evidence,
            Effect(
                "none",
                None,
                f"measured from the repeats: {spread}, {len(flipped)} of {asked} "
                "questions flip; a seed makes a rerun repeat itself, it does not "
                "remove this spread across samples",
            ),
        )
    ]
