"""``benchaudit import [SOURCE] PATH...``: other harnesses' logs and published outputs as run directories.

Sources: ``inspect`` (Inspect ``.eval`` / ``.json`` logs), ``lm-eval`` (``--output_path`` folders
written with ``--log_samples``), ``every-eval-ever`` (aggregate JSON files and their sample
JSONL), and the released outputs of two benchmarks (``athenabench-runs``,
``cti-bench-responses``).  Without SOURCE the format is detected and named.  See
:mod:`pytest_benchaudit.importers` and docs/import.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_benchaudit.cli._common import Subparsers

HELP = "other harnesses' logs and published outputs as run directories"
# The sources, named here so that parsing the command does not import the importers.
SOURCE_HELP = {
    "inspect": "Inspect eval logs (.eval or .json), or folders of them: one run directory per task and model",
    "lm-eval": "lm_eval --output_path folders written with --log_samples: one run directory per task and model",
    "every-eval-ever": "Every Eval Ever aggregate files (and their _samples.jsonl): one per task and model",
    "athenabench-runs": "AthenaBench runs-mini/ (raw responses + released scores)",
    "cti-bench-responses": "CTI-Bench responses/ (extracted answers only)",
}
_RELEASED = ("athenabench-runs", "cti-bench-responses")


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "import", help="turn other harnesses' logs (Inspect, lm-eval, Every Eval Ever) or a benchmark's published "
                       "outputs into run directories",
        description="Turn another harness's logs, or a benchmark's published model outputs, into benchaudit run "
                    "directories that every offline command reads. A log whose requests are what one of our peer "
                    "layers renders becomes that layer; any other task imports as a generic one. Each run's "
                    "headline is checked against the harness's own reported metric. Without SOURCE the format is "
                    "detected. Sources: " + "; ".join(f"{k}: {v}" for k, v in SOURCE_HELP.items()))
    p.add_argument("paths", nargs="+", metavar="[SOURCE] PATH",
                   help=f"optionally a source ({', '.join(SOURCE_HELP)}), then the logs or folders to import")
    p.add_argument("--report-dir", type=Path, default=Path("reports"), help="where run directories go (default: reports/)")
    p.add_argument("--suites-dir", type=Path, default=Path("suites"), help="where suites live (default: suites/)")
    p.add_argument("--data-dir", help="benchmark data directory (default: $BENCHAUDIT_DATA, else ~/.cache/benchaudit/datasets)")
    return p


def run(args: argparse.Namespace) -> int:
    """0 when every run directory was written; bad input raises (one line, exit 2)."""
    from pytest_benchaudit.importers import SOURCES
    from pytest_benchaudit.importers.common import ImportSourceError
    from pytest_benchaudit.importers.detect_format import detect, importer, released_source
    from pytest_benchaudit.importers.imported_runs import ImportOptions
    from pytest_benchaudit.dataset.readers import resolve_data_dir

    first, *rest = args.paths
    source = first if first in SOURCE_HELP and (rest or not Path(first).exists()) else None
    paths = [Path(p) for p in (rest if source else args.paths)]
    if not paths:
        raise ImportSourceError(f"benchaudit import {source}: give the logs or folders to import")
    # Without a source each path's format is detected (logs of several harnesses may be given at once).
    groups: dict[str, list[Path]] = {}
    for path in paths:
        name = source or released_source(path) or getattr(detect(path), "name", None)
        if name is None:
            raise ImportSourceError(f"{path}: not a format benchaudit imports (Inspect .eval/.json logs, lm-eval "
                                    "results_*.json folders, Every Eval Ever files, AthenaBench runs-mini/, "
                                    "CTI-Bench responses/); name the source: benchaudit import SOURCE PATH")
        if source is None:
            print(f"detected {name} in {path}")
        groups.setdefault(name, []).append(path)
    runs = []
    for name, group in groups.items():
        if name in _RELEASED:
            if len(group) != 1:
                raise ImportSourceError(f"benchaudit import {name} reads one folder, not {len(group)}")
            runs += SOURCES[name](group[0], args.report_dir, args.suites_dir, args.data_dir, log=print)
        else:
            data_dir, origin = resolve_data_dir(args.data_dir)
            options = ImportOptions(args.report_dir, args.suites_dir, data_dir, origin, log=print)
            runs += importer(name).import_logs(group, options)
    for imported in runs:
        print(f"  {imported.path}")
    print(f"{len(runs)} run directories written under {args.report_dir}")
    return 0
