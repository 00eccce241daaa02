"""The whole-group checks of ``diagnose``: a group that gave no valid answer, missing
log-probabilities, and the card lint (static checks of the pipeline card against the data).

These checks name a *cause* that the per-item checks of :mod:`.answer_checks` would otherwise
misread (a run whose answers are all 'A' because no log-probability came back is not an
extraction rule reading letters out of words), and the card lint finds a budget or a stop
sequence that cannot work on the data even when the server ignored it (a ``max_tokens=1`` the
server did not honour leaves no truncated record for FM03 to see).  Wording is a hypothesis, as
everywhere in ``diagnose``.
"""

from __future__ import annotations

from collections import Counter

from pytest_benchaudit.diagnose.core import (
    Effect,
    Finding,
    Group,
    Resources,
    make_finding,
    question_ids,
    recompute_as_invalid,
    recovery_estimate,
)
from pytest_benchaudit.pipeline.record_documents import RecordRow
from pytest_benchaudit.pipeline.stages import is_unspecified
from pytest_benchaudit.scoring.names import rules_reading

__all__ = ["LOGPROB_RULES", "check_all_invalid", "check_card_lint", "check_logprobs_missing"]

# Rules whose prediction is the arg-max of the first token's log-probabilities (no text read),
# as each declares on its definition (scoring.declarations).
LOGPROB_RULES = rules_reading("logprobs")
_NO_EFFECT = "a static check of the card: no score change computed; what it cost shows in the other findings"


def _rule(group: Group) -> str:
    return str(group.fields.get("extraction.rule", ""))


def _without_logprobs(group: Group) -> list[RecordRow]:
    """Records of a log-prob rule that came back without an error and without log-probabilities."""
    if _rule(group) not in LOGPROB_RULES:
        return []
    return [r for r in group.records if not r.get("error") and not r.get("top_logprobs")]


def check_logprobs_missing(group: Group, resources: Resources | None) -> list[Finding]:
    """BA05: the rule reads first-token log-probabilities and answers came back without any."""
    hits = _without_logprobs(group)
    if not hits:
        return []
    rule, n = _rule(group), len(group.records)
    scored = [r for r in hits if r.get("valid")]
    predictions = dict(Counter(str(r.get("prediction")) for r in scored).most_common())
    n_correct = sum(1 for r in scored if r.get("correct"))
    if scored:
        effect = recompute_as_invalid(
            group,
            {str(r["question_id"]) for r in scored},
            f"recomputed with the {len(scored)} fallback answers counted unreadable "
            f"(no log-probabilities, no prediction)",
        )
        read = (
            f"the rule scored its fallback for {len(scored)} of them (predictions {predictions}, "
            f"{n_correct} correct by chance)"
        )
    else:
        effect = recovery_estimate(group, len(hits))
        read = "the rule found no prediction in any of them"
    budget = group.fields.get("inference.decoding.top_logprobs")
    hyp = (
        f"extraction.rule {rule!r} reads the first token's log-probabilities, and {len(hits)} of {n} answers "
        f"came back without any (inference.decoding.top_logprobs {budget!r}); {read}, which suggests the "
        f"endpoint does not return logprobs, so the score reflects the fallback rather than the model."
    )
    return [
        make_finding(
            group,
            "BA05-logprobs-missing",
            hyp,
            {
                "n": n,
                "n_without_logprobs": len(hits),
                "n_fallback_scored": len(scored),
                "n_fallback_correct": n_correct,
                "fallback_predictions": predictions,
                "top_logprobs": budget,
                "question_ids": question_ids(hits),
            },
            effect,
        )
    ]


def check_all_invalid(group: Group, resources: Resources | None) -> list[Finding]:
    """BA03: every record of the group is invalid (unless BA05 already names the cause)."""
    recs = group.records
    if not recs or any(r.get("valid") for r in recs):
        return []
    if len(_without_logprobs(group)) == len(recs):
        return []  # BA05 names the cause: no log-probabilities came back
    reasons = dict(Counter(str(r.get("invalid_reason")) for r in recs).most_common())
    stages = Counter(str(r.get("invalid_stage")) for r in recs)
    first = next((r for r in recs if r.get("error") or r.get("extraction_detail")), recs[0])
    detail = str(first.get("error") or first.get("extraction_detail") or "")[:120]
    if stages.get("inference", 0) == len(recs):
        cause = "the endpoint failed every request"
    elif stages.get("inference", 0):
        cause = "the endpoint failed some requests and the extraction rule read none of the other answers"
    else:
        cause = f"the answers are in a format extraction.rule {_rule(group)!r} never reads"
    hyp = (
        f"All {len(recs)} items are invalid ({', '.join(f'{k} {v}' for k, v in reasons.items())}; e.g. "
        f"{detail!r}), which suggests {cause}: no score of this group describes the model."
    )
    return [
        make_finding(
            group,
            "BA03-endpoint-or-format-failure",
            hyp,
            {"n": len(recs), "invalid_reasons": reasons, "detail": detail, "question_ids": question_ids(recs)},
            Effect(
                "none",
                None,
                "no answer was read, so there is no score to move: needs new "
                "generations (or another extraction rule, re-scored offline)",
            ),
        )
    ]


def _stops(group: Group) -> list[str]:
    stop = group.fields.get("inference.stop")
    if not stop or is_unspecified(stop):
        return []
    return [str(s) for s in (stop if isinstance(stop, list) else [stop]) if str(s)]


def _has_reasoning(rec: RecordRow) -> bool:
    return bool(rec.get("reasoning")) or "<think>" in str(rec.get("raw_output") or "").lower()


def check_card_lint(group: Group, resources: Resources | None) -> list[Finding]:
    """BA04: what the card asks cannot work on this data, whatever the server did with it."""
    out: list[Finding] = []
    rule, recs = _rule(group), group.records
    budget = group.fields.get("inference.max_tokens")
    generative = rule not in LOGPROB_RULES
    if isinstance(budget, int) and not isinstance(budget, bool) and generative and recs:
        longest = max(recs, key=lambda r: len(str(r.get("gold") or "").split()))
        words = len(str(longest.get("gold") or "").split())
        if budget == 1:
            out.append(
                make_finding(
                    group,
                    "BA04-card-lint",
                    (
                        f"inference.max_tokens is 1 while extraction.rule {rule!r} reads the answer from generated text, "
                        f"so any answer longer than one token is cut (found here whether or not the server honoured it)."
                    ),
                    {"lint": "max_tokens_1_generative", "max_tokens": budget, "rule": rule},
                    Effect("none", None, _NO_EFFECT),
                    field_name="inference.max_tokens",
                )
            )
        elif words > budget:
            out.append(
                make_finding(
                    group,
                    "BA04-card-lint",
                    (
                        f"inference.max_tokens {budget} is below the {words} words of the longest gold answer (question "
                        f"{longest['question_id']}; each word is at least one token), so a correct answer of that length "
                        f"cannot be generated in full."
                    ),
                    {
                        "lint": "budget_below_gold",
                        "max_tokens": budget,
                        "longest_gold_words": words,
                        "question_ids": [str(longest["question_id"])],
                    },
                    Effect("none", None, _NO_EFFECT),
                    field_name="inference.max_tokens",
                )
            )
    stops = _stops(group)
    newline = [s for s in stops if "\n" in s]
    reasoning = [r for r in recs if _has_reasoning(r)]
    if newline and generative and (reasoning or group.fields.get("extraction.reasoning") == "strip"):
        seen = f"{len(reasoning)} outputs carry reasoning" if reasoning else "extraction.reasoning strips reasoning"
        out.append(
            make_finding(
                group,
                "BA04-card-lint",
                (
                    f"inference.stop {newline!r} ends generation at a newline while {seen}, so a reasoning model may be "
                    f"stopped after its first line, before it gives any answer."
                ),
                {
                    "lint": "newline_stop_with_reasoning",
                    "stop": newline,
                    "n_with_reasoning": len(reasoning),
                    "question_ids": question_ids(reasoning),
                },
                Effect("none", None, _NO_EFFECT),
                field_name="inference.stop",
            )
        )
    cut = [r for r in recs if any(s in str(r.get("gold") or "") for s in stops)]
    if cut and generative:
        out.append(
            make_finding(
                group,
                "BA04-card-lint",
                (
                    f"{len(cut)} gold answers contain a stop sequence of inference.stop {stops!r}, so the correct answer to "
                    f"those questions cannot be generated in full."
                ),
                {
                    "lint": "stop_inside_gold",
                    "stop": stops,
                    "n_gold_with_stop": len(cut),
                    "question_ids": question_ids(cut),
                },
                Effect("none", None, _NO_EFFECT),
                field_name="inference.stop",
            )
        )
    return out
