"""PySpark jobs over the event log: sources, audits, timelines and what-if sweeps.

Dependency direction: may import balancer, events and projections; never actors."""
