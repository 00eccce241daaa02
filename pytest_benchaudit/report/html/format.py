"""Escaping, number formatting and tables of the HTML report.

Every string that reaches the page goes through :func:`esc` (model names, task keys and variants
come from model outputs and user configuration: untrusted).  Numbers are rounded to what they
mean: a rank is an integer unless tied (``1.5``), a share metric prints as a percentage with one
decimal, a correlation with two decimals, a p-value with two significant digits, a change in
percentage points with a sign and one decimal.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from typing import Any

__all__ = [
    "esc",
    "is_num",
    "fmt",
    "fmt_rank",
    "fmt_score",
    "fmt_corr",
    "fmt_p",
    "fmt_pp",
    "fmt_share",
    "fmt_ci",
    "table",
    "note",
    "short",
    "CSS",
    "CSP",
    "LABEL_MAX",
]

#: Longest label drawn on a plot (tables show the full string).
LABEL_MAX = 40

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:24px;color:#1b1b1b;background:#fff;max-width:1400px}
h1{font-size:1.5em;margin:0 0 .2em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{font-size:1em;margin-top:1.2em}
p.note{color:#555;font-size:.9em;margin:.3em 0;max-width:60em}
table{border-collapse:collapse;margin:.6em 0;font-size:.88em}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top;max-width:32em;overflow-wrap:break-word}
th{background:#f1f3f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr:nth-child(even) td{background:#fafafa}
figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#555;font-size:.85em}
.wrap{overflow-x:auto;max-width:100%}
.up{color:#1a7f37}.down{color:#cf222e}
.tie{text-decoration:underline dotted;cursor:help}
nav a{margin-right:1em}
ul.notes{font-size:.88em;color:#444}
h4{font-size:.95em;margin:1em 0 .2em}
p.warn{color:#8a4b00;background:#fff6e5;border-left:3px solid #d98e04;padding:2px 8px;font-size:.88em;margin:.3em 0;max-width:60em}
#verdict{border:1px solid #c9d3df;background:#f7f9fc;padding:4px 14px 8px;margin:.6em 0 1.2em}
#verdict h2{margin:.3em 0 0}
#verdict p.sentence{margin:.5em 0 .2em;max-width:72em}
#mv-verdict{border-left:3px solid #8da2bb;padding-left:8px;margin:.4em 0}
#verdict table{font-size:.82em;background:#fff}
#verdict td{max-width:28em;padding:2px 8px}#verdict td:first-child,#verdict td:nth-child(2),#verdict td code{white-space:nowrap}#verdict td:last-child{max-width:none}
code{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.92em;overflow-wrap:anywhere}
"""

# No script at all; images only from data: URIs; styles only inline.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def esc(value: Any) -> str:
    """Any value as escaped text (quotes too: safe in attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def is_num(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and not (isinstance(value, float) and math.isnan(value))
    )


def fmt(value: Any, digits: int = 3) -> str:
    """A value as display text (not yet escaped); floats to ``digits`` significant decimals."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        if value.is_integer() and abs(value) < 1e6:
            return str(int(value))
        if abs(value) < 10**-digits or abs(value) >= 1e5:
            return f"{value:.2g}"
        return f"{value:.{digits}f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt(v, digits) for v in value)
    return str(value)


def fmt_rank(value: Any) -> str:
    """A rank: integer unless tied (average ranks end in .5, mean ranks keep two decimals)."""
    if not is_num(value):
        return "—"
    v = float(value)
    if v.is_integer():
        return str(int(v))
    return f"{v:.1f}" if (2 * v).is_integer() else f"{v:.2f}"


def fmt_share(value: Any, digits: int = 1) -> str:
    """A share (0..1) as a percentage."""
    return "—" if not is_num(value) else f"{100 * float(value):.{digits}f}%"


def fmt_score(value: Any, share: bool) -> str:
    """A task score: a share metric in percent (one decimal), any other metric with two decimals."""
    if not is_num(value):
        return "—"
    return f"{100 * float(value):.1f}" if share else f"{float(value):.2f}"


def fmt_corr(value: Any) -> str:
    """A correlation (tau, rho, r): two decimals."""
    return "—" if not is_num(value) else f"{float(value):.2f}"


def fmt_p(value: Any) -> str:
    """A p-value: two significant digits, ``< 0.001`` below that."""
    if not is_num(value):
        return "—"
    v = float(value)
    return "< 0.001" if v < 0.001 else f"{v:.2g}"


def fmt_pp(value: Any) -> str:
    """A change in percentage points: signed, one decimal."""
    return "—" if not is_num(value) else f"{float(value):+.1f}"


def fmt_ci(ci: Any, digits: int = 2) -> str:
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or not all(is_num(v) for v in ci):
        return "—"
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def short(label: Any) -> str:
    text = str(label)
    return text if len(text) <= LABEL_MAX else text[: LABEL_MAX - 1] + "…"


def _cell(value: Any) -> str:
    """A cell: already-formatted text (str) is escaped as is; right-aligned when it reads as a number."""
    text = value if isinstance(value, str) else fmt(value)
    stripped = text.replace("%", "").replace("+", "").replace("−", "-").replace("< ", "").strip()
    numeric = is_num(value) or _parses(stripped)
    return f'<td class="num">{esc(text)}</td>' if numeric else f"<td>{esc(text)}</td>"


def _parses(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def table(headers: list[Any], rows: Iterable[list[Any]], *, raw_cols: set[int] | None = None) -> str:
    """A table; every header and cell is escaped (``raw_cols``: cells already rendered HTML)."""
    raw_cols = raw_cols or set()
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(f"<td>{c}</td>" if i in raw_cols else _cell(c) for i, c in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    return f'<div class="wrap"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'
