"""The ``benchaudit`` command line: one module per command, importing neither pytest nor scipy at start."""

from pytest_benchaudit.cli.app import main

__all__ = ["main"]
