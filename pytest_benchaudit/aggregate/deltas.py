"""How each ``--vary`` variant moved a task's score, and which pipeline stage moved it.

:func:`variant_deltas` reads the per task/model/variant result rows that
:func:`pytest_benchaudit.aggregate.results.summarize` makes (and the run's pipeline cards, for
what each variant varied) and gives, per benchmark x task x model, one row per non-base
variant: the score and the base's, the change in the metric's unit and in points, the
invalid rates and stage rates of both, and ``moved_by``: the stage whose pass rate moved the
score (see :func:`variant_deltas`), with each stage's contribution.

Pure: no pytest, no I/O; rows in, rows out.
"""

from __future__ import annotations

from typing import Literal

from pytest_benchaudit.aggregate.summary_documents import StageRates, TaskResult, VariantDelta
from pytest_benchaudit.pipeline.record_documents import Cards
from pytest_benchaudit.pipeline.variants import card_key
from pytest_benchaudit.scoring.metrics import METRIC_INFO

__all__ = ["reason_text", "variant_deltas"]

_EPS = 1e-9
_STAGES = ("inference", "extraction", "scoring")
_RATES: tuple[Literal["inference_ok", "extraction_ok", "correct"], ...] = ("inference_ok", "extraction_ok", "correct")


def _order(results: list[TaskResult], cards: Cards) -> dict[str, int]:
    """Variant name -> position: the order the cards were made in (the --vary order), else first seen."""
    order: dict[str, int] = {"": -1}
    for key in cards:
        if "|" in key:
            order.setdefault(key.split("|", 1)[1], len(order))
    for r in results:
        order.setdefault(r["variant"], len(order))
    return order


def _invalid_value(r: TaskResult) -> float:
    """What an invalid item scored in this result (read back from the two denominators)."""
    n, n_valid, score_total = r["n"], r["n_valid"], r["score_total"]
    if n > n_valid and score_total is not None:
        valid_sum = (r["score_valid"] or 0.0) * n_valid
        return float((score_total * n - valid_sum) / (n - n_valid))
    invalid = r.get("invalid_score")
    if invalid is not None:  # none invalid: what one would score (scoring.invalid_credit)
        return float(invalid)
    info = METRIC_INFO.get(r["metric"])
    return float(info.invalid_value) if info else 0.0


def _rates(rates: StageRates) -> StageRates:
    """A copy of a row's stage rates (the delta row does not share the result's)."""
    return {"inference_ok": rates["inference_ok"], "extraction_ok": rates["extraction_ok"], "correct": rates["correct"]}


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.3f}"


def _reason_changes(base: TaskResult, var: TaskResult) -> dict[str, int]:
    """Invalid reasons whose count changed (variant minus base), largest change first."""
    b, v = base.get("invalid_reasons") or {}, var.get("invalid_reasons") or {}
    changes = [(reason, v.get(reason, 0) - b.get(reason, 0)) for reason in dict.fromkeys([*v, *b])]
    return dict(sorted((c for c in changes if c[1]), key=lambda c: -abs(c[1])))


def reason_text(changes: dict[str, int], limit: int | None = None) -> str:
    """``truncated +11, empty -1``; with ``limit``, the largest changes and an ellipsis."""
    items = list(changes.items())
    text = ", ".join(f"{reason} {d:+d}" for reason, d in items[:limit])
    return text + (", …" if limit is not None and len(items) > limit else "")


def _contributions(base: TaskResult, var: TaskResult, delta: float) -> dict[str, float]:
    """Chain decomposition of the headline change over the stages (they add up to ``delta``).

    Over all items an item scores ``v`` (the mean score of valid answers) when it gets
    through inference (share ``i``) and extraction (share ``x`` of those), else the
    metric's invalid value ``w``: ``T = i*x*v + (1 - i*x)*w``.  Changing the stages one
    at a time in pipeline order gives the inference part (``i``), the extraction part
    (``x``); the rest (verdicts among valid answers, the denominator) is scoring's.
    """
    w = _invalid_value(base)
    i0, i1 = base["stage_rates"]["inference_ok"], var["stage_rates"]["inference_ok"]
    e0, e1 = base["stage_rates"]["extraction_ok"], var["stage_rates"]["extraction_ok"]
    # With no item through inference a side's extraction rate is undefined: take the other
    # side's, so that a base with 0% inference ok credits the recovery to inference.
    x0 = e0 / i0 if i0 else (e1 / i1 if i1 else 0.0)
    x1 = e1 / i1 if i1 else x0
    valid_score = base["score_valid"] if base["score_valid"] is not None else var["score_valid"]
    v0 = w if valid_score is None else valid_score

    def total(i: float, x: float) -> float:
        return i * x * v0 + (1 - i * x) * w

    c_inf = total(i1, x0) - total(i0, x0)
    c_ext = total(i1, x1) - total(i1, x0)
    return {"inference": c_inf, "extraction": c_ext, "scoring": delta - c_inf - c_ext}


def _moved_by(base: TaskResult, var: TaskResult, delta: float, same: bool) -> tuple[str, str, dict[str, float]]:
    """Which stage moved the headline: ``none``, ``inference``, ``extraction`` or ``scoring``.

    The rule (documented in :func:`variant_deltas`): no move -> ``none``; the same
    validity (inference-ok and extraction-ok rates equal) -> ``scoring``; both
    headlines over valid answers only -> the validity stage whose failure share changed
    most (the set of scored items changed); otherwise the stage with the largest part
    in the chain decomposition of :func:`_contributions` (ties: the earlier stage).
    """
    sr0, sr1 = base["stage_rates"], var["stage_rates"]
    d_inf = sr1["inference_ok"] - sr0["inference_ok"]
    d_ext_fail = (sr1["inference_ok"] - sr1["extraction_ok"]) - (sr0["inference_ok"] - sr0["extraction_ok"])
    same_validity = abs(d_inf) < _EPS and abs(d_ext_fail) < _EPS
    parts = {s: 0.0 for s in _STAGES}
    if abs(delta) < _EPS:
        return "none", "same pipeline as the base" if same else "headline unchanged", parts
    if same_validity:
        parts["scoring"] = delta
        stage = "scoring"
    elif base["denominator"] == var["denominator"] == "valid":
        stage = "inference" if abs(d_inf) >= abs(d_ext_fail) else "extraction"
        parts[stage] = delta
    else:
        parts = _contributions(base, var, delta)
        stage = max(_STAGES, key=lambda s: abs(parts[s]) - _EPS * _STAGES.index(s))
    reasons = reason_text(_reason_changes(base, var))
    if stage == "inference":
        detail = f"inference ok {100 * sr0['inference_ok']:.1f}% -> {100 * sr1['inference_ok']:.1f}%" + (
            f" ({reasons})" if reasons else ""
        )
    elif stage == "extraction":
        detail = f"extraction ok {100 * sr0['extraction_ok']:.1f}% -> {100 * sr1['extraction_ok']:.1f}%" + (
            f" ({reasons})" if reasons else ""
        )
    elif base["denominator"] != var["denominator"]:
        detail = f"denominator {base['denominator']} -> {var['denominator']}"
    else:
        detail = (
            f"same validity, different verdicts: correct {100 * sr0['correct']:.1f}% -> {100 * sr1['correct']:.1f}%"
            if same_validity
            else f"verdicts among valid answers: score/valid {_fmt(base['score_valid'])} -> {_fmt(var['score_valid'])}"
        )
    return stage, detail, parts


def variant_deltas(results: list[TaskResult], cards: Cards | None = None) -> list[VariantDelta]:
    """Per benchmark x task x model, one row per non-base variant: how it moved the score.

    Each row holds the variant's headline ``score`` and the base's (``base_score``), the
    change ``delta`` in the metric's own unit and ``delta_pp`` in percentage points
    (``None`` for lower-is-better metrics such as MAD, whose ``delta`` is in the metric's
    unit; ``lower_is_better`` says so, ``better`` says whether the variant scores better),
    the invalid rate of both, the stage rates of both and their change, the varied
    ``field``/``value``/``kind`` (from the variant's pipeline card when ``cards`` is given)
    and ``moved_by``: the stage that moved the score, with ``moved_by_detail``.

    The ``moved_by`` rule compares the cumulative stage rates (``inference_ok``,
    ``extraction_ok``, ``correct``) of variant and base:

    * ``none``: the headline did not move (``same pipeline as the base`` when the varied
      value equals the base's);
    * ``scoring``: inference-ok and extraction-ok rates are equal, so the same items are
      valid: the verdicts or the denominator changed the score;
    * when validity changed, the headline change is split over the stages by changing
      them one at a time in pipeline order (see :func:`_contributions`): the share of
      items that got through inference (``inference``: more/fewer errors, empty,
      truncated or unclosed-reasoning outputs), the share of those with a readable answer
      (``extraction``: more/fewer unreadable answers), and the rest (``scoring``: verdicts
      among valid answers, denominator); the largest part names the stage, ties going to
      the earlier stage.  When both headlines count valid answers only, validity moves the
      score only through which items are scored: the validity stage whose failure share
      changed most is named.

    A variant whose group has no base result (base items deselected) gets ``None`` scores
    and ``moved_by`` ``None``.
    """
    cards = cards or {}
    order = _order(results, cards)
    groups: dict[tuple[str, str, str], dict[str, TaskResult]] = {}
    for r in results:
        groups.setdefault((r["benchmark"], r["task"], r["model"]), {})[r["variant"]] = r
    out: list[VariantDelta] = []
    for (bench, task, model), by_variant in groups.items():
        base = by_variant.get("")
        for name in sorted((v for v in by_variant if v), key=lambda v: order.get(v, len(order))):
            var = by_variant[name]
            card = cards.get(card_key(bench, task, name))
            info = card.get("variant") if card else None
            lib = bool(var["lower_is_better"])
            row: VariantDelta = {
                "benchmark": bench,
                "task": task,
                "model": model,
                "variant": name,
                "field": info.get("field") if info else None,
                "value": info.get("value") if info else None,
                "base_value": info.get("base_value") if info else None,
                "kind": info.get("kind") if info else None,
                "same_as_base": bool(info.get("same_as_base", False)) if info else False,
                "metric": var["metric"],
                "lower_is_better": lib,
                "unit": var["metric"] if lib else "pp",
                "denominator": var["denominator"],
                "base_denominator": base["denominator"] if base else None,
                "n": var["n"],
                "base_n": base["n"] if base else None,
                "score": var["score"],
                "base_score": base["score"] if base else None,
                "delta": None,
                "delta_pp": None,
                "better": None,
                "invalid_rate": var["invalid_rate"],
                "base_invalid_rate": base["invalid_rate"] if base else None,
                "stage_rates": _rates(var["stage_rates"]),
                "base_stage_rates": _rates(base["stage_rates"]) if base else None,
                "stage_deltas": None,
                "contributions": None,
                "moved_by": None,
                "moved_by_detail": "no base result (base items not run)" if base is None else "",
                "invalid_reason_changes": _reason_changes(base, var) if base else None,
            }
            if base is not None:
                row["stage_deltas"] = {k: var["stage_rates"][k] - base["stage_rates"][k] for k in _RATES}
                var_score, base_score = var["score"], base["score"]
                if var_score is None or base_score is None:
                    row["moved_by_detail"] = "no headline score (denominator unspecified)"
                elif var["metric"] != base["metric"]:
                    # e.g. MAD vs 1 - MAD/7.7: two units, so a difference would mean nothing.
                    row["moved_by"] = "scoring"
                    row["moved_by_detail"] = (
                        f"metric changed: {base['metric']} -> {var['metric']} (different scales; no delta)"
                    )
                else:
                    delta = var_score - base_score
                    row["delta"] = delta
                    row["delta_pp"] = None if lib else 100 * delta
                    row["better"] = None if abs(delta) < _EPS else (delta < 0 if lib else delta > 0)
                    stage, detail, parts = _moved_by(base, var, delta, row["same_as_base"])
                    row["moved_by"], row["moved_by_detail"], row["contributions"] = stage, detail, parts
            out.append(row)
    return out
