"""Start-up of ``benchaudit`` commands: this tree against an earlier revision, side by side.

Times whole processes (interpreter start-up included) of ``benchaudit --help`` and
``benchaudit ledger`` (reads every suite.toml) for the current tree and for ``--baseline REV``
checked out into a temporary git worktree, interleaved so both see the same machine load.
Median of --repeats; ratio = current / baseline (lower is better; the target is <= 0.5).

    .venv/bin/python bench/startup.py --baseline 791eb26 [--repeats 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# each tree reads its own suites (the suite format grew between revisions)
COMMANDS = {"--help": ["--help"], "ledger": ["ledger", "--suites-dir", "{tree}/suites"]}


def _time(tree: Path, argv: list[str]) -> float:
    code = (
        "import sys; sys.argv = ['benchaudit', *sys.argv[1:]]; from pytest_benchaudit.cli import main; "
        "raise SystemExit(main(sys.argv[1:]))"
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    argv = [a.replace("{tree}", str(tree)) for a in argv]
    subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=tree,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="git revision to compare with (e.g. 791eb26)")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(base), args.baseline],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            print("| command | baseline s | current s | ratio |")
            print("|---|---|---|---|")
            for name, argv in COMMANDS.items():
                times: dict[str, list[float]] = {"baseline": [], "current": []}
                for _ in range(args.repeats):
                    times["baseline"].append(_time(base, argv))
                    times["current"].append(_time(REPO, argv))
                b, c = statistics.median(times["baseline"]), statistics.median(times["current"])
                print(f"| benchaudit {name} | {b:.3f} | {c:.3f} | {c / b:.2f} |")
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)],
                check=False,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
