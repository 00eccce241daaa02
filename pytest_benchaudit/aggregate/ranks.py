"""Model ranks per task and rank agreement (Kendall tau-b) between tasks.

Shared by the pytest run's summary (two or more ``--model``) and ``benchaudit compare``; pure.
Conventions: 1 = best, direction-aware (``lib[key]`` is true when lower scores are better, as for
MAD), ties averaged; tau-b only for task pairs scored on at least 3 common models.
"""

from __future__ import annotations

from pytest_benchaudit.aggregate import stats
from pytest_benchaudit.aggregate.summary_documents import TauRow

__all__ = ["task_ranks", "tau_b_table"]


def task_ranks(scores: dict[str, dict[str, float]], lib: dict[str, bool]) -> dict[str, dict[str, float]]:
    """{task key: {model: rank}}: 1 = best, direction-aware (``lib``: lower is better), ties averaged."""
    out: dict[str, dict[str, float]] = {}
    for key, by_model in scores.items():
        models = list(by_model)
        ranks = list(stats.rank_scores([by_model[m] for m in models], lib[key])) if models else []
        out[key] = {m: float(r) for m, r in zip(models, ranks)}
    return out


def tau_b_table(scores: dict[str, dict[str, float]], lib: dict[str, bool]) -> list[TauRow]:
    """Kendall tau-b and inversions for every pair of tasks scored on at least 3 common models."""
    keys = sorted(scores)
    rows: list[TauRow] = []
    for i, ka in enumerate(keys):
        for kb in keys[i + 1 :]:
            common = sorted(set(scores[ka]) & set(scores[kb]))
            if len(common) < 3:
                continue
            xa = stats.orient([scores[ka][m] for m in common], lib[ka])
            xb = stats.orient([scores[kb][m] for m in common], lib[kb])
            rows.append({"task_a": ka, "task_b": kb, **stats.kendall_tau_b(xa, xb)})
    return rows
