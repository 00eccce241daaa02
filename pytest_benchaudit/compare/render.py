"""The compare document as terminal tables (the registered analyses render their own: :mod:`.analysis_registry`)."""

from __future__ import annotations

from typing import Any

from pytest_benchaudit.compare.analysis_registry import render_texts
from pytest_benchaudit.compare.compare_documents import CompareDocument, PairedRow, SetAnalysis

__all__ = ["paired_unit", "render_compare"]

MAX_PAIRS_SHOWN = 15  # significant pairs listed in the text; compare.json holds every pair


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:g}" if float(x).is_integer() else f"{x:.{digits}f}"
    return str(x)


def paired_unit(rows: list[PairedRow]) -> str:
    """What the paired rows' error bars treat as independent, in words: the questions, or the groups of
    ``aggregation.by`` (per field, with the fewest and most groups of a pair)."""
    groups: dict[str, list[int]] = {}
    independent = False
    for r in rows:
        by = r.get("clustered_by")
        if by:
            groups.setdefault(str(by), []).append(int(r.get("n_groups") or 0))
        else:
            independent = True
    parts = [
        f"clustered by {by} ({min(g)}{'' if min(g) == max(g) else f'-{max(g)}'} groups: 95% CI diff ± "
        "t(G-1) clustered se)"
        for by, g in sorted(groups.items())
    ]
    if independent:
        parts.append("questions treated as independent (95% CI diff ± 1.96 se)")
    return "; ".join(parts)


def _render_paired(side: str, an: SetAnalysis) -> str:
    """The paired-differences block: the significant pairs, the count of the others, mde80 per task."""
    from tabulate import tabulate

    rows = an["paired"]
    significant = [r for r in rows if r.get("significant")]
    shown = significant[:MAX_PAIRS_SHOWN]
    untested = sum(1 for r in rows if r.get("test") is None)
    lines = [
        f"Paired differences, set {side} (same questions; {paired_unit(rows)}; exact McNemar on 0/1 scores, else "
        f"paired t, clustered t where grouped; Holm over each task's pairs): "
        f"{len(significant)} of {len(rows)} pairs significant (p_holm < 0.05), {len(rows) - len(significant)} not"
        + (f" ({untested} untestable: under two common questions or groups)" if untested else "")
    ]
    if shown:
        lines.append(
            tabulate(
                [
                    [
                        r["task"] + (" ↓" if r["lower_is_better"] else ""),
                        r["model_a"],
                        r["model_b"],
                        r["n"],
                        f"{r['diff']:+.3f}",
                        f"[{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]" if r["ci95"] else "–",
                        f"{r['p_value']:.2g}",
                        f"{r['p_holm']:.2g}",
                        str(r["test"]) + (f" (G {r.get('n_groups')})" if r.get("clustered_by") else ""),
                    ]
                    for r in shown
                ],
                headers=["task", "model a", "model b", "n", "diff (a - b)", "95% CI", "p", "p Holm", "test"],
                tablefmt="simple",
                disable_numparse=True,
            )
        )
    if len(significant) > len(shown):
        lines.append(f"({len(significant) - len(shown)} more significant pairs in compare.json 'paired')")
    mde = an.get("mde80", {})
    if mde:
        lines.append(
            "mde80 (smallest difference a pair detects with 80% power): "
            + ", ".join(f"{k} {_fmt(v['mde80'])} (n {v['n']})" for k, v in sorted(mde.items()))
        )
    return "\n".join(lines)


def render_compare(doc: CompareDocument) -> str:
    """The document as the terminal shows it: per set the ranks, paired differences, tau-b and PCA; for two
    sets rho and the rank shifts; each registered analysis's text; what is missing; the notes."""
    from tabulate import tabulate

    out: list[str] = []
    for side, an in doc["by_set"].items():
        keys = sorted(an["ranks"])
        models = sorted({m for k in keys for m in an["ranks"][k]})
        bench_ranks = an["benchmark_ranks"]
        benches = sorted(bench_ranks)
        headers = [
            "model",
            *[k + (" ↓" if an["tasks"][k]["lower_is_better"] else "") for k in keys],
            *[f"{b} (mean rank)" for b in benches],
            "win rate",
        ]
        # A model whose order against the model ranked just above it is not significant: "≈".
        tied = {(t["task"], t["worse"]) for t in an.get("rank_ties", [])}
        rows = []
        for m in models:
            row = [m, *[_fmt(an["ranks"][k].get(m), 1) + (" ≈" if (k, m) in tied else "") for k in keys]]
            for bnch in benches:
                e = bench_ranks[bnch].get(m)
                row.append(f"{_fmt(e['rank'], 1)} ({e['mean_task_rank']:.2f})" if e else "–")
            row.append(_fmt(an["mean_win_rate"].get(m)))
            rows.append(row)
        rows.sort(key=lambda r: (an["mean_win_rate"].get(r[0]) is None, -(an["mean_win_rate"].get(r[0]) or 0)))
        out.append(
            f"Per-task ranks, set {side} ({an['label']}: pipelines {', '.join(an['pipelines'])}); "
            "1 = best, ties averaged, ↓ = lower is better"
            + (
                "; ≈ = not significantly behind the model ranked just above (paired test, Holm, p >= 0.05)"
                if tied
                else ""
            )
        )
        out.append(tabulate(rows, headers=headers, tablefmt="simple"))
        if an.get("paired"):
            out.append("\n" + _render_paired(side, an))
        if an["tau_b"]:
            taus = [r["tau"] for r in an["tau_b"] if r["tau"] is not None]
            out.append(
                f"\nKendall tau-b between tasks, set {side}"
                + (f" (range {min(taus):.3f} .. {max(taus):.3f})" if taus else "")
            )
            out.append(
                tabulate(
                    [
                        [
                            r["task_a"],
                            r["task_b"],
                            _fmt(r["tau"]),
                            _fmt(r["p_value"]),
                            r["inversions"],
                            r["n_models"],
                            "declared similar" if r.get("similar") else "",
                        ]
                        for r in an["tau_b"]
                    ],
                    headers=["task a", "task b", "tau-b", "p", "inversions", "models", ""],
                    tablefmt="simple",
                )
            )
        pca = an["pca"]
        if "variance_explained" in pca:
            shares = ", ".join(f"{100 * v:.1f}%" for v in pca["variance_explained"])
            out.append(
                f"\nPCA ({len(pca['models'])} models x {len(pca['columns'])} tasks, standardized): variance "
                f"explained {shares}; parallel analysis retains "
                f"{pca['parallel_analysis']['n_components']} component(s)"
            )
        elif pca.get("skipped"):
            out.append(f"\nPCA skipped: {pca['skipped']}")
        out.append("")
    c, boot = doc.get("comparison"), doc.get("bootstrap")
    if c and boot:
        out.append(
            f"Set a = {c['a']}, set b = {c['b']} (by {c['by']}); paired bootstrap over questions, "
            f"{boot['n_resamples']} resamples, seed {boot['seed']} "
            f"({boot['seconds']:.2f} s)"
        )
        out.append(
            tabulate(
                [
                    [
                        s["benchmark"],
                        _fmt(s["rho"]),
                        f"[{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}]" if s["ci95"] else "–",
                        s["n_models"],
                        len(s["tasks"]),
                    ]
                    for s in doc["spearman"]
                ],
                headers=["benchmark", "Spearman rho", "95% CI (bootstrap percentile)", "models", "tasks"],
                tablefmt="simple",
            )
        )
        moved = sorted((r for r in doc["rank_shift"] if r["shift"] != 0), key=lambda r: (-abs(r["shift"]), r["model"]))
        if moved:
            out.append(
                "\nRank shifts (shift = rank a - rank b; + = climbs under b; stability for |shift| >= "
                f"{doc['min_shift_for_stability']})"
            )
            out.append(
                tabulate(
                    [
                        [
                            r["benchmark"],
                            r["model"],
                            _fmt(r["rank_a"], 1),
                            _fmt(r["rank_b"], 1),
                            f"{r['shift']:+g}",
                            _fmt(r["direction_stability"]),
                        ]
                        for r in moved
                    ],
                    headers=["benchmark", "model", "rank a", "rank b", "shift", "direction stability"],
                    tablefmt="simple",
                )
            )
        else:
            out.append("\nNo rank shifts.")
    # Each registered analysis's text (peer gaps, similarity, sensitivity...: .registry), then what is missing.
    out += ["\n" + text for text in render_texts(doc)]
    for miss in doc.get("missing") or []:
        out.append(f"missing: {miss['benchmark']}: {miss['model']}: {miss['reason']}")
    for note in doc.get("notes", []):
        out.append(f"note: {note}")
    return "\n".join(out)
