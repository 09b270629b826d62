"""Hosts for the actor bodies: ``inproc`` (one process, virtual clock, MemoryEventLog; the base of
the fault simulator) and, later, ``ray`` (the deployment)."""

from actors.runtime.inproc import (
    InProcessHost,
    Ticket,
    build_cluster,
    run_sync,
    wait_ready,
)

__all__ = ["InProcessHost", "Ticket", "build_cluster", "run_sync", "wait_ready"]
