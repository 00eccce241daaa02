"""CPU per record of what a run and ``benchaudit rescore`` do for every item in scoring/evaluate.py:
``evaluate(...)`` (extraction, scoring, the Record built) and the record's ``model_dump(mode="json")``.

Real SecEval questions with their exact standardized requests and mixed answers (as
bench/rescore_speed.py makes them); process CPU time, the minimum of --repeats passes of --records
records each.  To compare two trees, run it from each (a ``git worktree`` of the other commit, with
``PYTHONPATH`` pointing at it) in turn, interleaved:

    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/record_speed.py --records 5000 --repeats 7
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_benchaudit.dataset.readers import load_questions, resolve_data_dir  # noqa: E402
from pytest_benchaudit.dataset.suites import load_suite  # noqa: E402
from pytest_benchaudit.pipeline.types import Generation  # noqa: E402
from pytest_benchaudit.prompt.templates import render_request  # noqa: E402
from pytest_benchaudit.scoring.evaluate import evaluate  # noqa: E402

ANSWERS = [
    "<think>A or C?</think>\nAnswer: AC",
    "Answer: B",
    "I think B and D.\nAnswer: BD",
    "no idea",
    "Let me think step by step",
    "Answer: A",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    suite = load_suite(REPO / "suites" / "seceval" / "suite.toml")
    pipe = suite.pipeline("mcq", "standardized")
    template = suite.templates[pipe.prompt.template]
    data_dir, origin = resolve_data_dir(None)
    questions, _ = load_questions(suite, "mcq", data_dir, origin)
    items = [
        (
            q,
            render_request(pipe, template, q),
            Generation(
                text=ANSWERS[i % len(ANSWERS)],
                usage={"prompt_tokens": 100, "completion_tokens": 5},
                latency_s=0.5,
                finish_reason="length" if i % len(ANSWERS) == 4 else "stop",
            ),
        )
        for i, q in enumerate(questions[:500])
    ]
    records = [evaluate(q, pipe, r, g, model="m") for q, r, g in items]

    def per_record(step: str) -> float:
        start = time.process_time()
        if step == "dump":
            for rec in itertools.islice(itertools.cycle(records), args.records):
                rec.model_dump(mode="json")
        else:
            for q, r, g in itertools.islice(itertools.cycle(items), args.records):
                record = evaluate(q, pipe, r, g, model="m")
                if step == "both":
                    record.model_dump(mode="json")
        return (time.process_time() - start) / args.records * 1e6

    per_record("both")  # warm-up
    figures = {step: min(per_record(step) for _ in range(args.repeats)) for step in ("evaluate", "dump", "both")}
    print(
        f"{REPO.name}: per record, us (min of {args.repeats} x {args.records:,}): evaluate {figures['evaluate']:.1f}, "
        f"model_dump {figures['dump']:.1f}, both {figures['both']:.1f}"
    )


if __name__ == "__main__":
    main()
