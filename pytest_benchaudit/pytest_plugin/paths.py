"""Suite paths as users type them: ``pytest suites/secEval`` runs ``suites/seceval``.

pytest resolves its path arguments exactly (case-sensitive on Linux) when it
collects; before that, at configure time, :func:`resolve_suite_args` rewrites
``config.args``: a path that does not exist but matches exactly one entry per
component case-insensitively is replaced by the real path, said in one line; a
path that matches nothing, under a folder that holds suites, is one usage error
listing the suites there are.  Any other missing path is left for pytest to
report as it always does.  A ``::node`` suffix is kept.  xdist workers re-parse
the original command line and rewrite it the same way.

**The packaged suites.**  A relative path under ``suites/`` that names nothing here
(no local folder of that name, even case-insensitively) is looked up in the suites
that ship with the package (:mod:`pytest_benchaudit.dataset.shipped`), so
``pytest suites/seceval`` runs from any directory; the header says that the
packaged copy ran, and its version.  A local folder always wins: ``benchaudit init``
writes one to edit, and when it shadows a packaged suite the header says the local
copy ran.  This happens at configure time, before pytest resolves its arguments and
would report "file or directory not found".

**The plugins' suites.**  After the packaged suites, the folders the installed benchaudit plugins
register (``benchaudit_suite_dirs``, :mod:`pytest_benchaudit.plugins`) are looked in, in load order:
``pytest suites/quiz`` runs a plugin's ``quiz`` from any directory, and the header names the plugin, its
distribution and the folder.  A local folder wins over both, the packaged suite over a plugin's of the
same name; the header says which ran and which copy was not used.
"""

from __future__ import annotations

from pathlib import Path

from pytest_benchaudit.common.errors import UsageError, did_you_mean
from pytest_benchaudit.dataset.shipped import package_version, packaged_suites_dir
from pytest_benchaudit.dataset.suites import SUITE_FILENAME
from pytest_benchaudit.plugins.plugin_manager import BUILTIN, PluginError, Plugins, load_plugins, loaded

__all__ = ["SuitePathError", "load_run_plugins", "names_suites", "resolve_suite_args"]


class SuitePathError(UsageError):
    """A suite path that names no suite."""


SUITES_FOLDER = "suites"  # the relative folder name that falls back to the packaged suites


def resolve_suite_args(args: list[str], invocation_dir: Path) -> tuple[list[str], list[str]]:
    """The arguments with case-mismatched paths corrected and ``suites/...`` paths that name
    nothing here pointed at the packaged suites; one note per rewrite, and one per local suite
    that shadows a packaged one (which copy ran)."""
    out: list[str] = []
    notes: list[str] = []
    for arg in args:
        error: SuitePathError | None = None
        try:
            fixed = _resolve_one(arg, invocation_dir)
        except SuitePathError as err:  # no such suite here: said unless the package ships it
            fixed, error = arg, err
        packaged = _packaged(arg, invocation_dir) if fixed == arg else None
        found = _plugin_suite(arg, invocation_dir) if fixed == arg else None
        if packaged is not None:
            notes.append(
                f"{arg} → {packaged}: the suites packaged with pytest-benchaudit {package_version()} "
                f"(no local {arg.partition('::')[0]}; `benchaudit init` writes a copy to edit)"
                + (f"; plugin {found[0]}'s suite of that name ({found[1]}) is not used" if found else "")
            )
            fixed = packaged
        elif found is not None:
            notes.append(
                f"{arg} → {found[1]}: the suite of plugin {found[0]} (no local {arg.partition('::')[0]}, none packaged)"
            )
            fixed = found[1]
        elif error is not None:
            raise error
        elif fixed != arg:
            notes.append(f"{arg} → {fixed} (case-insensitive match)")
        else:
            notes += _shadowing(arg, invocation_dir)
        out.append(fixed)
    return out, notes


def _packaged(arg: str, invocation_dir: Path) -> str | None:
    """``arg`` resolved inside the packaged suites when it is a relative ``suites/...`` path that
    names nothing here; ``None`` otherwise (or when the package ships no such suite)."""
    if arg.startswith("-"):
        return None
    text, sep, node = arg.partition("::")
    path = Path(text)
    shipped = packaged_suites_dir()
    if shipped is None or path.is_absolute() or not path.parts or path.parts[0].lower() != SUITES_FOLDER:
        return None
    if (invocation_dir / path).exists():
        return None
    try:
        inside = _resolve_one("/".join(path.parts[1:]) or ".", shipped)
    except SuitePathError:
        return None
    target = (shipped / inside).resolve()
    return str(target) + sep + node if target.exists() else None


def load_run_plugins(disable: list[str], asks_models: bool, args: list[str], invocation_dir: Path) -> list[str]:
    """Load the benchaudit plugins for this pytest run; the notes for its header.  A broken plugin is a
    usage error (exit 4) in a run that asks models or names suites; in any other pytest run (a
    project's own unit tests, with a benchaudit plugin installed beside) it is one header line instead."""
    try:
        load_plugins(disable)
    except PluginError as err:
        if asks_models or names_suites(args, invocation_dir) or _names_plugin_suite(args):
            raise
        return [f"warning: {err}"]
    return []


def _loaded() -> Plugins | None:
    """The plugins loaded for this run; None when they could not be (said once, in the header)."""
    try:
        return loaded()
    except PluginError:
        return None


def _names_plugin_suite(args: list[str]) -> bool:
    """Whether an argument is ``suites/NAME`` with no folder here: a plugin's suite may be meant."""
    return any(Path(a.partition("::")[0]).parts[:1] == (SUITES_FOLDER,) for a in args if not a.startswith("-"))


def _in_folder(arg: str, invocation_dir: Path, folder: Path) -> str | None:
    """``arg`` (a relative ``suites/...`` path naming nothing here) resolved inside ``folder``, else None."""
    if arg.startswith("-"):
        return None
    text, sep, node = arg.partition("::")
    path = Path(text)
    if (
        path.is_absolute()
        or not path.parts
        or path.parts[0].lower() != SUITES_FOLDER
        or (invocation_dir / path).exists()
    ):
        return None
    try:
        inside = _resolve_one("/".join(path.parts[1:]) or ".", folder)
    except SuitePathError:
        return None
    target = (folder / inside).resolve()
    return str(target) + sep + node if target.exists() and target != folder.resolve() else None


def _plugin_suite(arg: str, invocation_dir: Path) -> tuple[str, str] | None:
    """``(the plugin, arg resolved in its suites)`` for the first plugin whose suites hold it."""
    plugins = _loaded()
    if plugins is None:
        return None
    for plugin, folder in plugins.suites:
        if plugin == BUILTIN:
            continue
        target = _in_folder(arg, invocation_dir, folder)
        if target is not None:
            info = plugins.infos.get(plugin)
            dist = f" ({info.distribution} {info.version})" if info and info.distribution else ""
            return f"{plugin!r}{dist}", target
    return None


def _shadowing(arg: str, invocation_dir: Path) -> list[str]:
    """A note when ``arg`` is a local suite (its folder or suite.toml), or a folder of suites,
    with a name the package or a plugin also ships, and not that copy itself: the local copy runs."""
    if arg.startswith("-"):
        return []
    path = (invocation_dir / arg.partition("::")[0]).resolve()
    folder = path.parent if path.name == SUITE_FILENAME else path
    names = [folder.name] if (folder / SUITE_FILENAME).is_file() else _suites_in(folder)
    others = []
    plugins = _loaded()
    if plugins is None:
        return []
    for plugin, shipped in plugins.suites:
        if folder.is_relative_to(shipped) or shipped.is_relative_to(folder):  # that copy itself (a checkout)
            return []
        if any((shipped / name / SUITE_FILENAME).is_file() for name in names):
            info = plugins.infos.get(plugin)
            others.append(
                f"the one packaged with pytest-benchaudit {package_version()}"
                if plugin == BUILTIN
                else f"plugin {plugin!r}'s ({info.distribution if info else '?'} {info.version if info else ''})".rstrip()
            )
    if not others:
        return []
    return [f"{arg}: the local copy ({folder}), not {' or '.join(others)}"]


def _resolve_one(arg: str, invocation_dir: Path) -> str:
    if arg.startswith("-"):
        return arg
    text, sep, node = arg.partition("::")
    path = Path(text)
    full = path if path.is_absolute() else invocation_dir / path
    if not text or full.exists():
        return arg
    current = Path(full.anchor) if path.is_absolute() else invocation_dir
    parts = [p for p in path.parts if p not in (path.anchor, "")]
    fixed: list[str] = []
    for i, part in enumerate(parts):
        if part in (".", ".."):
            current, fixed = current / part, [*fixed, part]
            continue
        if (current / part).exists():
            current, fixed = current / part, [*fixed, part]
            continue
        matches = _entries(current, part)
        if len(matches) != 1:
            _unknown(arg, current, part, parts[:i])
            return arg
        current, fixed = current / matches[0], [*fixed, matches[0]]
    head = path.anchor if path.is_absolute() else ""
    return head + "/".join(fixed) + sep + node


def _entries(folder: Path, part: str) -> list[str]:
    try:
        return sorted(e.name for e in folder.iterdir() if e.name.lower() == part.lower())
    except OSError:
        return []


def _suites_in(folder: Path) -> list[str]:
    try:
        return sorted(e.name for e in folder.iterdir() if (e / SUITE_FILENAME).is_file())
    except OSError:
        return []


def _unknown(arg: str, folder: Path, part: str, before: list[str]) -> None:
    """Raise a usage error listing the suites when ``folder`` holds suites; else let pytest say it."""
    suites = _suites_in(folder)
    if not suites:
        return
    where = "/".join(before) or "."
    raise SuitePathError(
        f"{arg}: no suite {part!r} in {where}/{did_you_mean(part, suites)}; suites there: {', '.join(suites)}"
    )


def names_suites(args: list[str], invocation_dir: Path) -> bool:
    """Whether a path argument is a suite file or a folder holding suites (itself, or one or two
    levels down: ``suites/seceval``, ``suites/``, the repository root), i.e. whether the run will
    collect benchmark items; only a hint (collection decides), read before collection starts."""
    for arg in args:
        if arg.startswith("-"):
            continue
        path = invocation_dir / arg.split("::")[0]
        if path.name == SUITE_FILENAME and path.is_file():
            return True
        if path.is_dir() and any(
            next(path.glob(pattern), None) is not None
            for pattern in (SUITE_FILENAME, f"*/{SUITE_FILENAME}", f"*/*/{SUITE_FILENAME}")
        ):
            return True
    return False
