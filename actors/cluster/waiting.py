"""Waiting on the cluster, as part of ``Cluster``: until it is ready, until the view shows what a
verb caused, for the next record that matches, or for cluster time to pass.

Invariants: every wait is measured on the link's clock (wall seconds on Ray, cluster seconds in
process) and ends in ``Unavailable`` naming what did not happen; a wait reads the client's view,
never the bodies; ``poll`` hands out each record the view folded once, in fold order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from actors.client import ClientView
from actors.cluster.life import TIMEOUT_S
from actors.cluster.link import LinkClock, LinkTransport
from balancer.errors import Unavailable
from balancer.ownership import BundleState
from events.log.port import Record


class Waiting:
    """The waits of ``Cluster`` (mixed in; it provides these fields)."""

    transport: LinkTransport
    clock: LinkClock
    view: ClientView
    _polled: asyncio.Queue[Record]

    async def wait_ready(self, brokers: int, timeout_s: float = TIMEOUT_S) -> None:
        """Until a leader is elected and ``brokers`` brokers are registered, looking every 200 ms
        of cluster time (on the virtual clock, the moment a run starts from is part of its seed).
        A kept cluster a read left unstarted is started first: its log alone is no running one."""
        await self.transport.open_for_commands()
        deadline = self.clock.clock_s() + timeout_s
        while len(self.view.brokers) < brokers or self.view.epoch == 0:
            if self.clock.clock_s() > deadline:
                raise Unavailable(f"{len(self.view.brokers)} of {brokers} broker(s) registered and "
                                  f"leader epoch {self.view.epoch} after {timeout_s:g} s")
            await self.clock.sleep(200)

    async def catch_up(self) -> None:
        """Fold everything the log holds now into the view (reads the log, sends nothing)."""
        await self.transport.catch_up()

    def poll(self) -> list[Record]:
        """Every record folded since the last ``poll`` (from when this client was made), in order."""
        out: list[Record] = []
        while not self._polled.empty():
            out.append(self._polled.get_nowait())
        return out

    async def sleep(self, ms: int) -> None:
        """Let ``ms`` of cluster time pass (in process: at once; on Ray: ``ms / speed`` wall)."""
        await self.clock.sleep(ms)

    async def next_record(self, match: Callable[[Record], bool], *, timeout_s: float = TIMEOUT_S,
                          what: str = "the cluster") -> Record:
        """The first record, from the next ``poll`` on, that ``match``es (``match`` sees every
        record once, in order, so it may keep state); ``Unavailable`` naming ``what`` once
        ``timeout_s`` of the link's clock have passed."""
        deadline = self.clock.clock_s() + timeout_s
        while True:
            for record in self.poll():
                if match(record):
                    return record
            if self.clock.clock_s() >= deadline:
                clock = "cluster time" if self.clock.virtual else "wall time"
                raise Unavailable(f"{what}: not done after {timeout_s:g} s of {clock} "
                                  "(it was accepted; see `lbctl log tail`)")
            await self.clock.sleep(100)

    async def _shown(self, predicate: Callable[[], bool], what: str) -> None:
        """Until the view shows what a verb appended (a log may serve a record moments after its
        append, e.g. Kafka's transactions): the verb's invariant, returned once in the view."""
        if not await self.clock.wait_for(predicate, TIMEOUT_S):
            raise Unavailable(f"{what}: appended, not in the client's view after {TIMEOUT_S:g} s")

    async def _settle(self, bundles: Sequence[str], timeout_s: float) -> None:
        def settled() -> bool:
            return not any(self.view.ownership.state(b).in_flight for b in bundles)

        if not await self.clock.wait_for(settled, timeout_s):
            raise Unavailable(f"{', '.join(bundles)} still in flight after {timeout_s}s",
                              value=list(bundles))

    async def _settle_namespace(self, namespace: str, parent: str, timeout_s: float) -> None:
        def settled() -> bool:
            view = self.view.ownership
            if view.state(parent) is BundleState.SPLITTING:
                return False
            return not any(BundleState(row.state).in_flight for row in view.bundles(namespace))

        if not await self.clock.wait_for(settled, timeout_s):
            raise Unavailable(f"the split of {parent} did not settle within {timeout_s}s", value=parent)
