"""Helpers for tests and the demo: a local control plane and samples. Not used in production."""
