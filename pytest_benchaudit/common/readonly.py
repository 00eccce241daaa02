"""Read-only copies of JSON documents, all the way down, for code the project does not own.

The hooks users implement (``pytest_benchaudit_record``, ``pytest_benchaudit_summary``) receive the
documents the run writes.  A view of the top level only (``types.MappingProxyType``) lets a hook
change what lies below it: ``summary["results"].clear()`` would empty the score table the terminal
prints next.  :func:`read_only_copy` gives a copy whose every dict and list refuses changes:

- :class:`ReadOnlyDict` and :class:`ReadOnlyList` are ``dict`` and ``list`` subclasses, so what
  reads a document as JSON reads them as it reads the original: ``json.dumps``, equality with
  the document, ``isinstance(x, dict)``, ``dict(x)``, iteration, ``x["key"]``;
- each method that would change one raises ``TypeError`` naming the way out:
  ``copy.deepcopy(x)`` gives plain, mutable dicts and lists (so does ``pickle``);
- strings, numbers, booleans and ``None`` are immutable already and are shared, not copied.

Cost: one pass over the document (tens of microseconds for a record of a few kilobytes), paid only when a
hook is implemented.  Pure: no project imports.
"""

from __future__ import annotations

from typing import Any, NoReturn, cast

__all__ = ["ReadOnlyDict", "ReadOnlyList", "read_only_copy", "thaw"]

_WHY = (
    "is read-only: benchaudit hands hooks the documents the run writes, not copies to edit; "
    "copy.deepcopy() it for a copy you may change"
)


class ReadOnlyDict(dict[Any, Any]):
    """A ``dict`` that refuses every change (see the module docstring)."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(f"this dict {_WHY}")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def copy(self) -> dict[Any, Any]:
        """A plain ``dict`` of the same items (their values stay read-only; ``copy.deepcopy`` thaws all)."""
        return dict(self)

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return cast("dict[Any, Any]", thaw(self))

    def __reduce__(self) -> tuple[type, tuple[dict[Any, Any]]]:
        return dict, (thaw(self),)


class ReadOnlyList(list[Any]):
    """A ``list`` that refuses every change (see the module docstring)."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(f"this list {_WHY}")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def copy(self) -> list[Any]:
        return list(self)

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return cast("list[Any]", thaw(self))

    def __reduce__(self) -> tuple[type, tuple[list[Any]]]:
        return list, (thaw(self),)


def read_only_copy(doc: Any) -> Any:
    """``doc`` (JSON-shaped: dicts, lists, tuples, scalars) with every dict and list made read-only;
    tuples become read-only lists, as JSON writes them."""
    if isinstance(doc, dict):
        return ReadOnlyDict({key: read_only_copy(value) for key, value in doc.items()})
    if isinstance(doc, (list, tuple)):
        return ReadOnlyList([read_only_copy(value) for value in doc])
    return doc


def thaw(doc: Any) -> Any:
    """A plain, mutable copy of ``doc`` (its read-only dicts and lists, or anyone's, as ``dict``/``list``)."""
    if isinstance(doc, dict):
        return {key: thaw(value) for key, value in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [thaw(value) for value in doc]
    return doc
