"""Threat-actor attribution (CTI-TAA, AthenaBench TAA): actor names scored over alias graphs.

Resources (task ``resources``, JSON ``{actor: [alias_or_related, ...]}``, lower-case):
``aliases`` (CTI-Bench ``alias_dict``) and ``related`` (``related_dict``).

Rules:

* ``athena_actor_line`` — AthenaBench ``extract_taa_answer``: the last non-empty line, label
  prefix stripped, quotes stripped, whitespace collapsed.
* ``actor_final_line``  — standardized: the final line with content once decoration, an
  ``Answer:`` label, a trailing period and quotes are removed; whitespace collapsed.
  (CTI-Bench's released extraction was manual: no rule.)

Metrics (value = correct 1/0; ``extras`` = plausible 1/0 and combined C=1 / P=0.5 / I=0):

* ``cti_actor_graph`` — CTI-Bench ``compute_taa_accuracy`` with its BFS as released:
  the start node is never compared with the target, so gold == prediction counts only when
  the name has an alias edge (a name absent from the graph is "I" even when identical);
  the string ``"nan"`` in the lookups is a node like any other (it was a string in the
  released pickles too), which links every actor that has a ``"nan"`` entry.
* ``actor_graph``     — AthenaBench ``score_taa`` BFS: identity counts, then alias chain → C,
  alias ∪ related chain → P.  ``"nan"`` entries (pandas artefacts) are dropped.  Used by
  AthenaBench's released layer (with CTI-Bench's graphs; its own tables are not public) and
  by the standardized layers.
"""

from __future__ import annotations

import re
from collections import OrderedDict, deque

from pydantic import JsonValue

from pytest_benchaudit.pipeline.types import Generation, Question, Score
from pytest_benchaudit.scoring import declarations
from pytest_benchaudit.scoring.tasks.attack import athena_lines, clean_freeform
from pytest_benchaudit.scoring.tasks.inputs import ActorTable, Resources

__all__ = ["RULES", "METRICS", "METRIC_INFO", "connection"]

RESOURCES = ("aliases", "related")
_NAN = "nan"


# --------------------------------------------------------------------------- rules


@declarations.rule(name="athena_actor_line")
def athena_actor_line(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """AthenaBench TAA: the last non-empty line after the label prefix, quotes and extra spaces."""
    value, detail = athena_lines(text, r"(.+)", clean_freeform)
    return (value or None), detail


_PREFIX = re.compile(r"^(?:final\s+answer|answer|threat\s+actor|actor|attribution)\s*[:\-–—]\s*", re.IGNORECASE)
_STRIP = " \t\r\n*\"'`“”‘’_#>"


@declarations.rule(name="actor_final_line")
def actor_final_line(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """Standardized: the last line with content once markdown, quotes, an ``Answer:``-style label
    and a trailing period are removed; internal whitespace collapsed."""
    for line in reversed(text.splitlines()):
        value = line.strip(_STRIP)
        value = _PREFIX.sub("", value).strip(_STRIP).rstrip(".").strip(_STRIP)
        if value:
            return re.sub(r"\s+", " ", value), f"last line: {line.strip()[:60]!r}"
    return None, "no line with content"


# --------------------------------------------------------------------------- graphs


class _GraphCache:
    """The graphs built from resource tables, by table *identity*, each entry holding its table.

    Why the table is held: an ``id()`` is unique only while its object lives, and a table freed and
    another built at the same address (a second suite, a test's own table) would otherwise be answered
    with the first one's graph.  An entry keeps its table alive, so no other object can take its id
    while the entry exists, and a hit is checked to be that very table.  Tables are read-only data
    (JSON files read once per task): one changed in place is not noticed.  At most ``size`` entries,
    the least recently used dropped first (a run holds a few tables; a test session may build many).
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[int, bool], tuple[JsonValue, dict[str, list[str]]]] = OrderedDict()

    def get(self, table: JsonValue, keep_nan: bool) -> dict[str, list[str]]:
        key = (id(table), keep_nan)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is table:
            self._entries.move_to_end(key)
            return entry[1]
        graph = _build_graph(table, keep_nan)
        self._entries[key] = (table, graph)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return graph

    def clear(self) -> None:
        self._entries.clear()


def _actor_table(table: JsonValue) -> ActorTable:
    """``table`` as an :data:`ActorTable` (checked once per table, when its graph is built)."""
    if not isinstance(table, dict):
        raise TypeError(f"an actor table is a JSON object {{actor: [name, ...]}}, not {type(table).__name__}")
    checked: dict[str, list[JsonValue] | None] = {}
    for actor, values in table.items():
        if values is not None and not isinstance(values, list):
            raise TypeError(f"actor table entry {actor!r}: a list of names, not {type(values).__name__}")
        checked[actor] = values
    return checked


def _build_graph(table: JsonValue, keep_nan: bool) -> dict[str, list[str]]:
    """Normalised (strip + lower) undirected adjacency lists, in the released insertion order."""
    graph: dict[str, list[str]] = {}
    for actor, values in _actor_table(table).items():
        name = str(actor).strip().lower()
        graph[name] = [str(v).strip().lower() for v in (values or []) if keep_nan or str(v).strip().lower() != _NAN]
        if not keep_nan and name == _NAN:
            graph[name] = []
    for actor in list(graph):
        for other in list(graph[actor]):
            back = graph.setdefault(other, [])
            if actor not in back:
                back.append(actor)
    return graph


_graphs = _GraphCache()


def _graph(table: JsonValue, keep_nan: bool) -> dict[str, list[str]]:
    """The graph of ``table`` (built once per table while it is cached)."""
    return _graphs.get(table, keep_nan)


def _bfs(start: str, target: str, graphs: tuple[dict[str, list[str]], ...], count_start: bool) -> bool:
    if count_start and start == target:
        return True
    visited = {start}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        for graph in graphs:
            for nxt in graph.get(current, []):
                if nxt == target:
                    return True
                if nxt not in visited:
                    visited.add(nxt)
                    queue.append(nxt)
    return False


def connection(gold: str, prediction: str, resources: Resources, *, released_cti: bool) -> str:
    """ "C" (alias chain), "P" (alias ∪ related chain) or "I", from gold to prediction.

    ``released_cti`` selects CTI-Bench's variant (start node not compared, ``"nan"`` kept).
    The BFS visits nodes once; the released code re-queues visited ones, which changes
    nothing about reachability.
    """
    gold, prediction = gold.strip().lower(), prediction.strip().lower()
    keep_nan = released_cti
    aliases = _graph(resources["aliases"], keep_nan)
    related = _graph(resources["related"], keep_nan)
    count_start = not released_cti
    if _bfs(gold, prediction, (aliases,), count_start):
        return "C"
    if _bfs(gold, prediction, (aliases, related), count_start):
        return "P"
    return "I"


def _score(kind: str) -> Score:
    return Score(
        value=1.0 if kind == "C" else 0.0,
        correct=kind == "C",
        extras={"plausible": 1.0 if kind in ("C", "P") else 0.0, "combined": {"C": 1.0, "P": 0.5}.get(kind, 0.0)},
    )


@declarations.metric(
    name="cti_actor_graph",
    lower_is_better=False,
    kind="binary",
    resources=RESOURCES,
    invalid_extras=(("plausible", 0.0), ("combined", 0.0)),
    description="CTI-Bench TAA: 1 when the prediction is reached from the gold over the alias graph (BFS as "
    "released: an identical name counts only if it has an alias edge; 'nan' is a node); extras "
    "'plausible' (alias or related-group chain) and 'combined' (C=1, P=0.5)",
)
def cti_actor_graph(prediction: str, question: Question, resources: Resources) -> Score:
    """CTI-Bench ``compute_taa_accuracy``: value = correct (alias chain); extras plausible, combined."""
    return _score(connection(question.gold, prediction, resources, released_cti=True))


@declarations.metric(
    name="actor_graph",
    lower_is_better=False,
    kind="binary",
    resources=RESOURCES,
    invalid_extras=(("plausible", 0.0), ("combined", 0.0)),
    description="TAA: 1 when prediction equals the gold or is reached from it over the alias graph "
    "(AthenaBench BFS; 'nan' artefacts dropped); extras 'plausible' (alias or related-group chain) "
    "and 'combined' (C=1, P=0.5)",
)
def actor_graph(prediction: str, question: Question, resources: Resources) -> Score:
    """AthenaBench ``score_taa`` BFS (identity counts, "nan" dropped): value = correct; extras plausible, combined."""
    return _score(connection(question.gold, prediction, resources, released_cti=False))


# This module's rules and metrics by name, from their decorators (declarations.declared).
RULES, METRICS, METRIC_INFO = declarations.declared(globals())
