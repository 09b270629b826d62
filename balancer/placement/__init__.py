"""Placement: the filter pipelines of both load managers and the broker-selection strategies (behaviour §5)."""
