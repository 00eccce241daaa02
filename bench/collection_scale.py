"""Collection time and peak RSS: every suite on real data, and a synthetic 50,000-question suite.

- ``pytest suites/ --collect-only -q`` with the real data directory ($BENCHAUDIT_DATA);
- ``pytest SYNTH/suites/synth --collect-only -q --data-dir SYNTH/data``: a self-contained
  suite.toml and a JSONL file of --questions self-made 4-option questions in a temp folder;
- for scale, ``pytest --collect-only -q`` on a generated plain test file with that many
  parametrized items (what pytest itself costs for the same number of items).

Wall time and peak RSS (``/usr/bin/time``-style: ``resource.getrusage(RUSAGE_CHILDREN)`` of a
fresh child per measurement), interleaved, median of --repeats.

    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/collection_scale.py --questions 50000
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from data_dir import require_data_dir

REPO = Path(__file__).resolve().parent.parent

SUITE = """
[benchmark]
name = "synth"
title = "Synthetic scale suite"
data_folder = "synth"

[templates.plain]
user = "{question}\\n{options}\\nAnswer with the letter."

[tasks.mcq]
[tasks.mcq.data]
file = "synth.jsonl"
format = "jsonl"
id = "id"
question = "question"
choices = "options"
gold = "gold"
meta = ["topic"]

[tasks.mcq.standardized]
prompt.template = "plain"
prompt.format = { mode = "chat", system_role = "none", few_shot = 0 }
inference.decoding = { temperature = 0.0 }
inference.max_tokens = 64
inference.stop = []
extraction = { rule = "final_answer_letter", reasoning = "strip" }
scoring = { metric = "exact_match", denominator = "total" }
aggregation = { method = "micro" }
"""

WORDS = (
    "firewall packet cipher token exploit kernel phishing hash certificate audit malware "
    "sandbox privilege vector buffer overflow injection lateral movement beacon payload"
).split()


def write_synth(root: Path, n: int) -> tuple[Path, Path]:
    suite_dir = root / "suites" / "synth"
    data = root / "data"
    suite_dir.mkdir(parents=True)
    (data / "synth").mkdir(parents=True)
    (suite_dir / "suite.toml").write_text(SUITE)
    rng = random.Random(0)
    with (data / "synth" / "synth.jsonl").open("w") as fh:
        for i in range(n):
            q = " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 40)))
            opts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8))) for _ in range(4)]
            fh.write(
                json.dumps(
                    {
                        "id": f"s{i:05d}",
                        "question": f"Which is true of {q}?",
                        "options": opts,
                        "gold": "ABCD"[rng.randrange(4)],
                        "topic": rng.choice(WORDS),
                    }
                )
                + "\n"
            )
    return suite_dir, data


def write_plain(root: Path, n: int) -> Path:
    path = root / "plain" / "test_plain.py"
    path.parent.mkdir()
    path.write_text(
        f"import pytest\n\n\n@pytest.mark.parametrize('i', range({n}))\ndef test_item(i):\n    assert i >= 0\n"
    )
    return path


MEASURE = r"""
import resource, subprocess, sys, time, json
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"wall": wall, "rss_kb": rss, "rc": p.returncode, "tail": p.stdout[-300:] + p.stderr[-300:]}))
"""


def measure(cmd: list[str], cwd: str) -> tuple[float, float, int]:
    out = subprocess.run([sys.executable, "-c", MEASURE, *cmd], capture_output=True, text=True, cwd=cwd, check=True)
    res = json.loads(out.stdout)
    if res["rc"] != 0:
        raise RuntimeError(" ".join(cmd) + "\n" + res["tail"])
    m = re.search(r"(\d+) tests? collected", res["tail"]) or re.search(r"(\d+)(?:/\d+)? tests? collected", res["tail"])
    items = int(m.group(1)) if m else -1
    return res["wall"], res["rss_kb"] / 1024, items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    require_data_dir()
    base = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        suite_dir, data = write_synth(tmp, args.questions)
        plain = write_plain(tmp, args.questions)
        cmds = {
            "all suites (real data)": base + [str(REPO / "suites")],
            f"synthetic suite, {args.questions:,} questions": base + [str(suite_dir), "--data-dir", str(data)],
            f"plain pytest, {args.questions:,} parametrized": base + [str(plain)],
        }
        res: dict[str, list[tuple[float, float, int]]] = {k: [] for k in cmds}
        for _ in range(args.repeats):
            for name, cmd in cmds.items():
                res[name].append(measure(cmd, str(tmp)))
    print(f"pytest --collect-only -q, fresh process each, median of {args.repeats} (interleaved)")
    print(f"{'what':<40} {'items':>7} {'wall s':>7} {'peak RSS MiB':>13} {'us/item':>8}")
    for name, rows in res.items():
        wall = statistics.median(r[0] for r in rows)
        rss = statistics.median(r[1] for r in rows)
        items = rows[0][2]
        print(f"{name:<40} {items:>7,} {wall:>7.2f} {rss:>13.0f} {wall / max(items, 1) * 1e6:>8.1f}")
    print("raw wall:", {k: [round(r[0], 2) for r in v] for k, v in res.items()})


if __name__ == "__main__":
    main()
