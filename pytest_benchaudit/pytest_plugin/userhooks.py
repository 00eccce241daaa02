"""Calling the hooks users implement (:mod:`pytest_benchaudit.newhooks`) from the controller.

Two promises are kept here, so that a plugin's or ``conftest.py``'s code can neither corrupt the
run nor end it in a traceback:

- **Read-only, all the way down**: each hook gets a read-only copy of the document
  (:func:`~pytest_benchaudit.common.readonly.read_only_copy`); a hook that tries to change one
  gets a ``TypeError`` and changes nothing the controller keeps (the terminal's score table,
  the next record).  The copy is made only when some plugin implements the hook.
- **One clear error**: an implementation that raises is named (its plugin or ``conftest.py``, the
  line that raised, the exception) in one line (:attr:`UserHooks.failure`); the hook is not called
  again in this run, and the controller decides what follows (the record hook stops the run,
  the summary hook lets the run directory finish).  ``pytest.exit()`` from a hook is obeyed, as
  pytest obeys it anywhere; Ctrl-C is not caught.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pytest

from pytest_benchaudit.common.readonly import read_only_copy
from pytest_benchaudit.common.safe_text import printable

__all__ = ["UserHooks"]

# What a hook may raise and still be reported as the hook's failure (pytest.fail/skip raise
# BaseException subclasses); pytest.exit (an Exception) is re-raised before these are caught.
_CAUGHT: tuple[type[BaseException], ...] = (Exception, pytest.fail.Exception, pytest.skip.Exception)


class UserHooks:
    """The controller's caller of ``pytest_benchaudit_*`` hooks (see the module docstring)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.failure: str | None = None  # the first implementation that raised, in one line
        self.failed_hook: str | None = None
        self._off: set[str] = set()  # hooks not called again: one of their implementations raised

    def call(self, name: str, **document: Any) -> bool:
        """Call hook ``name`` with a read-only copy of each keyword's document and ``config``.

        ``False`` when an implementation raised (:attr:`failure` says which, where and what)."""
        caller = getattr(self.config.hook, name)
        impls = caller.get_hookimpls()
        if not impls or name in self._off:
            return True
        frozen = {key: read_only_copy(value) for key, value in document.items()}
        try:
            caller(**frozen, config=self.config)
        except pytest.exit.Exception:
            raise
        except _CAUGHT as err:
            self._off.add(name)
            if self.failure is None:
                self.failure, self.failed_hook = self._describe(name, impls, err), name
            return False
        return True

    def _describe(self, name: str, impls: list[Any], err: BaseException) -> str:
        """``the pytest_benchaudit_summary hook of conftest.py raised ValueError: down (conftest.py:3)``."""
        frames = traceback.extract_tb(err.__traceback__)
        codes = {id(impl.function.__code__): impl for impl in impls if hasattr(impl.function, "__code__")}
        owner = None
        tb = err.__traceback__
        while tb is not None and owner is None:  # the first frame that is one of the implementations
            owner = codes.get(id(tb.tb_frame.f_code))
            tb = tb.tb_next
        whose = self._plugin_name(owner) if owner is not None else "a plugin"
        where = f" ({self._relative(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
        what = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
        return printable(f"the {name} hook of {whose} raised {what}{where}")

    def _plugin_name(self, impl: Any) -> str:
        """A conftest.py by its path under the root directory; another plugin by its registered name."""
        name = str(impl.plugin_name)
        module_file = getattr(impl.plugin, "__file__", None)
        if module_file and Path(module_file).name == "conftest.py":
            return self._relative(module_file)
        return f"plugin {name!r}"

    def _relative(self, filename: str) -> str:
        try:
            return str(Path(filename).resolve().relative_to(self.config.rootpath.resolve()))
        except ValueError:
            return filename
