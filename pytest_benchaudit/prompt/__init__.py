"""Upstream stage 2: prompt templates and chat formats that turn a question into a request."""
