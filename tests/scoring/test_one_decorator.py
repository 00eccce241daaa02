"""A rule or metric is registered by its one decorator: the tables are derived from the declarations
(declarations.declared), never listed by hand, and the declaration is checked where it is written."""

from __future__ import annotations

import pytest

from pytest_benchaudit.pipeline.types import MetricInfo, Score
from pytest_benchaudit.scoring import declarations, extract, metrics
from pytest_benchaudit.scoring.tasks import TASK_METRICS, TASK_RULES


def test_every_builtin_rule_and_metric_is_named_by_its_decorator() -> None:
    assert extract.BUILTIN_RULES and metrics.BUILTIN_METRICS
    for name, rule in extract.BUILTIN_RULES.items():
        assert declarations.declared_name(rule) == name
    for name, metric in metrics.BUILTIN_METRICS.items():
        assert declarations.declared_name(metric) == name
        assert declarations.declared_metric_info(metric) is metrics.METRIC_INFO[name]
    # the task families are every module of scoring/tasks (no list to keep): each family has its names
    assert {"cwe_last_match", "inspect_choice", "lm_eval_exact_match", "final_cvss_score"} <= set(TASK_RULES)
    assert {"cvss_abs_error", "actor_graph", "technique_set_f1"} <= set(TASK_METRICS)


def test_declared_reads_a_namespace_in_order_and_only_its_own_functions() -> None:
    @declarations.rule(name="b_rule", answers="label")
    def b(text: str, question: object, generation: object) -> tuple[str | None, str]:
        return None, ""

    @declarations.metric(
        name="a_metric",
        lower_is_better=True,
        kind="continuous",
        description="d",
        invalid_value=10.0,
        worst_case="the scale",
    )
    def a(prediction: str, question: object, resources: object) -> Score:
        return Score(value=0.0, correct=True)

    def plain() -> None: ...

    namespace = {"__name__": __name__, "b": b, "a": a, "plain": plain, "imported": extract.final_answer_letter}
    rules, found, infos = declarations.declared(namespace)
    assert rules == {"b_rule": b} and found == {"a_metric": a}
    assert infos == {
        "a_metric": MetricInfo(
            lower_is_better=True, kind="continuous", description="d", invalid_value=10.0, worst_case="the scale"
        )
    }
    assert declarations.rule_info(b).answers == "label" and declarations.metric_reads(a).answers == "other"


def test_a_declaration_is_checked_where_it_is_written() -> None:
    with pytest.raises(TypeError, match="lower_is_better and kind go together"):
        declarations.metric(name="m", kind="binary")
    with pytest.raises(TypeError, match="invalid_value without lower_is_better and kind"):
        declarations.metric(name="m", invalid_value=1.0)
    with pytest.raises(TypeError):
        declarations.metric(name="m", lower_is_better=False, kind="binary", no_such_field=1)
    with pytest.raises(ValueError, match="letters, digits"):
        declarations.rule(name="bad name")(lambda t, q, g: (None, ""))

    @declarations.metric(name="no_scale")
    def m(prediction: str, question: object, resources: object) -> Score:
        return Score(value=0.0, correct=True)

    with pytest.raises(TypeError, match="metric 'no_scale' declares no direction and scale"):
        declarations.declared({"__name__": __name__, "m": m})
