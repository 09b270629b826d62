"""Hosts for the actor bodies: ``inproc`` (one process, virtual clock, MemoryEventLog; the base of
the fault simulator), ``realtime`` (one body on a real clock and a real log, Ray-free) and ``ray`` (each
body a named Ray actor hosting a ``realtime`` host; the deployment). ``ray`` is not imported here: only
what asks for it pays for importing Ray."""

from actors.runtime.inproc import InProcessHost
from actors.runtime.inproc_cluster import build_cluster, wait_ready
from actors.runtime.tickets import Ticket, run_sync

__all__ = ["InProcessHost", "Ticket", "build_cluster", "run_sync", "wait_ready"]
