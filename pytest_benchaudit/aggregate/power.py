"""Power analysis before a run: how many questions, each asked K times, a paired comparison needs.

Two models answer the same questions; question i has model a's K scores ``a_i1..a_iK`` and model
b's ``b_i1..b_iK``.  The comparison reads ``D_i = mean_k a_ik - mean_k b_ik`` and tests whether
their mean is 0 (docs/statistics.md, "Two models on the same questions").  Across questions

    Var(D_i) = var_between + var_within / K

where ``var_between`` is the variance over questions of the difference of the two models' expected
per-question scores (what the questions themselves contribute: repeats cannot remove it) and
``var_within`` the variance of one repeat's difference around it (the dice: each model's
per-question sampling variance, summed; K repeats average it away).  A two-sided test at level
``alpha`` detects a true mean difference ``mde`` with probability ``power`` when (normal
approximation; Miller 2024, "Adding Error Bars to Evals", section 5)

    n >= (z_{1 - alpha/2} + z_{power})^2 * (var_between + var_within / K) / mde^2.

This module estimates the two variances from stored scores (:func:`paired_variances`,
:func:`one_model_variances`) or states an assumption (:func:`assumed_binary_variances`), and
solves for n (:func:`plan_rows`).  Pure: no I/O, no pytest; scipy (for the normal quantiles) is
imported when a plan is made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

__all__ = ["DEFAULT_REPEATS", "PlanRow", "Variances", "assumed_binary_variances", "one_model_variances",
           "paired_variances", "plan_rows", "questions_for", "z_total"]

# The repeat counts a plan lists unless told otherwise.
DEFAULT_REPEATS: tuple[int, ...] = (1, 2, 3, 5, 10)


@dataclass(frozen=True)
class Variances:
    """The two variance components of a paired difference (see the module docstring).

    ``within_measured``: False when the scores came from questions asked once, where the
    within-question part cannot be told apart from the between-question part; it is then counted
    in ``between`` (``within`` = 0: repeats are assumed to average nothing away, the cautious side).
    ``source``: how the numbers were obtained, in words, for the plan's reader.
    """

    between: float
    within: float
    source: str
    within_measured: bool = True
    questions: int = 0  # how many questions the estimate rests on (0: an assumption)
    repeats: int = 0  # the most repeats a question had in the data (0: an assumption)

    def total(self, repeats: int) -> float:
        """``Var(D_i)`` when each question is asked ``repeats`` times: between + within / K."""
        return self.between + self.within / repeats


@dataclass(frozen=True)
class PlanRow:
    """One line of a plan: with ``repeats`` per question, ``questions`` are needed (``generations`` =
    questions x repeats per model); ``fits``: the task has that many questions (None: size unknown)."""

    repeats: int
    questions: int
    generations: int
    fits: bool | None


def z_total(alpha: float, power: float) -> float:
    """``z_{1 - alpha/2} + z_{power}``, the standard normal quantiles from ``scipy.stats.norm.ppf``
    (2.8016 at alpha 0.05, power 0.80)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), not {alpha}")
    if not 0 < power < 1:
        raise ValueError(f"power must lie in (0, 1), not {power}")
    from scipy.stats import norm  # lazy: importing the module stays cheap

    return float(norm.ppf(1 - alpha / 2) + norm.ppf(power))


def questions_for(mde: float, variances: Variances, repeats: int, alpha: float = 0.05, power: float = 0.80) -> int:
    """Questions needed: ``ceil(z_total^2 * (between + within / K) / mde^2)``, at least 2 (a standard
    error needs two questions)."""
    if not mde > 0 or not math.isfinite(mde):
        raise ValueError(f"the difference to detect must be a number > 0, not {mde}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, not {repeats}")
    z = z_total(alpha, power)
    # Rounded before the ceiling so that float noise (a product that is an integer up to 1e-12)
    # does not add a question.
    return max(2, math.ceil(round(z * z * variances.total(repeats) / (mde * mde), 9)))


def plan_rows(mde: float, variances: Variances, task_questions: int | None,
              repeats: Sequence[int] = DEFAULT_REPEATS, alpha: float = 0.05, power: float = 0.80) -> list[PlanRow]:
    """One :class:`PlanRow` per repeat count, each checked against the task's size."""
    rows = []
    for k in repeats:
        n = questions_for(mde, variances, k, alpha, power)
        rows.append(PlanRow(repeats=k, questions=n, generations=n * k,
                            fits=None if task_questions is None else n <= task_questions))
    return rows


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _var(values: Sequence[float]) -> float:
    """Sample variance (ddof 1); 0 for a single value."""
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return sum((v - m) ** 2 for v in values) / (len(values) - 1)


def _spread(scores: Sequence[float]) -> tuple[float, float]:
    """(variance of one repeat around the question's mean (ddof 1; 0 when asked once), that variance
    divided by the question's K: the noise left in its mean)."""
    v = _var(scores)
    return v, v / len(scores)


def paired_variances(a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]],
                     label: str = "a vs b") -> Variances:
    """The variance components of a minus b, measured on the questions both answered.

    ``a``, ``b``: question id -> that model's scores on it, one per repeat.  With ``s2`` a question's
    sample variance across its repeats and ``K`` their number (method of moments, each term unbiased):

    * ``within`` = mean over questions of ``s2_a + s2_b``;
    * ``between`` = ``Var_i(D_i) - mean_i(s2_a / K_a + s2_b / K_b)``, floored at 0,

    since ``Var_i(D_i)`` holds ``between`` plus the noise left in each question's means.  Questions
    asked once leave the within part unmeasured (:attr:`Variances.within_measured`).
    """
    common = [q for q in a if q in b and a[q] and b[q]]
    if len(common) < 2:
        raise ValueError(f"{label}: the two models share {len(common)} answered question(s); a variance needs 2")
    diffs = [_mean(a[q]) - _mean(b[q]) for q in common]
    spreads = [(_spread(a[q]), _spread(b[q])) for q in common]
    asked_again = all(len(a[q]) > 1 and len(b[q]) > 1 for q in common)
    k = max(max(len(a[q]), len(b[q])) for q in common)
    if not asked_again:
        return Variances(between=_var(diffs), within=0.0, within_measured=False, questions=len(common), repeats=k,
                         source=f"measured: paired difference {label} on {len(common)} questions asked once "
                                "(the within-question part cannot be told apart: counted as between, so repeats "
                                "are assumed to average nothing away)")
    within = _mean([sa[0] + sb[0] for sa, sb in spreads])
    left = _mean([sa[1] + sb[1] for sa, sb in spreads])
    return Variances(between=max(_var(diffs) - left, 0.0), within=within, questions=len(common), repeats=k,
                     source=f"measured: paired difference {label} on {len(common)} questions, up to {k} repeats each")


def one_model_variances(scores: Mapping[str, Sequence[float]], label: str = "the model") -> Variances:
    """The variance components of a comparison against a second model that is like this one but
    independent of it, from one model's scores (question id -> one score per repeat).

    With ``p_i`` the model's expected score on question i: ``between`` = ``2 Var_i(p_i)`` (estimated as
    ``Var_i(mean_i) - mean_i(s2_i / K_i)``, floored at 0) and ``within`` = ``2 mean_i(s2_i)``.  Two real
    models find the same questions hard, which makes their differences vary less: measured with two
    models (:func:`paired_variances`) the plan is usually smaller; this one errs on the safe side.
    """
    asked = [q for q, v in scores.items() if v]
    if len(asked) < 2:
        raise ValueError(f"{label}: {len(asked)} answered question(s); a variance needs 2")
    means = [_mean(scores[q]) for q in asked]
    spreads = [_spread(scores[q]) for q in asked]
    k = max(len(scores[q]) for q in asked)
    assumption = f"{label}'s per-question variance on {len(asked)} questions, doubled for a second, independent model"
    if not all(len(scores[q]) > 1 for q in asked):
        return Variances(between=2 * _var(means), within=0.0, within_measured=False, questions=len(asked), repeats=k,
                         source=f"measured and assumed: {assumption} (questions asked once: the within-question "
                                "part cannot be told apart, counted as between)")
    within = 2 * _mean([s[0] for s in spreads])
    between = 2 * max(_var(means) - _mean([s[1] for s in spreads]), 0.0)
    return Variances(between=between, within=within, questions=len(asked), repeats=k,
                     source=f"measured and assumed: {assumption}, up to {k} repeats each")


def assumed_binary_variances() -> Variances:
    """No runs to measure: the cautious case for a 0/1 score.  Each model right with probability 1/2 on
    each answer, the two models independent: ``Var(a - b) = 1/4 + 1/4 = 1/2`` per question asked once,
    the most a 0/1 score allows for independent models.  How it splits between questions and repeats is
    unknown, so all of it is counted as between-question (repeats are assumed to average nothing away)."""
    return Variances(between=0.5, within=0.0, within_measured=False,
                     source="assumed (no runs given): 0/1 scores, each model right with probability 0.5 on each "
                            "answer, independent models: Var(difference) = 0.5 per question, all of it counted as "
                            "between-question (repeats assumed to help nothing); measure it with --from RUN")
