"""Caravel: the shared kernel every service imports (rules, contracts, store, bus)."""
