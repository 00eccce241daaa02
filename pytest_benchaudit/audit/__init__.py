"""``benchaudit audit``: the whole audit of stored runs toward a layer, one document and one report.

:mod:`.whole` builds ``audit.json`` from the features it combines (re-scoring, compare, diagnose, the
ledger); :mod:`.layer_runs` splits a ``--pipelines`` run into one run per layer, :mod:`.layer_diff` and
:mod:`.upstream` say which fields differ and whether they change what is sent, :mod:`.cross_harness`
makes the cross-harness table, :mod:`.audit_documents` declares the document.
"""
