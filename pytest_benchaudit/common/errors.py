"""One exception hierarchy for everything a user can get wrong, and how each kind is reported.

Every error the project raises on purpose derives from :class:`BenchauditError` and falls in one
of four kinds; the kind decides the exit status, the message is the one line the user reads:

- :class:`UsageError`: a bad option, pipeline value, model spec, gate or path on the command line.
- :class:`ConfigError`: a bad ``suite.toml`` or ``[tool.benchaudit]`` table (a usage error too:
  the user can fix it before anything runs).
- :class:`DataError`: benchmark data missing or malformed (a row, a file, an import source).
- :class:`RunDirError`: a run directory that is missing, corrupt, or holds lines that are not records.

The mapping to exit codes lives here and only here: :func:`cli_exit_code` for ``benchaudit``
commands (2 for bad input, as argparse reports usage errors; 1 when a stored run directory is
unusable or a file cannot be read or written), and the pytest plugin turns
every ``BenchauditError`` raised before the first item into ``pytest.UsageError`` (exit 4).
A message names what and where (``suites/seceval/suite.toml: [tasks.mcq.relased]: unknown layer
'relased' (did you mean 'released'?)``) and never carries a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "BenchauditError",
    "ConfigError",
    "DataError",
    "RunDirError",
    "UsageError",
    "cli_exit_code",
    "did_you_mean",
]


class BenchauditError(Exception):
    """Base of every error pytest-benchaudit raises on purpose; ``str(err)`` is the one-line message."""

    exit_code: int = 2  # the command's input was bad (argparse's status for usage errors)


class UsageError(BenchauditError, ValueError):
    """A bad command-line value: option, pipeline field, model spec, gate, path."""


class ConfigError(UsageError):
    """A bad suite config or ``[tool.benchaudit]`` table, found before anything runs."""


class DataError(BenchauditError):
    """Benchmark data that is missing or malformed: a row, a file, an import source."""


class RunDirError(BenchauditError):
    """A run directory that is missing, corrupt, or holds lines that are not records."""

    exit_code = 1  # the stored run, not the command line, is what failed


def cli_exit_code(err: BaseException) -> int:
    """The ``benchaudit`` exit status for an error that stopped a command (see the module docstring)."""
    return err.exit_code if isinstance(err, BenchauditError) else 1


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` when a choice is close to ``name``, else an empty string."""
    close = difflib.get_close_matches(name, sorted(set(choices)), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
