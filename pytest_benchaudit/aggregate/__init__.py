"""Downstream aggregation, pure: per-task results, benchmark scores, variant deltas, ranks, statistics."""
