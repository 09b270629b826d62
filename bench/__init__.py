"""Benchmarks: scenarios and the runner that prints ratio tables (shared/bench/README.md)."""
