"""Upstream stage 1: suite configs (``suite.toml``), data readers, questions, the data directory and fetching."""
