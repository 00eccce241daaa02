"""How much of a task's score variance across specifications each field explains.

The scores of one model across a factorial of specifications are split the way a factorial ANOVA
splits them (with one observation per cell; e.g. Montgomery, *Design and Analysis of Experiments*,
ch. 5), by marginal means:

- grand mean ``m``; main effect of field ``f`` at the specification's level ``v``:
  ``mean(y | f = v) - m``; ``SS_f`` = the sum over specifications of its square;
- two-way interaction of ``f`` and ``g``: ``mean(y | f = v, g = w) - m - effect_f(v) - effect_g(w)``,
  ``SS_fg`` the sum of its squares;
- ``SS_total`` = the sum of ``(y - m)^2``; what the main effects and two-way interactions leave is the
  higher-order interactions (three fields or more), ``SS_higher``.

In a full factorial these terms are orthogonal: they are the sums of squares statsmodels' ``anova_lm``
gives for ``y ~ C(f) + C(g) + ... + C(f):C(g) + ...`` (tests/multiverse checks it), and they add up to
``SS_total``.  A field's share is its main effect plus half of each two-way interaction it is in, over
``SS_total``; with the higher-order share the shares add to 100%, and a field whose values all read
the answers alike gets 0.  Several models are pooled by summing each term's SS over the models (each
centred on its own mean: a model's level is no field's doing).

On a sample of a larger factorial the marginal means are no longer orthogonal: the same formulas
give estimates, marked ``exact = False``, whose shares need not add to 100%.

Pure: numpy only, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from numpy.typing import NDArray

__all__ = ["Decomposition", "decompose"]


@dataclass(frozen=True)
class Decomposition:
    """Sums of squares of one task's scores across specifications (pooled over the models given)."""

    fields: tuple[str, ...]  # the fields that vary (two or more values)
    total: float
    main: dict[str, float]
    interactions: dict[tuple[str, str], float]

    @property
    def higher_order(self) -> float:
        return self.total - sum(self.main.values()) - sum(self.interactions.values())

    def share(self, ss: float) -> float:
        """``ss`` over the total (0 without variance; a rounding residue below 1e-12 of the total is 0)."""
        if self.total <= 0:
            return 0.0
        value = ss / self.total
        return 0.0 if abs(value) < 1e-12 else value

    def field_share(self, name: str) -> float:
        """The field's main effect plus half of each two-way interaction it is in, over the total."""
        half = sum(ss for pair, ss in self.interactions.items() if name in pair) / 2
        return self.share(self.main[name] + half)


def decompose(
    levels: Sequence[Sequence[int]], ys: Sequence[Sequence[float]], fields: Sequence[str], n_levels: Sequence[int]
) -> Decomposition:
    """The decomposition (module docstring) of ``ys`` (one list per model, one score per specification,
    aligned with ``levels``: each specification's value index per field of ``fields``, a field having
    ``n_levels`` values).  Fields with one value are left out: they explain nothing."""
    varying = [j for j, n in enumerate(n_levels) if n > 1]
    names = tuple(fields[j] for j in varying)
    main = dict.fromkeys(names, 0.0)
    inter = {(fields[j], fields[k]): 0.0 for j, k in combinations(varying, 2)}
    total = 0.0
    lv = np.asarray(levels, dtype=np.int64).reshape(len(levels), len(fields))
    for y_list in ys:
        y = np.asarray(y_list, dtype=float)
        if y.size == 0:
            continue
        dev = y - y.mean()
        total += float(dev @ dev)
        effects = {}
        for j in varying:
            effects[j] = _effect(lv[:, j], dev, n_levels[j])
            main[fields[j]] += float(effects[j] @ effects[j])
        for j, k in combinations(varying, 2):
            cell = _effect(lv[:, j] * n_levels[k] + lv[:, k], dev, n_levels[j] * n_levels[k])
            term = cell - effects[j] - effects[k]
            inter[(fields[j], fields[k])] += float(term @ term)
    return Decomposition(names, total, main, inter)


def _effect(index: NDArray[np.int64], dev: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    """Per specification, the mean deviation of its level of ``index`` (the marginal mean minus the grand mean)."""
    sums = np.bincount(index, weights=dev, minlength=n)
    counts = np.bincount(index, minlength=n)
    means: NDArray[np.float64] = np.divide(sums, counts, out=np.zeros(n), where=counts > 0)
    return means[index]
