"""Helpers only this repository's tests need (the rest, which a plugin author's tests can use too, is
``pytest_benchaudit.testing``): where the checkout and its packaged suites are.

Importable as ``helpers`` (a package: one module per shared test-only piece) in either import mode: ``pythonpath`` in pyproject.toml's pytest table puts
tests/ on ``sys.path`` (``--import-mode=importlib`` does not do so itself).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "suites"
