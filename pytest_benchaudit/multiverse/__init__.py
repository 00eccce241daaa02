"""The multiverse of a benchmark: every defensible pipeline at once, and which conclusions survive it.

A multiverse analysis (Steegen, Tuerlinckx, Gelman & Vanpaemel 2016) and its specification curve
(Simonsohn, Simmons & Nelson 2020), over stored runs: each task's *space* (the defensible values of
its downstream fields, and its generation sets) is enumerated and every specification re-scored from
the stored outputs, as ``benchaudit rescore --set`` would.  docs/multiverse.md describes the method.

The package, by what each module holds:

- :mod:`.space`: a task's space (declared in the suite, or its defaults) and why each value is in it;
- :mod:`.enumerate_specs`: the full factorial, or a seeded sample of it;
- :mod:`.cells`: the runs as cells (model x task x generation set);
- :mod:`.fast_rescore`: every cell's score under any specification, each reading made once;
- :mod:`.robustness`: distributions, rank intervals, pair orders and the fields that flip them;
- :mod:`.variance`: the share of the score variance each field explains;
- :mod:`.mv_verdict`: one sentence per benchmark;
- :mod:`.universe`: :func:`build_multiverse`, the whole of it; :mod:`.mv_documents` its document;
- :mod:`.mv_terminal`, :mod:`.mv_html`: the terminal and HTML views.

The command line is :mod:`pytest_benchaudit.cli.multiverse_cmd`.
"""

from pytest_benchaudit.multiverse.universe import MultiverseError, build_multiverse

__all__ = ["MultiverseError", "build_multiverse"]
