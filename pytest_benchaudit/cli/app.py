"""``benchaudit``: commands over run directories; no pytest run and no model server needed.

    benchaudit show RUN_DIR               summary tables, gate verdicts and pipeline cards of a run
    benchaudit rescore RUN_DIR [--pipeline P] [--set FIELD=VALUE]...
                                          re-score stored outputs under other downstream fields
    benchaudit sweep RUN_DIR [--vary FIELD=V1,V2,...]... [--toward LAYER]
                                          single-field counterfactuals from stored outputs: each
                                          variant's score, delta, invalid rate and the stage that moved it
    benchaudit compare RUN... [--pipelines A,B] [--against RUN...] --out DIR [--html PATH]
                                          ranks per task, tau-b between tasks, rank shifts and Spearman rho
                                          with paired-bootstrap CIs, PCA; compare.json and an HTML report
    benchaudit export RUN_DIR --format every-eval-ever [--out DIR] [--samples] [--include-questions]
                                          results in the Every Eval Ever schema (questions withheld by default)
    benchaudit audit-gold RUN... [--min-models K] [--out CSV]
                                          questions where most models agree on one answer against gold (for review)
    benchaudit judge-agreement RUN_A RUN_B | RUN
                                          agreement, Cohen's kappa, confusion table and strata of two judges
    benchaudit import athenabench-runs DIR | cti-bench-responses DIR
                                          published model outputs as run directories (one per model)
    benchaudit summarize RUN_DIR          recompute summary.json from records.jsonl and run.json
                                          (e.g. after a run was killed before it could write it)
    benchaudit card BENCH [--task T] [--pipeline P] [--set FIELD=VALUE]...
                                          a task's pipeline card as JSON, resolved from suites/
    benchaudit card RUN_DIR [--task T]    the pipeline cards a run was made with
    benchaudit ledger [--format table|json|markdown]
                                          per benchmark and pipeline field: does the documentation
                                          match the released code (matched / undefined / contradicted)
    benchaudit fetch BENCH... [--data-dir DIR] [--force]
                                          download a benchmark's files from its public origin into
                                          the data directory, sha256-verified
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from pytest_benchaudit.common.errors import BenchauditError, UsageError, cli_exit_code
from pytest_benchaudit.aggregate.results import benchmark_scores, summarize, summary_document
from pytest_benchaudit.audit.compare import add_compare_parser, run_compare
from pytest_benchaudit.report.export import add_export_parser, run_export
from pytest_benchaudit.audit.goldaudit import add_audit_gold_parser, run_audit_gold
from pytest_benchaudit.audit.judgeagree import add_judge_agreement_parser, run_judge_agreement
from pytest_benchaudit.audit.importers import add_import_parser, run_import
from pytest_benchaudit.audit.offline import OfflineError, rescore_run, sweep_run
from pytest_benchaudit.pytest_plugin.options import parse_vary
from pytest_benchaudit.pipeline.stages import PipelineError, apply_overrides, parse_override
from pytest_benchaudit.cli.runargs import add_skip_bad_records, locate_suites_dir, no_suite_message
from pytest_benchaudit.runs.store import load_run, read_run_json, read_summary_json, skip_bad_records, write_json_atomic
from pytest_benchaudit.report.terminal import render_summary, render_variant_deltas
from pytest_benchaudit.dataset.suites import SUITE_FILENAME, SuiteError, load_suite, resolve_data_dir

__all__ = ["main"]


class CliError(UsageError):
    """A problem with the command's input; printed without a traceback."""


def _cards(run_dir: Path) -> dict[str, dict[str, Any]]:
    return read_run_json(run_dir).get("pipeline_cards", {})


def cmd_show(run_dir: Path) -> int:
    cards = _cards(run_dir)
    summary = read_summary_json(run_dir)
    if not summary.get("results"):
        load_run(run_dir, require_records=True)  # an empty run: say why there is nothing to show
    print(render_summary(summary.get("results", []), summary.get("benchmarks", []), cards, []))
    for gate in summary.get("gates", []):
        print(f"  {'PASS' if gate['passed'] else 'FAIL'}  {gate['gate']}   {gate['detail']}")
    for key, card in cards.items():
        fields = card.get("fields", {})
        print(f"\n{key}: pipeline '{card.get('pipeline')}' {card.get('hash')}")
        for name in ("prompt.template", "prompt.format.mode", "inference.max_tokens", "inference.stop",
                     "extraction.rule", "extraction.reasoning", "scoring.metric", "scoring.denominator",
                     "aggregation.method"):
            print(f"  {name:<24} {json.dumps(fields.get(name))}")
        for note in card.get("notes", []):
            print(f"  note: {note}")
    return 0


def cmd_summarize(run_dir: Path) -> int:
    meta, records = load_run(run_dir, lambda msg: print(f"warning: {msg}", file=sys.stderr), require_records=True)
    cards = meta.get("pipeline_cards", {})
    results = summarize(records, cards)
    out = summary_document(results, benchmark_scores(results, cards), [], cards)
    write_json_atomic(run_dir / "summary.json", out)
    print(f"{run_dir / 'summary.json'}: {len(results)} results from {len(records)} records")
    return 0


def _suite_cards(bench: str, suites_dir: Path, task: str | None, layer: str, sets: list[str]) -> dict[str, Any]:
    path = suites_dir / bench / SUITE_FILENAME
    if not path.is_file():
        known = sorted(p.parent.name for p in suites_dir.glob(f"*/{SUITE_FILENAME}"))
        raise CliError(no_suite_message(bench, suites_dir, known))
    try:
        suite = load_suite(path)
        overrides = [parse_override(text) for text in sets]
        tasks = [task] if task else list(suite.tasks)
        for name in tasks:
            if name not in suite.tasks:
                raise CliError(f"{bench} has no task {name!r}; tasks: {', '.join(suite.tasks)}")
        return {f"{bench}.{name}": apply_overrides(suite.pipeline(name, layer), overrides).card() for name in tasks}
    except (SuiteError, PipelineError) as err:
        raise CliError(str(err)) from None


def cmd_card(target: str, task: str | None, layer: str, sets: list[str], suites_dir: Path) -> int:
    if (Path(target) / "run.json").is_file():
        cards = _cards(Path(target))
        if task:
            key = task if "." in task else next((k for k in cards if k.endswith(f".{task}")), task)
            if key not in cards:
                raise CliError(f"no card for {task!r}; tasks in this run: {', '.join(cards) or 'none'}")
            cards = {key: cards[key]}
    else:
        cards = _suite_cards(target, suites_dir, task, layer, sets)
    print(json.dumps(cards, indent=2))
    return 0


def cmd_ledger(fmt: str, suites_dir: Path) -> int:
    from pytest_benchaudit.audit.ledger import build_ledger, render

    try:
        ledger = build_ledger(suites_dir)
    except (SuiteError, PipelineError) as err:
        raise CliError(str(err)) from None
    print(render(ledger, fmt))
    return 0


def cmd_fetch(benches: list[str], data_dir: str | None, origin: str | None, force: bool, suites_dir: Path) -> int:
    from pytest_benchaudit.dataset.fetch import FetchError, fetch_suite

    suites = []
    for bench in benches:
        path = suites_dir / bench / SUITE_FILENAME
        if not path.is_file():
            known = sorted(p.parent.name for p in suites_dir.glob(f"*/{SUITE_FILENAME}"))
            raise CliError(no_suite_message(bench, suites_dir, known))
        try:
            suites.append(load_suite(path))
        except SuiteError as err:
            raise CliError(str(err)) from None
    root, chosen_by = resolve_data_dir(data_dir)
    print(f"data directory: {root} (from {chosen_by})", file=sys.stderr)
    errors: list[str] = []
    for suite in suites:
        try:
            errors += fetch_suite(suite, root, origin=origin, force=force)
        except FetchError as err:
            raise CliError(str(err)) from None
    for message in errors:
        print(f"benchaudit fetch: {message}", file=sys.stderr)
    return 1 if errors else 0


def cmd_rescore(args: argparse.Namespace) -> int:
    try:
        overrides = [parse_override(text) for text in args.sets]
    except PipelineError as err:
        raise CliError(str(err)) from None
    try:
        out, results, cards = rescore_run(args.run_dir, layer=args.pipeline, overrides=overrides,
                                          report_dir=args.report_dir, suites_dir=args.suites_dir,
                                          data_dir=args.data_dir)
    except OfflineError as err:
        raise CliError(str(err)) from None
    print(render_summary(results, [], cards, []))
    for skip in out.meta.get("skipped", []):
        print(f"skipped {skip['records']} records: {skip['reason']}")
    print(f"run directory: {out.path}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    try:
        vary = [parse_vary(text) for text in args.vary]
    except PipelineError as err:
        raise CliError(str(err)) from None
    if not vary and not args.toward:
        raise CliError("nothing to vary: give --vary FIELD=V1,V2,... and/or --toward LAYER")
    try:
        rows, _results, _cards = sweep_run(args.run_dir, vary, toward=args.toward, suites_dir=args.suites_dir,
                                          data_dir=args.data_dir)
    except OfflineError as err:
        raise CliError(str(err)) from None
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(render_variant_deltas(rows))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchaudit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("show", help="print a run's summary and pipeline cards")
    p.add_argument("run_dir", type=Path)
    p = sub.add_parser("summarize", help="recompute summary.json from records.jsonl (no model calls)")
    p.add_argument("run_dir", type=Path)
    p = sub.add_parser("card", help="print pipeline cards as JSON (of a benchmark's suite, or of a run)")
    p.add_argument("target", help="a benchmark name (e.g. seceval) or a run directory")
    p.add_argument("--task", help="one task (e.g. mcq)")
    p.add_argument("--pipeline", default="standardized", help="layer (default: standardized)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a field, as in pytest --set")
    p.add_argument("--suites-dir", type=Path, default=Path("suites"), help="where suites live (default: suites/)")
    p = sub.add_parser("ledger", help="documented vs released pipeline, per benchmark and field")
    p.add_argument("--format", dest="fmt", choices=("table", "json", "markdown"), default="table")
    p.add_argument("--suites-dir", type=Path, default=Path("suites"), help="where suites live (default: suites/)")
    p = sub.add_parser("fetch", help="download benchmark files from their public origin, sha256-verified")
    p.add_argument("benches", nargs="+", metavar="BENCH", help="benchmark (suite folder) names, e.g. seceval")
    p.add_argument("--data-dir", help="data directory (default: $BENCHAUDIT_DATA, else ~/.cache/benchaudit/datasets)")
    p.add_argument("--origin", metavar="URL", help="replace the suite's base_url (a mirror, or a test server)")
    p.add_argument("--force", action="store_true", help="replace existing files whose checksum differs")
    p.add_argument("--suites-dir", type=Path, default=Path("suites"), help="where suites live (default: suites/)")
    p = sub.add_parser("rescore", help="re-score a run's stored outputs under another pipeline (no model calls)")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--pipeline", help="apply this layer's downstream stages (extraction, scoring, aggregation)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a downstream field (an upstream one needs new generations and is refused)")
    p.add_argument("--report-dir", type=Path, help="where the new run directory goes (default: beside RUN_DIR)")
    p.add_argument("--suites-dir", type=Path, default=Path("suites"), help="where suites live (default: suites/)")
    p.add_argument("--data-dir", help="data directory, for metrics that read lookup files (default: $BENCHAUDIT_DATA)")
    p = sub.add_parser("sweep", help="single-field counterfactuals on a run's stored outputs (downstream fields)")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--vary", action="append", default=[], metavar="FIELD=V1,V2,...",
                   help="each value is a variant changing only FIELD (repeatable)")
    p.add_argument("--toward", metavar="LAYER",
                   help="one variant per downstream field whose value in LAYER differs from the run's pipeline")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--suites-dir", type=Path, default=Path("suites"), help="where suites live (default: suites/)")
    p.add_argument("--data-dir", help="data directory, for metrics that read lookup files (default: $BENCHAUDIT_DATA)")
    add_import_parser(sub)
    add_compare_parser(sub)
    add_export_parser(sub)
    add_audit_gold_parser(sub)
    add_judge_agreement_parser(sub)
    add_skip_bad_records(sub)
    args = parser.parse_args(argv)
    skip_bad_records(bool(getattr(args, "skip_bad_records", False)))
    locate_suites_dir(args)
    try:
        if args.command == "show":
            return cmd_show(args.run_dir)
        if args.command == "summarize":
            return cmd_summarize(args.run_dir)
        if args.command == "ledger":
            return cmd_ledger(args.fmt, args.suites_dir)
        if args.command == "audit-gold":
            return run_audit_gold(args)
        if args.command == "judge-agreement":
            return run_judge_agreement(args)
        if args.command == "export":
            return run_export(args)
        if args.command == "compare":
            return run_compare(args)
        if args.command == "import":
            return run_import(args)
        if args.command == "sweep":
            return cmd_sweep(args)
        if args.command == "rescore":
            return cmd_rescore(args)
        if args.command == "fetch":
            return cmd_fetch(args.benches, args.data_dir, args.origin, args.force, args.suites_dir)
        return cmd_card(args.target, args.task, args.pipeline, args.sets, args.suites_dir)
    except BenchauditError as err:  # CliError and every other error of the package: one line, no traceback
        print(f"benchaudit {args.command}: {err}", file=sys.stderr)
        return cli_exit_code(err)
    except BrokenPipeError:
        # `benchaudit ledger | head`: the reader left; stop quietly instead of a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:  # a path that cannot be written or read (a file in the way, no permission)
        print(f"benchaudit {args.command}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
