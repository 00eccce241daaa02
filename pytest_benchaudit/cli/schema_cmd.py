"""``benchaudit schema [DOCUMENT] [--out DIR]``: the JSON Schema of each file a run directory holds.

The schemas are generated from the types the code itself builds and validates the documents with
(the TypedDicts of ``pipeline/record_documents.py``, ``aggregate/summary_documents.py``, ``runs/run_meta.py``,
``compare/``, ``diagnose/``, ``audit/``, ``multiverse/``), so they cannot drift from what is written;
``docs/schemas/`` holds them as published (a test regenerates and compares).  ``additionalProperties: false`` throughout:
a key the schema does not name is not one benchaudit writes.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_benchaudit.cli._common import CliError, Subparsers
from pytest_benchaudit.common.errors import did_you_mean

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = ["DOCUMENTS", "HELP", "Document", "add_parser", "run", "schema_of", "schema_text"]

HELP = (
    "the JSON Schema of run.json, records.jsonl lines, summary.json, compare.json, audit.json, findings, "
    "multiverse.json"
)


@dataclass(frozen=True)
class Document:
    """One published document: where its type lives, and what file it describes."""

    name: str
    module: str
    type_name: str
    describes: str

    def adapter(self) -> TypeAdapter[object]:
        from pydantic import TypeAdapter

        return TypeAdapter(getattr(import_module(self.module), self.type_name))


# Imported only when asked for: `benchaudit schema run` loads no scipy or matplotlib.
DOCUMENTS: tuple[Document, ...] = (
    Document("run", "pytest_benchaudit.runs.run_meta", "RunMeta", "run.json: how a run was made"),
    Document("record", "pytest_benchaudit.pipeline.record_documents", "RecordRow", "one line of records.jsonl"),
    Document(
        "card",
        "pytest_benchaudit.pipeline.record_documents",
        "PipelineCard",
        "a pipeline card (run.json pipeline_cards, benchaudit card)",
    ),
    Document("summary", "pytest_benchaudit.aggregate.summary_documents", "SummaryDocument", "summary.json"),
    Document(
        "compare", "pytest_benchaudit.compare.compare_documents", "CompareDocument", "compare.json (benchaudit compare)"
    ),
    Document("audit", "pytest_benchaudit.audit.audit_documents", "AuditDocument", "audit.json (benchaudit audit)"),
    Document(
        "findings", "pytest_benchaudit.diagnose.finding_documents", "DiagnoseDocument", "benchaudit diagnose --json"
    ),
    Document(
        "multiverse",
        "pytest_benchaudit.multiverse.mv_documents",
        "MultiverseDocument",
        "multiverse.json (benchaudit multiverse, benchaudit audit)",
    ),
)


def schema_of(doc: Document) -> dict[str, object]:
    """The JSON Schema (draft 2020-12, pydantic's) of ``doc``, titled and described."""
    schema = doc.adapter().json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://pytest-benchaudit.invalid/schemas/{doc.name}.schema.json",
        "title": doc.name,
        "description": doc.describes,
        **{k: v for k, v in schema.items() if k != "title"},
    }


def schema_text(doc: Document) -> str:
    """:func:`schema_of` as the text ``docs/schemas/<name>.schema.json`` holds."""
    return json.dumps(schema_of(doc), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    names = ", ".join(d.name for d in DOCUMENTS)
    p = sub.add_parser("schema", help=HELP, description=HELP + ".")
    p.add_argument("document", nargs="?", help=f"one of: {names} (default: all, with --out)")
    p.add_argument("--out", type=Path, help="write DOCUMENT.schema.json files into this directory instead of printing")
    return p


def run(args: argparse.Namespace) -> int:
    by_name = {d.name: d for d in DOCUMENTS}
    if args.document is not None and args.document not in by_name:
        raise CliError(
            f"schema {args.document!r}: not a document{did_you_mean(args.document, by_name)}; choose one "
            f"of {', '.join(by_name)}"
        )
    chosen = [by_name[args.document]] if args.document else list(DOCUMENTS)
    if args.out is None:
        if len(chosen) > 1:
            raise CliError("name a DOCUMENT to print, or give --out DIR to write them all")
        print(schema_text(chosen[0]), end="")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for doc in chosen:
        path = args.out / f"{doc.name}.schema.json"
        path.write_text(schema_text(doc), encoding="utf-8")
        print(path)
    return 0
