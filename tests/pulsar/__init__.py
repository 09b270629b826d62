"""Tests against a real Apache Pulsar 4.0.7 cluster (marker `pulsar`)."""
