"""A package, so that its conftest.py is imported as ``multiverse.conftest`` (not a second bare ``conftest``
beside tests/conftest.py) and its test_oracle.py does not clash with tests/rescore/test_oracle.py."""
