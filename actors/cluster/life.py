"""The actors' life and the hosted bodies' own views, for tests, faults, bench and ``lbctl run``:
the part of ``Cluster`` (``actors.api``) that starts, crashes and asks single bodies, on any host.

Invariants: every operation goes through the link (``actors.cluster.link``), so the in-process
and the Ray host answer the same calls; a started broker is returned once the client's view shows
it registered (the wait for its registration counts from its body's start, which a busy machine
may slow for long), a shut-down one once it has left (its bundles transferred first); a kill is a
crash, the restarted body rebuilt from its snapshot and the log; an unknown broker is named
(``UnknownBroker``), and only the process that started a Ray cluster manages its actors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from actors.client import ClientView
from actors.cluster.link import LinkClock, LinkFleet, LinkTransport
from actors.settings import LEADER, ActorSettings, broker_body_name
from actors.workload import Capacity
from balancer.errors import Unavailable
from events.log.port import Offsets
from projections.ownership import OwnershipProjection

TIMEOUT_S = 30.0
"""A verb's default timeout, in seconds of the link's clock."""


@dataclass(frozen=True, slots=True)
class ActorView:
    """A body's live ownership view and the log position (partition -> next offset) it folded."""

    ownership: OwnershipProjection
    position: Offsets



class ActorLife:
    """Fault injection and body views; mixed into ``Cluster``, which provides these fields."""

    transport: LinkTransport
    clock: LinkClock
    fleet: LinkFleet
    view: ClientView
    settings: ActorSettings

    @property
    def kind(self) -> str:
        """The host: ``ray`` or ``inproc``."""
        return self.transport.kind

    async def actor_views(self, timeout_s: float = TIMEOUT_S) -> dict[str, ActorView]:
        """Each hosted body's live ownership view, once it has folded at least what the client
        has, with the log position it is a fold of (compare it with a replay up to there)."""
        await self.transport.catch_up()
        snaps = await self.fleet.snapshots(dict(self.view.cursor.position), timeout_s)
        return {n: ActorView(OwnershipProjection.restore(s["ownership"]), dict(s["position"]))
                for n, s in snaps.items()}

    async def statuses(self, timeout_s: float | None = None) -> dict[str, dict[str, Any]]:
        """Each hosted body's ``status()`` with its host's counts; a dead one, or one that does
        not answer within ``timeout_s`` (None: no limit), is ``{"error": ...}``."""
        return await self.fleet.statuses(timeout_s)

    async def add_broker(self, broker_id: str | None = None, *, failure_domain: str | None = None,
                         capacity: Capacity | None = None, options: Mapping[str, Any] | None = None,
                         timeout_s: float = TIMEOUT_S) -> str:
        """Start one more broker (``broker-N``, the first N free), or a killed one again; its id
        once it is registered. ``options``: Ray actor options (Ray only)."""
        broker_id = await self.fleet.spawn_broker(broker_id, failure_domain, capacity, options)
        await self._registered([broker_id], timeout_s)
        return broker_id

    async def add_brokers(self, broker_ids: Sequence[str], *, timeout_s: float = TIMEOUT_S) -> None:
        """Start several brokers at once (killed ones again: a full restart), then wait until
        every one is registered."""
        await asyncio.gather(*(self.fleet.spawn_broker(b, None, None, None) for b in broker_ids))
        await self._registered(broker_ids, timeout_s)

    async def _registered(self, broker_ids: Sequence[str], timeout_s: float) -> None:
        if not await self.clock.wait_for(lambda: all(b in self.view.brokers for b in broker_ids), timeout_s):
            missing = [b for b in broker_ids if b not in self.view.brokers]
            raise Unavailable(f"brokers {missing} did not register within {timeout_s}s")

    async def kill_broker(self, broker_id: str, *, restart: bool = False) -> None:
        """Hard-kill a broker's actor (a crash); ``restart``: it starts again from the log."""
        self.fleet.kill(broker_body_name(broker_id), broker_id=broker_id, restart=restart)

    async def shutdown_broker(self, broker_id: str, *, timeout_s: float | None = None) -> None:
        """Graceful shutdown: the broker's bundles are transferred, it leaves, its actor ends."""
        await self.fleet.ask_broker(broker_id, "shutdown")
        drain_s = self.clock.cluster_s(self.settings.drain_timeout_ms) + 10.0
        if not await self.clock.wait_for(lambda: broker_id not in self.view.brokers,
                                        drain_s if timeout_s is None else timeout_s):
            raise Unavailable(f"broker {broker_id} did not leave in time")
        await self.fleet.retire(broker_body_name(broker_id))

    async def kill_leader(self, *, restart: bool = True) -> None:
        """Hard-kill the leader's actor; restarted, it campaigns for a new epoch."""
        self.fleet.kill(LEADER, restart=restart)

