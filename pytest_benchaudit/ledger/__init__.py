"""The reproducibility ledger (``benchaudit ledger``): per benchmark and pipeline field, does the
documentation match the released code.

:mod:`.ledger_rows` builds it from the suites, :mod:`.ledger_peers` adds the peer harnesses' layers,
:mod:`.ledger_documents` declares its JSON, :mod:`.ledger_render` prints it.  Nothing here imports
scipy or pytest: ``benchaudit ledger`` starts fast (tests/test_architecture.py checks it).
"""
