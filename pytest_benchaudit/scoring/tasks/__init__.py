"""Task-family extraction rules and metrics, one module per family.

``extract.py`` and ``metrics.py`` hold the generic MCQ rules and metrics and merge
these in.  A family module (``cwe``, ``cvss``, ...) imports only ``pipeline.types``
and :mod:`..declarations`; each rule ``(text, question, generation) -> (prediction |
None, detail)`` and metric ``(prediction, question, resources) -> Score`` in it is
registered by its one decorator (``@declarations.rule(name=...)``,
``@declarations.metric(name=..., lower_is_better=..., kind=..., description=...)``).
Adding a family = adding a module here: every module of this package is read.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TypeVar, cast

from pytest_benchaudit.pipeline.types import MetricInfo
from pytest_benchaudit.scoring import declarations
from pytest_benchaudit.scoring.tasks.inputs import Metric, Rule

__all__ = ["TASK_RULES", "TASK_METRICS", "TASK_METRIC_INFO"]

TASK_RULES: dict[str, Rule] = {}
TASK_METRICS: dict[str, Metric] = {}
TASK_METRIC_INFO: dict[str, MetricInfo] = {}

_V = TypeVar("_V")


def _merge(target: dict[str, _V], new: dict[str, _V], family: str, kind: str) -> None:
    clash = set(target) & set(new)
    if clash:
        raise RuntimeError(f"tasks.{family} redefines {kind} {', '.join(sorted(clash))}")
    target.update(new)


# Every module of this package, in name order; a name defined twice is an error.
for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    _module = importlib.import_module(f"{__name__}.{_info.name}")
    _rules, _metrics, _infos = declarations.declared(vars(_module))
    _merge(TASK_RULES, cast(dict[str, Rule], _rules), _info.name, "rule")
    _merge(TASK_METRICS, cast(dict[str, Metric], _metrics), _info.name, "metric")
    _merge(TASK_METRIC_INFO, _infos, _info.name, "metric info")
