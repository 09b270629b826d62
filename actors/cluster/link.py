"""The seam between ``Cluster`` and the actors it drives: one ``Link`` per host, in three parts.

``LinkTransport`` carries commands and feeds the client's view, ``LinkClock`` is the cluster's
time as the client sees it, ``LinkFleet`` starts, crashes and asks single bodies (tests, faults,
``lbctl run``). A host's link meets all three; a verb uses the part it needs.

A ``Cluster`` writes every verb once; a link is what differs between hosts: how a command
reaches a body, how the client's view is fed, and what a second is. ``RayLink`` runs each body as
a Ray actor on the wall clock (sped up by ``speed``; on one machine a paced clock that stands
still for a late actor, ``actors.runtime.paced``); ``InProcLink`` runs every body in this
process on a virtual clock, so a simulated hour costs seconds.

Invariants:
- a link owns the client's view (``ClientView``): a fold of a prefix of the log, in log order,
  each record once; every record it folds also reaches the view's listeners;
- a read (the view, ``history``, ``catch_up``) starts no body and appends nothing; a kept
  in-process cluster starts its bodies only for what needs them (``open_for_commands``, ``call``,
  time passing, the bodies' own answers);
- ``call`` delivers one command to one body and returns ``(reply, error)``: a body's refusal is
  returned, never raised, so the caller decides what to retry;
- ``clock_s`` and ``pause`` are the link's own seconds: wall seconds on Ray, cluster seconds on
  the virtual clock; a verb's ``timeout_s`` is measured on that clock;
- ``sleep(ms)`` lets ``ms`` of cluster time pass (virtual: at once; Ray: ``ms / speed`` of wall
  time, at least a few milliseconds so waiting loops never spin);
- ``wait_for(predicate, timeout_s)`` is True as soon as the predicate holds on the view.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from actors.client import ClientView
from actors.settings import ActorSettings
from actors.workload import Capacity
from balancer.config import LoadBalancerConfig
from balancer.errors import LoadBalancerError
from events.catalog import Command
from events.log.port import Record


class LinkTransport(Protocol):
    """How commands reach the bodies and the log reaches the client's view."""

    kind: str
    """``ray``, ``inproc`` or ``pulsar`` (a mirror)."""
    view: ClientView
    config: LoadBalancerConfig
    settings: ActorSettings

    async def call(self, target: str, command: Command,
                   timeout_s: float) -> tuple[object | None, LoadBalancerError | None]: ...

    async def catch_up(self) -> None: ...

    async def open_for_commands(self) -> None:
        """Make the cluster ready to take a command: start its bodies (a kept in-process
        cluster, which a read leaves unstarted) or nothing (a running one)."""
        ...

    async def history(self) -> list[Record]:
        """Every record of the log, read back from the log."""
        ...

    def describe(self) -> Mapping[str, Any]:
        """What another process needs to reach this cluster (kept clusters)."""
        ...

    async def close(self) -> None: ...


class LinkClock(Protocol):
    """The cluster's time as the client sees it: wall seconds on Ray, virtual ones in process."""

    virtual: bool
    """True when cluster time moves only through ``sleep``/``pause``/``wait_for`` (inproc)."""

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool: ...

    def clock_s(self) -> float: ...

    async def pause(self, seconds: float) -> None: ...

    async def sleep(self, ms: int) -> None: ...

    def now_ms(self) -> int: ...

    def retry_s(self) -> float:
        """How long a lookup waits for its bundle's owner before asking the leader again."""
        ...

    def cluster_s(self, ms: int) -> float:
        """How many of this link's seconds ``ms`` of cluster time take."""
        ...


class LinkFleet(Protocol):
    """The bodies' life (each operation names the bad body or option) and their own answers."""

    async def spawn_broker(self, broker_id: str | None, failure_domain: str | None,
                           capacity: Capacity | None, options: Mapping[str, Any] | None) -> str:
        """Start broker ``broker_id`` (None: the first free ``broker-N``), a new one or one that
        was killed; its id once its body has recovered (it then registers by itself)."""
        ...

    def kill(self, name: str, *, broker_id: str | None = None, restart: bool) -> None:
        """Crash body ``name``; ``restart``: start it again at once, rebuilt from the log."""
        ...

    async def ask_broker(self, broker_id: str, method: str) -> None:
        """Have the broker's body run ``method(now_ms)`` and its effects (``shutdown``)."""
        ...

    async def retire(self, name: str) -> None:
        """End body ``name`` for good (after it left)."""
        ...

    async def snapshots(self, target: Mapping[int, int], timeout_s: float) -> dict[str, dict[str, Any]]:
        """Each body's ``{"ownership": ..., "position": ...}`` once it folded at least ``target``."""
        ...

    async def statuses(self, timeout_s: float | None = None) -> dict[str, dict[str, Any]]:
        """Each body's ``status()``; a dead one, or one silent for ``timeout_s``: ``error``."""
        ...


class Link(LinkTransport, LinkClock, LinkFleet, Protocol):
    """What a ``Cluster`` needs of the host its actors run on: the three parts one link meets
    (``Cluster`` keeps each part apart: ``transport``, ``clock``, ``fleet``)."""
