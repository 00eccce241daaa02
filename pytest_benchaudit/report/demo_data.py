"""The data ``make demo`` needs, fetched when it is absent: the demo's first step.

``python -m pytest_benchaudit.report.demo_data [--data-dir DIR] [--origin URL]`` checks that the data
directory (``--data-dir``, else ``$BENCHAUDIT_DATA``, else the per-user cache: where ``pytest`` will read
it) holds ``cybermetric/CyberMetric-80-v1.json``.  When it does, it prints nothing and exits 0.  When it
does not, it fetches CyberMetric's files from their public origin as ``benchaudit fetch cybermetric``
does (sha256-verified, no partial file left) and exits 0 once the demo's file is in place.  When that
fails (no network, a proxy, a checksum that does not match, a folder that cannot be written) it prints
ONE line saying what failed and how to point ``BENCHAUDIT_DATA`` at a copy, and exits 2: without it the
demo's run would skip its only task and its audit would find no records.

The suite read is the one ``pytest suites/cybermetric`` runs: ``suites/cybermetric`` under the current
directory when there is one (a checkout), else the copy packaged with pytest-benchaudit.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import TextIO

from pytest_benchaudit.common.errors import BenchauditError

__all__ = ["DEMO_BENCHMARK", "DEMO_FILE", "ensure_demo_data", "main"]

DEMO_BENCHMARK = "cybermetric"
DEMO_FILE = "CyberMetric-80-v1.json"  # the file the demo's task (cm80) reads
EXIT_NO_DATA = 2  # bad input: the data is neither there nor fetchable (common/errors.py's convention)


def _demo_suite_file(suites_dir: Path | None) -> Path:
    """The demo benchmark's ``suite.toml``: the local copy when there is one, else the packaged one."""
    from pytest_benchaudit.dataset.shipped import packaged_suites_dir
    from pytest_benchaudit.dataset.suites import SUITE_FILENAME

    candidates = [suites_dir] if suites_dir is not None else [Path("suites"), packaged_suites_dir()]
    for folder in candidates:
        if folder is not None and (folder / DEMO_BENCHMARK / SUITE_FILENAME).is_file():
            return folder / DEMO_BENCHMARK / SUITE_FILENAME
    raise FileNotFoundError(
        f"no {DEMO_BENCHMARK}/{SUITE_FILENAME} under " + " or ".join(str(f) for f in candidates if f is not None)
    )


def _hint(data_dir: Path) -> str:
    where = f"{DEMO_BENCHMARK}/{DEMO_FILE}"
    return (
        f"point BENCHAUDIT_DATA at a directory that holds {where} (make demo BENCHAUDIT_DATA=/path/to/datasets), "
        f"or run `benchaudit fetch {DEMO_BENCHMARK} --data-dir {data_dir}` where its origin can be reached"
    )


def ensure_demo_data(
    data_dir: str | None = None, *, origin: str | None = None, suites_dir: Path | None = None, out: TextIO | None = None
) -> int:
    """Make sure the demo's data file is in the data directory, fetching the benchmark when it is not.

    Returns 0 when the file is there (already, or fetched and verified), :data:`EXIT_NO_DATA` after one
    line on ``out`` (stderr) naming what failed and how to point ``BENCHAUDIT_DATA`` at a copy."""
    from pytest_benchaudit.dataset.fetch import fetch_suite
    from pytest_benchaudit.dataset.readers import resolve_data_dir
    from pytest_benchaudit.dataset.suites import load_suite

    out = out or sys.stderr
    root, chosen_by = resolve_data_dir(data_dir)
    if (root / DEMO_BENCHMARK / DEMO_FILE).is_file():
        return 0
    print(
        f"demo: no {DEMO_BENCHMARK}/{DEMO_FILE} in {root} (from {chosen_by}): "
        f"fetching it (benchaudit fetch {DEMO_BENCHMARK}, sha256-verified)",
        file=out,
        flush=True,
    )
    lines = io.StringIO()  # one line per file; shown on success, folded into one line on failure
    try:
        errors = fetch_suite(load_suite(_demo_suite_file(suites_dir)), root, origin=origin, out=lines, progress=out)
    except (BenchauditError, OSError) as err:  # a malformed [fetch] table, a folder that cannot be written
        errors = [f"{type(err).__name__}: {err}" if isinstance(err, OSError) else str(err)]
    if (root / DEMO_BENCHMARK / DEMO_FILE).is_file():
        print(lines.getvalue().rstrip("\n"), file=out)
        if errors:  # another file of the benchmark failed; the demo reads only this one
            print(f"demo: {len(errors)} other file(s) not fetched, not needed by the demo: {errors[0]}", file=out)
        return 0
    needed = [e for e in errors if DEMO_FILE in e] or errors or ["no file was fetched"]
    print(f"demo: cannot fetch the demo's data into {root}: {needed[0]}; {_hint(root)}", file=out)
    return EXIT_NO_DATA


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_benchaudit.report.demo_data",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--data-dir", default=None, help="data directory (default: $BENCHAUDIT_DATA, else ~/.cache/benchaudit/datasets)"
    )
    parser.add_argument(
        "--origin", metavar="URL", default=None, help="replace the suite's base_url (a mirror, or a test server)"
    )
    parser.add_argument(
        "--suites-dir",
        type=Path,
        default=None,
        help="where the suite folders are (default: ./suites, else the packaged suites)",
    )
    args = parser.parse_args(argv)
    return ensure_demo_data(args.data_dir, origin=args.origin, suites_dir=args.suites_dir)


if __name__ == "__main__":
    sys.exit(main())
