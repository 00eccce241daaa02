"""The pytest side: options, collection into items, the runner, the xdist controller.
These are the only modules that import pytest."""
