"""``benchaudit plugins``: the plugins loaded, where each comes from and what it registered.

One block per plugin (the built-ins first, then the entry points of the group ``benchaudit`` in the
order pluggy loaded them): its name, distribution and version, module, and the names it registered per
kind (suites, readers, rules, metrics, analyses, importers); ``--json`` prints the same as one document.
Every kind is asked, so this is the command that imports every plugin's analyses and importers too: a
broken one is named here (exit 2).
"""

from __future__ import annotations

import argparse
import json

from pytest_benchaudit.cli._common import Subparsers

__all__ = ["HELP", "add_parser", "run"]

HELP = "the plugins loaded, where from, and what each registered"
KINDS = ("suites", "readers", "rules", "metrics", "analyses", "importers")


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "plugins", help=HELP, description=HELP + " (entry points in the group `benchaudit`; docs/plugins.md)"
    )
    p.add_argument("--json", action="store_true", help="one JSON document instead of the text")
    return p


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.plugins.plugin_manager import importers, load_analyses, loaded

    load_analyses()
    importers()
    plugins = loaded()
    rows = [
        {
            "name": info.name,
            "distribution": info.distribution,
            "version": info.version,
            "module": info.module,
            "registered": {kind: sorted(info.registered.get(kind, [])) for kind in KINDS},
        }
        for info in plugins.infos.values()
    ]
    if args.json:
        print(json.dumps({"plugins": rows, "disabled": list(plugins.disabled)}, indent=2))
        return 0
    for info in plugins.infos.values():
        print(f"{info.name}: {info.distribution} {info.version} ({info.module})")
        for kind in KINDS:
            names = sorted(info.registered.get(kind, []))
            if names:
                print(f"  {kind:<10} {', '.join(names)}")
    if plugins.disabled:
        print(f"disabled: {', '.join(plugins.disabled)}")
    return 0
