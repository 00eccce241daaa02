"""How a model spec becomes the backend that asks it: recipes an engine builds backends from.

Each recipe is a module-level function bound to its arguments with :func:`functools.partial`,
so it can be handed to an :class:`~.engine.Engine` in this process or pickled to the inference
process (:mod:`.process`) and built there.  The HTTP client stack (aiohttp) is imported only
where a backend is built, so a pytest process whose engine runs elsewhere never loads it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_benchaudit.inference.backend import Backend, ModelSpec

if TYPE_CHECKING:
    from pytest_benchaudit.inference.usage import ModelPrice

__all__ = ["endpoint_recipe", "budgeted_recipe"]

Recipe = Callable[[], Backend]


def _endpoint_backend(spec: ModelSpec, concurrency: int, threshold: int) -> Backend:
    # Every HTTP model sits behind a circuit breaker: a dead endpoint is not asked every question.
    from pytest_benchaudit.inference.breaker import BreakerBackend

    inner: Any
    if spec.endpoints:
        from pytest_benchaudit.inference.balanced import BalancedBackend

        inner, in_flight = BalancedBackend(spec, concurrency=concurrency), concurrency * len(spec.endpoints)
    else:
        from pytest_benchaudit.inference.openai_compat import OpenAICompatBackend

        inner, in_flight = OpenAICompatBackend(spec, concurrency=concurrency), concurrency
    # The breaker's gate is the client's own size: it decides when a request is about to be sent,
    # so a 401 stops the model at its first answer.  (A request waiting out its retry backoff
    # holds a slot meanwhile, as it would behind any client's concurrency bound.)
    return BreakerBackend(inner, threshold, spec.label, in_flight)


def endpoint_recipe(spec: ModelSpec, concurrency: int, threshold: int) -> Recipe:
    """An OpenAI-compatible endpoint (balanced over ``spec.endpoints`` when there are several)
    behind a breaker of ``threshold`` consecutive failures; ``concurrency`` per endpoint."""
    return functools.partial(_endpoint_backend, spec, concurrency, threshold)


def _budgeted_backend(inner: Recipe, meter: Any, price: ModelPrice | None, concurrency: int) -> Backend:
    from pytest_benchaudit.inference.usage import BudgetedBackend

    return BudgetedBackend(inner(), meter, price, concurrency)


def budgeted_recipe(inner: Recipe, meter: Any, price: ModelPrice | None, concurrency: int) -> Recipe:
    """``inner`` behind the ``--max-cost`` meter (a :class:`~.usage.CostMeter`, shared by every
    model of the process that builds them)."""
    return functools.partial(_budgeted_backend, inner, meter, price, concurrency)
