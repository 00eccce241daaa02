"""The analyses of the compare document, each declared once: what it adds to compare.json, its text, its HTML.

An analysis is one :class:`Analysis`: a ``name`` (its key in ``compare.json``), ``compute`` (the
function that makes its part of the document from the run sets and the analyses already made), an
optional ``text`` renderer (the terminal output of ``benchaudit compare`` and ``audit``) and an
optional :class:`HtmlSection` (the HTML report's section and its link in the navigation).  Once
:func:`register`-ed, the analysis is in every compare document :func:`run_analyses` completes
(``benchaudit compare``, ``benchaudit audit``'s ``compare`` part, :func:`.document_builder.compare_document`),
in :func:`.render.render_compare`'s text and in the HTML report (:mod:`pytest_benchaudit.report.html`),
in the order registered.  The built-in analyses are registered by :mod:`.builtin_analyses`; adding one is
one module and one line there (docs/compare.md, "Adding an analysis").

What ``compute`` may do, so that analyses do not step on each other or on the core document:

- return its part (JSON-ready: dicts, lists, str, numbers, None), stored as ``doc[name]``; None
  leaves the key out (e.g. an analysis of two sets, given one);
- add its per-set part under ``doc["by_set"][side][name]`` and notes with :meth:`AnalysisContext.note`;
- read anything of ``ctx.doc`` (the core parts, and the parts of the analyses registered before it).

An analysis with ``on_request=True`` runs only when the caller passes options under its name
(``options={name: ...}``: the command's flags, e.g. ``--similarity``); the others always run.

The HTML section is written without importing the report (``audit`` sits below ``report`` in the
dependency direction, tests/test_architecture.py): the report hands the section an :class:`HtmlKit`
(escaping, notes, tables, numbers, a scatter plot); every string given to the kit is escaped by it, so
a section built from kit calls only cannot inject markup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast

from pytest_benchaudit.compare.compare_documents import CompareDocument
from pytest_benchaudit.compare.runsets import RunSet

__all__ = [
    "Analysis",
    "AnalysisContext",
    "HtmlKit",
    "HtmlSection",
    "CORE_KEYS",
    "REPORT_ANCHORS",
    "register",
    "unregister",
    "analyses",
    "run_analyses",
    "render_texts",
]

#: The type of an analysis's part of the document (e.g. ``list[PeerGapRow]`` for ``peer_gaps``).
PartT = TypeVar("PartT")

#: Keys the compare document has whatever analyses are registered (document.py); no analysis may take one.
CORE_KEYS = frozenset(
    {
        "version",
        "created",
        "sets",
        "conventions",
        "scores",
        "ranks",
        "tau_b",
        "mean_win_rate",
        "benchmark_ranks",
        "pca",
        "pca_by_benchmark",
        "tasks",
        "paired",
        "rank_ties",
        "mde80",
        "by_set",
        "comparison",
        "rank_shift",
        "spearman",
        "missing",
        "bootstrap",
        "notes",
        "label_a",
        "label_b",
        "min_shift_for_stability",
        "similar_pairs",
        "findings",
    }
)


#: The HTML report's own section anchors (report/html/__init__.py ``_NAV``; a test keeps the two equal): an
#: analysis's section may not take one.
REPORT_ANCHORS = frozenset(
    {
        "verdict",
        "summary",
        "harnesses",
        "causes",
        "scores",
        "ranks",
        "shift",
        "bump",
        "tau",
        "pca",
        "findings",
        "sweeps",
        "invalid",
        "repeats",
        "paired",
        "ledger",
        "notes",
    }
)


class HtmlKit(Protocol):
    """The HTML report's building blocks, handed to an analysis's section (:class:`HtmlSection`).

    Each method escapes the text it is given; numbers are rounded as the rest of the report rounds them.
    """

    def esc(self, value: Any) -> str:
        """``value`` as escaped text."""

    def note(self, text: str) -> str:
        """A paragraph of explanation (small print)."""

    def lead(self, text: str) -> str:
        """A paragraph in bold: the section's main result."""

    def warn(self, text: str) -> str:
        """A warning paragraph."""

    def table(self, headers: list[Any], rows: Iterable[list[Any]]) -> str:
        """A table; cells are escaped (numbers right-aligned)."""

    def fmt(self, value: Any, digits: int = 3) -> str:
        """A number rounded to ``digits`` significant places, ``—`` for a missing one."""

    def fmt_p(self, value: Any) -> str:
        """A p-value."""

    def fmt_pp(self, value: Any) -> str:
        """A signed difference in percentage points."""

    def fmt_ci(self, ci: Any, digits: int = 2) -> str:
        """A [low, high] interval."""

    def fmt_corr(self, value: Any) -> str:
        """A correlation (two decimals)."""

    def is_num(self, value: Any) -> bool:
        """Whether ``value`` is a finite number."""

    def small_sample(self, n: Any, what: str) -> str:
        """The report's warning that ``what`` rests on only ``n`` models, or "" when ``n`` is enough."""

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
        """A scatter plot as an embedded PNG (with the least-squares line when ``fit_line``); "" without points."""


@dataclass(frozen=True)
class HtmlSection(Generic[PartT]):
    """An analysis's section of the HTML report: ``<section id=anchor>`` headed ``title``, linked from the
    navigation as ``nav`` (default: the title).  ``body(part, doc, kit)`` returns its content, "" to leave the
    section out (e.g. nothing to show)."""

    anchor: str
    title: str
    body: Callable[[PartT, CompareDocument, HtmlKit], str]
    nav: str | None = None


@dataclass
class AnalysisContext:
    """What ``compute`` reads: the run sets, the document so far, the command's statistics settings and
    the analyses' own options (``options[name]``, the type each analysis defines)."""

    set_a: RunSet
    set_b: RunSet | None
    doc: CompareDocument
    n_resamples: int = 5000
    seed: int = 0
    permutations: int = 1000
    options: Mapping[str, object] = field(default_factory=dict)

    @property
    def sets(self) -> list[RunSet]:
        """The compared run sets, set a first."""
        return [s for s in (self.set_a, self.set_b) if s is not None]

    def note(self, text: str) -> None:
        """Add a note to the document (``notes``: printed after the tables, listed in the report)."""
        self.doc["notes"].append(text)


@dataclass(frozen=True)
class Analysis(Generic[PartT]):
    """One analysis of the compare document (see the module's contract); ``PartT``: the type of its part
    (what ``compute`` returns, ``text`` and the HTML section read)."""

    name: str
    compute: Callable[[AnalysisContext], PartT | None]
    text: Callable[[PartT], str] | None = None
    html: HtmlSection[PartT] | None = None
    on_request: bool = False
    summary: str = ""


_REGISTRY: dict[str, Analysis[Any]] = {}  # each analysis has a part of its own type


def register(analysis: Analysis[PartT]) -> Analysis[PartT]:
    """Add ``analysis`` after those registered; returns it.  A name already taken (by another analysis or by
    the core document, :data:`CORE_KEYS`) or an HTML anchor already used (by another analysis or by the
    report, :data:`REPORT_ANCHORS`) is a :class:`ValueError` naming it."""
    name = analysis.name
    if not name or not name.replace("_", "").isalnum():
        raise ValueError(f"analysis {name!r}: a name is letters, digits and '_' (its key in compare.json)")
    if name in CORE_KEYS:
        raise ValueError(f"analysis {name!r}: compare.json's core document already has that key")
    if name in _REGISTRY:
        raise ValueError(f"analysis {name!r} is already registered ({_REGISTRY[name].summary or 'no summary'})")
    anchors = {a.html.anchor: a.name for a in _REGISTRY.values() if a.html is not None}
    anchors.update({anchor: "the report's own section" for anchor in REPORT_ANCHORS})
    if analysis.html is not None and analysis.html.anchor in anchors:
        raise ValueError(
            f"analysis {name!r}: HTML anchor {analysis.html.anchor!r} is taken by {anchors[analysis.html.anchor]!r}"
        )
    _REGISTRY[name] = analysis
    return analysis


def unregister(name: str) -> None:
    """Remove the analysis registered as ``name`` (KeyError when there is none)."""
    del _REGISTRY[name]


def analyses() -> list[Analysis[Any]]:
    """Every registered analysis, in the order registered (the built-ins first: the package's ``__init__``
    imports :mod:`.builtin_analyses`, so they are registered before any module of the package can be used)."""
    return list(_REGISTRY.values())


def run_analyses(ctx: AnalysisContext) -> None:
    """Add each registered analysis's part to ``ctx.doc``, in order; on-request analyses only when
    ``ctx.options`` has their name.  Errors of an analysis (e.g. :class:`.runsets.CompareError`) propagate."""
    for analysis in analyses():
        if analysis.on_request and analysis.name not in ctx.options:
            continue
        part = analysis.compute(ctx)
        if part is not None:
            _put_part(ctx.doc, analysis.name, part)


def _put_part(doc: CompareDocument, name: str, part: object) -> None:
    """``doc[name] = part``: the registry's open end.  An analysis's part goes under its own name, which only
    the analysis knows (the built-ins' are declared on :class:`.compare_documents.CompareDocument`, an analysis
    registered from outside adds a key of its own), so the key is a variable: the document, a dict at run
    time, is set as one."""
    cast("dict[str, object]", doc)[name] = part


def render_texts(doc: CompareDocument) -> list[str]:
    """The text of each registered analysis that has a part in ``doc`` and a text renderer, in order."""
    return [a.text(part) for a in analyses() if a.text is not None and (part := doc.get(a.name)) is not None]
