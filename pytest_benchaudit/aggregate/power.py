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

That normal approximation (:func:`questions_for`) is where a plan starts; each row is then sized for
the test ``benchaudit compare`` will run on it (:func:`plan_rows`):

- **K = 1 on a 0/1 metric: the exact McNemar test**, whose power depends on the discordance rate ψ
  (the share of questions exactly one of the two models gets right) and the difference δ = mde:
  given n questions, the discordant count m is Binomial(n, ψ) and the questions only a gets right
  among them Binomial(m, (ψ + δ) / 2ψ); the power is the chance that the two-sided exact binomial test
  at p = 1/2 rejects, summed exactly over m (:func:`mcnemar_power`).  On 0/1 scores asked once the
  differences D_i are -1, 0, 1 and Var(D) = ψ - δ^2, so the alternative with the variance the runs
  show (or the assumption states) has ψ = Var(D) + mde^2 (:func:`mcnemar_discordance`; at least mde:
  every question that moves the score is discordant).
- **Otherwise the paired t test** on the per-question differences, Var = between + within / K: its
  power from the noncentral t distribution with n - 1 degrees of freedom (:func:`paired_t_power`).

Both are solved for n by bisection (:func:`questions_for_power`); each row carries the test and the
power it reaches at its n.  This module estimates the variances from stored scores
(:func:`paired_variances`, :func:`one_model_variances`) or states an assumption
(:func:`assumed_binary_variances`).  Pure: no I/O, no pytest; scipy is imported when a plan is made.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "DEFAULT_REPEATS",
    "PlanRow",
    "PlanTest",
    "Variances",
    "assumed_binary_variances",
    "mcnemar_discordance",
    "mcnemar_power",
    "one_model_variances",
    "paired_t_power",
    "paired_variances",
    "plan_rows",
    "questions_for",
    "questions_for_power",
    "z_total",
]

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
    # Every score 0 or 1: compare runs the exact McNemar test on questions asked once (plan_rows).
    binary: bool = False

    def total(self, repeats: int) -> float:
        """``Var(D_i)`` when each question is asked ``repeats`` times: between + within / K."""
        return self.between + self.within / repeats


PlanTest = Literal["mcnemar_exact", "paired_t"]


@dataclass(frozen=True)
class PlanRow:
    """One line of a plan: with ``repeats`` per question, ``questions`` are needed (``generations`` =
    questions x repeats per model) for ``test`` (the one compare runs) to reach the power asked:
    ``power`` is the power it has at that n; ``fits``: the task has that many questions (None: size unknown)."""

    repeats: int
    questions: int
    generations: int
    fits: bool | None
    test: PlanTest = "paired_t"
    power: float | None = None


def z_total(alpha: float, power: float) -> float:
    """``z_{1 - alpha/2} + z_{power}``, the standard normal quantiles from ``scipy.stats.norm.ppf``
    (2.8016 at alpha 0.05, power 0.80)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), not {alpha}")
    if not 0 < power < 1:
        raise ValueError(f"power must lie in (0, 1), not {power}")
    from scipy.stats import norm  # lazy: importing the module stays cheap

    z = float(norm.ppf(1 - alpha / 2) + norm.ppf(power))
    if not math.isfinite(z):  # 1 - alpha / 2 rounds to 1 below alpha ~ 2.2e-16
        raise ValueError(f"alpha {alpha} is too small: its normal quantile is infinite in floating point")
    return z


def questions_for(mde: float, variances: Variances, repeats: int, alpha: float = 0.05, power: float = 0.80) -> int:
    """Questions needed: ``ceil(z_total^2 * (between + within / K) / mde^2)``, at least 2 (a standard
    error needs two questions)."""
    if not mde > 0 or not math.isfinite(mde):
        raise ValueError(f"the difference to detect must be a number > 0, not {mde}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, not {repeats}")
    z = z_total(alpha, power)
    square = mde * mde
    if square == 0:  # underflows: no float number of questions would do
        raise ValueError(f"the difference to detect, {mde}, is too small to plan for")
    # Rounded before the ceiling so that float noise (a product that is an integer up to 1e-12)
    # does not add a question.
    return max(2, math.ceil(round(z * z * variances.total(repeats) / square, 9)))


def _rejection_bounds(n: int, alpha: float) -> Any:
    """For m = 0..n discordant questions, the largest c with 2 P(X <= c) < alpha, X ~ Binomial(m, 1/2)
    (-1: no outcome rejects): the two-sided exact test at p = 1/2 rejects when min(k, m - k) <= c.
    From the normal approximation, corrected by exact binomial tails (``scipy.special.bdtr``); memoised
    per alpha, since a plan asks for it at every step of its bisection."""
    import numpy as np
    from scipy import special

    known = _BOUNDS.get(alpha)
    if known is not None and len(known) > n:
        return known[: n + 1]
    m = np.arange(max(n + 1, 2 * len(known) if known is not None else 0, 64))
    # Started at -1 at the lowest: below it bdtr is nan, which would hold c under a bound of 0 at a
    # small alpha (m = 28 at alpha 1e-8); c never goes lower, since it moves down only from c >= 0.
    c = np.maximum(np.floor(m / 2 - _normal_quantile(1 - alpha / 2) * np.sqrt(m) / 2), -1)
    for _ in range(64):  # a few steps at most: the approximation is within one or two of the bound
        up = 2 * special.bdtr(c + 1, m, 0.5) < alpha
        down = (c >= 0) & ~(2 * special.bdtr(np.maximum(c, 0), m, 0.5) < alpha)
        if not up.any() and not down.any():
            break
        c = np.where(up, c + 1, np.where(down, c - 1, c))
    _BOUNDS[alpha] = c
    return c[: n + 1]


_BOUNDS: dict[float, Any] = {}


def _normal_quantile(level: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(level)


def mcnemar_discordance(variances: Variances, mde: float) -> float:
    """The discordance rate of the alternative a K = 1 plan sizes McNemar for: ``Var(D) + mde^2`` (on 0/1
    scores Var(D) = ψ - δ^2), at least ``mde`` and at most 1."""
    return min(1.0, max(variances.total(1) + mde * mde, mde))


def mcnemar_power(n: int, discordance: float, mde: float, alpha: float = 0.05) -> float:
    """The exact power of the two-sided exact McNemar test (``scipy.stats.binomtest`` of the questions
    only a gets right among the discordant ones, p = 1/2, rejecting at p < ``alpha``) on ``n`` questions
    when a share ``discordance`` of them is discordant and the true difference is ``mde``:
    ``sum_m Binom(m; n, ψ) P(reject | m)``, the questions only a gets right Binomial(m, (ψ + δ) / 2ψ).
    ψ below δ is raised to δ (every question that moves the score is discordant)."""
    if not 0 < mde <= 1 or not 0 <= discordance <= 1:
        raise ValueError(
            f"McNemar's power needs 0 < mde <= 1 and a discordance rate in [0, 1], not {mde}, {discordance}"
        )
    import numpy as np
    from scipy import special, stats

    psi = max(discordance, mde)
    # Only the discordant counts with any weight: within 12 SDs of n ψ (the rest weigh under 1e-30).
    spread = 12 * math.sqrt(n * psi * (1 - psi)) + 1
    lo, hi = max(0, math.floor(n * psi - spread)), min(n, math.ceil(n * psi + spread))
    m = np.arange(lo, hi + 1)
    c = _rejection_bounds(n, alpha)[lo : hi + 1]
    q = (psi + mde) / (2 * psi)
    # P(K <= c) + P(K >= m - c) for K ~ Binomial(m, q); bdtrc(k) is P(K > k).
    reject = np.where(c >= 0, special.bdtr(np.maximum(c, 0), m, q) + special.bdtrc(m - c - 1, m, q), 0.0)
    return float(np.sum(stats.binom.pmf(m, n, psi) * reject))


def paired_t_power(n: int, mde: float, variance: float, alpha: float = 0.05) -> float:
    """The power of the two-sided one-sample (paired) t test on ``n`` per-question differences of
    variance ``variance`` when their true mean is ``mde``: ``P(|T| > t_{1-alpha/2, n-1})`` for T
    noncentral t with n - 1 degrees of freedom and noncentrality ``mde sqrt(n / variance)``."""
    if n < 2:
        return 0.0
    if not variance > 0:
        return 1.0  # every question moves by the same amount: any n >= 2 shows it
    from scipy import stats

    df, nc = n - 1, mde * math.sqrt(n / variance)
    crit = float(stats.t.ppf(1 - alpha / 2, df))
    # The lower tail P(T < -crit) as P(T' > crit) for T' = -T, noncentral with -nc: scipy's nct.cdf is nan
    # far in that tail (n = 60, var 0.05, mde 0.25), which sent the bisection the wrong way.
    return float(stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc))


def questions_for_power(power_at: Callable[[int], float], target: float, start: int) -> tuple[int, float]:
    """The fewest questions (>= 2) at which ``power_at(n)`` reaches ``target``, by bisection from the
    normal approximation ``start`` (the power rises with n, up to the exact test's small steps), and the
    power there."""
    lo, hi = 1, max(2, start)
    # Checked before the power is computed there: McNemar's power at n holds n + 1 bounds in memory.
    if hi > 10**8:
        raise ValueError("the plan needs more than 100 million questions: detect a larger difference")
    while power_at(hi) < target:
        lo, hi = hi, hi * 2
        if hi > 10**8:
            raise ValueError("the plan needs more than 100 million questions: detect a larger difference")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if power_at(mid) >= target:
            hi = mid
        else:
            lo = mid
    return hi, power_at(hi)


def plan_rows(
    mde: float,
    variances: Variances,
    task_questions: int | None,
    repeats: Sequence[int] = DEFAULT_REPEATS,
    alpha: float = 0.05,
    power: float = 0.80,
) -> list[PlanRow]:
    """One :class:`PlanRow` per repeat count, each sized for the test compare runs (module docstring) and
    checked against the task's size: exact McNemar at K = 1 when the scores are 0/1 (``binary``), with
    the discordance rate :func:`mcnemar_discordance`, else the paired t test."""
    rows = []
    for k in repeats:
        start = questions_for(mde, variances, k, alpha, power)
        test: PlanTest
        if k == 1 and variances.binary:
            psi = mcnemar_discordance(variances, mde)
            test, (n, reached) = (
                "mcnemar_exact",
                questions_for_power(lambda n: mcnemar_power(n, psi, mde, alpha), power, start),  # noqa: B023 - called within this iteration
            )
        else:
            var = variances.total(k)
            test, (n, reached) = (
                "paired_t",
                questions_for_power(lambda n: paired_t_power(n, mde, var, alpha), power, start),  # noqa: B023 - called within this iteration
            )
        rows.append(
            PlanRow(
                repeats=k,
                questions=n,
                generations=n * k,
                test=test,
                power=reached,
                fits=None if task_questions is None else n <= task_questions,
            )
        )
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


def paired_variances(
    a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]], label: str = "a vs b"
) -> Variances:
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
    binary = all(v in (0.0, 1.0) for q in common for v in (*a[q], *b[q]))
    if not asked_again:
        return Variances(
            between=_var(diffs),
            within=0.0,
            within_measured=False,
            questions=len(common),
            repeats=k,
            binary=binary,
            source=f"measured: paired difference {label} on {len(common)} questions asked once "
            "(the within-question part cannot be told apart: counted as between, so repeats "
            "are assumed to average nothing away)",
        )
    within = _mean([sa[0] + sb[0] for sa, sb in spreads])
    left = _mean([sa[1] + sb[1] for sa, sb in spreads])
    return Variances(
        between=max(_var(diffs) - left, 0.0),
        within=within,
        questions=len(common),
        repeats=k,
        binary=binary,
        source=f"measured: paired difference {label} on {len(common)} questions, up to {k} repeats each",
    )


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
    binary = all(v in (0.0, 1.0) for q in asked for v in scores[q])
    assumption = f"{label}'s per-question variance on {len(asked)} questions, doubled for a second, independent model"
    if not all(len(scores[q]) > 1 for q in asked):
        return Variances(
            between=2 * _var(means),
            within=0.0,
            within_measured=False,
            questions=len(asked),
            repeats=k,
            binary=binary,
            source=f"measured and assumed: {assumption} (questions asked once: the within-question "
            "part cannot be told apart, counted as between)",
        )
    within = 2 * _mean([s[0] for s in spreads])
    between = 2 * max(_var(means) - _mean([s[1] for s in spreads]), 0.0)
    return Variances(
        between=between,
        within=within,
        questions=len(asked),
        repeats=k,
        binary=binary,
        source=f"measured and assumed: {assumption}, up to {k} repeats each",
    )


def assumed_binary_variances() -> Variances:
    """No runs to measure: the cautious case for a 0/1 score.  Each model right with probability 1/2 on
    each answer, the two models independent: ``Var(a - b) = 1/4 + 1/4 = 1/2`` per question asked once,
    the most a 0/1 score allows for independent models.  How it splits between questions and repeats is
    unknown, so all of it is counted as between-question (repeats are assumed to average nothing away)."""
    return Variances(
        between=0.5,
        within=0.0,
        within_measured=False,
        binary=True,
        source="assumed (no runs given): 0/1 scores, each model right with probability 0.5 on each "
        "answer, independent models: Var(difference) = 0.5 per question, all of it counted as "
        "between-question (repeats assumed to help nothing); measure it with --from RUN",
    )
