"""Leaf helpers with no project imports: the error hierarchy, secret redaction, progress lines."""
