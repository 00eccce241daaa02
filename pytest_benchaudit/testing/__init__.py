"""Test helpers for pytest-benchaudit: a scripted OpenAI-compatible HTTP server.

Nothing here is imported by the plugin itself; it exists for the project's own
end-to-end, fault-injection and benchmark tests (and for users who want to test
their suites without a real model).  Standard library only.

The names below are loaded lazily (PEP 562) rather than imported eagerly:
``python -m pytest_benchaudit.testing.scripted_server`` imports this package
first, and an eager import of the submodule would make runpy warn that the
module "found in sys.modules ... prior to execution" on every CLI start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_benchaudit.testing.scripted_server import (
        Call,
        Reply,
        Script,
        ScriptedServer,
        by_marker,
        sequence,
    )

__all__ = ["Call", "Reply", "Script", "ScriptedServer", "by_marker", "sequence"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        module = importlib.import_module("pytest_benchaudit.testing.scripted_server")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
