"""Benchmarks of the vflfs engine (run as ``python -m benchmarks.<name>`` from the repo root)."""
