"""Test suite: unit/, contracts/, integration/ (real Kafka, real Ray), sim/ (seeded fault runs)."""
