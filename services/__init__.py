"""Caravel services and the `caravel` command line."""
