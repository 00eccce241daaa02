"""The TAA metrics' alias-graph cache answers for the table it is given: tables built, freed and built
again (a freed table's id is taken by the next one; the cache was keyed by id() alone and answered the
new table with the old one's graph) each get their own graph, checked against a BFS written here."""

from __future__ import annotations

from collections import deque

from pytest_benchaudit.scoring.tasks import actors


def _reachable(table: dict[str, list[str]], start: str, target: str) -> bool:
    """A reference: undirected reachability over the table's edges, identity counted (AthenaBench's BFS)."""
    edges: dict[str, set[str]] = {}
    for actor, values in table.items():
        for other in values:
            edges.setdefault(actor, set()).add(other)
            edges.setdefault(other, set()).add(actor)
    seen, queue = {start}, deque([start])
    while queue:
        node = queue.popleft()
        if node == target:
            return True
        for nxt in edges.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return False


def _kind(table: dict[str, list[str]], related: dict[str, list[str]], gold: str, prediction: str) -> str:
    if _reachable(table, gold, prediction):
        return "C"
    merged = {k: [*table.get(k, []), *related.get(k, [])] for k in {*table, *related}}
    return "P" if _reachable(merged, gold, prediction) else "I"


def test_tables_built_freed_and_rebuilt_get_their_own_graphs() -> None:
    ids: list[int] = []
    for i in range(300):  # more tables than the cache holds: evicted ones are freed and their ids reused
        # Same shape every time (a freed dict's memory goes to the next), different names.
        aliases = {f"apt{i}": [f"bear{i}"], "shared": [f"x{i}"]}
        related = {f"bear{i}": [f"group{i}"]}
        ids.append(id(aliases))
        resources = {"aliases": aliases, "related": related}
        for gold, prediction in (
            (f"apt{i}", f"bear{i}"),
            (f"apt{i}", f"group{i}"),
            (f"apt{i}", f"bear{i - 1}"),
            ("shared", f"x{i}"),
            ("shared", f"x{i - 1}"),
        ):
            want = _kind(aliases, related, gold, prediction)
            assert actors.connection(gold, prediction, resources, released_cti=False) == want, (i, gold, prediction)
        del aliases, related, resources  # freed here (reference counting)
    # The scenario that broke the id()-keyed cache happened: a new table at a freed one's address.
    assert len(set(ids)) < len(ids)


def test_the_cache_is_bounded_and_a_hit_is_the_same_table() -> None:
    cache = actors._GraphCache(size=3)
    tables = [{f"a{i}": [f"b{i}"]} for i in range(5)]
    graphs = [cache.get(t, keep_nan=False) for t in tables]
    assert [sorted(g) for g in graphs] == [[f"a{i}", f"b{i}"] for i in range(5)]
    assert cache.get(tables[4], keep_nan=False) is graphs[4]  # cached
    assert len(cache._entries) == 3
    assert cache.get(tables[0], keep_nan=False) == graphs[0]  # evicted, built again: the same graph
    equal_but_other = {"a4": ["b4"]}
    assert cache.get(equal_but_other, keep_nan=False) == graphs[4]
    # keep_nan is part of the key: CTI-Bench keeps "nan" as a node, AthenaBench drops it.
    nan_table = {"x": ["nan"], "y": ["nan"]}
    assert actors.connection("x", "y", {"aliases": nan_table, "related": {}}, released_cti=True) == "C"
    assert actors.connection("x", "y", {"aliases": nan_table, "related": {}}, released_cti=False) == "I"
