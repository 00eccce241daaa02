"""``benchaudit ledger`` output: the 72-cell view as a table, Markdown or JSON.

The ledger itself (which field each benchmark's documentation states, and whether its released
code matches) is built by :mod:`pytest_benchaudit.audit.ledger`; this module only renders it.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_benchaudit.audit.ledger import CONTRADICTED, MATCHED, STATUSES, UNDEFINED

__all__ = ["render", "render_json", "render_markdown", "render_table", "totals_line"]


_MARK = {MATCHED: "matched", UNDEFINED: "undefined", CONTRADICTED: "CONTRADICTED"}


def _rows(ledger: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    headers = ["benchmark", *ledger["fields"], "not reproducible", "dataset (apart)"]
    rows = []
    for row in ledger["benchmarks"]:
        cells = [_MARK[row["cells"][f]["status"]] for f in ledger["fields"]]
        rows.append([row["benchmark"], *cells, f"{row['not_reproducible']} of {row['fields_total']}",
                     _MARK[row["dataset"]]])
    t = ledger["totals"]
    rows.append(["total", *[""] * len(ledger["fields"]), f"{t['not_reproducible']} of {t['fields_total']}", ""])
    return headers, rows


def totals_line(ledger: dict[str, Any]) -> str:
    """Our counts over the cells next to the paper's (e.g. 'ours 5/60/7, paper 28/36/8')."""
    t = ledger["totals"]
    ours = " / ".join(f"{t['counts'][s]} {s}" for s in STATUSES)
    paper = " / ".join(f"{t['paper_counts'][s]} {s}" for s in STATUSES)
    d = t["dataset_counts"]
    return (f"{t['cells']} cells ({t['benchmarks']} benchmarks x {len(ledger['fields'])} fields): ours {ours}; "
            f"paper {paper}. Dataset row apart: " + ", ".join(f"{d[s]} {s}" for s in STATUSES) + ".")


def render_table(ledger: dict[str, Any]) -> str:
    from tabulate import tabulate

    headers, rows = _rows(ledger)
    # "prompt.template" -> two header lines, so the table stays narrow enough for a terminal
    headers = [h.replace(".", "\n", 1).replace("not reproducible", "not\nreproducible") for h in headers]
    lines = [tabulate(rows, headers=headers, tablefmt="simple"), ""]
    for row in ledger["benchmarks"]:
        lines.append(f"{row['benchmark']}: {row['summary']}")
        for field in (*ledger["fields"], ledger["dataset_field"]):
            cell = row["cells"][field]
            if cell["notes"]:
                lines.append(f"  {field} [{cell['status']}]:")
                lines.extend(f"    {note}" for note in cell["notes"])
        if row["quirks"]:
            lines.append(f"  data quirks (from {row['quirks_source']}):")
            lines.extend(f"    - {q}" for q in row["quirks"])
        lines.append("")
    lines.append(f"overall: {ledger['totals']['summary']}")
    lines.append(totals_line(ledger))
    return "\n".join(lines)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(ledger: dict[str, Any]) -> str:
    headers, rows = _rows(ledger)
    lines = ["# Reproducibility ledger", "",
             "Each cell compares the benchmark's documented pipeline with its released code: "
             "`matched`, `undefined` (the documentation leaves it unspecified) or `CONTRADICTED`.", "",
             "| " + " | ".join(f"`{h}`" if h in ledger["fields"] else h for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(_md(c) for c in r) + " |")
    lines += ["", f"**Overall: {ledger['totals']['summary']}.** {totals_line(ledger)}", ""]
    for row in ledger["benchmarks"]:
        lines += [f"## {row['title']} (`{row['benchmark']}`)", "", f"{row['summary']}.", ""]
        for field in (*ledger["fields"], ledger["dataset_field"]):
            cell = row["cells"][field]
            if cell["notes"]:
                lines.append(f"- `{field}` — {cell['status']}")
                lines.extend(f"  - {_md(note)}" for note in cell["notes"])
        if row["quirks"]:
            lines += ["", f"Data quirks (from {row['quirks_source']}):", ""]
            lines.extend(f"- {_md(q)}" for q in row["quirks"])
        lines.append("")
    return "\n".join(lines)


def render_json(ledger: dict[str, Any]) -> str:
    return json.dumps(ledger, indent=2, ensure_ascii=False)


def render(ledger: dict[str, Any], fmt: str) -> str:
    renderers = {"table": render_table, "json": render_json, "markdown": render_markdown}
    if fmt not in renderers:
        raise ValueError(f"unknown format {fmt!r}; formats: {', '.join(renderers)}")
    return renderers[fmt](ledger)
