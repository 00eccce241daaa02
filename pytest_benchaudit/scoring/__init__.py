"""Downstream stages, pure: extraction rules, metrics, grading, judge prompts and parsing, task families."""
