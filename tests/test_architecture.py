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
    # The features over stored runs, one subpackage each (issue 34), lowest first: each may import
    # the core and the features above it in this list, never one below.
    "rescore": {"common", "pipeline", "dataset", "scoring", "aggregate", "runs"},
    "ledger": {"common", "pipeline", "dataset", "scoring"},
    "annotation": {"common", "pipeline", "scoring", "aggregate"},
    "importers": {"common", "pipeline", "prompt", "dataset", "scoring", "aggregate", "runs"},
    "compare": {"common", "pipeline", "prompt", "dataset", "scoring", "aggregate", "runs", "rescore"},
    "diagnose": {
        "common",
        "pipeline",
        "prompt",
        "dataset",
        "scoring",
        "aggregate",
        "runs",
        "rescore",
        "compare",
        "ledger",
    },
    "audit": {
        "common",
        "pipeline",
        "prompt",
        "dataset",
        "scoring",
        "aggregate",
        "runs",
        "rescore",
        "ledger",
        "compare",
        "diagnose",
    },
    "report": {
        "common",
        "pipeline",
        "prompt",
        "dataset",
        "scoring",
        "aggregate",
        "runs",
        "rescore",
        "compare",
        "diagnose",
        "audit",
    },
    # issue 36: above compare (paired tests), diagnose (BA07's pairs) and report (the HTML kit); only the
    # CLI imports it (audit and diagnose take its pairs as values)
    "multiverse": {
        "common",
        "pipeline",
        "prompt",
        "dataset",
        "scoring",
        "aggregate",
        "runs",
        "rescore",
        "compare",
        "diagnose",
        "report",
    },
    # the plugin manager (issue 34): registers the built-ins and the plugins' additions on the registries
    # of the units it names (each imported when its hook is called: the compare package only when asked)
    "plugins": {"common", "pipeline", "dataset", "scoring", "compare", "importers", "__init__"},
    "pytest_plugin": {
        "common",
        "pipeline",
        "prompt",
        "dataset",
        "inference",
        "scoring",
        "aggregate",
        "runs",
        "report",
        "plugins",
    },
    "cli": {
        "common",
        "pipeline",
        "prompt",
        "dataset",
        "scoring",
        "aggregate",
        "runs",
        "rescore",
        "ledger",
        "annotation",
        "importers",
        "compare",
        "diagnose",
        "audit",
        "report",
        "multiverse",
        "__init__",
        "plugins",
    },
    "plugin": {"pytest_plugin", "common", "newhooks"},
    "newhooks": set(),  # the hookspecs (pytest_benchaudit/newhooks.py), registered by plugin.py
    "testing": set(),
    "api": set(),  # pytest_benchaudit/api.py: the public names, imported lazily by name like __init__
    "__init__": {"api"},  # its public names are api's, imported lazily, by name, not at import time
}
PYTEST_SIDE = {"pytest_plugin", "plugin", "newhooks"}

# pytest's and pytest-xdist's private internals (issue 25): each is used behind one adapter module.
PRIVATE_ATTRIBUTES = frozenset(
    {
        "_setupstate",
        "_request",
        "_markers",
        "_report_sections",
        "_log_cli_enabled",
        "_tw",
        "_show_progress_info",
        "_showfspath",
        "torun",
        "nextitem_index",
        "_fixtureinfo",
        "_node_location_to_relpath",
    }
)
ADAPTERS = {f"{NAME}.pytest_plugin._fastpath", f"{NAME}.pytest_plugin._terminal", f"{NAME}.pytest_plugin._xdist"}


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
    type_only = {
        id(n)
        for node in tree.body
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
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
                if (PACKAGE.parent / Path(*candidate.split("."))).with_suffix(".py").exists() or (
                    PACKAGE.parent / Path(*candidate.split(".")) / "__init__.py"
                ).exists():
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
                cycles.append(" -> ".join(stack[stack.index(nxt) :] + [nxt]))
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
    wrong = [
        f"{module}: {target}"
        for module, path in _modules().items()
        if _unit(module) in ("scoring", "aggregate")
        for target, _line, _top in _imports(path)
        if target.startswith(f"{NAME}.inference")
    ]
    assert not wrong


@pytest.mark.parametrize(
    "command",
    [
        "import pytest_benchaudit.cli",
        "from pytest_benchaudit.cli.app import main, build_parser; build_parser(['ledger']); build_parser(['--help'])",
        # what `benchaudit ledger` runs: the ledger package, apart from the compare package's scipy
        "import pytest_benchaudit.cli.ledger_cmd, pytest_benchaudit.ledger.ledger_rows, pytest_benchaudit.ledger.ledger_render,"
        " pytest_benchaudit.ledger.ledger_documents, pytest_benchaudit.ledger.ledger_peers",
    ],
)
def test_cli_start_up_imports_neither_pytest_nor_scipy(command: str) -> None:
    code = f"{command}; import sys; print(sorted(m for m in ('pytest', '_pytest', 'scipy', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_package_version_matches_the_distribution() -> None:
    import tomllib

    import pytest_benchaudit

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert pytest_benchaudit.__version__ == project["version"]


def _private_uses(path: Path) -> list[str]:
    """Each use of a name of :data:`PRIVATE_ATTRIBUTES` (``x.name`` or ``getattr(x, "name")`` /
    ``hasattr``), of ``TestReport(...)`` built directly and of a terminal reporter's ``stats``
    (``x.stats`` or ``getattr(x, "stats")``) in ``path``, as ``line: name``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRIBUTES | {"stats"}:
            if node.attr != "stats" or "reporter" in ast.unparse(node.value):
                found.append(f"{node.lineno}: {node.attr}")
        elif isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name.endswith("TestReport"):
                found.append(f"{node.lineno}: TestReport(...)")
            elif (
                name in ("getattr", "hasattr", "setattr")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in PRIVATE_ATTRIBUTES | {"stats"}
            ):
                found.append(f"{node.lineno}: {node.args[1].value}")
    return sorted(found, key=lambda use: int(use.split(":", 1)[0]))


def test_private_internals_stay_behind_their_adapters() -> None:
    """At most three modules touch pytest's or xdist's private internals: the adapters, each of
    which names what it uses, the versions it was checked on and its public fallback."""
    touching = {module: uses for module, path in _modules().items() if (uses := _private_uses(path))}
    outside = {module: uses for module, uses in touching.items() if module not in ADAPTERS}
    assert not outside, f"private internals outside the adapters: {outside}"
    assert len(touching) <= 3 and set(touching) <= ADAPTERS
    for module in ADAPTERS:
        doc = ast.get_docstring(ast.parse(_modules()[module].read_text(encoding="utf-8"))) or ""
        assert "Private names used" in doc and "Checked on" in doc and "fallback" in doc, module
        used = {use.split(": ", 1)[1] for use in touching.get(module, [])} - {"TestReport(...)", "stats"}
        assert all(f"``{name}" in doc or f"{name}``" in doc or name in doc for name in used), (module, used)


def _private_imports(path: Path) -> list[str]:
    """Each import of pytest's private package (``_pytest``) or of one of pytest-xdist's modules (its
    public names live on the ``xdist`` package itself) in ``path``, as ``line: module``; imports under
    ``if TYPE_CHECKING:`` count too (a private name is one wherever it is spelled)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module]
            if isinstance(node, ast.ImportFrom) and node.module and not node.level
            else []
        )
        found += [
            f"{node.lineno}: {name}" for name in names if name == "_pytest" or name.startswith(("_pytest.", "xdist."))
        ]
    return found


def test_private_modules_are_imported_only_by_the_adapters() -> None:
    """``import _pytest`` / ``from xdist.workermanage import ...`` happen in the adapters alone (issue 34:
    pytest_plugin/remote.py imported both)."""
    outside = {
        module: uses
        for module, path in _modules().items()
        if module not in ADAPTERS and (uses := _private_imports(path))
    }
    assert not outside, f"private modules imported outside the adapters: {outside}"


def test_no_two_modules_share_a_file_name() -> None:
    """One name per thing (issue 34): ``__init__.py`` aside, every module's file name is its own."""
    seen: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            seen.setdefault(path.name, []).append(str(path.relative_to(PACKAGE.parent)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}


def test_cli_command_modules_follow_one_scheme() -> None:
    """Every ``benchaudit`` command is ``cli/<command>_cmd.py`` (``-`` as ``_``), and every such module is a
    command: the registry in cli/app.py names them, nothing else does."""
    from pytest_benchaudit.cli.app import COMMANDS

    assert {c: m for c, m in COMMANDS.items() if m != c.replace("-", "_") + "_cmd"} == {}
    assert {p.stem for p in (PACKAGE / "cli").glob("*_cmd.py")} == set(COMMANDS.values())


def test_layer_merging_lives_in_pipeline_layering() -> None:
    """How layers combine (the merge, a task's layers and ``base =``, ``--set``, re-targeting a stored
    pipeline) is defined once, in pipeline/layering.py (issue 34: it was split over dataset/, pipeline/
    and the rescore modules)."""
    merging = {
        "deep_merge",
        "task_layers",
        "_resolve_bases",
        "_set_path",
        "apply_overrides",
        "retarget",
        "upstream_changes",
    }
    defined: dict[str, list[str]] = {}
    for module, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in merging:
                defined.setdefault(node.name, []).append(module)
    assert defined == {name: [f"{NAME}.pipeline.layering"] for name in merging}


def test_the_private_uses_finder_finds_them(tmp_path: Path) -> None:
    """The counter above is not vacuous: each shape of use it must see, it sees."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "session._setupstate.teardown_exact(None)\nitem.keywords._markers\n"
        "getattr(plugin, '_log_cli_enabled', None)\nreporter._tw.fullwidth\n"
        "terminalreporter.stats['failed']\npytest.TestReport('a', ('f', 1, 'd'), {}, 'passed', None, 'call')\n"
        "hasattr(plugin, 'torun')\nlimiter.stats()\nself._user_fspath = None\n"
    )
    assert _private_uses(sample) == [
        "1: _setupstate",
        "2: _markers",
        "3: _log_cli_enabled",
        "4: _tw",
        "5: stats",
        "6: TestReport(...)",
        "7: torun",
    ]
    imports = tmp_path / "imports.py"
    imports.write_text(
        "import _pytest\nfrom _pytest.terminal import TerminalReporter\nimport _pytest.main as m\n"
        "from xdist.workermanage import make_reltoroot\nimport xdist\nimport pytest\n"
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from xdist.remote import WorkerInteractor\n"
    )
    assert _private_imports(imports) == [
        "1: _pytest",
        "2: _pytest.terminal",
        "3: _pytest.main",
        "4: xdist.workermanage",
        "9: xdist.remote",
    ]
