"""common/readonly.py: read-only copies of JSON documents (what the hooks of newhooks.py receive).

Properties over any JSON document (hypothesis): the copy equals the document and serialises to the
same JSON; every dict and list in it, at any depth, refuses every change; a deep copy or a pickle
of it is plain and mutable, equal to the document again.
"""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_benchaudit.common.readonly import ReadOnlyDict, ReadOnlyList, read_only_copy, thaw

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=30,
)

DICT_CHANGES: list[Callable[[dict[Any, Any]], object]] = [
    lambda d: d.__setitem__("k", 1),
    lambda d: d.__delitem__(next(iter(d), "k")),
    lambda d: d.clear(),
    lambda d: d.pop("k", None),
    lambda d: d.popitem(),
    lambda d: d.setdefault("k", 1),
    lambda d: d.update(k=1),
    lambda d: d.__ior__({"k": 1}),
]
LIST_CHANGES: list[Callable[[list[Any]], object]] = [
    lambda x: x.append(1),
    lambda x: x.extend([1]),
    lambda x: x.insert(0, 1),
    lambda x: x.pop(),
    lambda x: x.remove(1),
    lambda x: x.clear(),
    lambda x: x.sort(),
    lambda x: x.reverse(),
    lambda x: x.__setitem__(0, 1),
    lambda x: x.__delitem__(0),
    lambda x: x.__iadd__([1]),
    lambda x: x.__imul__(2),
]


def _containers(doc: Any) -> list[Any]:
    out = []
    if isinstance(doc, (dict, list)):
        out.append(doc)
        for value in doc.values() if isinstance(doc, dict) else doc:
            out += _containers(value)
    return out


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_the_copy_reads_as_the_document_and_refuses_every_change_at_any_depth(doc: Any) -> None:
    ro = read_only_copy(doc)
    before = json.dumps(doc, sort_keys=True)
    assert ro == doc and json.dumps(ro, sort_keys=True) == before and orjson.loads(orjson.dumps(ro)) == doc
    for node in _containers(ro):
        assert isinstance(node, (ReadOnlyDict, ReadOnlyList))
        for change in DICT_CHANGES if isinstance(node, dict) else LIST_CHANGES:
            with pytest.raises(TypeError, match="read-only.*copy.deepcopy"):
                change(node)
    assert json.dumps(doc, sort_keys=True) == before  # the original was never touched either


@settings(max_examples=100, deadline=None)
@given(JSON)
def test_a_deep_copy_or_a_pickle_is_plain_and_mutable(doc: Any) -> None:
    ro = read_only_copy(doc)
    for plain in (copy.deepcopy(ro), pickle.loads(pickle.dumps(ro)), thaw(ro)):
        assert plain == doc
        assert not any(isinstance(n, (ReadOnlyDict, ReadOnlyList)) for n in _containers(plain))


def test_the_copy_shares_nothing_mutable_with_the_document() -> None:
    doc = {"results": [{"score": 0.5, "ci95": [0.1, 0.9]}]}
    ro = read_only_copy(doc)
    doc["results"][0]["ci95"].append(1.0)  # the controller's own document may change; the hook's copy does not
    assert ro == {"results": [{"score": 0.5, "ci95": [0.1, 0.9]}]}
    mine = dict(ro)  # a shallow copy: its own top level, read-only below
    mine["extra"] = 1
    with pytest.raises(TypeError):
        mine["results"].clear()
