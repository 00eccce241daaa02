"""Reporting: terminal summary, gates, JUnit properties."""
