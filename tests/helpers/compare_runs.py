"""Hand-made run sets for the ``benchaudit compare`` tests: five models whose ranks move between sets in
known ways (the sensitivity sets), and sets of two benchmarks whose tasks share long instructions (the
similarity sets)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np

from pytest_benchaudit.testing.runs import write_run_dir

# --------------------------------------------------------------------------- the sensitivity sets

MODELS = ["m1", "m2", "m3", "m4", "m5"]
TASKS = {"x": "Which port does SSH listen on?", "y": "Map this CVE description to its CWE."}
N = 20


def toy_records(model: str, k: int, pipeline: str, upstream: str, raw: str) -> list[dict[str, Any]]:
    """N questions per task; the first ``k`` are correct."""
    out = []
    for task, text in TASKS.items():
        for i in range(N):
            out.append(
                {
                    "benchmark": "toy",
                    "task": task,
                    "question_id": f"{task}{i:02d}",
                    "model": model,
                    "variant": "",
                    "pipeline": pipeline,
                    "pipeline_hash": f"{pipeline}-{upstream}",
                    "upstream_hash": upstream,
                    "request": {"messages": [{"role": "user", "content": f"{text} #{i}"}]},
                    "raw_output": f"{raw} {model} {i}",
                    "valid": True,
                    "correct": i < k,
                    "score": 1.0 if i < k else 0.0,
                    "invalid_reason": None,
                }
            )
    return out


def run_set(
    root: Path,
    name: str,
    ks: list[int],
    pipeline: str,
    upstream: str,
    raw: str,
    rule: str = "final_answer_letter",
    denominator: str = "total",
    extra: dict[str, Any] | None = None,
) -> Path:
    """Five runs (m1..m5, m_i answering ``ks[i]`` questions per task right) under ``root/name``."""
    folder = root / name
    cards = {
        f"toy.{t}": {
            "fields": {
                "scoring.denominator": denominator,
                "scoring.metric": "exact_match",
                "aggregation.method": "macro",
                "extraction.rule": rule,
                "inference.max_tokens": 16 if upstream == "u1" else 4,
                **(extra or {}),
            }
        }
        for t in TASKS
    }
    for model, k in zip(MODELS, ks):
        run_dir = write_run_dir(folder, model, toy_records(model, k, pipeline, upstream, raw))
        (run_dir / "run.json").write_text(json.dumps({"run_id": model, "pipeline_cards": cards}))
    return folder


def sensitivity_sets(tmp_path: Path) -> dict[str, Path]:
    """Four sets of five runs each against a base set: re-scored, re-scored under another denominator too,
    and regenerated under another token budget."""
    return {
        "base": run_set(tmp_path, "base", [18, 15, 12, 9, 6], "released", "u1", "out"),
        # same outputs re-scored under another extraction rule: m4 and m5 swap (its cards also name a
        # field the base's cards, written before the field existed, do not: no evidence of a change)
        "rescored": run_set(
            tmp_path,
            "rescored",
            [18, 15, 12, 6, 9],
            "standardized",
            "u1",
            "out",
            rule="last_line_letter",
            extra={"scoring.invalid_credit": 0.0},
        ),
        # same outputs, another rule and another denominator: m3 and m4 swap too
        "downstream": run_set(
            tmp_path,
            "downstream",
            [18, 15, 9, 6, 12],
            "standardized",
            "u1",
            "out",
            rule="last_line_letter",
            denominator="valid",
        ),
        # new generations under another token budget: the order reverses
        "regenerated": run_set(tmp_path, "regen", [6, 9, 12, 15, 18], "short", "u2", "new"),
    }


# --------------------------------------------------------------------------- the similarity sets

N_QUESTIONS = 60  # more than the 50 questions sampled per task
INSTRUCTION = {  # a long shared instruction per task, as AthenaBench's prompts have
    "alpha.t1": "Analyze the following CVE description and calculate the CVSS v3.1 base vector.\nValid options: "
    "AV N A L P; AC L H.\nThe final line must be 'Answer: CVSS:3.1/...'.",
    "alpha.t2": "Analyze the following CVE description and map it to its CWE.\nThe final line must be 'Answer: CWE-n'.",
    "alpha.t3": "Attribute the following threat report to a threat actor.\nThe final line must be 'Answer: NAME'.",
    "alpha.t4": "Choose the best option of the multiple-choice question below.\nThe final line must be 'Answer: X'.",
    "beta.t1": "You are a CTI analyst. Compute the CVSS vector for this CVE: ",
    "beta.t2": "You are a CTI analyst. Name the CWE of this CVE: ",
    "beta.t3": "You are a CTI analyst. Which threat actor wrote this report? ",
}
TOPIC = {
    "t1": "buffer overflow remote network attack privileges",
    "t2": "injection input validation weakness",
    "t3": "phishing campaign actor espionage implant",
    "t4": "firewall port protocol encryption policy",
}


def prompt_text(key: str, i: int) -> str:
    """Question ``i`` of task ``key``: its task's shared instruction around a few topic words."""
    words = TOPIC[key.split(".")[1]].split()
    content = " ".join(words[(i + j) % len(words)] for j in range(6)) + f" case {i}"
    sep = "\n\nCVE Description:\n" if key.startswith("alpha") else ""
    return f"{INSTRUCTION[key]}{sep}{content}\n" if key.startswith("alpha") else f"{INSTRUCTION[key]}{content}  End."


def write_similarity_set(
    root: Path, models: dict[str, list[str]], seed: int, shuffle: bool = False, reverse: bool = False
) -> Path:
    """One run directory per (benchmark, model); model k of a task answers its first k_i questions right."""
    rng = np.random.default_rng(seed)
    cards: dict[str, Any] = {}
    for key in INSTRUCTION:
        cards[key] = {
            "fields": {
                "scoring.denominator": "total",
                "scoring.metric": "exact_match",
                "aggregation.method": "macro",
                "extraction.rule": "final_answer_letter",
            }
        }
    # drawn in one fixed order, so that writing the runs in another order writes the same runs
    right = {k: dict(zip(models[k.split(".")[0]], (int(x) * 7 + 10 for x in rng.permutation(5)))) for k in INSTRUCTION}
    for bench, names in sorted(models.items(), reverse=reverse):
        keys = [k for k in INSTRUCTION if k.startswith(bench + ".")]
        for model in list(reversed(names)) if reverse else names:
            recs = []
            for key in keys:
                task = key.split(".")[1]
                for i in range(N_QUESTIONS):
                    ok = i < right[key][model]
                    recs.append(
                        {
                            "benchmark": bench,
                            "task": task,
                            "question_id": f"{task}-{i:03d}",
                            "model": model,
                            "variant": "",
                            "pipeline": "released",
                            "pipeline_hash": "h",
                            "upstream_hash": "u",
                            "request": {"messages": [{"role": "user", "content": prompt_text(key, i)}]},
                            "raw_output": f"out {i}",
                            "valid": True,
                            "correct": ok,
                            "score": float(ok),
                            "invalid_reason": None,
                        }
                    )
            if shuffle:
                random.Random(seed).shuffle(recs)
            run_dir = write_run_dir(root, f"{bench}-{model}", recs)
            (run_dir / "run.json").write_text(json.dumps({"run_id": f"{bench}-{model}", "pipeline_cards": cards}))
    return root


SHARED = {"alpha": ["m1", "m2", "m3", "m4", "m5"], "beta": ["m1", "m2", "m3", "m4", "m5"]}
