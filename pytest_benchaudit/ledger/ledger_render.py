"""``benchaudit ledger`` output: the 72-cell view as a table, Markdown or JSON.

The ledger itself (which field each benchmark's documentation states, and whether its released
code matches) is built by :mod:`pytest_benchaudit.ledger.ledger_rows`; this module only renders it.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_benchaudit.ledger.ledger_documents import LedgerDocument, LedgerRow
from pytest_benchaudit.ledger.ledger_rows import CONTRADICTED, MATCHED, STATUSES, UNDEFINED, UNREAD

__all__ = ["peer_lines", "render", "render_json", "render_markdown", "render_table", "totals_line"]


_MARK = {MATCHED: "matched", UNDEFINED: "undefined", CONTRADICTED: "CONTRADICTED", UNREAD: "unread"}
_READ = (MATCHED, UNDEFINED, CONTRADICTED)


def _not_reproducible(n: int, total: int, unread: int) -> str:
    """'5 of 9', or '2 of 9 +6 unread': unread cells are neither reproducible nor known not to be."""
    return f"{n} of {total}" + (f" +{unread} unread" if unread else "")


def _rows(ledger: LedgerDocument) -> tuple[list[str], list[list[str]]]:
    headers = ["benchmark", *ledger["fields"], "not reproducible", "dataset (apart)"]
    rows = []
    for row in ledger["benchmarks"]:
        cells = [_MARK[row["cells"][f]["status"]] for f in ledger["fields"]]
        rows.append(
            [
                row["benchmark"],
                *cells,
                _not_reproducible(row["not_reproducible"], row["fields_total"], row["counts"].get(UNREAD, 0)),
                _MARK[row["dataset"]],
            ]
        )
    t = ledger["totals"]
    rows.append(
        [
            "total",
            *[""] * len(ledger["fields"]),
            _not_reproducible(t["not_reproducible"], t["fields_total"], t["counts"].get(UNREAD, 0)),
            "",
        ]
    )
    return headers, rows


def totals_line(ledger: LedgerDocument) -> str:
    """Our counts over all cells, then the paper view: our shares over the cells read next to the
    paper's over its 72 (the paper has no 'unread', so its counts are not comparable to ours cell
    for cell), then the dataset row apart."""
    t = ledger["totals"]
    ours = " / ".join(f"{t['counts'][s]} {s}" for s in STATUSES)
    view = t["paper_view"]
    if view["cells_read"]:
        read = " / ".join(
            f"{view['ours_over_read'][s]} {s} ({100 * (view['ours_share'][s] or 0.0):.0f}%)" for s in _READ
        )
    else:
        read = "none"
    paper = " / ".join(f"{view['paper_counts'][s]} {s} ({100 * view['paper_share'][s]:.0f}%)" for s in _READ)
    d = t["dataset_counts"]
    return (
        f"{t['cells']} cells ({t['benchmarks']} benchmarks x {len(ledger['fields'])} fields): ours {ours}. "
        f"Paper view, over the {view['cells_read']} cells read ({view['cells_unread']} unread left out): "
        f"ours {read}; paper, over its {sum(view['paper_counts'].values())} cells: {paper}. "
        "Dataset row apart: " + ", ".join(f"{d[s]} {s}" for s in STATUSES) + "."
    )


def peer_lines(row: LedgerRow, indent: str = "  ", bullet: str = "") -> list[str]:
    """The row's peer layers (``peers``), field by field against ``released``: both values and the
    peer layer's ``why``; [] for a benchmark without peer layers."""
    lines = []
    for peer in row.get("peers") or []:
        scope = "" if peer["tasks"] == row.get("tasks") else f" [{', '.join(peer['tasks'])}]"
        lines.append(
            f"{indent}{bullet}peer layer {peer['layer']}{scope}: {len(peer['fields'])} fields differ from released"
        )
        for f in peer["fields"]:
            where = "" if f["tasks"] == peer["tasks"] else f" [{', '.join(f['tasks'])}]"
            lines.append(
                f"{indent}  {bullet}{f['field']}: released {_show(f['released'])}, {peer['layer']} "
                f"{_show(f['peer'])}{where}" + (f" — why: {f['why']}" if f["why"] else " — no why given")
            )
            for name, pair in f["content"].items():
                lines.append(
                    f"{indent}    {bullet}template {name}: released {_show(pair['released'])}, "
                    f"{peer['layer']} {_show(pair['peer'])}"
                )
        if peer["missing_released"]:
            lines.append(f"{indent}  {bullet}no released layer to compare with: {', '.join(peer['missing_released'])}")
    return lines


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def render_table(ledger: LedgerDocument) -> str:
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
        lines.extend(peer_lines(row))
        lines.append("")
    lines.append(f"overall: {ledger['totals']['summary']}")
    lines.append(totals_line(ledger))
    return "\n".join(lines)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(ledger: LedgerDocument) -> str:
    headers, rows = _rows(ledger)
    lines = [
        "# Reproducibility ledger",
        "",
        "Each cell compares the benchmark's documented pipeline with its released code: "
        "`matched`, `undefined` (the documentation read leaves it unspecified), `CONTRADICTED`, or "
        "`unread` (a document that may state it exists but could not be read).",
        "",
        "| " + " | ".join(f"`{h}`" if h in ledger["fields"] else h for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
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
        if row.get("peers"):
            lines += ["", "Peer layers, field by field against `released`:", ""]
            lines.extend(
                _md(line)
                if not line.lstrip().startswith("- ")
                else line[: len(line) - len(line.lstrip())] + "- " + _md(line.lstrip()[2:])
                for line in peer_lines(row, indent="", bullet="- ")
            )
        lines.append("")
    return "\n".join(lines)


def render_json(ledger: LedgerDocument) -> str:
    return json.dumps(ledger, indent=2, ensure_ascii=False)


def render(ledger: LedgerDocument, fmt: str) -> str:
    renderers = {"table": render_table, "json": render_json, "markdown": render_markdown}
    if fmt not in renderers:
        raise ValueError(f"unknown format {fmt!r}; formats: {', '.join(renderers)}")
    return renderers[fmt](ledger)
