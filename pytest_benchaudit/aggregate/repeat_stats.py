"""Repeated generations and error bars: the reducers, standard errors and power of docs/statistics.md.

``inference.repeats = K`` asks each question K times.  A question's K scores become its one score
by ``aggregation.reducer`` (:func:`reduce_scores`); the headline is the mean of those per-question
scores, and its standard errors are over questions (Miller 2024, "Adding Error Bars to Evals").

Pure: no I/O, no pytest; plain floats (numpy-free) except :func:`paired_difference`, which takes
scipy's exact binomial and paired t tests.  Every function states the formula it computes;
docs/statistics.md gives the references and when each number is the one to read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any, Literal, NotRequired

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

__all__ = [
    "REDUCERS",
    "Reducer",
    "reduce_scores",
    "reduce_verdicts",
    "expected_best_of_k",
    "pass_at_k",
    "clt_se",
    "clustered_se",
    "sampling_sd",
    "retest_agreement",
    "normal_ci",
    "paired_difference",
    "mde80",
    "questions_needed",
    "Z95",
    "Z80",
    "PairedDifference",
    "PairedTest",
]

Reducer = Literal["mean", "majority", "any", "all"]
REDUCERS: tuple[Reducer, ...] = ("mean", "majority", "any", "all")

# Standard normal quantiles: 0.975 (two-sided 95%) and 0.80 (80% power).
Z95 = NormalDist().inv_cdf(0.975)
Z80 = NormalDist().inv_cdf(0.80)


def expected_best_of_k(values: Sequence[float], k: int) -> float:
    """The expected largest of ``k`` values drawn without replacement from ``values`` (an unbiased
    estimate of the best of k fresh samples): with ``x(1) <= ... <= x(n)`` sorted,
    ``sum_{i=k..n} C(i-1, k-1) / C(n, k) * x(i)``.  On 0/1 values it is pass@k (:func:`pass_at_k`)."""
    x = sorted(values)
    n = len(x)
    if not 1 <= k <= n:
        raise ValueError(f"best of k needs 1 <= k <= n, not k = {k}, n = {n}")
    total = math.comb(n, k)
    return sum(math.comb(i - 1, k - 1) * x[i - 1] for i in range(k, n + 1)) / total


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. (2021)'s unbiased pass@k from ``n`` samples of which ``c`` are correct:
    ``1 - C(n-c, k) / C(n, k)``."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, not n = {n}, c = {c}, k = {k}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def reduce_scores(
    values: Sequence[float], reducer: Reducer, lower_is_better: bool = False, k: int | None = None
) -> float:
    """One question's score from its repeats' scores.

    ``mean``: the mean.  ``majority``: the lower median of the values oriented better-is-larger (on
    0/1 scores: 1 only when more than half are correct, so a tie is not a majority).  ``any``: the
    expected best of ``k`` repeats (:func:`expected_best_of_k`; k = all repeats by default, or
    fewer repeats when a question has fewer), pass@k on 0/1 scores.  ``all``: the expected worst of
    ``k`` (on 0/1 scores: every one of k correct, ``C(c, k) / C(n, k)``).
    """
    if not values:
        raise ValueError("a question with no scores cannot be reduced")
    sign = -1.0 if lower_is_better else 1.0
    oriented = [sign * v for v in values]
    if reducer == "mean":
        return sum(values) / len(values)
    if reducer == "majority":
        return sign * sorted(oriented)[(len(oriented) - 1) // 2]
    kk = min(k or len(values), len(values))
    if reducer == "any":
        return sign * expected_best_of_k(oriented, kk)
    if reducer == "all":
        return -sign * expected_best_of_k([-v for v in oriented], kk)
    raise ValueError(f"unknown reducer {reducer!r}; one of {', '.join(REDUCERS)}")


def reduce_verdicts(correct: Sequence[bool], reducer: Reducer) -> bool:
    """A question's pass/fail from its K verdicts: ``any`` one correct, ``all`` correct, else
    (``mean``, ``majority``) more than half correct."""
    c = sum(1 for v in correct if v)
    if reducer == "any":
        return c > 0
    if reducer == "all":
        return c == len(correct) > 0
    return 2 * c > len(correct)


def _sd(values: Sequence[float]) -> float:
    n = len(values)
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def clt_se(values: Sequence[float]) -> float | None:
    """The CLT standard error of a mean over questions: ``s / sqrt(n)``, ``s`` the sample SD
    (ddof 1); ``None`` under two questions."""
    if len(values) < 2:
        return None
    return _sd(values) / math.sqrt(len(values))


def clustered_se(values: Sequence[float], clusters: Sequence[Any]) -> float | None:
    """The CR1 cluster-robust standard error of a mean over questions in groups (``aggregation.by``):
    ``sqrt(G / (G - 1) * sum_c (sum_{i in c} (s_i - m))^2) / n`` over the G groups c.

    Miller (2024) eq. 4 with the small-sample correction G / (G - 1) (Liang & Zeger 1986; what
    inspect_ai's clustered ``stderr`` and statsmodels' cluster-robust covariance of an intercept-only
    regression compute): without it, 5 or 10 groups give intervals that cover 84-90% instead of 95%.
    Groups of one question each give :func:`clt_se` exactly.  ``None`` under two questions or two groups.
    """
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sums: dict[Any, float] = {}  # group -> sum of its questions' deviations from the mean
    for v, c in zip(values, clusters):
        sums[c] = sums.get(c, 0.0) + (v - mean)
    groups = len(sums)
    if groups < 2:
        return None
    var = groups / (groups - 1) * sum(s * s for s in sums.values()) / (n * n)
    return math.sqrt(var)


def sampling_sd(per_repeat_headlines: Sequence[float]) -> float | None:
    """The SD (ddof 1) of the headline computed once per repeat index; ``None`` under two repeats."""
    if len(per_repeat_headlines) < 2:
        return None
    return _sd(per_repeat_headlines)


def retest_agreement(verdicts_per_question: Sequence[Sequence[bool]]) -> float | None:
    """The share of questions (asked at least twice) whose verdicts all agree; ``None`` when none was."""
    asked = [v for v in verdicts_per_question if len(v) >= 2]
    if not asked:
        return None
    return sum(1 for v in asked if len(set(v)) == 1) / len(asked)


def normal_ci(centre: float | None, se: float | None) -> list[float] | None:
    """``centre -/+ 1.96 se`` (rounded to 6 places like the other intervals); ``None`` without both."""
    if centre is None or se is None:
        return None
    return [round(centre - Z95 * se, 6), round(centre + Z95 * se, 6)]


PairedTest = Literal["mcnemar_exact", "paired_t", "clustered_t"]


@with_config(ConfigDict(extra="forbid"))
class PairedDifference(TypedDict):
    """:func:`paired_difference`: model a minus model b on the same questions (``None`` while
    fewer than two questions, or two groups, leave it undefined; ``test`` is then ``None`` too)."""

    n: int
    diff: float | None
    se: float | None
    ci95: list[float] | None
    p_value: float | None
    test: PairedTest | None
    mde80: float | None
    discordant: NotRequired[list[int]]  # 0/1 scores: [only a right, only b right]
    n_groups: NotRequired[int]  # clustered: the groups among the common questions
    # clustered: the CR1 standard error of diff (se is the larger of it and SD(d)/sqrt(n))
    se_clustered: NotRequired[float | None]


def paired_difference(
    a: Sequence[float], b: Sequence[float], binary: bool, clusters: Sequence[Any] | None = None
) -> PairedDifference:
    """Model a minus model b on the same questions (Miller 2024, section 4).

    ``diff`` = mean of ``d_i = a_i - b_i``.  Questions treated as independent (``clusters`` None):
    ``se`` = SD(d) / sqrt(n) (ddof 1), ``ci95`` = diff -/+ 1.96 se; ``p_value`` on 0/1 scores the
    exact McNemar test (``scipy.stats.binomtest`` of the questions only a gets right among the
    discordant ones, p = 1/2), otherwise the paired t test (``scipy.stats.ttest_rel``); ``mde80``:
    :func:`mde80` of the observed SD(d).

    Questions in groups (``clusters``, one key per question: ``aggregation.by``), whatever the scores:
    the ``clustered_t`` test.  ``se`` = the larger of the CR1 clustered SE of d (:func:`clustered_se`,
    ``se_clustered``) and SD(d) / sqrt(n); t = diff / se with G - 1 degrees of freedom for the
    two-sided p-value and ``ci95`` = diff -/+ t_{0.975, G-1} se; ``mde80`` = (t_{0.975, G-1} +
    t_{0.80, G-1}) se.  A difference shared by the questions of a group is one observation, not
    many: McNemar and the paired t count it once per question and reject a true null far too often.
    """
    if len(a) != len(b):
        raise ValueError("paired difference: the two models need scores on the same questions")
    if clusters is not None and len(clusters) != len(a):
        raise ValueError("paired difference: one cluster per question is needed")
    n = len(a)
    d = [x - y for x, y in zip(a, b)]
    test: PairedTest = "clustered_t" if clusters is not None else "mcnemar_exact" if binary else "paired_t"
    out: PairedDifference = {
        "n": n,
        "diff": sum(d) / n if n else None,
        "se": None,
        "ci95": None,
        "p_value": None,
        "test": None,
        "mde80": None,
    }
    if binary:
        out["discordant"] = [sum(1 for x, y in zip(a, b) if x > y), sum(1 for x, y in zip(a, b) if y > x)]
    if clusters is not None:
        out["n_groups"] = len(set(clusters))
        out["se_clustered"] = clustered_se(d, clusters)
    if n < 2 or (clusters is not None and out["se_clustered"] is None):
        return out  # no test: too few questions (or groups) to measure a spread
    sd = _sd(d)
    diff = float(out["diff"] or 0.0)
    out["test"] = test
    from scipy import stats  # lazy: a summary without comparisons never needs it

    if clusters is not None:
        df = out["n_groups"] - 1
        se = max(float(out["se_clustered"] or 0.0), sd / math.sqrt(n))
        q = float(stats.t.ppf(0.975, df))
        out["se"] = se
        out["ci95"] = [round(diff - q * se, 6), round(diff + q * se, 6)]
        out["mde80"] = (q + float(stats.t.ppf(0.80, df))) * se
        out["p_value"] = (1.0 if diff == 0 else 0.0) if se == 0 else float(2 * stats.t.sf(abs(diff) / se, df))
        return out
    out["se"] = sd / math.sqrt(n)
    out["ci95"] = normal_ci(diff, out["se"])
    out["mde80"] = mde80(sd, n)
    if binary:
        only_a, only_b = out["discordant"]
        out["p_value"] = 1.0 if only_a + only_b == 0 else float(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue)
    elif sd == 0:
        out["p_value"] = 1.0 if diff == 0 else 0.0  # every question moved by the same amount
    else:
        out["p_value"] = float(stats.ttest_rel(a, b).pvalue)
    return out


def mde80(sd_diff: float, n: int) -> float:
    """The smallest true mean difference a two-sided 5% test detects with 80% power on ``n`` paired
    questions whose differences have SD ``sd_diff``: ``(z_0.975 + z_0.80) * sd_diff / sqrt(n)``."""
    return (Z95 + Z80) * sd_diff / math.sqrt(n)


def questions_needed(mde: float, var_between: float, var_within: float, repeats: int) -> int:
    """Questions a paired comparison needs to detect ``mde`` at 5% (two-sided) with 80% power when
    each question is asked ``repeats`` times: ``ceil((z_0.975 + z_0.80)^2 * (var_between +
    var_within / K) / mde^2)``.  ``var_between``: the variance of the per-question difference of
    the two models' expected scores; ``var_within``: the variance of one repeat's difference around
    it (what K repeats average away)."""
    if mde <= 0:
        raise ValueError(f"the difference to detect must be > 0, not {mde}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, not {repeats}")
    var = var_between + var_within / repeats
    return max(2, math.ceil((Z95 + Z80) ** 2 * var / (mde * mde)))
