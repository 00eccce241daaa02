"""``benchaudit import``: other harnesses' logs and published model outputs -> run directories.

Logs of other harnesses (one run directory per task and model; docs/import.md has the mapping):

    benchaudit import inspect LOG_OR_DIR...      Inspect .eval / .json logs (inspect_log.py)
    benchaudit import lm-eval DIR...             lm_eval --output_path DIR --log_samples (lm_eval_log.py)
    benchaudit import every-eval-ever DIR...     Every Eval Ever 0.3.0 files (eee_log.py)
    benchaudit import PATH...                    the format detected (detect_format.py)

Each is one importer object (``name``, ``help``, ``detect(path)``, ``import_logs(paths, options)``, and
``import_runs(source, report_dir, suites_dir, data_dir, log)`` in the released importers' shape;
:class:`detect_format.Importer`, :data:`detect_format.LOG_IMPORTERS`) that reads its format into
``log_samples.py``'s types; what they share is ``imported_runs.py`` (the imported layer, staged
writes), ``headline_check.py`` (the headline against the harness's own metric), ``peer_match.py``
(a log whose requests are what a peer layer renders is that layer) and ``sample_feed.py`` (reading on
the second core).

Published outputs of two benchmarks, one run directory per model:

    benchaudit import athenabench-runs DIR [--report-dir D] [--suites-dir S] [--data-dir X]
        DIR: AthenaBench's released ``runs-mini/`` (``<model path>/<TASK>-scored.jsonl``: the
        prompt, the model's raw response, the released extraction and per-item score).
    benchaudit import cti-bench-responses DIR [--report-dir D] [--suites-dir S] [--data-dir X]
        DIR: CTI-Bench's released ``responses/`` (``cti-<task>-responses.tsv``: gold and one
        already-extracted answer per model and row; no raw outputs).

Each model becomes a run directory under ``--report-dir`` with the same contract as a
pytest run (``run.json``, ``records.jsonl``, ``summary.json``), scored here with the
suite's ``released`` layer, so an imported run can be shown, compared and re-scored like
any other.  ``run.json`` has ``source`` ({kind, path, ...}) where a pytest run has argv.

Every record keeps what the source published next to our reading of it:
``released_prediction`` (the released extracted answer) and, for AthenaBench,
``released_score`` (the released per-item score as published), ``released_success`` and
``released_value`` (that score on the record's metric scale; ``null`` where the released
aggregation leaves the row out).  ``import_report.json`` lists every item where our
released-layer score differs from the released one, with the reason when it is known,
and the released per-task aggregates beside ours.

Rows are matched to the benchmark files (read from the data directory, as a pytest run
reads them) by order, and the match is checked (AthenaBench: the prompt and the gold of
each row; CTI-Bench: the gold).  A missing file, a malformed row or a failed match stops
the import with one message naming the file and the row; nothing is written then.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_benchaudit.importers.athenabench import import_athenabench_runs
from pytest_benchaudit.importers.common import (
    ImportedRun,
    ImportSourceError,
    run_dir_name,
)
from pytest_benchaudit.importers.cti_bench import import_cti_bench_responses

__all__ = [
    "SOURCES",
    "ImportSourceError",
    "ImportedRun",
    "import_athenabench_runs",
    "import_cti_bench_responses",
    "run_dir_name",
]

# `benchaudit import SOURCE DIR`: source name -> importer
SOURCES: dict[str, Callable[..., list[ImportedRun]]] = {
    "athenabench-runs": import_athenabench_runs,
    "cti-bench-responses": import_cti_bench_responses,
}
