"""Folds of the event log into views (ownership, load), with checkpoints, snapshots and time travel.

Dependency direction: projections imports events and balancer only."""
