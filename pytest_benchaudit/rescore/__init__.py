"""Re-scoring stored runs: ``benchaudit rescore`` and ``benchaudit sweep``, no model and no pytest.

Read in the order the data flows: :mod:`.run_dirs` reads a run directory, finds each task's target
pipeline (its stored card retargeted to a suite's layer and ``--set``, merged by
:mod:`pytest_benchaudit.pipeline.layering`), re-scores the records with :mod:`.records` and writes a new run
directory; ``sweep_run`` re-scores the same records once per single-field variant.
"""
