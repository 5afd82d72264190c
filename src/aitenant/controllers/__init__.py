"""Reconcilers: level-triggered functions from a key to a Result, one module per kind."""
