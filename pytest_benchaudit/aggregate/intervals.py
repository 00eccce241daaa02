"""The 95% intervals of a headline over questions, plain and clustered (docs/statistics.md).

Which interval a summary row gets depends on what its per-question scores are (``method`` names it):

- ``wilson``: every per-question score is 0 or 1 (a 0/1 metric asked once, or reduced to verdicts):
  Wilson's score interval on the n questions (Wilson 1927).
- ``wilson_effective_n``: a *share* (a higher-is-better metric whose per-question scores all lie in
  [0, 1]: means of K repeats, partial credit) and every clustered interval of a share: Wilson's
  interval on an effective number of trials ``n_eff = min(N, p (1 - p) / se^2)``, where N is the
  number of records the headline averages (its Bernoulli trials; the n questions when their scores
  are 0/1) and se the headline's standard error: Kish's design effect, ``n_eff = N / deff``,
  floored at deff = 1, since a record cannot count for more than one trial.  The quantile is Student's t with the standard error's degrees of freedom
  instead of z (Korn & Graubard 1998; the same as Wilson with z on ``n_eff (z / t)^2``).  It lies in
  [0, 1] and has a positive width for every finite N, whatever the scores.
- ``student_t`` / ``cluster_t``: any other metric (an error in its own unit, a share with a score
  outside [0, 1]): ``mean -/+ t se``; none (``None``) where no spread can be measured (under two
  questions, or every question scoring the same): no interval rather than one of zero width.

**Clustered** (``aggregation.by``: questions in G groups): ``se`` = the CR1 cluster-robust standard
error (:func:`.repeats.clustered_se`) and t with G - 1 degrees of freedom, as inspect_ai's clustered
``stderr`` and statsmodels' cluster-robust covariance do.  The interval uses the larger of the CR1 and
the plain standard error (the rule of Angrist & Pischke 2009, section 8.2: from few groups CR1 is a
noisy estimate that can come out below the plain one), so a clustered interval always contains the
plain one of the same row, and groups of size 1 give the plain interval's width back (or a little more).

Pure: no I/O; the t quantile comes from ``scipy.special.stdtrit`` (imported when a t is needed).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Literal

from pytest_benchaudit.aggregate.repeat_stats import Z95, clt_se, clustered_se

__all__ = [
    "IntervalMethod",
    "METHOD_TEXT",
    "Interval",
    "effective_n",
    "headline_interval",
    "clustered_interval",
    "is_share_scores",
    "t_quantile",
    "wilson",
]

IntervalMethod = Literal["wilson", "wilson_effective_n", "student_t", "cluster_t"]

#: What each method is, in words (the terminal's legend, the HTML report, a gate's message).
METHOD_TEXT: dict[str, str] = {
    "wilson": "Wilson on the 0/1 question scores",
    "wilson_effective_n": "Wilson on the design-effect n, t quantile",
    "student_t": "mean ± t(n-1) se",
    "cluster_t": "mean ± t(G-1) clustered se",
}

Interval = tuple[list[float] | None, IntervalMethod | None]


def t_quantile(df: int | None, level: float = 0.975) -> float:
    """Student's t quantile with ``df`` degrees of freedom; the normal one when ``df`` is None."""
    if df is None:
        return Z95 if level == 0.975 else _normal_quantile(level)
    if df < 1:
        raise ValueError(f"a t quantile needs at least 1 degree of freedom, not {df}")
    from scipy.special import stdtrit  # lazy: a light import, and only summaries need it

    return float(stdtrit(df, level))


def _normal_quantile(level: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(level)


def wilson(p: float, n: float, q: float = Z95) -> list[float]:
    """Wilson's score interval of a share ``p`` on ``n`` trials (``n`` may be fractional: an effective
    n) with quantile ``q``: the shares π with ``(p - π)^2 <= q^2 π (1 - π) / n``, rounded to 6 places."""
    if not n > 0:
        raise ValueError(f"a Wilson interval needs n > 0, not {n}")
    q2 = q * q
    centre = (p + q2 / (2 * n)) / (1 + q2 / n)
    half = q * math.sqrt(max(p * (1 - p), 0.0) / n + q2 / (4 * n * n)) / (1 + q2 / n)
    return [round(max(0.0, centre - half), 6), round(min(1.0, centre + half), 6)]


def effective_n(p: float, se: float | None, units: int) -> float:
    """``min(units, p (1 - p) / se^2)``: the trials a share ``p`` with standard error ``se`` is worth
    (Kish's ``N / deff`` with deff floored at 1); ``units`` when ``se`` is unknown or 0, or ``p`` is 0 or 1."""
    spread = p * (1 - p)
    if se is None or not se > 0 or not spread > 0:
        return float(units)
    return min(float(units), spread / (se * se))


def is_share_scores(values: Sequence[float], lower_is_better: bool) -> bool:
    """True for a higher-is-better metric whose per-question scores all lie in [0, 1]."""
    return not lower_is_better and all(0.0 <= v <= 1.0 for v in values)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def headline_interval(values: Sequence[float], share: bool, units: int | None = None) -> Interval:
    """The plain 95% interval over the questions (treated as independent) and its method (module
    docstring); ``(None, None)`` without a question.  ``share``: :func:`is_share_scores`; ``units``:
    the records behind the headline (default: one per question)."""
    n = len(values)
    if n == 0:
        return None, None
    mean = _mean(values)
    if share and all(v in (0.0, 1.0) for v in values):
        return wilson(mean, n), "wilson"
    se = clt_se(values)
    if share:
        # One question: its records alone (z); else the questions' spread with n - 1 degrees of freedom.
        q = t_quantile(n - 1 if n >= 2 else None)
        return wilson(mean, effective_n(mean, se, max(units or n, 1)), q), "wilson_effective_n"
    if se is None or not se > 0:
        return None, None
    half = t_quantile(n - 1) * se
    return [round(mean - half, 6), round(mean + half, 6)], "student_t"


def clustered_interval(
    values: Sequence[float], clusters: Sequence[Hashable], share: bool, units: int | None = None
) -> Interval:
    """The 95% interval clustered by ``clusters`` (one per value) and its method (module docstring):
    the larger of the CR1 and the plain standard error, t with G - 1 degrees of freedom.
    ``(None, None)`` under two groups (no clustered standard error) or, on a metric that is not a
    share, when no spread can be measured."""
    n = len(values)
    groups = len(set(clusters))
    se_cluster = clustered_se(values, clusters)
    if se_cluster is None or groups < 2:
        return None, None
    se = max(se_cluster, clt_se(values) or 0.0)
    mean = _mean(values)
    q = t_quantile(groups - 1)
    if share:
        # 0/1 question scores are n trials (the plain interval's Wilson on n), whatever the records behind them.
        cap = n if all(v in (0.0, 1.0) for v in values) else max(units or n, 1)
        return wilson(mean, effective_n(mean, se, cap), q), "wilson_effective_n"
    if not se > 0:
        return None, None
    return [round(mean - q * se, 6), round(mean + q * se, 6)], "cluster_t"
