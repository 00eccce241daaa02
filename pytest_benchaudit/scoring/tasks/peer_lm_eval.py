"""lm-evaluation-harness's readers as extraction rules (exact match, highest log-likelihood).

Filled in by the lm_eval layer work (issue 27); the family exposes ``RULES`` like the others.
"""

from __future__ import annotations

from typing import Any

RULES: dict[str, Any] = {}
