"""The failure-mode catalogue behind ``benchaudit diagnose`` (docs/failure-modes.md explains each entry).

Every check of :mod:`.answer_checks` reports findings under one id of :data:`CATALOGUE`.  An
entry says which pipeline field would fix the failure, whether that field is upstream (a fix
needs new generations) or downstream (a fix is re-scored offline from the stored outputs), and
where the failure mode comes from: ``paper`` (named in the paper's text as quoted by this
project's issue 15 and design notes) or ``ours`` (added by this project).

Pure data: no I/O, no project imports beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["CATALOGUE", "DOCUMENTED_SIZES", "FailureMode", "failure_mode"]

Stage = Literal["upstream", "downstream", "dataset", "documentation"]


@dataclass(frozen=True)
class FailureMode:
    """One entry of the catalogue: what can go wrong, which field fixes it, how it is detected."""

    id: str
    title: str
    field: str
    stage: Stage
    source: Literal["paper", "ours"]
    detection: str


_ENTRIES = [
    FailureMode(
        "FM01-valid-only-denominator",
        "invalid answers hidden by a valid-only denominator",
        "scoring.denominator",
        "downstream",
        "paper",
        "scoring.denominator is 'valid' and at least one record is invalid; the effect is the run "
        "re-scored offline with scoring.denominator=total.",
    ),
    FailureMode(
        "FM02-stop-inside-reasoning",
        "a stop sequence ends generation inside a reasoning span",
        "inference.stop",
        "upstream",
        "paper",
        "inference.stop is set and a record ends (finish_reason 'stop') with a <think> span never closed.",
    ),
    FailureMode(
        "FM03-token-budget-truncation",
        "a token budget truncates answers",
        "inference.max_tokens",
        "upstream",
        "paper",
        "records whose finish_reason is 'length' (the budget ran out), counted apart when they are invalid.",
    ),
    FailureMode(
        "FM04-budget-below-provider-minimum",
        "a token budget below a provider minimum",
        "inference.max_tokens",
        "upstream",
        "paper",
        "records whose error payload names max_tokens / max_completion_tokens, or whose request carries "
        "the adjustment 'raised ... to the provider minimum'.",
    ),
    FailureMode(
        "FM05-reasoning-left-in-text",
        "a reasoning span left in the text before extraction",
        "extraction.reasoning",
        "downstream",
        "paper",
        "extraction.reasoning is 'keep' and raw outputs contain <think> or </think>; the effect is the run "
        "re-scored offline with extraction.reasoning=strip.",
    ),
    FailureMode(
        "FM06-letters-read-anywhere",
        "an extraction rule reads letters anywhere ('DEP' -> D)",
        "extraction.rule",
        "downstream",
        "paper",
        "a valid MCQ prediction holds a letter that never stands alone, upper-case, in the text the rule "
        "read; the effect is those flagged items re-scored with the standardized rule "
        "(final_answer_letter[s]), the other items left as they were; the whole-rule swap is in the "
        "evidence (whole_rule_effect_pp).",
    ),
    FailureMode(
        "FM07-echoed-options-scored",
        "echoed option lists scored as answers",
        "extraction.rule",
        "downstream",
        "paper",
        "the output repeats the option list (three or more lines starting 'A)', 'B.', ...) and the answer "
        "read comes from it (the last line is an option line, or the prediction holds three or more echoed "
        "labels); the effect is the score recomputed with those items counted unreadable.",
    ),
    FailureMode(
        "FM08-metric-direction-or-scale",
        "metric direction or scale differs between similar tasks",
        "scoring.metric",
        "downstream",
        "paper",
        "two tasks of the same name in different benchmarks use metrics of opposite direction or of a "
        "different scale (MAD vs 1 - MAD/7.7).",
    ),
    FailureMode(
        "FM09-partial-vs-binary-credit",
        "partial credit in one task, binary credit in a similar one",
        "scoring.metric",
        "downstream",
        "paper",
        "two tasks of the same name in different benchmarks, one metric binary and the other continuous.",
    ),
    FailureMode(
        "FM10-alias-handling",
        "alias handling differs between similar tasks",
        "scoring.metric",
        "downstream",
        "paper",
        "two tasks of the same name whose metrics both resolve aliases, but by different rules.",
    ),
    FailureMode(
        "FM11-empty-or-unmatchable-gold",
        "empty or unmatchable gold labels",
        "dataset",
        "dataset",
        "paper",
        "a gold label that is blank, or (MCQ) holds a letter that is not an option or repeats one; the "
        "effect is the score recomputed without those questions.",
    ),
    FailureMode(
        "FM12-duplicate-questions",
        "duplicate questions",
        "dataset",
        "dataset",
        "paper",
        "two or more question ids whose prompt text is identical after whitespace and case are folded; the "
        "effect is the score recomputed keeping the first of each group.",
    ),
    FailureMode(
        "FM13-dataset-size-vs-documentation",
        "dataset size differs from the documentation",
        "dataset",
        "dataset",
        "paper",
        "the number of distinct questions of a task differs from the size its documentation states "
        "(DOCUMENTED_SIZES, with the source).",
    ),
    FailureMode(
        "FM14-sampling-without-seed",
        "sampling without a seed or repeats",
        "inference.decoding.seed",
        "upstream",
        "paper",
        "requests sent with a temperature above 0, or with none (the provider's default), and no seed; with "
        "one generation per question the spread cannot be seen, with repeats (inference.repeats) it is "
        "measured: the headline's sampling SD across repeats and the questions whose verdict flips.",
    ),
    FailureMode(
        "FM15-documented-vs-released",
        "documented and released layers contradict (ledger)",
        "(the contradicted field)",
        "documentation",
        "paper",
        "a run made under the released layer, for a field the ledger marks contradicted; the sentence "
        "quotes the differing content (for prompt.template the template texts that differ, not their "
        "names); downstream fields are re-scored with the documented value, upstream ones need new "
        "generations.",
    ),
    FailureMode(
        "BA01-judge-fallback-or-failure",
        "judge answers that needed the fallback parser or failed",
        "judge (--judge, pinned prompt)",
        "downstream",
        "ours",
        "records whose judge parse_status is 'fallback' (the strict JSON verdict did not parse) or "
        "'failed' (no verdict: the item is invalid).",
    ),
    FailureMode(
        "BA02-free-text-near-miss",
        "a free-text answer scored wrong although it contains the gold name",
        "scoring.metric",
        "downstream",
        "ours",
        "valid predictions of a free-text task (no options, gold not an id) scored incorrect whose folded "
        "text contains the folded gold or is contained in it ('Lazarus' vs 'Lazarus Group').",
    ),
    FailureMode(
        "BA03-endpoint-or-format-failure",
        "endpoint or format failure: every answer of a group invalid",
        "inference (endpoint) or extraction.rule",
        "upstream",
        "ours",
        "every record of a model x task is invalid (no score describes the model); the reasons and a "
        "detail are quoted. Not reported where BA05 names the cause (no log-probabilities).",
    ),
    FailureMode(
        "BA04-card-lint",
        "the pipeline card cannot work on this data (static check)",
        "(the field named)",
        "upstream",
        "ours",
        "static checks of the card against the records, whether or not the server honoured the card: "
        "inference.max_tokens below the word count of the longest gold answer (each word is at least one "
        "token), max_tokens=1 for an answer read from generated text, a stop sequence containing a "
        "newline while the outputs carry reasoning (or extraction.reasoning strips it), a stop sequence "
        "that occurs inside a gold answer.",
    ),
    FailureMode(
        "BA05-logprobs-missing",
        "the rule reads first-token log-probabilities and none came back",
        "inference (an endpoint that returns logprobs)",
        "upstream",
        "ours",
        "extraction.rule reads the first token's log-probabilities (logprob_argmax, "
        "mmlu_logprob_argmax) and records without an error carry none: the paper's rule finds no "
        "prediction, the released MMLU rule scores its fallback 'A'; the effect is the score recomputed "
        "with those items counted unreadable.",
    ),
    FailureMode(
        "BA06-order-within-noise",
        "two models' order rests on a difference within its noise",
        "inference.repeats (or more questions)",
        "upstream",
        "ours",
        "two models next to each other in a task's ranking (same benchmark, task and pipeline) whose paired "
        "difference on the questions both answered is not significant: exact McNemar on 0/1 per-question "
        "scores, else paired t, Holm over the task's pairs, p_holm >= 0.05 (the rows of compare.json "
        "'paired'); one finding per task (model '*') lists every such pair in evidence.pairs.",
    ),
    FailureMode(
        "BA07-order-flips-across-specifications",
        "two models' order flips across defensible pipelines",
        "(the field that flips the most pairs)",
        "downstream",
        "ours",
        "in the task's multiverse (benchaudit multiverse: every specification of its space re-scored from "
        "the stored outputs) the other model is better in at least a quarter of the specifications in "
        "which both have a score; one finding per task (model '*') lists every such pair in evidence.pairs "
        "with the fields whose change alone reverses it.",
    ),
]

CATALOGUE: dict[str, FailureMode] = {entry.id: entry for entry in _ENTRIES}

# Sizes the benchmarks' own documentation states, with where it says so.  Only tasks whose
# documentation gives a number are listed; a task not listed is not checked.
DOCUMENTED_SIZES: dict[tuple[str, str], tuple[int, str]] = {
    ("seceval", "mcq"): (2126, "SecEval README: 2,126 questions"),
    ("cti_bench", "mcq"): (2500, "CTI-Bench paper, Table 1: CTI-MCQ 2,500"),
    ("cti_bench", "rcm"): (1000, "CTI-Bench paper, Table 1: CTI-RCM 1,000"),
    ("cti_bench", "vsp"): (1000, "CTI-Bench paper, Table 1: CTI-VSP 1,000"),
    ("cti_bench", "ate"): (60, "CTI-Bench paper, Table 1: CTI-ATE 60"),
    ("cti_bench", "taa"): (50, "CTI-Bench paper, Table 1: CTI-TAA 50"),
    ("cybermetric", "cm80"): (80, "CyberMetric README: CyberMetric-80"),
    ("cybermetric", "cm500"): (500, "CyberMetric README: CyberMetric-500"),
    ("cybermetric", "cm2000"): (2000, "CyberMetric README: CyberMetric-2000"),
}


def failure_mode(fm_id: str) -> FailureMode:
    """The catalogue entry ``fm_id``; KeyError names the known ids."""
    try:
        return CATALOGUE[fm_id]
    except KeyError:
        raise KeyError(f"unknown failure mode {fm_id!r}; known: {', '.join(CATALOGUE)}") from None
