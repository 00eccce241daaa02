"""pytest-benchaudit: LLM benchmarks as pytest suites, with the pipeline that produced every score.

The package's layout (a subpackage per pipeline stage, then one per thing a user does with stored
runs) and its dependency rules are described once, in docs/DESIGN.md ("Package layout").

Importing the package is cheap: the public names below are loaded on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

# public name -> module that defines it (loaded lazily so `import pytest_benchaudit.cli`
# stays free of pydantic-heavy modules until a command needs them)
_PUBLIC = {
    "Pipeline": "pytest_benchaudit.pipeline.stages",
    "PipelineError": "pytest_benchaudit.pipeline.stages",
    "build_pipeline": "pytest_benchaudit.pipeline.stages",
    "apply_overrides": "pytest_benchaudit.pipeline.layering",
    "parse_override": "pytest_benchaudit.pipeline.stages",
    "Question": "pytest_benchaudit.pipeline.types",
    "Request": "pytest_benchaudit.pipeline.types",
    "Generation": "pytest_benchaudit.pipeline.types",
    "Extraction": "pytest_benchaudit.pipeline.types",
    "Score": "pytest_benchaudit.pipeline.types",
    "Record": "pytest_benchaudit.pipeline.record",
    "load_suite": "pytest_benchaudit.dataset.suites",
    "evaluate": "pytest_benchaudit.scoring.evaluate",
    "summarize": "pytest_benchaudit.aggregate.results",
    "RunDirectory": "pytest_benchaudit.runs.store",
    "read_records": "pytest_benchaudit.runs.store",
    "BenchauditError": "pytest_benchaudit.common.errors",
}

__all__ = ["__version__", *sorted(_PUBLIC)]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from pytest_benchaudit.aggregate.results import summarize
    from pytest_benchaudit.common.errors import BenchauditError
    from pytest_benchaudit.dataset.suites import load_suite
    from pytest_benchaudit.pipeline.record import Record
    from pytest_benchaudit.pipeline.stages import Pipeline, PipelineError, build_pipeline, parse_override
    from pytest_benchaudit.pipeline.layering import apply_overrides
    from pytest_benchaudit.pipeline.types import Extraction, Generation, Question, Request, Score
    from pytest_benchaudit.runs.store import RunDirectory, read_records
    from pytest_benchaudit.scoring.evaluate import evaluate


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_benchaudit' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
