"""Inspect's readers as extraction rules (inspect_ai's multiple-choice ``choice()`` scorer).

Filled in by the inspect_evals layer work (issue 27); the family exposes ``RULES`` like the others.
"""

from __future__ import annotations

from typing import Any

RULES: dict[str, Any] = {}
