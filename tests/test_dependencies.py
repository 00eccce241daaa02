"""Every third-party module the package imports is declared in pyproject.toml (issue 34: numpy,
typing_extensions and packaging were imported and not declared)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_benchaudit"
# Import name -> distribution, where they differ.
DISTRIBUTION = {
    "_pytest": "pytest",
    "xdist": "pytest-xdist",
    "pydantic_core": "pydantic-core",
    "typing_extensions": "typing-extensions",
    "sklearn": "scikit-learn",
    "llama_cpp": "llama-cpp-python",
}
# Imported only where present (an ImportError is caught and a fallback used); not a dependency.
OPTIONAL_WITH_FALLBACK = {"scikit-learn"}


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _imported() -> dict[str, set[str]]:
    """distribution -> the modules that import it, for every import outside the standard library."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.module and not node.level
                else []
            )
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == PACKAGE.name:
                    continue
                dist = DISTRIBUTION.get(top, top).lower().replace("_", "-")
                found.setdefault(dist, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_imported_distribution_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = {_name(r) for r in project["dependencies"]}
    extras = {_name(r) for reqs in project["optional-dependencies"].values() for r in reqs}
    imported = _imported()
    undeclared = {
        dist: sorted(where) for dist, where in imported.items() if dist not in core | extras | OPTIONAL_WITH_FALLBACK
    }
    assert not undeclared, f"imported, not declared in pyproject.toml: {undeclared}"
    # the ones issue 34 found
    assert {"numpy", "typing-extensions", "packaging"} <= core & set(imported)


def test_typing_extensions_is_imported_only_for_what_typing_lacks_on_python_3_11() -> None:
    """TypedDict only: pydantic validates typing_extensions' TypedDict, not typing's, before 3.12; the
    other names (NotRequired, Required, TypeGuard, ...) come from typing."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "typing_extensions":
                names |= {a.name for a in node.names}
    assert names == {"TypedDict"}
