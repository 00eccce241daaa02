"""The public API is one documented place: pytest_benchaudit.api (and the same names at the package's top
level), each name importable and documented, docs/api.md listing exactly them, and the examples and the
documentation importing nothing else of the package."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_benchaudit
from pytest_benchaudit import api

REPO = Path(__file__).resolve().parent.parent


def documented_names() -> list[str]:
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    return re.findall(r"^\| `([A-Za-z_]+)` \|", text, re.MULTILINE)


def test_docs_api_lists_exactly_the_api() -> None:
    names = documented_names()
    assert len(names) == len(set(names)), "a name listed twice in docs/api.md"
    assert sorted(names) == sorted(api.__all__)


@pytest.mark.parametrize("name", api.__all__)
def test_each_name_is_importable_documented_and_at_the_top_level(name: str) -> None:
    value = getattr(api, name)
    doc = inspect.getdoc(value) or ""
    assert doc and not doc.startswith(f"{name}("), f"{name} has no docstring of its own"
    assert getattr(pytest_benchaudit, name) is value
    assert name in pytest_benchaudit.__all__


def test_importing_the_api_imports_nothing_else() -> None:
    code = (
        "import pytest_benchaudit, pytest_benchaudit.api, sys; "
        "print(sorted(m for m in sys.modules if m.startswith('pytest_benchaudit')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['pytest_benchaudit', 'pytest_benchaudit.api']"


def _imports(source: str) -> list[tuple[str, list[str]]]:
    """(module, names) of every import in ``source``."""
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
    return out


def _sources() -> list[tuple[str, str]]:
    found = [
        (str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for p in sorted((REPO / "examples").rglob("*.py"))
    ]
    for page in sorted((REPO / "docs").glob("*.md")):
        if page.name in ("DESIGN.md", "renames-0.3.md"):  # the internals, for contributors
            continue
        for i, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)):
            found.append((f"{page.relative_to(REPO)} block {i + 1}", block))
    return found


def test_examples_and_docs_import_only_api_names() -> None:
    sources = _sources()
    assert any(label.startswith("examples/") for label, _ in sources)
    wrong = []
    for label, source in sources:
        for module, names in _imports(source):
            if not module.startswith("pytest_benchaudit"):
                continue
            if module not in ("pytest_benchaudit", "pytest_benchaudit.api") or set(names) - set(api.__all__):
                wrong.append(f"{label}: from {module} import {', '.join(names)}")
    assert not wrong, "imports outside the public API:\n" + "\n".join(wrong)
