"""Plugins: what a distribution adds to benchaudit through entry points in the group ``benchaudit``.

:mod:`.hookspecs` declares the hooks (suites, data readers, extraction rules, metrics, compare
analyses, importers), :mod:`.builtin_plugin` registers the package's own through them, and
:mod:`.plugin_manager` loads the installed plugins with pluggy and merges what each registers into
the registries the rest of the package reads.  docs/plugins.md is the author's guide.
"""
