"""ClientView: the caller's own projection of the log (ARCHITECTURE §3: lookups of owned
bundles are a dictionary read, not a round trip).

Invariants:
- it is a ``Follower`` (ownership view, leader epoch, registered brokers) plus the load view and
  each broker's latest report, folded from the log in the caller's event loop: a subscription
  follows the log, and ``catch_up`` reads it to its end on demand; both take each record once
  (``LogCursor``), so the view is a fold of a prefix of the log, in log order per partition;
- it writes nothing and sends nothing: commands go through the ``Cluster``;
- waiting is event-driven: every folded batch wakes the waiters (``wait_for``) and feeds every
  listener's queue (``listen``), in fold order;
- with a snapshot store (an embedded log's ``snapshots/``, as reader ``client``) it starts from
  its newest usable snapshot and folds the tail, and writes one whenever ``snapshot_policy`` says
  so, only between two batches (a snapshot is a fold of exactly the records before its
  position): a view after retention equals one folded from offset 0; the log's retention counts
  the client as a reader (``actors.retention``);
- reading the whole log back (``records(from_start=True)``, ``replay``) on a retained log names
  the records retention dropped, never pretends the log starts at its first held record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from actors.body import Follower
from actors.runtime.cursor import LogCursor, read_new, subscribe
from actors.snapshots import (
    DEFAULT_POLICY,
    BodySnapshot,
    DirectorySnapshots,
    SnapshotPolicy,
    collector_paused,
)
from balancer.config import LoadBalancerConfig
from balancer.errors import UnknownBroker, UnknownNamespace
from balancer.ownership import AcceptMode
from events.catalog import BrokerLeft, LoadReported, Message
from events.log.port import EventLog, Record, dropped_note
from events.report_parts import is_continuation, is_delta
from events.reports import stats_to_payload
from projections.load import LoadProjection
from projections.ownership import BundleRow, OwnershipProjection
from projections.tracking import Anomaly

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    """A registered broker as the client's view knows it."""

    broker_id: str
    url: str
    failure_domain: str | None
    """Its domain: the admin's (FailureDomainSet), else the one it registered with."""
    version: str
    last_seen_ms: int
    bundles: int
    """Bundles it owns now."""


class LeaderStatus(NamedTuple):
    """The newest election the view has folded: ``leader_id, epoch = cluster.leader()``."""

    leader_id: str | None
    epoch: int


class ClientView(Follower):
    """Ownership + load views folded from ``log``, kept current by a subscription."""

    name = "client"
    SNAPSHOT_FIELDS = (*Follower.SNAPSHOT_FIELDS, "load", "reports")

    def __init__(self, config: LoadBalancerConfig, log: EventLog, *, poll_s: float = 0.01,
                 snapshots: DirectorySnapshots | None = None,
                 snapshot_policy: SnapshotPolicy = DEFAULT_POLICY) -> None:
        super().__init__(config)
        self.snapshots, self.snapshot_policy = snapshots, snapshot_policy
        self.folded = self._snapshot_at = 0
        """Records folded (those a restored snapshot holds included); at the last snapshot."""
        self.started: tuple[int, int] = (0, 0)
        """(records taken from a snapshot, records then folded from the log) at ``start``."""
        self.log, self.poll_s = log, poll_s
        self.ownership.ordered = getattr(log, "partitions", 1) == 1  # across partitions an election may come late
        self.load = LoadProjection(config)
        self.reports: dict[str, tuple[int, LoadReported]] = {}
        """Broker -> (ts_ms, event) of its latest LoadReported (its first part)."""
        self.cursor = LogCursor(on_dead=self.note_dead_letter)
        self._changed = asyncio.Event()
        self._listeners: list[asyncio.Queue[Record]] = []
        self._task: asyncio.Task[None] | None = None

    def fold_more(self, record: Record, event: Message) -> None:
        envelope = record.envelope
        self.load.apply(record.offset, envelope)
        if isinstance(event, LoadReported) and not is_continuation(event.broker_load):
            self.reports[event.broker_id] = (envelope.ts_ms, event)
        elif isinstance(event, BrokerLeft):
            self.reports.pop(event.broker_id, None)

    # -- life --------------------------------------------------------------------------------
    async def start(self) -> None:
        await self.log.start()
        restored = self._restore()
        await self.catch_up()
        self.started = (restored, self.folded - restored)
        self._task = asyncio.get_running_loop().create_task(self._follow())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        await self.log.close()

    async def catch_up(self) -> None:
        """Fold everything the log holds now (after a command, to see what it caused)."""
        self._take(await read_new(self.log, self.cursor))

    async def _follow(self) -> None:
        while True:
            try:
                async for item in subscribe(self.log, dict(self.cursor.position), self.poll_s):
                    record = self.cursor.take(item)
                    if record is not None:
                        self._take([record])
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("client view: following the log failed; resubscribing")
                await asyncio.sleep(0.5)

    def take(self, records: list[Record]) -> None:
        """Fold ``records`` handed over by a host that feeds the view itself (in-process)."""
        for record in records:  # the cursor stands past them, as if read: ``records(from_start)``
            position = self.cursor.position  # reads back what was folded up to there
            position[record.partition] = max(position.get(record.partition, 0), record.offset + 1)
        self._take(records)

    def _take(self, records: list[Record]) -> None:
        folded = [r for r in records if self.fold(r)]
        self.folded += len(records)
        self._maybe_snapshot()
        if not folded:
            return
        for queue in self._listeners:
            for record in folded:
                queue.put_nowait(record)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    # -- snapshots (actors.snapshots) ----------------------------------------------------------
    def _restore(self) -> int:
        """Take the newest usable snapshot, if any, and stand past it; the records it holds."""
        if self.snapshots is None:
            return 0
        with collector_paused():
            snapshot = self.snapshots.newest(self.name, self.snapshot_identity())
        if snapshot is None:
            return 0
        ordered = self.ownership.ordered
        self.restore_state(snapshot.state)
        self.ownership.ordered = ordered
        self.cursor.position, self.cursor.seen = dict(snapshot.position), dict(snapshot.position)
        self.folded = self._snapshot_at = snapshot.records
        return snapshot.records

    def _maybe_snapshot(self) -> None:
        if self.snapshots is None or not self.snapshot_policy.due(self.folded - self._snapshot_at,
                                                                  self.state_size()):
            return
        try:
            self.snapshots.save(BodySnapshot(self.name, self.snapshot_identity(),
                                             dict(self.cursor.position), self.folded,
                                             self.snapshot_state()))
        except Exception:  # a full disk must not stop the view: the log is still the truth
            logger.exception("client view: writing a snapshot failed")
        self._snapshot_at = self.folded

    # -- waiting and listening ---------------------------------------------------------------
    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``predicate()`` holds after some fold (True) or ``timeout_s`` passes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return True

    def listen(self) -> asyncio.Queue[Record]:
        """A queue that receives every record folded from now on."""
        queue: asyncio.Queue[Record] = asyncio.Queue()
        self._listeners.append(queue)
        return queue

    def unlisten(self, queue: asyncio.Queue[Record]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(queue)

    # -- queries -----------------------------------------------------------------------------
    def bundle_rows(self, namespace: str) -> list[BundleRow]:
        if namespace not in self.ownership.namespaces:
            raise UnknownNamespace(f"namespace {namespace!r} does not exist; namespaces: "
                                   f"{', '.join(sorted(self.ownership.namespaces)) or 'none'}",
                                   value=namespace)
        return list(self.ownership.bundles(namespace))

    def broker_statuses(self) -> list[BrokerStatus]:
        counts = {b: 0 for b in self.brokers}
        for owner in self.ownership.owners().values():
            if owner in counts:
                counts[owner] += 1
        domains = {**{b: e.failure_domain for b, e in self.brokers.items()},
                   **self.ownership.failure_domains}
        out = []
        for broker_id, registered in sorted(self.brokers.items()):
            info = self.load.brokers.get(broker_id)
            out.append(BrokerStatus(broker_id, registered.url, domains.get(broker_id), registered.version,
                                    info.last_seen_ms if info is not None else 0, counts[broker_id]))
        return out

    def load_report(self, broker: str) -> dict[str, Any]:
        if broker not in self.brokers:
            raise UnknownBroker(f"broker {broker!r} is not registered; registered: "
                                f"{', '.join(sorted(self.brokers)) or 'none'}", value=broker)
        found = self.reports.get(broker)
        if found is None:
            return {"broker_id": broker, "ts_ms": None, "broker_load": None, "bundles": []}
        ts_ms, report = found
        bundles = list(report.bundles or [])
        if is_delta(report.broker_load):  # the changed ones only: every bundle as it stands now
            bundles = [stats_to_payload(s) for s in self.load.reported.get(broker, {}).values()]
        return {"broker_id": broker, "ts_ms": ts_ms, "broker_load": report.broker_load,
                "bundles": bundles}

    async def records(self, *types: str, from_start: bool = False) -> AsyncGenerator[Record, None]:
        """Every record folded from now on (``from_start``: the log's earlier ones first)."""
        wanted = set(types)
        queue = self.listen()
        try:
            if from_start:  # what was folded before listening, read back from the log
                seen = dict(self.cursor.position)
                result = await self.log.read()
                if result.dropped:
                    logger.warning("client view: %s; the records read back start there",
                                   dropped_note(result.dropped))
                for item in result.records:
                    folded = item.offset < seen.get(item.partition, 0)
                    if folded and (not wanted or item.envelope.type in wanted):
                        yield item
            while True:
                record = await queue.get()
                if not wanted or record.envelope.type in wanted:
                    yield record
        finally:
            self.unlisten(queue)

    async def replay(self) -> OwnershipProjection:
        """A fresh fold of the whole log, read back from the log itself; on a retained log, of
        what is left, with a ``retained`` anomaly naming the first offset and every view marked
        degraded (the records before it are gone)."""
        projection = OwnershipProjection(mode=AcceptMode.from_config(self.config), ordered=self.ownership.ordered)
        result = await self.log.read()
        for partition, first in sorted(result.dropped.items()):
            note = dropped_note({partition: first})
            projection.tracker.anomalies.append(Anomaly("retained", first, "", None, "?", note))
            projection.degraded.setdefault("?", f"offset {first}: {note}")
        for record in result.records:
            projection.apply(record.offset, record.envelope)
        return projection
