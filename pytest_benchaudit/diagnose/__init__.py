"""``benchaudit diagnose``: the catalogued failure modes, checked on every model x task of some runs.

The package, by what each module holds:

- :mod:`.diagnosis`: :func:`diagnose` / :func:`diagnose_report` (pure: loaded runs in, findings out),
  the text table and the JSON (:func:`render`, :func:`to_json`);
- :mod:`.core`: what a finding holds (:class:`Finding`), the groups checked, how an effect is computed
  (re-scoring offline with one field changed);
- :mod:`.failure_modes`: the catalogue of failure modes (docs/failure-modes.md);
- :mod:`.answer_checks`: the per-group checks, one function per failure mode; :mod:`.data_checks`: the checks of
  the data (sizes, duplicates, across tasks); :mod:`.lint_checks`: the card lint; :mod:`.order_checks`: the
  paired-order check (rank ties a headline table hides).

The command line is :mod:`pytest_benchaudit.cli.diagnose_cmd`.
"""

from pytest_benchaudit.diagnose.diagnosis import (
    NOT_A_VERDICT,
    PER_TASK,
    Diagnosis,
    Finding,
    LoadedRun,
    diagnose,
    diagnose_report,
    render,
    to_json,
)

__all__ = [
    "NOT_A_VERDICT",
    "PER_TASK",
    "Diagnosis",
    "Finding",
    "LoadedRun",
    "diagnose",
    "diagnose_report",
    "render",
    "to_json",
]
