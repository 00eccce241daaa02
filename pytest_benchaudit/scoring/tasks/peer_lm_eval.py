"""lm-evaluation-harness's readers as extraction rules (highest log-likelihood, exact match).

Family module (see ``tasks/__init__.py``): imports only ``..types``.  Both rules read what
lm-eval 0.4.13 reads for MMLU, so a stored run re-scores "as lm-eval would" offline:

* ``lm_eval_loglikelihood``: the ``multiple_choice`` output type (``mmlu_computer_security``,
  ``lm_eval/tasks/mmlu/default/_default_template_yaml``).  Each option's continuation (" A".." D")
  has a log-likelihood, the sum of its echoed tokens' log-probabilities
  (``Generation.continuations``: lm-eval's ``token_logprobs[ctxlen:-1]``, see
  :mod:`pytest_benchaudit.inference.loglikelihood`); the
  prediction is the option with the highest, the first of equal ones as ``np.argmax`` picks it
  (``lm_eval/api/task.py`` ``process_results``: ``pred = np.argmax(lls)``, metric ``acc``).  A
  generation without them is ``no_logprobs``, naming what the endpoint left out.
* ``lm_eval_exact_match``: the generative task (``mmlu_computer_security_generative``,
  ``lm_eval/tasks/mmlu/generative/_default_template_yaml``): its filter chain ``regex
  "^(.*?)(?=\\n|$)"`` (the first line), ``remove_whitespace``, ``regex "^(.*?)\\s*$"``,
  ``take_first`` (``lm_eval/filters/extraction.py``: a regex filter also strips its match, and
  gives ``[invalid]`` when nothing matches), then ``exact_match`` with ``ignore_case`` and
  ``ignore_punctuation`` (``lm_eval/api/metrics.py`` ``exact_match_hf_evaluate``: lower-case, every
  ``string.punctuation`` character deleted, then string equality with the target letter).  The
  prediction is the option label the filtered answer equals under that normalisation; an answer
  equal to none (``Answer: A`` normalises to ``answer a``) is kept as it is, a valid answer that
  the ``exact_match`` metric scores 0, as lm-eval does.
"""

from __future__ import annotations

import re
import string

from pytest_benchaudit.pipeline.types import NO_LOGPROBS_PREFIX, Generation, Question
from pytest_benchaudit.scoring import declarations

__all__ = ["RULES", "lm_eval_exact_match", "lm_eval_loglikelihood", "lm_eval_filtered", "lm_eval_normalised"]

_FIRST_LINE = re.compile(r"^(.*?)(?=\n|$)")
_NO_TRAILING_SPACE = re.compile(r"^(.*?)\s*$")
_FALLBACK = "[invalid]"  # RegexFilter's default fallback
_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)


def _labels(question: Question) -> tuple[str, ...]:
    return tuple(question.choices) or ("A", "B", "C", "D")


def _regex_filter(pattern: re.Pattern[str], text: str) -> str:
    """lm-eval's ``RegexFilter`` (group_select 0): the first ``findall`` match, stripped, else ``[invalid]``."""
    found = pattern.findall(text)
    return found[0].strip() if found else _FALLBACK


def lm_eval_filtered(text: str) -> str:
    """The generative task's filter chain on one response: first line, whitespace removed, take_first."""
    first_line = _regex_filter(_FIRST_LINE, text)
    return _regex_filter(_NO_TRAILING_SPACE, first_line.strip())


def lm_eval_normalised(text: str) -> str:
    """What ``exact_match`` compares under ``ignore_case`` and ``ignore_punctuation``."""
    return text.lower().translate(_NO_PUNCTUATION)


@declarations.rule(name="lm_eval_exact_match")
def lm_eval_exact_match(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """The option label lm-eval's filtered, normalised answer equals; else that answer itself (wrong)."""
    filtered = lm_eval_filtered(text)
    if not filtered:
        return None, "nothing left after lm-eval's filters (first line, whitespace removed)"
    normalised = lm_eval_normalised(filtered)
    for label in _labels(question):
        if normalised == lm_eval_normalised(label):
            return label, f"filtered {filtered!r}, normalised {normalised!r} = {label!r}"
    return filtered, f"filtered {filtered!r}, normalised {normalised!r}: equals no option label"


@declarations.rule(name="lm_eval_loglikelihood", reads="continuations", answers="label")
def lm_eval_loglikelihood(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """The option whose continuation has the highest summed log-likelihood (the first of equals).
    ``text`` is not read: a log-likelihood request generates no answer text."""
    read = generation.continuations
    if read is None:
        return None, (
            NO_LOGPROBS_PREFIX + "no continuation log-likelihoods in the generation (it was not asked "
            "with inference.request = 'loglikelihood')"
        )
    missing = [f"{c.continuation!r}: {c.missing}" for c in read if c.missing is not None]
    if missing:
        return None, NO_LOGPROBS_PREFIX + "; ".join(missing)
    labels = _labels(question)
    if len(read) != len(labels):
        return None, (
            NO_LOGPROBS_PREFIX + f"{len(read)} continuation log-likelihoods for {len(labels)} options "
            f"({', '.join(labels)})"
        )
    lls = [c.loglikelihood for c in read]
    best = max(range(len(lls)), key=lambda i: (lls[i], -i))  # np.argmax: the first maximum
    detail = " ".join(f"{label}={ll:.6g}" for label, ll in zip(labels, lls))
    # What lm-eval's cut did that a reader would not expect (no generated token, a merged context), once each.
    notes = sorted({c.note for c in read if c.note})
    return labels[best], (
        f"loglikelihood {detail} (lm-eval's token_logprobs[ctxlen:-1] summed)" + "".join(f"; {note}" for note in notes)
    )


# This module's rules and metrics by name, from their decorators (declarations.declared).
RULES, METRICS, METRIC_INFO = declarations.declared(globals())
