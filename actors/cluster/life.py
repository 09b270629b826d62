"""The actors' life and the hosted bodies' own views, for tests, faults and ``lbctl run``: the part
of ``Cluster`` (``actors.api``) that only a Ray-hosted cluster offers.

Invariants: every call here names the operation and the host when the cluster is not on Ray
(``InvalidInput``); a started broker is returned once the client's view shows it registered, a
shut-down one once it has left (its bundles transferred first); a kill is a crash, with Ray
restarting the body when asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actors.client import ClientView
from actors.cluster.link import Link
from actors.settings import LEADER, ActorSettings, broker_body_name
from actors.workload import Capacity
from balancer.errors import InvalidInput, Unavailable
from events.log.port import Offsets
from projections.ownership import OwnershipProjection

if TYPE_CHECKING:
    from actors.cluster.ray_link import RayLink

TIMEOUT_S = 30.0
"""A verb's default timeout, in seconds of the link's clock."""


@dataclass(frozen=True, slots=True)
class ActorView:
    """A body's live ownership view and the log position (partition -> next offset) it folded."""

    view: OwnershipProjection
    position: Offsets



class ActorLife:
    """Fault injection and body views; mixed into ``Cluster``, which provides these fields."""

    link: Link
    view: ClientView
    settings: ActorSettings

    @property
    def kind(self) -> str:
        """The host: ``ray`` or ``inproc``."""
        return self.link.kind

    async def actor_views(self, timeout_s: float = TIMEOUT_S) -> dict[str, ActorView]:
        """Each hosted body's live ownership view, once it has folded at least what the client
        has, with the log position it is a fold of (compare it with a replay up to there)."""
        await self.link.catch_up()
        snaps = await self._ray("actor_views").snapshots(dict(self.view.cursor.position), timeout_s)
        return {n: ActorView(OwnershipProjection.restore(s["view"]), dict(s["position"]))
                for n, s in snaps.items()}

    async def statuses(self, timeout_s: float | None = None) -> dict[str, dict[str, Any]]:
        """Each hosted body's ``status()`` (Ray); one that does not answer within ``timeout_s``
        (None: no limit) is ``{"error": ...}`` naming the wait, the others still answer."""
        return await self._ray("statuses").statuses(timeout_s)

    def _ray(self, what: str) -> RayLink:
        from actors.cluster.ray_link import RayLink

        if not isinstance(self.link, RayLink):
            raise InvalidInput(f"{what}: a Ray-hosted cluster's operation; this one runs {self.kind}",
                               value=what)
        return self.link

    async def add_broker(self, broker_id: str | None = None, *, failure_domain: str | None = None,
                         capacity: Capacity | None = None, options: Mapping[str, Any] | None = None,
                         timeout_s: float = TIMEOUT_S) -> str:
        """Start one more broker (``broker-N``, the first N free); its id once it is registered."""
        broker_id = self._ray("add_broker").spawn_broker(broker_id, failure_domain, capacity, options)
        if not await self.link.wait_for(lambda: broker_id in self.view.brokers, timeout_s):
            raise Unavailable(f"broker {broker_id} did not register within {timeout_s}s")
        return broker_id

    async def kill_broker(self, broker_id: str, *, restart: bool = False) -> None:
        """Hard-kill a broker's actor (a crash); ``restart``: Ray starts it again from the log."""
        self._ray("kill_broker").kill(broker_body_name(broker_id), broker_id=broker_id, restart=restart)

    async def shutdown_broker(self, broker_id: str, *, timeout_s: float | None = None) -> None:
        """Graceful shutdown: the broker's bundles are transferred, it leaves, its actor ends."""
        ray = self._ray("shutdown_broker")
        await ray.ask_broker(broker_id, "shutdown")
        drain_s = ray.host.clock.wall_s(self.settings.drain_timeout_ms) + 10.0
        if not await self.link.wait_for(lambda: broker_id not in self.view.brokers,
                                        drain_s if timeout_s is None else timeout_s):
            raise Unavailable(f"broker {broker_id} did not leave in time")
        await ray.retire(broker_body_name(broker_id))

    async def kill_leader(self, *, restart: bool = True) -> None:
        """Hard-kill the leader's actor; Ray restarts it and it campaigns for a new epoch."""
        self._ray("kill_leader").kill(LEADER, restart=restart)

