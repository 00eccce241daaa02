"""What a run's answers say about the context they were asked in: warnings said once each.

A score can rest on something no record field flags on its own:

* **the served model** -- an endpoint that serves another model than the one named
  (``--model llama3@URL`` in front of a gpt-4o proxy) scores that model.  Each answer's ``model``
  (the record's ``served_model``) and the endpoint's ``GET /models`` (when the generation cache
  asked it) are compared with the model id the run sent: the same id says nothing, a dated
  snapshot of it (``gpt-4o`` answered by ``gpt-4o-2024-08-06``, ``claude-3-5-sonnet-latest`` by
  ``claude-3-5-sonnet-20241022``) is a note (``served_model_snapshot``), anything else a warning
  (``served_model_mismatch``);
* **log-probabilities asked and not returned** (``logprobs_missing``) -- a layer that sends
  ``top_logprobs`` reads its answer from them; an endpoint that ignores the parameter leaves
  the rule nothing to read;
* **the released fallback** (``released_fallback``) -- released MMLU's reader turns an answer
  without log-probabilities into 'A' and scores it (``evaluate.py``'s bare ``except``); the
  records say so in ``extraction_detail``, and this counts them per task, layer and model;
* **log-likelihood edges** -- an endpoint whose tokenizer merges the context's end with the
  continuation and serves no tokenizer (``loglikelihood_merged``: those continuations are not read),
  and one that echoes no generated token (``loglikelihood_no_generated_token``: lm-eval's cut leaves
  out each continuation's own last token), counted per model (:mod:`.loglikelihood`);
* **a cache that cannot hit** (``cache_unusable``) -- see :func:`cache_warnings`.

:class:`ContextWatch` reads records one at a time (the run's one streaming pass over
``records.jsonl``) and keeps counters only.  Pure: no I/O, no pytest; the warnings are
``{"kind": ..., "message": ...}`` rows (:class:`~pytest_benchaudit.pipeline.record_documents.CardWarning`) for
run.json's ``warnings`` list and the terminal.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from pydantic import JsonValue

from pytest_benchaudit.inference.loglikelihood import MERGED, NO_GENERATED
from pytest_benchaudit.pipeline.record_documents import CardWarning, RecordRow

if TYPE_CHECKING:
    from pytest_benchaudit.inference.cache import CacheStats, UnusableCache

__all__ = ["ContextWatch", "cache_warnings", "served_relation", "warning"]

# What may follow "<model id>-" in a dated snapshot's name: 2024-08-06, 20241022, 0613 (gpt-4-0613),
# optionally followed by a suffix (-preview, -v1:0).
_SNAPSHOT = re.compile(r"^(\d{4}-\d{2}-\d{2}|\d{8}|\d{4})(\b.*)?$")
_ALIAS = ("-latest", ":latest")  # names that stand for "the newest snapshot"


def warning(kind: str, message: str) -> CardWarning:
    """One entry of run.json's ``warnings`` list."""
    return {"kind": kind, "message": message}


def served_relation(asked: str, served: str) -> str:
    """How the model id served relates to the one asked for: ``"same"``, ``"snapshot"`` (a dated
    snapshot of it) or ``"other"``.  Case is ignored; ``:latest`` / ``-latest`` name the newest one."""
    a, s = asked.strip().lower(), served.strip().lower()
    if a == s:
        return "same"
    for alias in _ALIAS:
        if a.endswith(alias) and s == a[: -len(alias)]:
            return "same"
        if s.endswith(alias) and a == s[: -len(alias)]:
            return "same"
    base = next((a[: -len(alias)] for alias in _ALIAS if a.endswith(alias)), a)
    if s.startswith(base + "-") and _SNAPSHOT.match(s[len(base) + 1 :]):
        return "snapshot"
    return "other"


def _share(n: int, total: int) -> str:
    return f"{n:,} of {total:,}"


class ContextWatch:
    """Counters over a run's records, turned into context warnings at the end (:meth:`warnings`).

    ``asked`` maps each model label whose served model is to be checked to the model id the run
    sends (models the run launched itself and replays are left out by the caller).
    ``fallback_marker`` is how a record's ``extraction_detail`` starts when a released reader's
    fallback scored it (``scoring.extract.MMLU_FALLBACK``)."""

    def __init__(self, asked: Mapping[str, str | None], fallback_marker: str | None = None) -> None:
        self.asked = {label: model_id for label, model_id in asked.items() if model_id}
        self.fallback_marker = fallback_marker
        self.answers: Counter[str] = Counter()  # model -> answers (records without an error)
        self.served: dict[str, Counter[str]] = {}  # model -> served_model -> answers naming it
        self.listed: dict[str, list[str]] = {}  # model -> what GET /models listed
        self.logprobs_asked: Counter[str] = Counter()  # model -> answers to requests with top_logprobs
        self.logprobs_missing: Counter[str] = Counter()  # ... of which carried none
        self.top_asked: dict[str, JsonValue] = {}  # model -> the top_logprobs value sent (for the message)
        self.items: Counter[tuple[str, str, str]] = Counter()  # (task, layer, model) -> records
        self.fallback: Counter[tuple[str, str, str]] = Counter()  # ... scored by the released fallback
        self.loglik_merged: Counter[str] = Counter()  # model -> log-likelihood answers its tokenizer merged
        self.loglik_no_generated: Counter[str] = Counter()  # model -> ... echoed without a generated token

    def add(self, record: RecordRow) -> None:
        """Count one record (a dict as ``records.jsonl`` holds it)."""
        model = str(record.get("model"))
        layer = str(record.get("pipeline") or "") + (f" {record['variant']}" if record.get("variant") else "")
        where = (f"{record.get('benchmark')}.{record.get('task')}", layer, model)
        self.items[where] += 1
        detail = record.get("extraction_detail")
        if self.fallback_marker and isinstance(detail, str) and detail.startswith(self.fallback_marker):
            self.fallback[where] += 1
        if record.get("error"):
            return  # no answer came back: nothing to say about what answered
        self.answers[model] += 1
        served = record.get("served_model")
        if isinstance(served, str) and served:
            self.served.setdefault(model, Counter())[served] += 1
        request = record.get("request")
        params = request.get("params") if isinstance(request, Mapping) else None
        if isinstance(params, Mapping) and params.get("top_logprobs") is not None:
            self.logprobs_asked[model] += 1
            self.top_asked.setdefault(model, params["top_logprobs"])
            continuations = record.get("continuations")  # a log-likelihood request's echoed log-probabilities
            read = (
                isinstance(continuations, list)
                and bool(continuations)
                and all(isinstance(c, Mapping) and c.get("missing") is None for c in continuations)
            )
            said = [
                str(c.get(k) or "") for c in continuations or () if isinstance(c, Mapping) for k in ("missing", "note")
            ]
            if any(text.startswith(MERGED) for text in said):
                self.loglik_merged[model] += 1  # echoed, but lm-eval's cut cannot be known: not "missing"
            elif not record.get("top_logprobs") and not read:
                self.logprobs_missing[model] += 1
            if any(NO_GENERATED in text for text in said):
                self.loglik_no_generated[model] += 1

    def note_listed(self, model: str, ids: Iterable[str]) -> None:
        """What the model's endpoint listed at ``GET /models`` (read by the generation cache)."""
        self.listed[model] = sorted(set(ids))

    def warnings(self) -> list[CardWarning]:
        """The context warnings, one per kind and model (or task), in a stable order."""
        out: list[CardWarning] = []
        for model, model_id in sorted(self.asked.items()):
            out.extend(self._served_warnings(model, model_id))
        for model, missing in sorted(self.logprobs_missing.items()):
            out.append(
                warning(
                    "logprobs_missing",
                    (
                        f"model {model}: {_share(missing, self.logprobs_asked[model])} answers came back without the "
                        f"log-probabilities the layer asked for (top_logprobs={self.top_asked[model]}); a rule that reads "
                        "them had nothing to read (an endpoint that ignores logprobs, or an API without them)"
                    ),
                )
            )
        for model, n in sorted(self.loglik_merged.items()):
            out.append(
                warning(
                    "loglikelihood_merged",
                    (
                        f"model {model}: in {_share(n, self.answers[model])} answers the endpoint's tokenizer merged the "
                        "context's end with the continuation and serves no /tokenizer_info and /tokenize: what lm-eval would "
                        "send and read depends on a tokenizer the endpoint does not serve, so those continuations were not "
                        "read (no_logprobs); serve the endpoint's tokenizer (vLLM --enable-tokenizer-info-endpoint)"
                    ),
                )
            )
        for model, n in sorted(self.loglik_no_generated.items()):
            out.append(
                warning(
                    "loglikelihood_no_generated_token",
                    (
                        f"model {model}: {_share(n, self.answers[model])} log-likelihood answers echoed the prompt with no "
                        "generated token after it: lm-eval's token_logprobs[ctxlen:-1] then leaves out each continuation's "
                        "own last token (a one-token option scores 0 and ties), and so does this layer"
                    ),
                )
            )
        for (task, layer, model), n in sorted(self.fallback.items()):
            out.append(
                warning(
                    "released_fallback",
                    (
                        f"{task} ({layer}), model {model}: {_share(n, self.items[(task, layer, model)])} items were scored "
                        f"by the {self.fallback_marker} (the answer carried no log-probabilities); those scores are the "
                        "released reader's quirk, not the model's answers"
                    ),
                )
            )
        return out

    def _served_warnings(self, model: str, model_id: str) -> list[CardWarning]:
        names = self.served.get(model, Counter())
        others = {n: c for n, c in names.items() if served_relation(model_id, n) == "other"}
        snapshots = {n: c for n, c in names.items() if served_relation(model_id, n) == "snapshot"}
        listed = self.listed.get(model) or []
        unlisted = bool(listed) and all(served_relation(model_id, i) == "other" for i in listed)
        total = self.answers[model]
        if others or unlisted:
            parts = []
            if others:
                said = ", ".join(f"{n!r} ({_share(c, total)} answers)" for n, c in sorted(others.items()))
                parts.append(f"the answers name {said}")
            if unlisted:
                parts.append(f"GET /models lists {', '.join(repr(i) for i in listed)}")
            return [
                warning(
                    "served_model_mismatch",
                    (
                        f"model {model}: the run asked for {model_id!r}, but {' and '.join(parts)}; its scores are "
                        "the served model's, not those of the model named"
                    ),
                )
            ]
        if snapshots:
            said = ", ".join(f"{n!r} ({_share(c, total)} answers)" for n, c in sorted(snapshots.items()))
            return [
                warning(
                    "served_model_snapshot",
                    (
                        f"model {model}: the run asked for {model_id!r}, answered by the dated snapshot {said}; "
                        "another day's run of the same name may be answered by another snapshot"
                    ),
                )
            ]
        return []


def cache_warnings(stats: Iterable[CacheStats]) -> list[CardWarning]:
    """Why the generation cache cannot answer a model, from the engines' ``cache_stats()``.

    A stored answer is used only when the model it names is among those the endpoint lists at
    ``GET /models`` (so a different model restarted behind the same URL is not answered from the
    old one's generations).  An endpoint whose answers name a model it does not list (``/models``
    says ``gpt-4o``, the answers ``openai/gpt-4o-2024-08-06``) therefore never gets a hit: every
    answer stored is unusable, every lookup of one a miss.  Said once per model."""
    seen: dict[str, UnusableCache] = {}
    for stat in stats:
        for model, why in (stat.get("unusable") or {}).items():
            entry = seen.setdefault(
                model, {"answered_by": why["answered_by"], "served": why["served"], "stores": 0, "misses": 0}
            )
            entry["stores"] += int(why.get("stores", 0))
            entry["misses"] += int(why.get("misses", 0))
    out = []
    for model, e in sorted(seen.items()):
        listed = ", ".join(repr(s) for s in e["served"] or ())
        out.append(
            warning(
                "cache_unusable",
                (
                    f"generation cache, model {model}: the answers name {e['answered_by']!r}, which GET /models does "
                    f"not list ({listed}); a stored answer is used only when the model it names is served, so none of "
                    f"this model's answers can hit ({e['stores']:,} stored unusable, {e['misses']:,} lookups missed for it)"
                ),
            )
        )
    return out
