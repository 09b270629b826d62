"""Attach the project to a real Apache Pulsar cluster: mirror it, advise on it, drive it."""
