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


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "import",
        help="turn other harnesses' logs (Inspect, lm-eval, Every Eval Ever) or a benchmark's published "
        "outputs into run directories",
        description="Turn another harness's logs, or a benchmark's published model outputs, into benchaudit run "
        "directories that every offline command reads. A log whose requests are what one of our peer "
        "layers renders becomes that layer; any other task imports as a generic one. Each run's "
        "headline is checked against the harness's own reported metric. Without SOURCE the format is "
        "detected. Sources: " + "; ".join(f"{k}: {v}" for k, v in SOURCE_HELP.items()),
    )
    p.add_argument(
        "paths",
        nargs="+",
        metavar="[SOURCE] PATH",
        help=f"optionally a source ({', '.join(SOURCE_HELP)}, or a plugin's importer: "
        "benchaudit plugins lists them), then the logs or folders to import",
    )
    p.add_argument(
        "--report-dir", type=Path, default=Path("reports"), help="where run directories go (default: reports/)"
    )
    p.add_argument("--suites-dir", type=Path, default=Path("suites"), help="where suites live (default: suites/)")
    p.add_argument(
        "--data-dir", help="benchmark data directory (default: $BENCHAUDIT_DATA, else ~/.cache/benchaudit/datasets)"
    )
    return p


def run(args: argparse.Namespace) -> int:
    """0 when every run directory was written; bad input raises (one line, exit 2)."""
    from pytest_benchaudit.cli._common import CliError
    from pytest_benchaudit.common.errors import did_you_mean
    from pytest_benchaudit.dataset.readers import resolve_data_dir
    from pytest_benchaudit.importers.common import ImportSourceError
    from pytest_benchaudit.importers.detect_format import detect, released_source
    from pytest_benchaudit.importers.imported_runs import ImportOptions
    from pytest_benchaudit.plugins.plugin_manager import importers

    known = importers()  # the built-ins (released outputs, other harnesses' logs) and the plugins'
    first, *rest = args.paths
    source = first if first in known and (rest or not Path(first).exists()) else None
    if source is None and rest and not Path(first).exists():
        # `import WORD PATH...` where WORD is neither an importer nor a path: a misspelled source
        raise CliError(
            f"no importer {first!r}{did_you_mean(first, list(known))} (and no such file or folder); "
            f"importers: {', '.join(sorted(known))}"
        )
    paths = [Path(p) for p in (rest if source else args.paths)]
    if not paths:
        raise ImportSourceError(f"benchaudit import {source}: give the logs or folders to import")
    # Without a source each path's format is detected (logs of several harnesses may be given at once):
    # the released folders by their files, then the log importers in order, then the plugins' importers.
    groups: dict[str, list[Path]] = {}
    for path in paths:
        name = source or released_source(path) or getattr(detect(path), "name", None)
        if name is None:
            name = next((n for n, imp in known.items() if _detects(imp, path)), None)
        if name is None:
            raise ImportSourceError(
                f"{path}: not a format benchaudit imports (Inspect .eval/.json logs, lm-eval "
                "results_*.json folders, Every Eval Ever files, AthenaBench runs-mini/, "
                "CTI-Bench responses/, or a plugin's: benchaudit plugins); name the source: "
                "benchaudit import SOURCE PATH"
            )
        if source is None:
            print(f"detected {name} in {path}")
        groups.setdefault(name, []).append(path)
    runs: list[object] = []
    for name, group in groups.items():
        imp = known[name]
        if hasattr(imp, "import_logs"):  # several logs at once (the log importers)
            data_dir, origin = resolve_data_dir(args.data_dir)
            options = ImportOptions(args.report_dir, args.suites_dir, data_dir, origin, log=print)
            runs += imp.import_logs(group, options)
        else:
            for path in group:
                runs += imp.import_runs(path, args.report_dir, args.suites_dir, args.data_dir, log=print)
    for imported in runs:
        print(f"  {getattr(imported, 'path', imported)}")
    print(f"{len(runs)} run directories written under {args.report_dir}")
    return 0


def _detects(importer: object, path: Path) -> bool:
    """A plugin importer's ``detect(path)``; one that raises says no (its import then names it)."""
    try:
        return bool(importer.detect(path))  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a plugin's detection is a guess; never a traceback here
        return False
