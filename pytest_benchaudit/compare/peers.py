"""Peer gaps: a model's distance to its peers under each of two pipelines.

When the fields of a pipeline interact (a denominator change matters only once extraction lets
invalid answers through, a token budget only under a reasoning prompt), a field's own effect on
one model cannot be isolated.  What can still be said is whether the pipeline change moved the
model *relative to the others* it is compared with.  For a task t and a model m scored under both
sets, with P = the other models scored on t under both sets (its peers, at least 2):

    gap_X(m, t)   = o_X(m, t) - mean over p in P of o_X(p, t)        (X = set a, set b)
    delta(m, t)   = gap_b(m, t) - gap_a(m, t)

where o is the headline score oriented so that higher is better (lower-is-better metrics such as
a MAD are negated).  A change that moves every model alike leaves delta at 0, whatever its size;
delta > 0 means the model gains on its peers under set b.  Gaps are in the metric's unit and,
for share metrics (scores in [0, 1], higher is better), also in percentage points (``*_pp``).
When the two sets score the task with different metrics the gaps are not on one scale:
``delta`` is then null and ``comparable`` false.
"""

from __future__ import annotations

from pytest_benchaudit.compare.analysis_registry import Analysis, AnalysisContext, HtmlKit, HtmlSection
from pytest_benchaudit.compare.compare_documents import CompareDocument, OneSetAnalysis, PeerGapRow

__all__ = ["peer_gaps", "render_peer_gaps", "peers_html", "ANALYSIS", "MIN_PEERS", "HTML_ROWS"]

MIN_PEERS = 2
#: Peer-gap rows the HTML report shows (largest change first); compare.json has them all.
HTML_ROWS = 30


def _share(scores: dict[str, float], lower_is_better: bool) -> bool:
    return not lower_is_better and all(0.0 <= v <= 1.0 for v in scores.values())


def peer_gaps(an_a: OneSetAnalysis, an_b: OneSetAnalysis) -> list[PeerGapRow]:
    """One row per (task, model) scored in both sets with at least :data:`MIN_PEERS` peers.

    ``an_a``/``an_b``: the per-set analyses of the compare document (``scores`` and ``tasks``).
    """
    rows: list[PeerGapRow] = []
    for key in sorted(set(an_a["scores"]) & set(an_b["scores"])):
        sa, sb = an_a["scores"][key], an_b["scores"][key]
        ta, tb = an_a["tasks"][key], an_b["tasks"][key]
        models = sorted(set(sa) & set(sb))
        if len(models) < MIN_PEERS + 1:
            continue
        lib_a, lib_b = bool(ta["lower_is_better"]), bool(tb["lower_is_better"])
        oa = {m: -sa[m] if lib_a else sa[m] for m in models}
        ob = {m: -sb[m] if lib_b else sb[m] for m in models}
        comparable = ta["metrics"] == tb["metrics"] and lib_a == lib_b
        pp = _share({m: sa[m] for m in models}, lib_a) and _share({m: sb[m] for m in models}, lib_b)
        total_a, total_b = sum(oa.values()), sum(ob.values())
        n = len(models) - 1
        for m in models:
            gap_a = oa[m] - (total_a - oa[m]) / n
            gap_b = ob[m] - (total_b - ob[m]) / n
            delta = gap_b - gap_a if comparable else None
            rows.append(
                {
                    "benchmark": key.split(".", 1)[0],
                    "task": key,
                    "model": m,
                    "n_peers": n,
                    "gap_a": gap_a,
                    "gap_b": gap_b,
                    "delta": delta,
                    "comparable": comparable,
                    "metric_a": "/".join(ta["metrics"]),
                    "metric_b": "/".join(tb["metrics"]),
                    "gap_a_pp": 100 * gap_a if pp else None,
                    "gap_b_pp": 100 * gap_b if pp else None,
                    "delta_pp": 100 * delta if pp and delta is not None else None,
                }
            )
    return rows


def render_peer_gaps(rows: list[PeerGapRow], top: int = 10) -> str:
    """The largest peer-gap changes for the terminal."""
    from tabulate import tabulate

    moved = sorted(
        (r for r in rows if r["delta"] is not None), key=lambda r: (-abs(r["delta"] or 0.0), r["task"], r["model"])
    )
    if not moved:
        return "Peer gaps: no task scored on one scale in both sets with 3 or more common models."

    def v(value: float | None, pp: float | None) -> str:
        return f"{pp:+.1f} pp" if pp is not None else f"{value:+.3f}"

    body = [
        [
            r["task"],
            r["model"],
            v(r["gap_a"], r["gap_a_pp"]),
            v(r["gap_b"], r["gap_b_pp"]),
            v(r["delta"], r["delta_pp"]),
            r["n_peers"],
        ]
        for r in moved[:top]
    ]
    return str(
        f"Peer gaps (score - mean of the other models; delta = gap b - gap a), largest {len(body)} of "
        f"{len(moved)}\n"
        + tabulate(body, headers=["task", "model", "gap a", "gap b", "delta", "peers"], tablefmt="simple")
    )


def peers_html(rows: list[PeerGapRow] | None, doc: CompareDocument, kit: HtmlKit) -> str:
    """The report's section: the :data:`HTML_ROWS` largest changes, each gap in pp on a share metric."""
    gaps = [r for r in rows or [] if isinstance(r, dict)]
    if not gaps:
        return ""

    def v(value: float | None, pp: float | None, unit: str | None) -> str:
        """A gap in pp on a share metric, else in the metric's own unit, named."""
        if kit.is_num(pp):
            return kit.fmt_pp(pp) + " pp"
        return f"{value:+.3g} {unit or ''}".rstrip() if kit.is_num(value) else "—"

    label_a, label_b = doc.get("label_a", "a"), doc.get("label_b", "b")
    ordered = sorted(gaps, key=lambda r: (not r.get("comparable"), -abs(r.get("delta") or 0), r["task"], r["model"]))
    body = [
        [
            r["task"],
            r["model"],
            v(r.get("gap_a"), r.get("gap_a_pp"), r.get("metric_a")),
            v(r.get("gap_b"), r.get("gap_b_pp"), r.get("metric_b")),
            v(r.get("delta"), r.get("delta_pp"), r.get("metric_a")) if r.get("comparable") else "— (metrics differ)",
            r.get("n_peers"),
        ]
        for r in ordered[:HTML_ROWS]
    ]
    more = (
        kit.note(f"The {HTML_ROWS} largest of {len(gaps)}; compare.json has them all.") if len(gaps) > HTML_ROWS else ""
    )
    return "".join(
        [
            kit.note(
                f"Gap = the model's score minus the mean of the other models on the task (higher = "
                f"better), under {label_a} and {label_b}; delta = gap b − gap a, the move relative to "
                "its peers that a change common to all models cannot explain. Largest first."
            ),
            kit.table(["task", "model", f"gap ({label_a})", f"gap ({label_b})", "delta", "peers"], body),
            more,
        ]
    )


def _compute(ctx: AnalysisContext) -> list[PeerGapRow] | None:
    """Two sets: the peer-gap rows of set a's and set b's analyses; one set: nothing."""
    if ctx.set_b is None:
        return None
    return peer_gaps(ctx.doc["by_set"]["a"], ctx.doc["by_set"]["b"])


ANALYSIS: Analysis[list[PeerGapRow]] = Analysis(
    name="peer_gaps",
    compute=_compute,
    text=render_peer_gaps,
    html=HtmlSection("peers", "Peer gaps", peers_html),
    summary="each model's score minus its peers' mean, per set, and the change between the sets",
)
