"""Nothing moves: the artifacts two checkouts make are the same, apart from created times and run ids.

``make CHECKOUT OUT`` makes, with CHECKOUT's own ``.venv`` (so each tree runs its own code):

- a toy pytest run against the scripted OpenAI-compatible server (correct, wrong, unreadable, reasoning
  and truncated answers; two layers at once with ``--pipelines``, a ``--vary`` variant), re-scored under
  its released layer, and ``benchaudit audit --pipelines`` on it;
- AthenaBench's 12 published runs imported (``benchaudit import athenabench-runs``), re-scored under
  ``standardized`` (``benchaudit rescore FOLDER --pipeline standardized --report-dir``), compared
  (``benchaudit compare --against ... --html``) and audited (``benchaudit audit``: audit.json,
  report.html, the re-scored runs, the Every Eval Ever files);
- CTI-Bench's 5 published responses the same way.

``compare OUT_A OUT_B`` reads both folders file by file and says which differ.  Before comparing it
takes out what differs from one making to the next on the same tree (``make`` the same checkout twice
and compare to see it is nothing else): run ids (``20261206T031500Z-1a2b3c``) and the Every Eval Ever
files' random UUIDs in paths and text, ISO times, the scripted server's port, the output folder's and the checkout's paths, and the keys that hold a wall time, a duration or
the machine's state (:data:`VOLATILE`); an HTML table's rows are compared as a sorted list (a table
with a row per run lists them in the order of their run ids, random within one second: measured as the
one difference between two makings of one tree).  Files whose normalised names collide (two run
directories made in the same second) are compared as a sorted group.  Exit status 0 when nothing
differs.

``both BASE TIP --out DIR`` makes both and compares them.

    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/same_outputs.py both ../base . --out ../same
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

from data_dir import require_data_dir

RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{6}")
# Every Eval Ever files are named and keyed by a random UUID (evaluation_id, sample ids).
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# The scripted server listens on a free port, another at each making.
PORT = re.compile(r"127\.0\.0\.1:\d+")
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?")
# Keys whose value is a wall time, a duration or an id made from the clock: they differ between two
# makings of the same tree (measured: `make` one checkout twice, `compare` the two).
VOLATILE = frozenset(
    {
        "run_id",
        "created",
        "started",
        "ended",
        "rescored_at",
        "timestamp",
        "latency_s",
        "seconds",
        "evaluation_id",
        "retrieved_timestamp",
    }
)

# A toy benchmark: each question's text names what the scripted server answers.
TOY_SUITE = """
[benchmark]
name = "toy"
title = "Toy benchmark"
data_folder = "toy"

[templates.plain]
user = "{question}\\n{options}"

[tasks.mcq]
[tasks.mcq.data]
file = "toy.jsonl"
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
extraction = { rule = "final_answer_letter", reasoning = "strip" }
scoring = { metric = "exact_match", denominator = "total" }
aggregation = { method = "micro", by = "topic" }

[tasks.mcq.released]
prompt.template = "plain"
prompt.format = { mode = "chat", system_role = "none", few_shot = 0 }
inference.decoding = { temperature = 0.0 }
inference.max_tokens = 32
extraction = { rule = "final_answer_letter", reasoning = "keep" }
scoring = { metric = "exact_match", denominator = "valid" }
aggregation = { method = "micro" }
"""
TOY_ANSWERS = {
    "CORRECT": ("Answer: B", "stop"),
    "WRONG": ("Answer: C", "stop"),
    "UNREADABLE": ("no idea", "stop"),
    "THINK": ("<think>A or B?</think>\nAnswer: A", "stop"),
    "LONG": ("Let me think step by", "length"),
}
TOY_GOLD = {"CORRECT": "B", "WRONG": "B", "UNREADABLE": "A", "THINK": "A", "LONG": "A"}
SERVER = textwrap.dedent("""
    import sys
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer, serve_until_signal
    answers = {answers!r}

    def script(call):
        text = call.last_user_text
        for marker, (content, finish) in answers.items():
            if marker in text:
                return Reply(content=content, finish_reason=finish)
        return Reply(content="Answer: A")

    sys.exit(serve_until_signal(ScriptedServer(script, model_id="toy-model")))
    """)


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> None:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode not in (0, 1):  # 1: a pytest run with failing items (wrong answers fail)
        raise SystemExit(
            f"{' '.join(cmd)} (in {cwd}): exit {proc.returncode}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )


def _write_toy(work: Path) -> None:
    (work / "suites" / "toy").mkdir(parents=True)
    (work / "data" / "toy").mkdir(parents=True)
    (work / "suites" / "toy" / "suite.toml").write_text(TOY_SUITE, encoding="utf-8")
    options = ["first option", "second option", "third option", "fourth option"]
    with (work / "data" / "toy" / "toy.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(20):
            marker = list(TOY_ANSWERS)[i % len(TOY_ANSWERS)]
            fh.write(
                json.dumps(
                    {
                        "id": f"q{i:02d}",
                        "question": f"Toy question {i} {marker}?",
                        "options": options,
                        "gold": TOY_GOLD[marker],
                        "topic": ["alpha", "beta", "gamma"][i % 3],
                    }
                )
                + "\n"
            )


def make(checkout: Path, out: Path) -> None:
    """Every artifact of the module doc, made by ``checkout``'s code, under ``out``."""
    checkout, out = checkout.resolve(), out.resolve()
    python, benchaudit = checkout / ".venv" / "bin" / "python", checkout / ".venv" / "bin" / "benchaudit"
    data = require_data_dir()
    if out.exists():
        shutil.rmtree(out)
    work = out / "work"
    work.mkdir(parents=True)
    # A cache of its own: a generation cached by another making would come back with from_cache = true.
    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(out / "cache"),
        "BENCHAUDIT_DATA": str(data),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    _write_toy(work)
    server = subprocess.Popen(
        [str(python), "-c", SERVER.format(answers=TOY_ANSWERS)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert server.stdout is not None
        ready = server.stdout.readline().split()
        if ready[:1] != ["READY"]:
            raise SystemExit(f"scripted server did not start: {ready}")
        _run(
            [
                str(python),
                "-m",
                "pytest",
                "suites/toy",
                "--data-dir",
                "data",
                "--model",
                f"toy-model@{ready[1]}",
                "--report-dir",
                str(out / "toy"),
                "--pipelines",
                "standardized,released",
                "-p",
                "no:cacheprovider",
                "-q",
            ],
            work,
            env,
        )
        _run(
            [
                str(python),
                "-m",
                "pytest",
                "suites/toy",
                "--data-dir",
                "data",
                "--model",
                f"toy-model@{ready[1]}",
                "--report-dir",
                str(out / "toy-vary"),
                "--vary",
                "scoring.denominator=valid",
                "-p",
                "no:cacheprovider",
                "-q",
            ],
            work,
            env,
        )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    toy_suites = ["--suites-dir", str(work / "suites"), "--data-dir", str(work / "data")]
    _run(
        [
            str(benchaudit),
            "rescore",
            str(out / "toy-vary"),
            "--pipeline",
            "released",
            "--report-dir",
            str(out / "toy-released"),
            *toy_suites,
        ],
        work,
        env,
    )
    _run(
        [
            str(benchaudit),
            "audit",
            str(out / "toy"),
            "--pipelines",
            "standardized,released",
            "--out",
            str(out / "toy-audit"),
            *toy_suites,
        ],
        work,
        env,
    )
    for name, source, folder in (
        ("athena", "athenabench-runs", data / "athenabench" / "runs-mini"),
        ("cti", "cti-bench-responses", data / "cti-bench" / "responses"),
    ):
        runs, std = out / name, out / f"{name}-std"
        _run([str(benchaudit), "import", source, str(folder), "--report-dir", str(runs)], checkout, env)
        _run(
            [str(benchaudit), "rescore", str(runs), "--pipeline", "standardized", "--report-dir", str(std)],
            checkout,
            env,
        )
        _run(
            [
                str(benchaudit),
                "compare",
                str(runs),
                "--against",
                str(std),
                "--out",
                str(out / f"{name}-compare"),
                "--html",
                str(out / f"{name}-compare" / "report.html"),
            ],
            checkout,
            env,
        )
        _run([str(benchaudit), "audit", str(runs), "--out", str(out / f"{name}-audit")], checkout, env)
    shutil.rmtree(out / "cache", ignore_errors=True)


def _text(text: str, roots: list[tuple[str, str]]) -> str:
    for path, token in roots:
        text = text.replace(path, token)
    return PORT.sub("127.0.0.1:<PORT>", ISO_TIME.sub("<TIME>", UUID.sub("<UUID>", RUN_ID.sub("<RUN_ID>", text))))


def _value(value: Any, roots: list[tuple[str, str]]) -> Any:
    if isinstance(value, dict):
        return {_text(k, roots): "<VOLATILE>" if k in VOLATILE else _value(v, roots) for k, v in value.items()}
    if isinstance(value, list):
        return [_value(v, roots) for v in value]
    if isinstance(value, str):
        return _text(value, roots)
    return value


TABLE = re.compile(r"<table\b.*?</table>", re.S)
ROW = re.compile(r"<tr\b.*?</tr>", re.S)


def _rows_sorted(table: re.Match[str]) -> str:
    """A table with its rows in sorted order (the header row stays first): where a report lists one row per
    run in the order the run directories are listed, that order is their run ids', random within a second."""
    text = table.group(0)
    rows = ROW.findall(text)
    if len(rows) < 3:
        return text
    head, body = rows[0], sorted(rows[1:])
    first, last = text.index(rows[0]), text.rindex(rows[-1]) + len(rows[-1])
    return text[:first] + head + "".join(body) + text[last:]


def normalised(path: Path, roots: list[tuple[str, str]]) -> str:
    """The file's content with what differs between two makings of one tree replaced by tokens."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".json":
        return json.dumps(_value(json.loads(raw), roots), indent=1, sort_keys=False)
    if path.suffix == ".jsonl":
        return "\n".join(json.dumps(_value(json.loads(line), roots)) for line in raw.splitlines() if line.strip())
    if path.suffix == ".html":
        return TABLE.sub(_rows_sorted, _text(raw, roots))
    return _text(raw, roots)


def _roots(out: Path) -> list[tuple[str, str]]:
    """The making's own paths, longest first: its output folder, then the checkout it was made in."""
    made = out.resolve()
    roots = [(str(made / "work"), "<WORK>"), (str(made), "<OUT>")]
    checkout = made / "checkout.txt"
    if checkout.is_file():
        roots.append((checkout.read_text(encoding="utf-8").strip(), "<CHECKOUT>"))
    return roots


def compare(a: Path, b: Path, show: int = 20) -> list[str]:
    """The normalised paths whose contents differ (or exist on one side only) between two makings."""
    sides: list[dict[str, list[str]]] = []
    for out in (a, b):
        roots = _roots(out)
        files: dict[str, list[str]] = defaultdict(list)
        for path in sorted(
            p
            for p in out.rglob("*")
            if p.is_file() and p.name != "checkout.txt" and "work" not in p.relative_to(out).parts[:1]
        ):
            files[_text(str(path.relative_to(out)), roots)].append(normalised(path, roots))
        sides.append({k: sorted(v) for k, v in files.items()})
    differ = sorted(k for k in set(sides[0]) | set(sides[1]) if sides[0].get(k) != sides[1].get(k))
    for key in differ[:show]:
        left, right = sides[0].get(key), sides[1].get(key)
        if left is None or right is None:
            print(f"only in {'B' if left is None else 'A'}: {key}")
            continue
        first_left, first_right = "\n".join(left).splitlines(), "\n".join(right).splitlines()
        line = next(
            (i for i, (x, y) in enumerate(zip(first_left, first_right)) if x != y),
            min(len(first_left), len(first_right)),
        )
        print(
            f"differs: {key} (line {line + 1})\n  A: {first_left[line][:300] if line < len(first_left) else '<end>'}"
            f"\n  B: {first_right[line][:300] if line < len(first_right) else '<end>'}"
        )
    n = sum(len(v) for v in sides[0].values())
    print(f"{n} files compared ({len(sides[0])} names): {len(differ)} differ")
    return differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_make = sub.add_parser("make", help="make the artifacts with CHECKOUT's .venv under OUT")
    p_make.add_argument("checkout", type=Path)
    p_make.add_argument("out", type=Path)
    p_cmp = sub.add_parser("compare", help="compare two makings")
    p_cmp.add_argument("a", type=Path)
    p_cmp.add_argument("b", type=Path)
    p_both = sub.add_parser("both", help="make with BASE and with TIP, then compare")
    p_both.add_argument("base", type=Path)
    p_both.add_argument("tip", type=Path)
    p_both.add_argument("--out", type=Path, required=True, help="BASE's artifacts go in OUT/base, TIP's in OUT/tip")
    args = parser.parse_args()
    if args.command == "compare":
        return 1 if compare(args.a, args.b) else 0
    pairs = (
        [(args.checkout, args.out)]
        if args.command == "make"
        else [(args.base, args.out / "base"), (args.tip, args.out / "tip")]
    )
    for checkout, out in pairs:
        make(checkout, out)
        (out / "checkout.txt").write_text(str(checkout.resolve()) + "\n", encoding="utf-8")
        print(f"made {out} with {checkout}", flush=True)
    if args.command == "both":
        return 1 if compare(args.out / "base", args.out / "tip") else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
