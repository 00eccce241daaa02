"""``benchaudit``: commands over run directories; no pytest run and no model server needed.

    benchaudit show RUN_DIR               summary tables, gate verdicts and pipeline cards of a run
    benchaudit rescore RUN_DIR [--pipeline P] [--set FIELD=VALUE]...
                                          re-score stored outputs under other downstream fields
    benchaudit sweep RUN_DIR [--vary FIELD=V1,V2,...]... [--toward LAYER]
                                          single-field counterfactuals from stored outputs: each
                                          variant's score, delta, invalid rate and the stage that moved it
    benchaudit compare RUN... [--pipelines A,B] [--against RUN...] --out DIR [--html PATH]
                                          ranks per task, tau-b between tasks, rank shifts and Spearman rho
                                          with paired-bootstrap CIs, PCA, peer gaps; compare.json and an HTML
                                          report; --similarity (task texts vs tau-b), --sensitivity RUN...
                                          (rho_gen / rho_ext)
    benchaudit audit RUN... --out DIR [--toward LAYER] [--similarity] [--findings JSON]
                                          the whole audit of stored runs: re-scored toward LAYER, field-by-
                                          field attribution, both layers compared, ledger, report, export
    benchaudit multiverse RUN... --out DIR | --list BENCH
                                          every defensible pipeline of each task at once (the suite's
                                          [tasks.T.multiverse], else its layers' and the registry's values):
                                          which model orderings hold in every specification, score
                                          distributions, rank intervals, the variance each field explains
    benchaudit export RUN_DIR --format every-eval-ever [--out DIR] [--samples] [--include-questions]
                                          results in the Every Eval Ever schema (questions withheld by default)
    benchaudit audit-gold RUN... [--min-models K] [--out CSV]
                                          questions where most models agree on one answer against gold (for review)
    benchaudit audit-gold --confirm SAMPLE.csv
                                          confirmed label-error rate among the flags people checked (Wilson CI)
    benchaudit judge-agreement RUN_A RUN_B | RUN
                                          agreement, Cohen's kappa, confusion table and strata of two judges
    benchaudit judge-agreement --human SAMPLE.csv
                                          the judge's accuracy against people, Cohen's kappa between two annotators
    benchaudit sample RUN... --for judge|gold [--n 120] [--strata K,...] --out SAMPLE.csv
                                          a stratified, seeded sample for annotators (local file with question text)
    benchaudit diagnose RUN... [--json]   the catalogued failure modes (docs/failure-modes.md) on every model x
                                          task: hypothesis, evidence, the field that fixes it, effect in points
    benchaudit import [SOURCE] PATH...    other harnesses' logs and published outputs as run directories
                                          (inspect, lm-eval, every-eval-ever, athenabench-runs,
                                          cti-bench-responses, a plugin's; detected when SOURCE is left out)
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
    benchaudit validate [SUITES_DIR]      check suite configs (suite.toml) against their schema
    benchaudit init [DIR] [--suite NAME]  a suites/ copy of the packaged suites to edit, and a pyproject
                                          snippet (pytest suites/NAME runs the local copy instead)
    benchaudit plan --task BENCH.TASK --mde D [--from RUN...] [--alpha A] [--power P] [--json]
                                          questions x repeats a paired comparison needs to detect a difference
                                          D (variances measured from the runs, or a stated assumption)
    benchaudit schema [DOCUMENT] [--out DIR]
                                          the JSON Schema of run.json, a records.jsonl line, a card,
                                          summary.json, compare.json, audit.json, diagnose --json,
                                          multiverse.json
    benchaudit plugins [--json]           the plugins loaded (entry points in the group `benchaudit`), where
                                          from and what each registered (docs/plugins.md)

Every command takes --disable-plugin NAME (repeatable; or BENCHAUDIT_DISABLE_PLUGINS=a,b) to turn an
installed plugin off.

`benchaudit COMMAND --help` gives a command's options.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import import_module

from pytest_benchaudit import __version__
from pytest_benchaudit.cli.runargs import add_skip_bad_records, locate_suites_dir
from pytest_benchaudit.common.errors import BenchauditError, cli_exit_code

__all__ = ["COMMANDS", "main"]

# command -> module under pytest_benchaudit.cli exposing HELP, add_parser(sub) and run(args): the
# command's name with '-' as '_' and '_cmd' after it (cli/audit_gold_cmd.py for `audit-gold`).
# Only the chosen command's module is imported: `benchaudit --help` and `benchaudit ledger`
# never load pytest, scipy or matplotlib.
COMMANDS: dict[str, str] = {
    "show": "show_cmd",
    "summarize": "summarize_cmd",
    "card": "card_cmd",
    "ledger": "ledger_cmd",
    "fetch": "fetch_cmd",
    "rescore": "rescore_cmd",
    "sweep": "sweep_cmd",
    "import": "import_cmd",
    "compare": "compare_cmd",
    "export": "export_cmd",
    "audit-gold": "audit_gold_cmd",
    "judge-agreement": "judge_agreement_cmd",
    "validate": "validate_cmd",
    "diagnose": "diagnose_cmd",
    "sample": "sample_cmd",
    "audit": "audit_cmd",
    "multiverse": "multiverse_cmd",
    "init": "init_cmd",
    "plan": "plan_cmd",
    "schema": "schema_cmd",
    "plugins": "plugins_cmd",
}

# One-line help per command for the command list, so listing them imports no command module.
_LIST_HELP: dict[str, str] = {
    "show": "print a run's summary and pipeline cards",
    "summarize": "recompute summary.json from records.jsonl (no model calls)",
    "card": "print pipeline cards as JSON (of a benchmark's suite, or of a run)",
    "ledger": "documented vs released pipeline, per benchmark and field",
    "fetch": "download benchmark files from their public origin, sha256-verified",
    "rescore": "re-score a run's stored outputs under another pipeline (no model calls)",
    "sweep": "single-field counterfactuals on a run's stored outputs (downstream fields)",
    "import": "other harnesses' logs and published outputs as run directories",
    "compare": "ranks, tau-b, rank shifts with bootstrap CIs, PCA, peer gaps, similarity, sensitivity; compare.json "
    "and an HTML report",
    "export": "write a run in another format (Every Eval Ever)",
    "audit-gold": "questions where most models agree on one answer against gold (for review)",
    "judge-agreement": "agreement, Cohen's kappa, confusion table and strata of two judges",
    "validate": "check suite configs (suite.toml) against their schema",
    "diagnose": "the catalogued failure modes on every model x task: hypotheses with evidence and effect",
    "sample": "a stratified, seeded sample of judge verdicts or gold flags for people to check",
    "audit": "the whole audit of stored runs toward a layer: attribution, both layers compared, ledger, report",
    "multiverse": "every defensible pipeline of each task at once: which model orderings survive (no model calls)",
    "init": "write a suites/ copy to edit and a pyproject snippet (the packaged suites, no data)",
    "plan": "questions x repeats a paired comparison needs to detect a difference (power analysis)",
    "schema": "the JSON Schema of run.json, records.jsonl lines, summary.json, compare.json, audit.json, findings, "
    "multiverse.json",
    "plugins": "the plugins loaded, where from, and what each registered",
}

# The commands that run compare analyses: the plugins' analyses are registered before they run.
_COMPARING = frozenset({"compare", "audit", "diagnose"})


def _chosen_command(argv: Sequence[str]) -> str | None:
    """The command word: the first argument that is not an option (the top level has only flags)."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The ``benchaudit`` parser; only the command named in ``argv`` gets its full options."""
    parser = argparse.ArgumentParser(
        prog="benchaudit", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"benchaudit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = _chosen_command(argv)
    for name, module_name in COMMANDS.items():
        if name == chosen:
            module = import_module(f"pytest_benchaudit.cli.{module_name}")
            command = module.add_parser(sub)
            command.set_defaults(_run=module.run)
            command.add_argument(
                "--disable-plugin",
                action="append",
                default=[],
                metavar="NAME",
                help="turn off the installed plugin NAME (repeatable; also BENCHAUDIT_DISABLE_PLUGINS=a,b)",
            )
            add_skip_bad_records(sub)
        else:
            sub.add_parser(name, help=_LIST_HELP[name])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``benchaudit`` command; returns its exit status (0 ok, 1 failed, 2 bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    locate_suites_dir(args)
    try:
        _load_plugins(args)
        if getattr(args, "skip_bad_records", False):
            # For this command only (a context the store reads, reset when it returns or raises): a
            # later main() in the same process reads strictly again.
            from pytest_benchaudit.runs.store import skipping_bad_records

            with skipping_bad_records():
                return int(args._run(args))
        return int(args._run(args))
    except BrokenPipeError:
        # `benchaudit ledger | head`: the reader left; stop quietly instead of a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (BenchauditError, OSError) as err:
        # Any error of the package, or a file that cannot be read or written (permissions, a file
        # where a folder should be): one line naming it, not a traceback (statuses: common.errors).
        print(f"benchaudit {args.command}: {err}", file=sys.stderr)
        return cli_exit_code(err)


def _load_plugins(args: argparse.Namespace) -> None:
    """The installed plugins, loaded before the command runs (their rules, metrics, formats and suites
    known to it); a command that compares also registers their analyses.  Not at start-up: ``--help``
    and the command list import none of them."""
    from pytest_benchaudit.plugins.plugin_manager import load_analyses, load_plugins

    load_plugins(args.disable_plugin)
    if args.command in _COMPARING:
        load_analyses()


if __name__ == "__main__":
    sys.exit(main())
