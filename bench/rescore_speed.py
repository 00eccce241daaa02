"""Offline re-scoring speed: `benchaudit rescore` on 100,000 records (target: <= 10 s).

Builds a run directory of N records in the real record format: the real SecEval
questions (cycled) with the exact standardized requests, and a mix of model answers
(reasoning spans, multi-letter answers, unreadable and truncated ones); then times the
whole `benchaudit rescore RUN --set scoring.denominator=valid` process, median of --repeats.

    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/rescore_speed.py --records 100000
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_benchaudit.dataset.readers import load_questions, resolve_data_dir
from pytest_benchaudit.dataset.suites import load_suite
from pytest_benchaudit.pipeline.types import Generation
from pytest_benchaudit.prompt.templates import render_request
from pytest_benchaudit.scoring.evaluate import evaluate

ANSWERS = [
    "<think>A or C?</think>\nAnswer: AC",
    "Answer: B",
    "I think B and D.\nAnswer: BD",
    "no idea",
    "Let me think step by step",
    "Answer: A",
]


def make_run(root: Path, n: int) -> Path:
    suite = load_suite(REPO / "suites" / "seceval" / "suite.toml")
    pipe = suite.pipeline("mcq", "standardized")
    data_dir, origin = resolve_data_dir(None)
    questions, _ = load_questions(suite, "mcq", data_dir, origin)
    template = suite.templates[pipe.prompt.template]
    run = root / "run"
    run.mkdir()
    rng = random.Random(0)
    with (run / "records.jsonl").open("w") as fh:
        for i in range(n):
            q = questions[i % len(questions)].model_copy(update={"id": f"q{i}", "index": i})
            request = render_request(pipe, template, q)
            gen = Generation(text=rng.choice(ANSWERS), finish_reason=rng.choice(["stop", "length"]))
            rec = evaluate(q, pipe, request, gen, model="m")
            fh.write(json.dumps(rec.model_dump(mode="json")) + "\n")
    (run / "run.json").write_text(json.dumps({"run_id": "bench", "pipeline_cards": {"seceval.mcq": pipe.card()}}))
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = make_run(Path(tmp), args.records)
        exe = Path(sys.executable).parent / "benchaudit"
        times = []
        for i in range(args.repeats):
            out = Path(tmp) / f"out{i}"
            start = time.perf_counter()
            subprocess.run(
                [
                    str(exe),
                    "rescore",
                    str(run),
                    "--set",
                    "scoring.denominator=valid",
                    "--report-dir",
                    str(out),
                    "--suites-dir",
                    str(REPO / "suites"),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            times.append(time.perf_counter() - start)
    best = statistics.median(times)
    print(
        f"benchaudit rescore, {args.records:,} records: median {best:.2f} s over {args.repeats} runs "
        f"({args.records / best:,.0f} records/s); target <= 10 s -> {'met' if best <= 10 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
