"""The built-in analyses of the compare document, registered in the order the text and the report show them.

Each module defines its :class:`~.analysis_registry.Analysis` next to the code that computes it (``ANALYSIS``);
this list is the one place that registers them.  Adding an analysis: write its module (compute, text,
HTML section, ``ANALYSIS``), add it here (docs/compare.md, "Adding an analysis").

The core document (scores, ranks, tau-b, win rates, benchmark ranks, PCA, paired differences; rank shifts,
Spearman rho and the bootstrap for two sets) is not on the registry: every analysis reads it, the
paired rows mark the rank tables and feed ``diagnose``, so it is made first, by :mod:`.document_builder`.
"""

from __future__ import annotations

from typing import Any

from pytest_benchaudit.compare import peers, sensitivity, similarity
from pytest_benchaudit.compare.analysis_registry import Analysis, register

__all__ = ["BUILTIN"]

#: The built-in analyses, in order: peer gaps (two sets), task similarity (--similarity), sensitivity
#: (--sensitivity RUN...).
BUILTIN: tuple[Analysis[Any], ...] = (peers.ANALYSIS, similarity.ANALYSIS, sensitivity.ANALYSIS)

for _analysis in BUILTIN:
    register(_analysis)
