"""What a test or the simulator asks of an ``InProcessHost`` directly, as part of it: submit or
call a command by hand and read the host's own fold of the log (its ``client`` follower).

A client of a cluster is ``Cluster`` (lookups included, over ``InProcLink``); these are the
host's synchronous handles for driving single commands under faults and for checking what the
log holds. Invariant: they read and send only through the host (its fold, its queue), never
around it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from actors.body import Follower
from actors.runtime.tickets import Ticket, run_sync
from actors.settings import ActorSettings, route
from balancer.config import LoadBalancerConfig
from balancer.ownership import AcceptMode
from events.catalog import Command
from events.log.memory import MemoryEventLog
from events.log.port import Record
from projections.ownership import OwnershipProjection


class HostCalls:
    """Synchronous handles on the host (mixed into ``InProcessHost``, which provides these)."""

    config: LoadBalancerConfig
    settings: ActorSettings
    client: Follower
    records: list[Record]
    log: MemoryEventLog
    _ids: itertools.count[int]

    def schedule_command(self, ticket: Ticket) -> None:
        raise NotImplementedError

    def run_until(self, predicate: Callable[[], bool], max_ms: int) -> bool:
        raise NotImplementedError

    @property
    def view(self) -> OwnershipProjection:
        return self.client.ownership

    @property
    def epoch(self) -> int:
        return self.client.epoch

    def command_id(self, prefix: str = "client") -> str:
        return f"{prefix}-{next(self._ids)}"

    def submit(self, command: Command, *, to: str | None = None) -> Ticket:
        ticket = Ticket(command, to or route(command, self.settings.namespace_shards))
        self.schedule_command(ticket)
        return ticket

    def call(self, command: Command, *, max_ms: int = 10_000, to: str | None = None) -> object | None:
        """Submit and run until answered; the reply, or the typed error raised."""
        ticket = self.submit(command, to=to)
        self.run_until(lambda: ticket.done, max_ms)
        return ticket.result()

    def replay(self) -> OwnershipProjection:
        """A fresh fold of the whole log, read back from the log itself."""
        projection = OwnershipProjection(mode=AcceptMode.from_config(self.config))
        for record in run_sync(self.log.read()).records:
            projection.apply(record.offset, record.envelope)
        return projection

    def events(self, *types: str) -> list[Record]:
        wanted = set(types)
        return [r for r in self.records if not wanted or r.envelope.type in wanted]

    def settled(self) -> bool:
        """No bundle in flight (every bundle Init, Free, Owned or gone)."""
        return not any(r.state.in_flight for r in self.view.records.values())
