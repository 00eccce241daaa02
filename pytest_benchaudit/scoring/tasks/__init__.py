"""Task-family extraction rules and metrics, one module per family.

``extract.py`` and ``scoring.py`` hold the generic MCQ rules and metrics and merge
these in.  A family module (``cwe``, ``cvss``, ...) imports only ``..types`` and
exposes three dicts: ``RULES`` (name -> rule ``(text, question, generation) ->
(prediction | None, detail)``), ``METRICS`` (name -> metric ``(prediction,
question, resources) -> Score``) and ``METRIC_INFO`` (name -> ``MetricInfo``).
Adding a family = adding a module and listing it in ``_FAMILIES``.
"""

from __future__ import annotations

import importlib
from typing import TypeVar

from pytest_benchaudit.pipeline.types import MetricInfo
from pytest_benchaudit.scoring.tasks.inputs import Metric, Rule

__all__ = ["TASK_RULES", "TASK_METRICS", "TASK_METRIC_INFO"]

# Family modules, imported in this order; a name defined twice is an error.
_FAMILIES: tuple[str, ...] = ("labels", "numeric", "attack", "cwe", "cvss", "actors", "peer_inspect", "peer_lm_eval")

TASK_RULES: dict[str, Rule] = {}
TASK_METRICS: dict[str, Metric] = {}
TASK_METRIC_INFO: dict[str, MetricInfo] = {}

_V = TypeVar("_V")


def _merge(target: dict[str, _V], new: dict[str, _V], family: str, kind: str) -> None:
    clash = set(target) & set(new)
    if clash:
        raise RuntimeError(f"tasks.{family} redefines {kind} {', '.join(sorted(clash))}")
    target.update(new)


for _name in _FAMILIES:
    _module = importlib.import_module(f"{__name__}.{_name}")
    _merge(TASK_RULES, getattr(_module, "RULES", {}), _name, "rule")
    _merge(TASK_METRICS, getattr(_module, "METRICS", {}), _name, "metric")
    _merge(TASK_METRIC_INFO, getattr(_module, "METRIC_INFO", {}), _name, "metric info")
