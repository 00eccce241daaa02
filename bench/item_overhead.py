"""Harness CPU per item, passing vs failing, on the replay backend (target <= 1 ms per item).

Makes two run directories of N SecEval items (standardized pipeline) against an in-process
scripted server: one where every answer is the gold (items pass), one where answers are
wrong (~90%) or invalid (~10%: unreadable prose), as a small model's are.  Then times, in
fresh processes, interleaved, with pytest's default options (what a user runs):

- ``pytest suites/seceval --limit N --model replay:RUN_DIR`` for each run directory (no model:
  stored generations; collection, items, extraction, scoring, records, summary, run directory);
- ``pytest test_trivial.py``: N trivial parametrized items (the floor: pytest itself);
- with ``--full-protocol``, the replay runs again with ``BENCHAUDIT_FULL_PROTOCOL=1`` (pytest's own
  setup/call/teardown protocol instead of benchaudit's lighter one: what the latter saves).

CPU = user + system time of the child process and its own (the inference process; the machine is
shared, so wall time is noisy; CPU is what the harness spends).  The children run with a bytecode
cache (warmed by an untimed run of each command), as an installed package has one.  Per item = (CPU at N items - CPU at 1 item) / (N - 1),
which takes out start-up.  Median of --repeats.

    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/item_overhead.py --items 2000
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from data_dir import require_data_dir

REPO = Path(__file__).resolve().parent.parent
SECEVAL_QUESTIONS = 2189
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]


# The children's environment: with a bytecode cache (as an installed package has one; a machine
# that sets PYTHONDONTWRITEBYTECODE=1 would compile and assertion-rewrite every module in every
# run, seconds of CPU whose noise is larger than the per-item figure), set in main().
ENV: dict[str, str] = dict(os.environ)


def run(cmd: list[str], cwd: str, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall s, CPU s) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env={**ENV, **(env or {})})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise RuntimeError(" ".join(cmd) + "\n" + proc.stdout[-2000:] + proc.stderr[-2000:])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def golds_by_prompt(n: int) -> dict[str, str]:
    """The last user message of each of the first n SecEval requests -> its gold letters."""
    from pytest_benchaudit.dataset.readers import load_questions, resolve_data_dir
    from pytest_benchaudit.dataset.suites import load_suite
    from pytest_benchaudit.prompt.templates import render_request

    suite = load_suite(REPO / "suites" / "seceval" / "suite.toml")
    data_dir, origin = resolve_data_dir(None)
    questions, _ = load_questions(suite, "mcq", data_dir, origin)
    pipe = suite.pipeline("mcq", "standardized")
    tpl = suite.templates[pipe.prompt.template]
    out = {}
    for q in questions[:n]:
        req = render_request(pipe, tpl, q)
        out[[m.content for m in req.messages if m.role == "user"][-1]] = q.gold
    return out


def make_run_dir(tmp: Path, n: int, correct: bool) -> Path:
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

    golds = golds_by_prompt(n)

    def script(call: object) -> Reply:
        gold = golds.get(call.last_user_text, "")  # type: ignore[attr-defined]
        if correct:
            return Reply(content=f"Answer: {gold}")
        if hash(call.last_user_text) % 10 == 0:  # type: ignore[attr-defined]
            return Reply(content="I am not sure which option is meant here.")
        wrong = next((x for x in "DCBA" if x not in gold), "D")
        return Reply(content=f"Answer: {wrong}")

    name = "passing" if correct else "failing"
    with ScriptedServer(script) as server:
        run(
            PYTEST
            + [
                str(REPO / "suites" / "seceval"),
                "--limit",
                str(n),
                "--model",
                f"m@{server.url}",
                "--report-dir",
                str(tmp / name),
                "--no-cache",
                "--tb=no",
                "-rN",
            ],
            str(tmp),
        )
    (run_dir,) = [p for p in (tmp / name).iterdir() if (p / "run.json").is_file()]
    return run_dir


def write_trivial(tmp: Path, n: int) -> Path:
    path = tmp / "trivial" / f"test_trivial_{n}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        f"import pytest\n\n\n@pytest.mark.parametrize('i', range({n}))\ndef test_item(i):\n    assert i >= 0\n"
    )
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--full-protocol",
        action="store_true",
        help="also time each run with BENCHAUDIT_FULL_PROTOCOL=1 (pytest's own per-item protocol)",
    )
    args = parser.parse_args()
    ENV["BENCHAUDIT_DATA"] = str(require_data_dir())
    n = args.items
    if n > SECEVAL_QUESTIONS:  # --limit cannot run more items than the suite has: per item would be wrong
        sys.exit(f"--items {n}: SecEval has {SECEVAL_QUESTIONS:,} questions; use at most that many")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        dirs = {"passing": make_run_dir(tmp, n, True), "failing": make_run_dir(tmp, n, False)}
        cmds: dict[tuple[str, int], tuple[list[str], dict[str, str]]] = {}
        for size in (1, n):
            for kind, run_dir in dirs.items():
                cmd = PYTEST + [
                    str(REPO / "suites" / "seceval"),
                    "--limit",
                    str(size),
                    "--model",
                    f"replay:{run_dir}",
                    "--report-dir",
                    str(tmp / "replayed"),
                ]
                cmds[(kind, size)] = (cmd, {})
                if args.full_protocol:  # the same run through pytest's own per-item protocol
                    cmds[(f"{kind} (full)", size)] = (cmd, {"BENCHAUDIT_FULL_PROTOCOL": "1"})
            cmds[("bare pytest", size)] = (PYTEST + [str(write_trivial(tmp, size))], {})
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        ENV["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        for cmd, env in cmds.values():  # warms the bytecode cache, untimed
            run(cmd, str(tmp), env)
        cpu: dict[tuple[str, int], list[float]] = {k: [] for k in cmds}
        wall: dict[tuple[str, int], list[float]] = {k: [] for k in cmds}
        for _ in range(args.repeats):  # interleaved, so drift hits all alike
            for key, (cmd, env) in cmds.items():
                w, c = run(cmd, str(tmp), env)
                wall[key].append(w)
                cpu[key].append(c)
    med = {k: statistics.median(v) for k, v in cpu.items()}
    medw = {k: statistics.median(v) for k, v in wall.items()}
    print(
        f"SecEval via replay, {n} items, default options, CPU (user+sys) of the whole process, "
        f"median of {args.repeats} (interleaved); load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'':>16} {'1 item CPU s':>13} {f'{n} items CPU s':>15} {'per item ms':>12} {'above bare ms':>14} "
        f"{'wall s':>8}"
    )
    kinds = list(dict.fromkeys(k for k, _ in cmds))
    kinds.sort(key=lambda k: (k != "bare pytest", k))
    per = {kind: (med[(kind, n)] - med[(kind, 1)]) / (n - 1) * 1000 for kind in kinds}
    for kind in kinds:
        print(
            f"{kind:>16} {med[(kind, 1)]:>13.2f} {med[(kind, n)]:>15.2f} {per[kind]:>12.3f} "
            f"{per[kind] - per['bare pytest']:>14.3f} {medw[(kind, n)]:>8.2f}"
        )
    for kind in ("passing", "failing"):
        print(
            f"{kind}: {per[kind]:.3f} ms per item (target <= 1 ms: {'met' if per[kind] <= 1 else 'NOT met'}); "
            f"{per[kind] - per['bare pytest']:.3f} ms above bare pytest's own per-item cost"
        )


if __name__ == "__main__":
    main()
