"""``benchaudit export``: a run directory in another project's format.

    benchaudit export RUN_DIR --format every-eval-ever [--out DIR] [--samples] [--include-questions]
                                                      [--validate SCHEMA_DIR]

Every Eval Ever (schema 0.3.0) is the only format so far.  For each model x benchmark of the
run it writes one aggregate JSON (``eval.schema.json``) and, with ``--samples``, one JSONL of
per-item lines (``instance_level_eval.schema.json``), laid out as the datastore expects::

    OUT/data/<benchmark>/<org>/<model>/<uuid>.json
    OUT/data/<benchmark>/<org>/<model>/<uuid>_samples.jsonl

How our fields map (the schema's typed slots first; what has none goes into the free-form
``additional_details`` string maps, JSON-encoded where the value is not a string):

- model: ``model_info.name`` = the model spec, ``model_info.id`` = the served model id when the
  endpoint reported exactly one, else the requested id, else the spec; spec, requested id and
  served ids in ``model_info.additional_details``.
- task (and variant): one ``evaluation_results[]`` entry each, ``evaluation_name`` =
  ``<benchmark>.<task>`` (``|<variant>`` for ``--vary`` variants); the benchmark's combined score
  (when the run's aggregation gives one) is one more entry named ``<benchmark>``.
- metric: ``metric_config`` (``lower_is_better``, ``metric_id`` ``benchaudit.<metric>``, bounds);
  headline ``score`` under the pipeline's denominator; ``uncertainty.confidence_interval`` = the
  run's 95% CI (Wilson for 0/1 metrics, Student t otherwise), ``num_samples`` = the headline's
  denominator; ``score_details.details``: n, n_valid, n_correct, score_total, score_valid,
  invalid_rate, invalid_reasons, stage_rates, extras.
- pipeline: ``generation_config.generation_args`` gets temperature, top_p, max_tokens and the
  prompt template text (when the suite can be read); every card field (stop sequences,
  extraction rule, reasoning handling, denominator, aggregation, ...), the pipeline name, hash,
  notes and the parameters actually sent go in ``generation_config.additional_details``.

Question content (question text, rendered prompt, messages, option labels, question metadata) is
withheld from sample lines unless ``--include-questions``; gold answers and model outputs are
written (``input.reference``, ``output.raw``).  Nothing from the environment (argv, endpoint
URLs, platform, versions other than the library's) is exported, and everything written passes
through the run's secret redaction.  The exporter does not need the schema files; ``--validate``
checks what it wrote against them with ``jsonschema``.
"""

from pytest_benchaudit.report.export.fields import (
    FORMATS,
    SCHEMA_VERSION,
    ExportError,
    read_run,
)
from pytest_benchaudit.report.export.writer import (
    export_every_eval_ever,
    validate_export,
)

__all__ = ["ExportError", "FORMATS", "SCHEMA_VERSION", "export_every_eval_ever", "read_run", "validate_export"]
