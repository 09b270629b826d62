"""The mirror: a running Pulsar cluster, continuously, into a state directory's embedded log.

    source = PulsarSource(AdminHttp("http://127.0.0.1:8080"))
    mirror = Mirror(Path(".lbctl"), source)
    await mirror.open()                        # reads DIR/log back: where it stopped, what it holds
    await mirror.run(stop=event, minutes=5, on_cycle=hook)   # or: cycle = await mirror.cycle()
    await mirror.close()

A cycle reads what Pulsar has for it (the ownership channel and the load topics under the
extensible manager, REST polls every ``poll_s``: brokers, the leader, and under the modular
manager each broker's owned bundles and load report), translates it (``attach.channel``,
``attach.loads``, ``attach.members``, ``attach.modular``), appends it and folds it into
``mirror.view`` (a ``ClientView``: ownership, load, brokers, leader), then calls the hook with a
``Cycle`` (the records it appended, the view through ``cycle.mirror.view``). Another writer of the
same log (advice, executions) appends through ``mirror.append`` (one writer per log).

Invariants:
- the mirror is the log's single writer: it holds ``DIR/log``'s lock (``lock_directory``) from
  ``open`` to ``close``; a second mirror, or ``lbctl run``, on the same directory is refused;
- every record is stamped with Pulsar's time (``Append.ts_ms``) and carries where it came from
  (``causation_id``, ``attach.positions``), at the newest epoch the mirror elected;
- where it stopped is proved from the log alone: the newest channel message id among the
  records' causation ids, and for a split in flight the id of its ``SplitRequested`` (the
  children read after it are read again, the mirrored ones only to hold them: ``replay``); so a
  restart after any stop, a SIGKILL included, repeats no record and skips none;
- what was read in a cycle is appended in that cycle: a stop (``stop`` set, ``minutes`` over)
  ends after the cycle, everything translated committed (the read of the next batch, already
  under way, is dropped: its channel messages are read again at the next start, its load
  reports, at most ``wait_ms`` of them, are not mirrored); a source that fails (Pulsar
  unreachable) is named in ``status`` and tried again next cycle, nothing read is lost;
- ``DIR/cluster.json`` names the host ``pulsar`` with the URL and cluster, so every verb opens the
  directory read-only (``actors.cluster.mirror_link``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from actors.client import ClientView
from actors.cluster.kept import (
    LOG_SUBDIR,
    STATE_FILE,
    ClusterSpec,
    read_spec,
    write_spec,
)
from actors.cluster.lock import lock_directory
from attach.channel import CHANNEL_TOPIC, Append, ChannelTranslator, SourceMessage, rejected
from attach.loads import LoadTranslator, to_event
from attach.members import Members, leader_id
from attach.modular import OwnershipPoll
from attach.positions import Position, parse_causation, rest_causation
from attach.shadow import Shadow
from attach.shedder_runs import METRICS_PATH, ShedderRuns
from attach.source import EXTENSIBLE, MODULAR, PulsarSource
from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput, LoadBalancerError, MalformedInput
from events.catalog import MIRROR_KEY, Event, LoadReported, SourceMessageRejected, SplitRequested
from events.envelope import Stamper, new_cluster_id, wall_clock_ms
from events.log.local import LocalEventLog
from events.log.port import Record

HOST = "pulsar"
logger = logging.getLogger(__name__)


@dataclass
class Cycle:
    """What one cycle did: the records it appended, in order."""

    number: int
    records: list[Record]
    now_ms: int
    lag_ms: int | None
    """Now minus Pulsar's time of the newest channel record appended this cycle (None: none)."""
    mirror: Mirror


CycleHook = Callable[[Cycle], Awaitable[None] | None]


@dataclass
class Status:
    """The live line: what the mirror holds and how far behind Pulsar it is."""

    manager: str = ""
    records: int = 0
    channel: int = 0
    rejected: int = 0
    cycles: int = 0
    lag_ms: int | None = None
    error: str | None = None
    started: tuple[int, int] = (0, 0)
    """(records the log held at open, channel messages read again as a replay)."""


@dataclass
class Mirror:
    """The mirror of one Pulsar cluster into ``state_dir``."""

    state_dir: Path
    source: PulsarSource
    poll_s: float = 1.0
    batch: int = 5_000
    wait_ms: int = 100
    clock_ms: Callable[[], int] = wall_clock_ms
    config: LoadBalancerConfig = field(default_factory=LoadBalancerConfig)
    cluster_name: str | None = None
    manager: str | None = None
    """``extensible`` or ``modular``; None: asked of Pulsar at ``open``."""
    compacted: bool = True
    """Read the channel's compacted view first (every bundle's latest record, then what came
    since); False: every message the topic still holds (a catch-up of the whole history)."""
    status: Status = field(default_factory=Status)

    def __post_init__(self) -> None:
        self.shadow = Shadow()
        self.channel = ChannelTranslator(self.shadow)
        self.modular = OwnershipPoll(self.shadow)
        self.loads = LoadTranslator()
        self.members = Members()
        self.runs = ShedderRuns()
        self.log: LocalEventLog | None = None
        self.view: ClientView | None = None
        self._lock_fd: int | None = None
        self._stamps: deque[int] = deque()
        """Pulsar's time of each event of the appends being committed, in commit order."""
        self._replay_until: Position | None = None
        """The newest channel message the log holds: messages up to it are read as a replay."""
        self._channel_after: Position | None = None
        """Where the channel reader starts (exclusive): before a split in flight, if any."""
        self._next_poll = 0.0
        self._report_seen: dict[str, int] = {}
        self._refused: set[tuple[str, str]] = set()
        self._outbox: list[Append] = []
        """Appends translated this cycle: every one is appended, whatever fails after it."""
        self._reading: asyncio.Future[list[Any]] | None = None
        """The read of the next batch, started as soon as the last one came back."""
        self._unread: list[SourceMessage] = []
        """Channel messages read and not yet translated (a layout could not be fetched)."""

    # -- life ------------------------------------------------------------------------------
    @property
    def log_dir(self) -> Path:
        return self.state_dir / LOG_SUBDIR

    async def open(self) -> None:
        """Take the log, read it back, reach Pulsar and open the readers where the log stops."""
        spec = self._spec()
        self._lock_fd = lock_directory(self.log_dir)
        try:
            await self._open_log(spec)
            await asyncio.to_thread(self._open_source, spec)
        except BaseException:
            await self.close()
            raise

    def _spec(self) -> ClusterSpec:
        """The directory's cluster.json: a mirror's own, or none yet (then written)."""
        if (self.state_dir / STATE_FILE).is_file():
            spec = read_spec(self.state_dir)
            if spec.host != HOST:
                raise MalformedInput(f"--state-dir {str(self.state_dir)!r} holds a cluster of host "
                                     f"{spec.host!r} (lbctl run --keep); choose another --state-dir",
                                     value=str(self.state_dir))
            return spec
        if self.log_dir.is_dir() and any(self.log_dir.glob("*.log")):
            raise MalformedInput(f"--state-dir {str(self.state_dir)!r} holds a log but no {STATE_FILE}; "
                                 "choose another --state-dir", value=str(self.state_dir))
        return ClusterSpec(host=HOST, brokers=0, cluster_id=new_cluster_id(), log_dir=str(self.log_dir))

    async def _open_log(self, spec: ClusterSpec) -> None:
        # No fsync: what a machine crash takes from the log's tail Pulsar still holds, and the
        # restart, which proves its position from the log, reads it again. Group commit: the
        # appends of one cycle share one lock and one write.
        self.log = LocalEventLog(self.log_dir, group_commit=True, fsync=False,
                                 stamper=Stamper(clock_ms=self._stamp, cluster_id=spec.cluster_id))
        await self.log.start()
        read = await self.log.read()
        self.view = ClientView(self.config, self.log)
        for letter in read.dead_letters:
            self.view.note_dead_letter(letter)
        last: Position | None = None
        splits: dict[str, Position] = {}
        for record in read.records:
            event = record.envelope.typed
            if not isinstance(event, Event):
                continue
            self.channel.observe(event, _version(record.envelope.correlation_id))
            self.members.observe(event)
            if isinstance(event, LoadReported) and (record.envelope.causation_id or "").endswith(
                    f"/load-report on {event.broker_id}"):
                self._report_seen[event.broker_id] = record.envelope.ts_ms  # polled: not again
            found = parse_causation(record.envelope.causation_id)
            if found is not None and found[0] == CHANNEL_TOPIC:
                last = found[1] if last is None else max(last, found[1])
                if isinstance(event, SplitRequested):
                    splits[event.bundle] = found[1]
        self.view.take(read.records)
        in_flight = [splits[b] for b in self.shadow.splits if b in splits]
        self._replay_until = last
        self._channel_after = min([last, *in_flight]) if last is not None else None
        self.status.records = len(read.records)
        self.status.started = (len(read.records), 0)

    def _open_source(self, spec: ClusterSpec) -> None:
        name = self.cluster_name or spec.pulsar_cluster
        self.source.discover_cluster(name)
        if spec.pulsar_cluster is not None and spec.pulsar_cluster != self.source.cluster:
            raise InvalidInput(f"--state-dir {str(self.state_dir)!r} mirrors Pulsar cluster "
                               f"{spec.pulsar_cluster!r}, not {self.source.cluster!r}", value=self.source.cluster)
        self.manager = self.manager or self.source.load_manager()
        self.status.manager = self.manager
        if self.manager == EXTENSIBLE:
            self.source.open_readers(self._channel_after, compacted=self.compacted)
        write_spec(self.state_dir, replace(spec, pulsar_url=self.source.url,
                                           pulsar_cluster=self.source.cluster, pulsar_manager=self.manager))

    async def close(self) -> None:
        if self._reading is not None:  # a read in flight: its channel messages are read again
            with contextlib.suppress(Exception):  # at the next start; nothing of it is kept
                await self._reading
            self._reading = None
        self.source.close()
        if self.log is not None:
            await self.log.close()
            self.log = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- running ---------------------------------------------------------------------------
    async def run(self, *, stop: asyncio.Event | None = None, minutes: float | None = None,
                  on_cycle: CycleHook | None = None) -> Status:
        """Cycle until ``stop`` is set or ``minutes`` have passed; the hook after every cycle."""
        deadline = None if minutes is None else time.monotonic() + minutes * 60
        while not (stop is not None and stop.is_set()) and (deadline is None or time.monotonic() < deadline):
            cycle = await self.cycle()
            if on_cycle is not None:
                done = on_cycle(cycle)
                if inspect.isawaitable(done):
                    await done
            if not cycle.records and self.manager == MODULAR:
                await _sleep_unless(stop, min(self.poll_s, max(0.0, self._next_poll - time.monotonic())))
        return self.status

    async def cycle(self) -> Cycle:
        """Read, translate, append and fold once. What was translated is appended even when a
        later step fails (a translator's state already counts it); what was read and not yet
        translated (a namespace's layout could not be fetched) waits for the next cycle."""
        self._outbox = []
        channel_ts: int | None = None
        try:
            if time.monotonic() >= self._next_poll:
                self._next_poll = time.monotonic() + self.poll_s
                await asyncio.to_thread(self._poll_blocking)
            if self.manager == EXTENSIBLE:
                channel_ts = await self._read_topics()
            self.status.error = None
        except LoadBalancerError as exc:
            self.status.error = exc.message
            logger.warning("mirror: %s", exc.message)
            await asyncio.sleep(min(1.0, self.poll_s))
        outbox, self._outbox = self._outbox, []
        records = [r for found in await self.append_all(outbox) for r in found]
        now = self.clock_ms()
        self.status.cycles += 1
        lag = None if channel_ts is None else max(0, now - channel_ts)
        if lag is not None:
            self.status.lag_ms = lag  # the line keeps the last lag measured
        return Cycle(self.status.cycles, records, now, lag, self)

    async def append(self, append: Append) -> list[Record]:
        """Append ``append`` (at the mirror's epoch, stamped with its time) and fold it into the
        view; every writer of the mirrored log goes through here."""
        return (await self.append_all([append]))[0]

    async def append_all(self, appends: list[Append]) -> list[list[Record]]:
        """Append each of ``appends`` in order (one group commit: each all-or-nothing with its
        own causation and correlation ids, each event stamped with its append's time), then fold
        them into the view. A refused append raises: the mirror stops, and a restart reads the
        log back (nothing half-known survives in memory)."""
        assert self.log is not None and self.view is not None, "open the mirror first"
        appends = [a for a in appends if a.events]
        now = self.clock_ms()
        self._stamps.extend(a.ts_ms or now for a in appends for _ in a.events)
        epoch = self.members.epoch
        try:
            found = await asyncio.gather(*(
                self.log.append(a.key, list(a.events), epoch=epoch, causation_ids=list(a.causation_ids),
                                correlation_id=a.correlation_id) for a in appends))
        finally:
            self._stamps.clear()
        for records in found:
            self.view.take(records)
            self.status.records += len(records)
            self.status.rejected += sum(isinstance(r.envelope.typed, SourceMessageRejected) for r in records)
        return list(found)

    def _stamp(self) -> int:
        """The log's clock: the time of the next event being sealed (Pulsar's), in order."""
        return self._stamps.popleft() if self._stamps else self.clock_ms()

    async def _read_topics(self) -> int | None:
        """Read every topic at once and translate what came; Pulsar's time of the newest fresh
        channel message (None: none). A reader that failed is raised after the others' messages
        were translated."""
        topics = self.source.topics()
        reading = self._reading or self._read(topics)
        batches = await reading
        self._reading = self._read(topics)  # the next read overlaps this batch's translation
        newest: int | None = None
        failed: BaseException | None = None
        for topic, messages in zip(topics, batches, strict=True):
            if isinstance(messages, BaseException):
                failed = failed or messages
            elif topic == CHANNEL_TOPIC:
                fresh = [m.publish_ms for m in messages if self._fresh(m)]
                newest = max(fresh) if fresh else None
                self._unread.extend(messages)
            else:
                for message in messages:
                    self._outbox += self.loads.translate(message)
        await self._channel_batch()
        if failed is not None:
            raise failed
        return newest

    def _read(self, topics: list[str]) -> asyncio.Future[list[Any]]:
        return asyncio.gather(*(asyncio.to_thread(self.source.read, t, self.batch, self.wait_ms)
                                for t in topics), return_exceptions=True)

    async def _channel_batch(self) -> None:
        """Translate the channel messages read (after the layouts of new namespaces)."""
        batch = self._unread
        fresh = [m for m in batch if self._fresh(m)]
        for namespace in self.channel.missing_namespaces(fresh):
            path = self.source.bundles_path(namespace)
            try:
                boundaries = await asyncio.to_thread(self.source.boundaries, namespace)
            except (InvalidInput, MalformedInput):
                continue  # not a namespace of Pulsar's: its messages are named one by one
            self._outbox.append(self.channel.add_namespace(namespace, boundaries, fresh, ts_ms=self.clock_ms(),
                                                           causation_id=rest_causation(path)))
        self._unread = []
        for message in batch:
            replay = not self._fresh(message)
            self._outbox += self.channel.translate(message, replay=replay)
            self.status.channel += 1
            if replay:
                self.status.started = (self.status.started[0], self.status.started[1] + 1)

    def _fresh(self, message: SourceMessage) -> bool:
        """Not mirrored yet: after the newest channel message the log holds."""
        return self._replay_until is None or message.position > self._replay_until

    # -- REST polls ------------------------------------------------------------------------
    def _poll_blocking(self) -> None:
        """The REST polls; each answer's appends go to the outbox as soon as it is translated."""
        now = self.clock_ms()
        source = self.source
        brokers = source.brokers()
        self._outbox += self.members.brokers_seen(brokers, scheme=source.scheme, ts_ms=now,
                                                  causation_id=rest_causation(source.brokers_path()))
        leader = leader_id(source.leader())
        self._outbox += self.members.leader_seen(leader, ts_ms=now,
                                                 causation_id=rest_causation("/admin/v2/brokers/leaderBroker"))
        if self.manager == MODULAR:
            self._poll_modular(brokers, now)
        elif leader is not None:
            self._poll_runs(leader, now)

    def _poll_runs(self, leader: str, now: int) -> None:
        """The runs of Pulsar's shedder that moved nothing, from its leader's metrics."""
        path = f"{METRICS_PATH} on {leader}"
        try:
            self._outbox += self.runs.observe(leader, self.source.metrics(leader), now)
        except LoadBalancerError as exc:
            self._outbox += self._refuse(path, leader, exc.message, now)

    def _poll_modular(self, brokers: list[str], now: int) -> None:
        owners: dict[str, str] = {}
        for broker in brokers:
            self._outbox += self._load_report(broker, now)
        for broker in brokers:  # all of them first: a partial poll would tell false unloads
            for bundle in self.source.owned(broker):
                owners[str(bundle)] = broker
        layouts: dict[str, list[int]] = {}
        for namespace in sorted({namespace_of(b) for b in owners} | set(self.shadow.layouts)):
            path = self.source.bundles_path(namespace)
            try:
                layouts[namespace] = self.source.boundaries(namespace)
            except (InvalidInput, MalformedInput) as exc:
                self._outbox += self._refuse(path, namespace, exc.message, now)
        for namespace, boundaries in layouts.items():
            self._outbox += self.modular.layout_seen(namespace, boundaries, owners, ts_ms=now,
                                                     causation_id=rest_causation(self.source.bundles_path(namespace)))
        for namespace in sorted(self.shadow.layouts):
            mine = {b: o for b, o in owners.items() if namespace_of(b) == namespace}
            self._outbox += self.modular.owners_seen(namespace, mine, ts_ms=now, causation_id=rest_causation(
                self.source.owned_path("*")))

    def _load_report(self, broker: str, now: int) -> list[Append]:
        path = f"/admin/v2/broker-stats/load-report on {broker}"
        try:
            ts, event = to_event(self.source.load_report(broker), where=path, fallback_broker=broker)
        except MalformedInput as exc:
            return self._refuse(path, broker, exc.message, now)
        if ts and self._report_seen.get(broker) == ts:
            return []  # the same report as last poll
        self._report_seen[broker] = ts
        event = replace(event, broker_id=broker)
        return [Append(broker, (event,), ts or now, (rest_causation(path),))]

    def _refuse(self, path: str, key: str, error: str, now: int) -> list[Append]:
        """One SourceMessageRejected per REST answer that cannot be used (once per process)."""
        if (path, error) in self._refused:
            return []
        self._refused.add((path, error))
        fake = SourceMessage(f"GET {path}", Position(0, 0), key, None, now)
        found = rejected(fake, error)
        return [Append(MIRROR_KEY, found.events, now, (rest_causation(path),))]


def _version(correlation_id: str | None) -> int | None:
    """The Pulsar record version a channel append carries (``pulsar-version:N``)."""
    if correlation_id is None or not correlation_id.startswith("pulsar-version:"):
        return None
    try:
        return int(correlation_id.partition(":")[2])
    except ValueError:
        return None


async def _sleep_unless(stop: asyncio.Event | None, seconds: float) -> None:
    if seconds <= 0:
        return
    if stop is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


def status_line(status: Status, mirror: Mirror) -> str:
    """One line of what the mirror holds: records, brokers, bundles owned, lag."""
    view = mirror.view
    owned = len(view.ownership.owners()) if view is not None else 0
    brokers = len(mirror.members.brokers)
    lag = "-" if status.lag_ms is None else f"{status.lag_ms} ms"
    line = (f"{status.manager} manager: {status.records} records ({status.channel} channel messages, "
            f"{status.rejected} rejected), {brokers} brokers, {owned} bundles owned, lag {lag}")
    return line if status.error is None else f"{line}; Pulsar: {status.error}"

