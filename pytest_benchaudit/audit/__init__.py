"""Work on stored runs, no model calls: rescore, sweep, compare, imports, gold audit, judge agreement, ledger."""
