"""Run directories: the one reader and writer of run.json, records.jsonl and summary.json, and replay."""
