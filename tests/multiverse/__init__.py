"""A package, so that its conftest.py is imported as ``multiverse.conftest``: as a bare ``conftest`` it
replaced tests/conftest.py in ``sys.modules`` and every later ``from conftest import ...`` failed (45
collection errors in a whole-suite run), and its test_oracle.py clashed with tests/rescore/test_oracle.py."""
