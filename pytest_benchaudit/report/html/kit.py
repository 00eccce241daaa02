"""The HTML report's building blocks as an :class:`~pytest_benchaudit.compare.analysis_registry.HtmlKit`, the one
handed to each registered analysis's section (:mod:`pytest_benchaudit.compare.analysis_registry`).

The methods are the report's own helpers (:mod:`.format`, :mod:`.plots`, :mod:`.verdict`): an analysis's
section escapes and rounds exactly as every other section does, without the analysis importing the report.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pytest_benchaudit.report.html.format import esc, fmt, fmt_ci, fmt_corr, fmt_p, fmt_pp, is_num, note, table
from pytest_benchaudit.report.html.plots import figure, img, rc
from pytest_benchaudit.report.html.verdict import small_sample_note

__all__ = ["ReportKit", "scatter_plot"]


def scatter_plot(
    xs: Sequence[float],
    ys: Sequence[float],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    alt: str,
    caption: str,
    fit_line: bool = False,
) -> str:
    """A scatter plot as an embedded PNG, with the least-squares line when ``fit_line`` (and 3 or more points
    spread along x); "" without points.  Labels are drawn as plain text (mathtext off, :func:`.plots.rc`)."""
    if not xs:
        return ""
    with rc():
        fig = figure(5.6, 4.0)
        ax = fig.add_subplot(1, 1, 1)
        ax.scatter(xs, ys, s=26, color="#1f77b4", alpha=0.8)
        if fit_line and len(xs) >= 3 and max(xs) > min(xs):
            import numpy as np

            slope, icept = np.polyfit(xs, ys, 1)
            line = np.linspace(min(xs), max(xs), 10)
            ax.plot(line, slope * line + icept, color="#d62728", lw=1.2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        return img(fig, alt, caption)


class ReportKit:
    """The report's :class:`~pytest_benchaudit.compare.analysis_registry.HtmlKit` (every method escapes its text)."""

    def esc(self, value: Any) -> str:
        return esc(value)

    def note(self, text: str) -> str:
        return note(text)

    def lead(self, text: str) -> str:
        return f"<p><strong>{esc(text)}</strong></p>"

    def warn(self, text: str) -> str:
        return f'<p class="warn">{esc(text)}</p>'

    def table(self, headers: list[Any], rows: Iterable[list[Any]]) -> str:
        return table(headers, rows)

    def fmt(self, value: Any, digits: int = 3) -> str:
        return fmt(value, digits)

    def fmt_p(self, value: Any) -> str:
        return fmt_p(value)

    def fmt_pp(self, value: Any) -> str:
        return fmt_pp(value)

    def fmt_ci(self, ci: Any, digits: int = 2) -> str:
        return fmt_ci(ci, digits)

    def fmt_corr(self, value: Any) -> str:
        return fmt_corr(value)

    def is_num(self, value: Any) -> bool:
        return is_num(value)

    def small_sample(self, n: Any, what: str) -> str:
        return small_sample_note(n, what)

    def scatter(
        self,
        xs: Sequence[float],
        ys: Sequence[float],
        *,
        xlabel: str,
        ylabel: str,
        title: str,
        alt: str,
        caption: str,
        fit_line: bool = False,
    ) -> str:
        return scatter_plot(
            xs, ys, xlabel=xlabel, ylabel=ylabel, title=title, alt=alt, caption=caption, fit_line=fit_line
        )
