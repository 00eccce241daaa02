"""``benchaudit init [DIR]``: a project folder with its own copy of the packaged suites to edit.

Writes ``DIR/suites/`` (every packaged ``suite.toml`` and the ``standardized.toml`` they extend,
byte for byte; ``--suite NAME`` copies only those) and the pyproject snippet the plugin reads
(:data:`PYPROJECT_SNIPPET`): into ``DIR/pyproject.toml`` when there is none, else printed for
the user to add (an existing pyproject.toml is never edited).  A local ``suites/NAME`` always
wins over the packaged one, and the run's header says so.

A file already there with the same bytes is left alone; one that differs (an edit) is kept and
the command refuses, naming it, unless ``--force``.  Benchmark data is never copied: it lives in
the data directory (``benchaudit fetch``).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pytest_benchaudit.cli._common import CliError, Subparsers

__all__ = ["HELP", "PYPROJECT_SNIPPET", "InitResult", "add_parser", "init_project", "run"]

HELP = "write a suites/ copy to edit and a pyproject snippet (the packaged suites, no data)"

PYPROJECT_SNIPPET = """\
# pytest-benchaudit {version} (from `benchaudit init`)
[tool.pytest.ini_options]
testpaths = ["suites"]   # a bare `pytest --model ...` runs every suite in suites/

# Named models for `--model NAME`; the key is read from the named variable, never stored.
[tool.benchaudit.models.my-model]
endpoint = "http://127.0.0.1:8000/v1"
model = "my-model"
api_key_env = "OPENAI_API_KEY"
"""


@dataclass
class InitResult:
    """What :func:`init_project` did, by path relative to the project folder."""

    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    pyproject_written: bool = False


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser("init", help=HELP, description=HELP)
    p.add_argument("dir", nargs="?", type=Path, default=Path("."), metavar="DIR", help="project folder (created)")
    p.add_argument(
        "--suite",
        action="append",
        default=[],
        metavar="NAME",
        help="copy only this suite (repeatable; default: every packaged suite)",
    )
    p.add_argument("--force", action="store_true", help="replace suite files that differ from the packaged ones")
    return p


def init_project(target: Path, suites: list[str], force: bool = False) -> InitResult:
    """Copy the packaged suites (all, or ``suites``) into ``target/suites`` and write
    ``target/pyproject.toml`` when absent.  Raises :class:`CliError` naming the unknown suite or
    the edited files it would overwrite (nothing is written then)."""
    from pytest_benchaudit.cli.runargs import no_suite_message
    from pytest_benchaudit.dataset.shipped import package_version, packaged_suites_dir
    from pytest_benchaudit.dataset.suites import SUITE_FILENAME

    shipped = packaged_suites_dir()
    if shipped is None:
        raise CliError("this installation ships no suites (reinstall pytest-benchaudit)")
    known = sorted(p.parent.name for p in shipped.glob(f"*/{SUITE_FILENAME}"))
    for name in suites:
        if name not in known:
            raise CliError(no_suite_message(name, shipped, known))
    names = suites or known
    # the shared base files the suites `extend` (standardized.toml), then each suite's config
    sources = sorted(shipped.glob("*.toml")) + [shipped / name / SUITE_FILENAME for name in names]
    plan = [(src, target / "suites" / src.relative_to(shipped)) for src in sources]
    edited = [dest for src, dest in plan if dest.is_file() and dest.read_bytes() != src.read_bytes()]
    if edited and not force:
        raise CliError(
            f"{', '.join(str(d) for d in edited)}: differ from the packaged copies of pytest-benchaudit "
            f"{package_version()} (edited?); kept: pass --force to replace them"
        )
    result = InitResult()
    for src, dest in plan:
        rel = str(dest.relative_to(target))
        if dest.is_file() and dest.read_bytes() == src.read_bytes():
            result.unchanged.append(rel)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(src.read_bytes())
        result.written.append(rel)
    pyproject = target / "pyproject.toml"
    if not pyproject.exists():
        pyproject.write_text(PYPROJECT_SNIPPET.format(version=package_version()), encoding="utf-8")
        result.pyproject_written = True
    return result


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.dataset.shipped import package_version

    target: Path = args.dir
    result = init_project(target, args.suite, force=args.force)
    where = target / "suites"
    print(
        f"{where}: {len(result.written)} file(s) written, {len(result.unchanged)} already the same "
        f"(the suites of pytest-benchaudit {package_version()}; edit them here: a local suites/NAME runs "
        "instead of the packaged one)"
    )
    if result.pyproject_written:
        print(f"{target / 'pyproject.toml'}: written (testpaths, a named model to edit)")
    else:
        print(f"{target / 'pyproject.toml'} exists and was left alone; add what you need of:\n")
        print(PYPROJECT_SNIPPET.format(version=package_version()), end="")
    print(f"next: cd {target} && benchaudit fetch NAME && pytest suites/NAME --model ID@URL", file=sys.stderr)
    return 0
