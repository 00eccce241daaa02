"""Loading the installed plugins (entry points in the group ``benchaudit``) and merging what they register.

One :class:`pluggy.PluginManager` per process, made on first use by :func:`load_plugins`: the built-ins
(:mod:`.builtin_plugin`) are registered first, then every entry point of the group through
``load_setuptools_entrypoints``, less those turned off (``--disable-plugin NAME`` on ``pytest`` and on
``benchaudit``, or ``BENCHAUDIT_DISABLE_PLUGINS=a,b``).  Each implementation of a hook is called on its
own, in that order, so what it returns is kept with its plugin's name (``benchaudit plugins`` lists it)
and an error names the plugin:

- an entry point whose module cannot be imported, a hook that raises, returns the wrong thing or is not
  one of :mod:`.hookspecs`, a name already registered (by the built-ins or another plugin): one
  :class:`PluginError` (a usage error: exit 2 from ``benchaudit``, 4 from ``pytest``) naming the plugin,
  its distribution and how to turn it off, never a traceback.

What is merged, and where the rest of the package reads it: suites (:func:`suite_dirs`), data formats
(:data:`pytest_benchaudit.dataset.readers.READERS`), extraction rules (``scoring.extract.RULES``) and
metrics (``scoring.metrics.METRICS`` / ``METRIC_INFO``) at load; compare analyses
(:func:`load_analyses`) and importers (:func:`importers`) only when a command asks for them, so that
``benchaudit ledger`` never imports the compare package's scipy.  Loading again with another set of
disabled plugins first takes out what the previous load added.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import pluggy

from pytest_benchaudit.common.errors import UsageError, did_you_mean
from pytest_benchaudit.plugins import builtin_plugin, hookspecs
from pytest_benchaudit.plugins.hookspecs import PROJECT, Importer

__all__ = [
    "BUILTIN",
    "DISABLE_ENV",
    "PluginError",
    "PluginInfo",
    "Plugins",
    "disabled_from_env",
    "importers",
    "load_analyses",
    "load_plugins",
    "loaded",
    "suite_dirs",
    "unload_plugins",
]

BUILTIN = "builtin"  # the package's own registrations, under this plugin name
DISABLE_ENV = "BENCHAUDIT_DISABLE_PLUGINS"


class PluginError(UsageError):
    """A plugin that cannot be used (not importable, a hook raising, a name it registers taken)."""


@dataclass
class PluginInfo:
    """One loaded plugin: where it comes from and what it registered, by kind (``rules``: names)."""

    name: str
    module: str
    distribution: str | None = None
    version: str | None = None
    registered: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Plugins:
    """The plugins of this process and what they added (the tables' entries, to take out again)."""

    manager: pluggy.PluginManager
    infos: dict[str, PluginInfo]
    disabled: tuple[str, ...]
    suites: list[tuple[str, Path]] = field(default_factory=list)
    owners: dict[str, dict[str, str]] = field(default_factory=dict)  # kind -> name -> plugin
    added: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    suite_dirs_added: list[Path] = field(default_factory=list)
    analyses_added: list[str] | None = None  # None: not asked yet
    importer_table: dict[str, Importer] | None = None

    def unload(self) -> None:
        """Take out of the package's tables what this load added."""
        from pytest_benchaudit.dataset.suites import PLUGIN_SUITE_DIRS

        for table, name in reversed(self.added):
            table.pop(name, None)
        for folder in self.suite_dirs_added:
            PLUGIN_SUITE_DIRS.remove(folder)
        self.suite_dirs_added.clear()
        if self.analyses_added:
            from pytest_benchaudit.compare.analysis_registry import unregister

            for name in self.analyses_added:
                unregister(name)
        self.added.clear()


_LOADED: Plugins | None = None


def disabled_from_env() -> list[str]:
    """The plugin names ``BENCHAUDIT_DISABLE_PLUGINS`` turns off (comma-separated)."""
    return [n.strip() for n in os.environ.get(DISABLE_ENV, "").split(",") if n.strip()]


def loaded() -> Plugins:
    """The plugins loaded in this process (loading them, none disabled but the environment's, if not yet)."""
    return _LOADED if _LOADED is not None else load_plugins()


def load_plugins(disable: Collection[str] = ()) -> Plugins:
    """Load the built-ins and every installed plugin but ``disable`` and the environment's; merge what
    they register.  Loaded once per process and set of disabled names.  Raises :class:`PluginError`."""
    global _LOADED
    env = disabled_from_env()
    names = tuple(sorted({*disable, *env}))
    if _LOADED is not None and _LOADED.disabled == names:
        return _LOADED
    if _LOADED is not None:
        _LOADED.unload()
        _LOADED = None
    points = _entry_points()
    unknown = [n for n in disable if n not in points]
    if unknown:
        raise PluginError(
            f"--disable-plugin {unknown[0]}: no plugin of that name is installed"
            f"{did_you_mean(unknown[0], list(points))}; installed: {', '.join(points) or 'none'}"
        )
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(hookspecs)
    manager.register(builtin_plugin, BUILTIN)
    infos = {BUILTIN: PluginInfo(BUILTIN, builtin_plugin.__name__, "pytest-benchaudit", _own_version())}
    for name in names:
        manager.set_blocked(name)
    for name, point in points.items():
        if name not in names:
            infos[name] = _import(name, point)
    try:
        manager.load_setuptools_entrypoints(PROJECT)
        manager.check_pending()
    except pluggy.PluginValidationError as err:
        plugin = manager.get_name(err.plugin) or "?"
        raise PluginError(f"plugin {plugin!r}{_where(infos.get(plugin))}: {err}{_off(plugin)}") from None
    plugins = Plugins(manager, infos, names)
    try:
        _merge_core(plugins)
    except BaseException:
        plugins.unload()
        raise
    _LOADED = plugins
    return plugins


def unload_plugins() -> None:
    """Take out what the plugins loaded in this process added (the next use loads them again)."""
    global _LOADED
    if _LOADED is not None:
        _LOADED.unload()
        _LOADED = None


def suite_dirs() -> list[tuple[str, Path]]:
    """``(plugin, folder of suite folders)``, the packaged suites first, then the plugins' in load order."""
    return list(loaded().suites)


def load_analyses() -> list[str]:
    """Register the plugins' compare analyses (once per load); the names registered by plugins."""
    plugins = loaded()
    if plugins.analyses_added is None:
        from pytest_benchaudit.compare.analysis_registry import Analysis, analyses, register

        plugins.analyses_added = []
        present = {a.name: a for a in analyses()}
        for plugin, found in _call(plugins, "benchaudit_analyses", "compare analyses"):
            for analysis in _iterable(found, plugin, "benchaudit_analyses"):
                if not isinstance(analysis, Analysis):
                    raise PluginError(
                        f"plugin {plugin!r}: benchaudit_analyses returned {type(analysis).__name__}, "
                        f"not an Analysis{_off(plugin)}"
                    )
                _note(plugins, plugin, "analyses", analysis.name)
                if present.get(analysis.name) is analysis:
                    continue
                try:
                    register(analysis)
                except ValueError as err:
                    raise PluginError(
                        f"plugin {plugin!r}{_where(plugins.infos.get(plugin))}: {err}{_off(plugin)}"
                    ) from None
                plugins.analyses_added.append(analysis.name)
    return list(plugins.analyses_added)


def importers() -> dict[str, Importer]:
    """The importers by name (``benchaudit import SOURCE``): the built-ins' and the plugins'."""
    plugins = loaded()
    if plugins.importer_table is None:
        table: dict[str, Importer] = {}
        for plugin, found in _call(plugins, "benchaudit_importers", "importers"):
            for importer in _iterable(found, plugin, "benchaudit_importers"):
                name = getattr(importer, "name", None)
                if not isinstance(name, str) or not callable(getattr(importer, "import_runs", None)):
                    raise PluginError(
                        f"plugin {plugin!r}: an importer needs a name and import_runs() (got "
                        f"{type(importer).__name__}){_off(plugin)}"
                    )
                _claim(plugins, plugin, "importers", name)
                table[name] = importer
        plugins.importer_table = table
    return dict(plugins.importer_table)


def _entry_points() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for point in entry_points(group=PROJECT):
        if point.name == BUILTIN:
            raise PluginError(f"plugin entry point {point.name!r} ({point.value}): that name is the built-ins'")
        found.setdefault(point.name, point)
    return found


def _import(name: str, point: EntryPoint) -> PluginInfo:
    """Import the entry point's module here, so that an error names it (pluggy's loader would raise it bare)."""
    dist = point.dist
    info = PluginInfo(name, point.module, dist.name if dist else None, dist.version if dist else None)
    try:
        point.load()
    except Exception as err:  # any error of a third party's import: said in one line, with the way out
        raise PluginError(
            f"plugin {name!r}{_where(info)} cannot be imported ({point.value}): {type(err).__name__}: {err}{_off(name)}"
        ) from None
    return info


def _merge_core(plugins: Plugins) -> None:
    from pytest_benchaudit.dataset.formats import READERS
    from pytest_benchaudit.dataset.suites import PLUGIN_SUITE_DIRS
    from pytest_benchaudit.scoring import declarations, extract, metrics

    for plugin, found in _call(plugins, "benchaudit_suite_dirs", "suites"):
        for folder in _iterable(found, plugin, "benchaudit_suite_dirs"):
            path = Path(folder)
            if not path.is_dir():
                raise PluginError(f"plugin {plugin!r}: suite folder {path} does not exist{_off(plugin)}")
            plugins.suites.append((plugin, path))
            if plugin != BUILTIN:
                PLUGIN_SUITE_DIRS.append(path)
                plugins.suite_dirs_added.append(path)
            _note(plugins, plugin, "suites", *sorted(p.parent.name for p in path.glob("*/suite.toml")))
    for plugin, found in _call(plugins, "benchaudit_readers", "data readers"):
        for name, reader in _mapping(found, plugin, "benchaudit_readers").items():
            _add(plugins, plugin, "readers", READERS, name, reader)
    for plugin, found in _call(plugins, "benchaudit_rules", "rules"):
        for name, rule in _named(found, plugin, "benchaudit_rules", declarations.declared_name).items():
            _add(plugins, plugin, "rules", extract.RULES, name, rule)
    for plugin, found in _call(plugins, "benchaudit_metrics", "metrics"):
        for name, metric in _named(found, plugin, "benchaudit_metrics", declarations.declared_name).items():
            if metrics.METRICS.get(name) is metric:
                _note(plugins, plugin, "metrics", name)
                continue
            info = declarations.declared_metric_info(metric)
            if info is None:
                raise PluginError(
                    f"plugin {plugin!r}: metric {name!r} declares no direction and scale "
                    f"(@metric(name=..., lower_is_better=..., kind=..., description=...)){_off(plugin)}"
                )
            _add(plugins, plugin, "metrics", metrics.METRICS, name, metric)
            _add(plugins, plugin, "", metrics.METRIC_INFO, name, info)


def _call(plugins: Plugins, hook: str, what: str) -> Iterable[tuple[str, Any]]:
    """Each implementation of ``hook`` called on its own (the built-ins first): ``(plugin, result)``."""
    caller = getattr(plugins.manager.hook, hook)
    for impl in caller.get_hookimpls():
        try:
            result = impl.function()
        except Exception as err:
            raise PluginError(
                f"plugin {impl.plugin_name!r}{_where(plugins.infos.get(impl.plugin_name))}: {hook}() "
                f"raised {type(err).__name__}: {err} (registering its {what}){_off(impl.plugin_name)}"
            ) from None
        if result is not None:
            yield impl.plugin_name, result


def _iterable(found: Any, plugin: str, hook: str) -> list[Any]:
    if isinstance(found, (str, bytes, Mapping)) or not isinstance(found, Iterable):
        raise PluginError(f"plugin {plugin!r}: {hook}() returned {type(found).__name__}, not a list{_off(plugin)}")
    return list(found)


def _mapping(found: Any, plugin: str, hook: str) -> Mapping[str, Any]:
    if not isinstance(found, Mapping) or not all(isinstance(k, str) and callable(v) for k, v in found.items()):
        raise PluginError(f"plugin {plugin!r}: {hook}() should return a mapping of names to functions{_off(plugin)}")
    return found


def _named(found: Any, plugin: str, hook: str, name_of: Callable[[Any], str | None]) -> dict[str, Any]:
    """A hook's functions by name: a mapping as it is, a list by the names their decorator declares."""
    if isinstance(found, Mapping):
        return dict(_mapping(found, plugin, hook))
    out: dict[str, Any] = {}
    for func in _iterable(found, plugin, hook):
        name = name_of(func) if callable(func) else None
        if name is None:
            raise PluginError(
                f"plugin {plugin!r}: {hook}() returned {getattr(func, '__name__', repr(func))}, which "
                f"declares no name (decorate it: @rule(name=...) / @metric(name=...)){_off(plugin)}"
            )
        out[name] = func
    return out


def _add(plugins: Plugins, plugin: str, kind: str, table: dict[str, Any], name: str, value: Any) -> None:
    """Put ``value`` in ``table`` as ``name`` for ``plugin``; the built-ins' own entries are already there."""
    if table.get(name) is value:
        if kind:
            _note(plugins, plugin, kind, name)
        return
    if kind:
        _claim(plugins, plugin, kind, name)
    elif name in table:
        raise PluginError(f"plugin {plugin!r}: {name!r} is already registered{_off(plugin)}")
    table[name] = value
    plugins.added.append((table, name))


def _claim(plugins: Plugins, plugin: str, kind: str, name: str) -> None:
    owner = plugins.owners.setdefault(kind, {}).get(name)
    if owner is not None:
        by = "the built-ins" if owner == BUILTIN else f"plugin {owner!r}"
        raise PluginError(
            f"plugin {plugin!r}{_where(plugins.infos.get(plugin))}: {kind[:-1]} {name!r} is already "
            f"registered by {by}{_off(plugin)}"
        )
    _note(plugins, plugin, kind, name)


def _note(plugins: Plugins, plugin: str, kind: str, *names: str) -> None:
    plugins.owners.setdefault(kind, {}).update({n: plugin for n in names})
    info = plugins.infos.get(plugin)
    if info is not None:
        info.registered.setdefault(kind, []).extend(n for n in names if n not in info.registered.get(kind, []))


def _where(info: PluginInfo | None) -> str:
    if info is None or info.distribution is None:
        return ""
    return f" (distribution {info.distribution} {info.version})"


def _off(name: str) -> str:
    return "" if name == BUILTIN else f"; turn it off with --disable-plugin {name} or {DISABLE_ENV}={name}"


def _own_version() -> str:
    from pytest_benchaudit import __version__

    return __version__
