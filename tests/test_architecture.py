"""The package's shape: dependencies point one way, no import cycles, pytest only on the pytest side.

Every import in every module is read from the source (function-level ones included, since a
cycle hidden inside a function is still a cycle), resolved to a package-level unit, and checked
against the allowed dependencies below (docs/DESIGN.md draws the same picture).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_benchaudit"
NAME = "pytest_benchaudit"

# unit -> the units it may import. A unit is a subpackage (or plugin.py / the package itself).
ALLOWED: dict[str, set[str]] = {
    "common": set(),
    "pipeline": {"common"},
    "prompt": {"common", "pipeline"},
    "dataset": {"common", "pipeline", "prompt"},
    "inference": {"common", "pipeline"},
    "scoring": {"common", "pipeline"},
    "aggregate": {"common", "pipeline", "scoring"},
    "runs": {"common", "pipeline", "scoring", "aggregate", "inference"},
    "audit": {"common", "pipeline", "prompt", "dataset", "scoring", "aggregate", "runs"},
    "report": {"common", "pipeline", "prompt", "dataset", "scoring", "aggregate", "runs", "audit"},
    "pytest_plugin": {"common", "pipeline", "prompt", "dataset", "inference", "scoring", "aggregate", "runs",
                      "report", "audit"},
    "cli": {"common", "pipeline", "prompt", "dataset", "scoring", "aggregate", "runs", "audit", "report", "__init__"},
    "plugin": {"pytest_plugin", "common"},
    "testing": set(),
    "__init__": set(),  # its public names are imported lazily, by name, not at import time
}
PYTEST_SIDE = {"pytest_plugin", "plugin"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _unit(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(absolute module imported, line, at module level) for every import in ``path``."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(node) for node in tree.body}
    # `if TYPE_CHECKING:` blocks are never executed: not a run-time dependency
    type_only = {id(n) for node in tree.body if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                 for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, id(node) in top_level) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((target, node.lineno, id(node) in top_level))
            # `from pkg import submodule` imports the submodule too
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                if (PACKAGE.parent / Path(*candidate.split("."))).with_suffix(".py").exists() or \
                        (PACKAGE.parent / Path(*candidate.split(".")) / "__init__.py").exists():
                    out.append((candidate, node.lineno, id(node) in top_level))
    return out


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_import_points_the_allowed_way() -> None:
    wrong = []
    for module, path in _modules().items():
        unit = _unit(module)
        for target, line, _top in _imports(path):
            if target.split(".")[0] != NAME or target == NAME:
                continue
            other = _unit(target)
            if other != unit and other not in ALLOWED[unit]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {unit} imports {target}")
    assert not wrong, "imports against the dependency direction:\n" + "\n".join(wrong)


def test_no_import_cycles_between_modules() -> None:
    modules = _modules()
    graph = {m: sorted({t for t, _l, _top in _imports(p) if t in modules and t != m}) for m, p in modules.items()}
    # a package's __init__ re-exporting its own submodules is not a cycle of the design
    for m in graph:
        graph[m] = [t for t in graph[m] if not (t.startswith(m + ".") and modules[m].name == "__init__.py")]
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_only_the_pytest_side_imports_pytest() -> None:
    wrong = []
    for module, path in _modules().items():
        if _unit(module) in PYTEST_SIDE or module.startswith(f"{NAME}.testing"):
            continue
        for target, line, _top in _imports(path):
            if target.split(".")[0] in ("pytest", "_pytest", "xdist"):
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: imports {target}")
    assert not wrong, "pytest imported outside the pytest side:\n" + "\n".join(wrong)


def test_downstream_never_imports_inference() -> None:
    wrong = [f"{module}: {target}" for module, path in _modules().items() if _unit(module) in ("scoring", "aggregate")
             for target, _line, _top in _imports(path) if target.startswith(f"{NAME}.inference")]
    assert not wrong


@pytest.mark.parametrize("command", [
    "import pytest_benchaudit.cli",
    "from pytest_benchaudit.cli.app import main, build_parser; build_parser(['ledger']); build_parser(['--help'])",
])
def test_cli_start_up_imports_neither_pytest_nor_scipy(command: str) -> None:
    code = f"{command}; import sys; print(sorted(m for m in ('pytest', '_pytest', 'scipy', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_package_version_matches_the_distribution() -> None:
    import tomllib

    import pytest_benchaudit

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert pytest_benchaudit.__version__ == project["version"]
