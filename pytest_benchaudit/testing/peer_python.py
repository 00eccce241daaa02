"""Where the peer harnesses (inspect_ai, inspect_evals, lm-eval) can be run for the live checks.

The peer layers are checked against fixtures captured from the real packages; the live checks
run the *installed* peer on the same inputs, so that a newer release that changes a request or a
reader fails a test naming the field.  The peers are not the project's dependencies (inspect_ai
alone pulls some hundred packages): they live in a virtualenv of their own, named by
``$BENCHAUDIT_PEER_PYTHON`` (its interpreter; ``make peers-venv`` makes one), or in the
interpreter running the tests.  Standard library only.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

__all__ = ["PEER_PYTHON_VAR", "find_peer_python", "peer_versions"]

PEER_PYTHON_VAR = "BENCHAUDIT_PEER_PYTHON"

_PROBE = (
    "import importlib.metadata as m, importlib.util as u, json, sys\n"
    "mods = sys.argv[1:]\n"
    "missing = [x for x in mods if u.find_spec(x) is None]\n"
    "print(json.dumps({'missing': missing, 'versions': {x: m.version(x) for x in mods if x not in missing}}))\n"
)


@functools.cache
def _ask(python: str, modules: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]] | None:
    """``(missing modules, ((module, version), ...))`` in ``python``, or ``None`` when it does not run."""
    try:
        done = subprocess.run([python, "-c", _PROBE, *modules], capture_output=True, text=True, timeout=60)
        answer = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if not isinstance(answer, dict):
        return None
    return tuple(answer["missing"]), tuple(sorted(answer["versions"].items()))


def find_peer_python(*modules: str) -> tuple[str | None, str]:
    """The interpreter that imports every one of ``modules`` (``$BENCHAUDIT_PEER_PYTHON``, else the
    running one) and ``""``; or ``None`` and why there is none (a test's skip reason)."""
    named = os.environ.get(PEER_PYTHON_VAR)
    candidates = [named] if named else [sys.executable]
    for python in candidates:
        asked = _ask(python, tuple(modules))
        if asked is None:
            return None, f"${PEER_PYTHON_VAR}={python} does not run"
        missing = asked[0]
        if not missing:
            return python, ""
        where = f"${PEER_PYTHON_VAR} ({python})" if named else "this interpreter"
        return None, (
            f"{', '.join(missing)} not installed in {where}: set ${PEER_PYTHON_VAR} to the python of a "
            "virtualenv holding the peers (make peers-venv)"
        )
    return None, "no interpreter to ask"  # pragma: no cover - candidates is never empty


def peer_versions(python: str, *distributions: str) -> dict[str, str]:
    """The installed versions of ``distributions`` in ``python`` (those it lacks are left out)."""
    asked = _ask(python, tuple(distributions))
    return dict(asked[1]) if asked else {}
