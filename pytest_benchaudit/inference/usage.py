"""Token usage and cost: per model and task, a dated price table, and ``--max-cost``.

Prices are the project's own data, dated, under ``[tool.benchaudit.prices]`` in
pyproject.toml, in USD per million tokens::

    [tool.benchaudit.prices]
    date = "2026-11-20"                                  # when they were read (required)
    source = "https://openai.com/api/pricing"            # optional
    "gpt-5.4" = { input = 1.25, output = 10.0 }          # by --model label,
    "openai/gpt-5.4" = { input = 1.25, output = 10.0 }   # or PROVIDER/MODEL_ID, or the model id

:func:`usage_rows` sums the usage stored in records (``prompt_tokens``,
``completion_tokens``) per model and task, with a cost where a price is known; an LLM
judge's calls (the record's ``judge.usage``) are rows of their own, under ``judge:LABEL``
and priced as ``LABEL``;
:class:`CostMeter` counts what this process actually spent on requests (cache hits
cost nothing) and :class:`BudgetedBackend` stops sending once ``--max-cost`` is
reached: a request not sent comes back as ``Generation(error=NOT_ASKED)``, which the
runner turns into a skipped item (no record), so ``--resume`` asks it later.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import TypedDict

from pytest_benchaudit.common.errors import ConfigError
from pytest_benchaudit.inference.backend import Backend, ModelSpec
from pytest_benchaudit.pipeline.record_documents import RecordRow, UsageRow
from pytest_benchaudit.pipeline.types import Generation, Request

__all__ = [
    "JUDGE_PREFIX",
    "NOT_ASKED",
    "BudgetedBackend",
    "CostMeter",
    "ModelPrice",
    "PriceTable",
    "check_prices",
    "price_for",
    "cost_of",
    "usage_rows",
    "UsageTally",
]

NOT_ASKED = "not asked: --max-cost reached"
JUDGE_PREFIX = "judge:"  # the label a judge's calls are recorded (and counted) under
_META = ("date", "source", "currency")


class ModelPrice(TypedDict):
    """One model's price, USD per million tokens."""

    input: float
    output: float


@dataclass(frozen=True)
class PriceTable:
    """``[tool.benchaudit.prices]``, checked (:func:`check_prices`): when the prices were read, where
    from, and each model's price by the name the table gives it (a ``--model`` label,
    ``PROVIDER/MODEL_ID`` or a model id).  ``PriceTable()`` (no ``date``): the project has no table."""

    date: str | None = None
    source: str | None = None
    currency: str | None = None
    models: Mapping[str, ModelPrice] = field(default_factory=dict)


def check_prices(table: Mapping[str, object] | None) -> PriceTable:
    """Validate ``[tool.benchaudit.prices]`` (the TOML table as read, its values checked here): a
    ``date`` and ``{input, output}`` per model (USD / 1M tokens)."""
    if not table:
        return PriceTable()
    where = "[tool.benchaudit.prices]"
    date = table.get("date")
    if isinstance(date, _dt.date):
        date = date.isoformat()
    if not isinstance(date, str) or not date:
        raise ConfigError(f"{where}: needs date = \"YYYY-MM-DD\" (when the prices were read)")
    source, currency = table.get("source"), table.get("currency")
    if (currency if "currency" in table else "USD") != "USD":
        raise ConfigError(f"{where}: currency must be USD")
    models: dict[str, ModelPrice] = {}
    for name, price in table.items():
        if name in _META:
            continue
        if not (
            isinstance(price, Mapping)
            and set(price) <= {"input", "output"}
            and all(isinstance(v, (int, float)) and v >= 0 for v in (price.get("input"), price.get("output")))
        ):
            raise ConfigError(f"{where} {name!r}: expected {{ input = USD_PER_1M, output = USD_PER_1M }}")
        models[name] = {"input": float(price["input"]), "output": float(price["output"])}
    return PriceTable(
        date=date,
        source=None if source is None else str(source),
        currency=None if currency is None else str(currency),
        models=models,
    )


def price_for(prices: PriceTable, label: str, spec: ModelSpec | None = None) -> ModelPrice | None:
    """The price of a model: by label, then ``PROVIDER/MODEL_ID``, then the model id."""
    keys = [label]
    if spec is not None:
        if spec.provider and spec.model_id:
            keys.append(f"{spec.provider}/{spec.model_id}")
        if spec.model_id:
            keys.append(spec.model_id)
    for key in keys:
        if key in prices.models:
            return prices.models[key]
    return None


# A usage object as records and answers hold it (TokenUsage, or a stored record's JSON object):
# read key by key, each count checked to be a number.
def _tokens(usage: Mapping[str, object] | None) -> tuple[int, int]:
    usage = usage or {}
    prompt = usage.get("prompt_tokens", usage.get("input_tokens", 0))
    completion = usage.get("completion_tokens", usage.get("output_tokens", 0))
    return (
        int(prompt) if isinstance(prompt, (int, float)) else 0,
        int(completion) if isinstance(completion, (int, float)) else 0,
    )


def cost_of(usage: Mapping[str, object] | None, price: ModelPrice | None) -> float:
    if price is None:
        return 0.0
    prompt, completion = _tokens(usage)
    return (prompt * price["input"] + completion * price["output"]) / 1e6


@dataclass
class _Counts:
    """One tally row's counts (the row's model, benchmark and task are its key)."""

    items: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class UsageTally:
    """:func:`usage_rows`, record by record (:meth:`add`, then :meth:`rows`): one small row per
    model × benchmark × task, never the records."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str, str], _Counts] = {}

    def add(self, rec: RecordRow) -> None:
        self._count(str(rec.get("model")), rec, rec.get("usage"))
        judged = rec.get("judge")
        if isinstance(judged, Mapping) and judged.get("model"):  # the judge's call for this item
            self._count(str(judged["model"]), rec, judged.get("usage"))

    def _count(self, model: str, rec: RecordRow, usage: object) -> None:
        key = (model, str(rec.get("benchmark")), str(rec.get("task")))
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = _Counts()
        row.items += 1
        prompt, completion = _tokens(usage if isinstance(usage, Mapping) else None)
        row.prompt_tokens += prompt
        row.completion_tokens += completion

    def rows(self, prices: PriceTable, specs: Mapping[str, ModelSpec] | None = None) -> list[UsageRow]:
        rows: list[UsageRow] = []
        for (model, benchmark, task), counts in self._rows.items():
            label = model.removeprefix(JUDGE_PREFIX)  # a judge is priced as the model it is
            price = price_for(prices, label, (specs or {}).get(label))
            cost = (
                None
                if price is None
                else round(
                    cost_of(
                        {"prompt_tokens": counts.prompt_tokens, "completion_tokens": counts.completion_tokens}, price
                    ),
                    6,
                )
            )
            rows.append(
                {
                    "model": model,
                    "benchmark": benchmark,
                    "task": task,
                    "items": counts.items,
                    "prompt_tokens": counts.prompt_tokens,
                    "completion_tokens": counts.completion_tokens,
                    "cost_usd": cost,
                    "prices_date": prices.date if price is not None else None,
                }
            )
        return sorted(rows, key=lambda r: (r["model"], r["benchmark"], r["task"]))


def usage_rows(
    records: Iterable[RecordRow], prices: PriceTable, specs: Mapping[str, ModelSpec] | None = None
) -> list[UsageRow]:
    """Per model × benchmark × task: requests with usage, prompt/completion tokens, and cost (or ``None``);
    a judge's calls under ``judge:LABEL``."""
    tally = UsageTally()
    for rec in records:
        tally.add(rec)
    return tally.rows(prices, specs)


_METERS: dict[str, CostMeter] = {}  # this process's meters by id (see CostMeter.__reduce__)


def _process_meter(meter_id: str, limit: float | None) -> CostMeter:
    return _METERS.setdefault(meter_id, CostMeter(limit, meter_id=meter_id))


class CostMeter:
    """What this process spent on requests, against a limit (``--max-cost``, this process's share).

    Every model's backend charges the same meter.  Pickled to the inference process (each
    model's recipe on its own), a meter arrives there as that process's one meter of the same
    id, so the models still share one budget."""

    def __init__(self, limit: float | None, meter_id: str | None = None) -> None:
        import uuid

        self.limit = limit
        self.spent = 0.0
        self.refused = 0
        self.meter_id = meter_id or uuid.uuid4().hex

    def __reduce__(self) -> tuple[Any, tuple[str, float | None]]:
        return _process_meter, (self.meter_id, self.limit)

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.spent >= self.limit

    def add(self, amount: float) -> None:
        self.spent += amount


class BudgetedBackend:
    """A backend that sends nothing once the meter is exhausted, and charges each answer's usage to it.

    The engine queues far more requests than are in flight; the meter is read when a request
    is about to go out (one of ``concurrency`` slots), so at most ``concurrency`` requests sent
    before the limit was reached finish after it.
    """

    def __init__(self, inner: Backend, meter: CostMeter, price: ModelPrice | None, concurrency: int) -> None:
        self.inner = inner
        self.meter = meter
        self.price = price
        self.spec = getattr(inner, "spec", None)  # the cache names the model by its spec
        self._slots: asyncio.Semaphore | None = None
        self._concurrency = max(1, concurrency)

    async def served_models(self) -> list[str] | None:
        """What the wrapped endpoint serves (the generation cache keys on it); ``None`` if it cannot say."""
        inner = getattr(self.inner, "served_models", None)
        return await inner() if inner is not None else None

    async def generate(self, request: Request) -> Generation:
        if self._slots is None:  # created on the engine's loop
            self._slots = asyncio.Semaphore(self._concurrency)
        async with self._slots:
            if self.meter.exhausted:
                self.meter.refused += 1
                return Generation(error=NOT_ASKED, attempts=0)
            gen = await self.inner.generate(request)
            self.meter.add(cost_of(gen.usage, self.price))
            return gen

    async def aclose(self) -> None:
        await self.inner.aclose()
