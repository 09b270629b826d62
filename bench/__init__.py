"""Benchmarks: scenarios and the runner that prints ratio tables (docs/spec/bench.md)."""
