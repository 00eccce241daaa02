"""pytest-benchaudit: LLM benchmarks as pytest suites, with the pipeline that produced every score.

The package's layout (a subpackage per pipeline stage, then one per thing a user does with stored
runs) and its dependency rules are described once, in docs/DESIGN.md ("Package layout").

The public API is :mod:`pytest_benchaudit.api` (docs/api.md lists it), whose names the package also
re-exports here, loaded on first use (importing the package costs nothing).  Every other module is
internal: it may be renamed, split or changed in any release.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.2.0"

from pytest_benchaudit import api  # noqa: E402  (names only: it imports nothing of the package)

__all__ = ["__version__", "api", *api.__all__]


def __getattr__(name: str) -> Any:
    """Every name of :mod:`pytest_benchaudit.api` (the public API), loaded on first use."""
    if name not in api.__all__:
        raise AttributeError(f"module 'pytest_benchaudit' has no attribute {name!r}")
    value = getattr(api, name)
    globals()[name] = value
    return value
