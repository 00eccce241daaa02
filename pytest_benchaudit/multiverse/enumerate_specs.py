"""The specifications of a task's space: the full factorial, or a seeded sample of it.

A specification is one value per axis.  Specifications are numbered in mixed radix over the space's
axes (sorted by field, values sorted: :mod:`.space`), so number ``i`` names the same specification
whatever order a suite or a run listed the values in.  A space of at most :data:`MAX_SPECS`
specifications is enumerated whole; a larger one is a simple random sample of ``MAX_SPECS``
numbers drawn without replacement by :class:`random.Random` with the given seed (the size, the seed
and the numbers are in the document), enumerated in increasing order.  No list of the full
factorial is built: a number is decoded on its own.

Pure: no I/O.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from pydantic import JsonValue

from pytest_benchaudit.multiverse.space import TaskSpace

__all__ = ["MAX_SPECS", "Spec", "Enumeration", "enumerate_specs", "decode"]

MAX_SPECS = 4096  # enumerate the full factorial up to this many specifications per task


@dataclass(frozen=True)
class Spec:
    """One specification: its number in the full factorial and its value index on each axis."""

    number: int
    levels: tuple[int, ...]  # per axis of the space (in its order), the index of the value

    def values(self, space: TaskSpace) -> dict[str, JsonValue]:
        """field -> value of this specification."""
        return {axis.field: axis.values[i].value for axis, i in zip(space.axes, self.levels)}


@dataclass(frozen=True)
class Enumeration:
    """The specifications evaluated for a space: all of them, or a seeded sample."""

    specs: tuple[Spec, ...]
    size: int  # the full factorial's
    sampled: bool
    seed: int | None  # the sample's seed (None when the full factorial is enumerated)


def decode(space: TaskSpace, number: int) -> Spec:
    """Specification ``number`` of ``space`` (mixed radix, the last axis varying fastest)."""
    levels = []
    rest = number
    for axis in reversed(space.axes):
        rest, level = divmod(rest, len(axis.values))
        levels.append(level)
    return Spec(number, tuple(reversed(levels)))


def enumerate_specs(space: TaskSpace, seed: int = 0, max_specs: int = MAX_SPECS) -> Enumeration:
    """Every specification of ``space`` when it has at most ``max_specs``, else a sample of
    ``max_specs`` of them drawn with ``random.Random(seed)`` (module docstring)."""
    size = space.size
    if size <= max_specs:
        return Enumeration(tuple(decode(space, i) for i in range(size)), size, False, None)
    numbers = sorted(random.Random(seed).sample(range(size), max_specs))
    return Enumeration(tuple(decode(space, i) for i in numbers), size, True, seed)
