"""BrokerBody: registers, serves the bundles the ownership view gives it, reports its load.

Invariants:
- it writes only its own key: BrokerRegistered, LoadReported, BrokerLeft(graceful); every append
  carries the newest leader epoch it has folded (a broker key is also written by the leader when
  it expires the broker, and a lower epoch would be fenced);
- what it serves is read from the ownership view, never remembered: Owned with ``dst`` = itself;
  so a restarted broker serves exactly what the log says it owns; after ``BrokerLeft`` of
  itself, the records of the departed session are void (``Follower.voided``): it neither serves
  nor confirms them, even registered again, until the leader reassigns them;
- every in-flight record waiting on it (Assigning to it, Releasing or Splitting from it) gets its
  confirmation at once, and again every ``retry_ms`` while the record waits; a retry for the same
  record (version, and seq of the event that started the wait), epoch and session reuses its
  command id (a repeat gets the first answer), and no other confirmation ever does;
- a split's boundaries come from its own topics (``balancer.split.split_boundaries``); an
  algorithm that finds no boundary completes the split with none (behaviour §2: no split);
- it reports at least every ``heartbeat_ms`` (liveness), and in between whenever
  ``should_publish_report`` says the load moved enough; never while draining or unregistered;
- a report lists the bundles whose stats changed since its last one (a delta,
  ``events.report_parts``) while its bundles stay the same; it is full after registering,
  after a report that may not have landed, when its bundles changed, and every ``FULL_EVERY``
  reports (a delta folds into exactly what the full report would have given);
- after ``BrokerLeft(expired)`` of itself it registers again; after a graceful shutdown it is
  inert.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from actors.body import Follower
from actors.effects import NOTHING, Effects, appending, combine
from actors.settings import ActorSettings, backoff_ms, broker_body_name, drain_request_id
from actors.workload import Capacity, Workload, broker_report
from balancer.bundles import BundleId
from balancer.config import LoadBalancerConfig
from balancer.errors import LoadBalancerError
from balancer.load import BrokerReport, BundleStats, should_publish_report
from balancer.ownership import ACTIVE, IN_FLIGHT, BundleState, OwnershipRecord
from balancer.split import split_boundaries
from events.catalog import (
    BrokerLeft,
    BrokerRegistered,
    BundleAssigned,
    Command,
    ConfirmOwnership,
    ConfirmRelease,
    ConfirmSplit,
    DrainBundle,
    LeaderElected,
    LoadReported,
    Message,
    SplitRequested,
    TransferPrepared,
    UnloadRequested,
)
from events.log.port import Record
from events.report_parts import BUNDLES_PER_PART, FULL_EVERY
from events.skim import Skim
from projections.ownership_index import OwnershipIndex

_WAITS = (BundleAssigned, UnloadRequested, TransferPrepared, SplitRequested)
"""The events that make a record wait for a broker's confirmation."""


def concerned(record: Record) -> tuple[str | None, ...] | None:
    """The brokers whose ``fold_more`` or ``react`` can change anything for ``record`` (None:
    every broker): a wait names its broker, a broker's own key is its own; a new epoch concerns
    all. For any other broker both do nothing, so a host may hand it the record or not."""
    envelope = record.envelope
    event = envelope.typed
    if isinstance(event, _WAITS):
        dst = event.dst if isinstance(event, BundleAssigned | TransferPrepared) else None
        return envelope.key, dst, event.src
    if isinstance(event, LeaderElected):
        return None
    return (envelope.key,)


class BrokerBody(Follower):
    """One broker of the cluster."""

    def __init__(self, broker_id: str, config: LoadBalancerConfig, workload: Workload, *,
                 settings: ActorSettings | None = None, url: str | None = None,
                 failure_domain: str | None = None, version: str = "3.3.0",
                 capacity: Capacity | None = None) -> None:
        super().__init__(config)
        self.broker_id = broker_id
        self.by_broker = OwnershipIndex(only=broker_id)
        self.skim = Skim(LoadReported.TYPE, keep=broker_id)  # it reads only its own reports
        self.name = broker_body_name(broker_id)
        self.workload = workload
        self.settings = settings or ActorSettings()
        self.url = url or f"pulsar://{broker_id}:6650"
        self.failure_domain = failure_domain
        self.version = version
        self.capacity = capacity or Capacity()
        self.registered = False
        self.sessions = 0
        """Registrations of this broker in the log: part of confirmation ids, so a new session
        never gets the cached answer to the old session's confirmation."""
        self.draining_since: int | None = None
        self.stopped = False
        self.last_report: BrokerReport | None = None
        self._reported: dict[str, BundleStats] | None = None
        """The bundles and stats of the last report sent (a delta's base); None: the next
        report is full (a fresh session, a report that may not have landed)."""
        self._since_full = 0
        """Reports sent since the last full one."""
        self.last_published_ms = -(1 << 62)
        self.last_confirmed_ms = self.last_published_ms
        """When the last report this broker folded back from the log was published."""
        self._next_check_ms = 0
        self._register_sent_ms = -(1 << 62)
        self._register_tries = 0  # registrations sent since the last one that landed (backoff)
        self._sent: dict[str, tuple[str, int, tuple[object, ...] | None, int]] = {}
        """Bundle -> (command id, when, what it was built from, times sent before) of the last
        confirmation or drain request sent."""
        self.split_requests: dict[str, SplitRequested] = {}
        """Bundle -> the SplitRequested of its last split from this broker."""
        self._storm = False
        """This broker's last tick found ``confirm_backoff_from`` or more confirmations waiting."""
        self._waits_since: dict[str, int] = {}
        """Bundle -> seq (of its namespace key) of the last event that made a record wait."""

    SNAPSHOT_FIELDS = (*Follower.SNAPSHOT_FIELDS, "registered", "sessions", "split_requests",
                       "_waits_since")

    # -- folding ---------------------------------------------------------------------------
    def fold_more(self, record: Record, event: Message) -> None:
        envelope, me = record.envelope, self.broker_id
        if isinstance(event, _WAITS):
            # Kept only from waits that name this broker: a record waits on it only after such
            # an event, and any later wait replaces that record, so a confirmation reads the seq
            # of the event that started its wait (a hundred brokers each holding
            # every bundle's seq was a wall; and the shared fold hands a broker only the
            # records that name it, ``concerned``).
            dst = event.dst if isinstance(event, BundleAssigned | TransferPrepared) else None
            if dst == me or event.src == me:
                self._waits_since[event.bundle] = envelope.seq
            if isinstance(event, SplitRequested) and event.src == me:
                self.split_requests[event.bundle] = event
                return
        if envelope.key != me:
            return
        if isinstance(event, BrokerRegistered):
            self.registered, self._register_tries = True, 0
            self.sessions += 1
        elif isinstance(event, BrokerLeft):
            self.registered = False
        elif isinstance(event, LoadReported):
            self.last_confirmed_ms = self.last_published_ms

    def react(self, record: Record, now_ms: int) -> Effects:
        if self.stopped:
            return NOTHING
        event = record.envelope.typed
        if isinstance(event, _WAITS):
            return self._confirm(event.bundle, now_ms)
        if isinstance(event, LeaderElected) or (
                isinstance(event, BrokerLeft | BrokerRegistered) and record.envelope.key == self.broker_id):
            # A new epoch or session: earlier confirmations may have been refused; send again.
            self._sent.clear()
            return self._confirmations(now_ms)
        return NOTHING

    # -- the port --------------------------------------------------------------------------
    def on_tick(self, now_ms: int) -> Effects:
        if self.stopped:
            return NOTHING
        if not self.registered:
            return self._register(now_ms)
        if self.draining_since is not None:
            return self._drain(now_ms)
        return self._confirmations(now_ms) + self._report(now_ms)

    def shutdown(self, now_ms: int) -> Effects:
        """Graceful shutdown: stop reporting, have every bundle transferred, then leave."""
        if self.stopped or self.draining_since is not None:
            return NOTHING
        self.draining_since = now_ms
        return self._drain(now_ms)

    # -- registration and load ---------------------------------------------------------------
    def _append(self, *events: BrokerRegistered | LoadReported | BrokerLeft) -> Effects:
        return appending(self.broker_id, events, epoch=self.epoch)

    def _register(self, now_ms: int) -> Effects:
        if now_ms - self._register_sent_ms < backoff_ms(self.settings, self._register_tries - 1):
            return NOTHING
        self._register_sent_ms, self._register_tries = now_ms, self._register_tries + 1
        self.last_report = None  # a fresh session reports at once
        self._reported = None  # and in full
        return self._append(BrokerRegistered(
            broker_id=self.broker_id, url=self.url, failure_domain=self.failure_domain,
            version=self.version, capacity=self.capacity.to_dict()))

    def status(self) -> dict[str, Any]:
        return {**super().status(), "registered": self.registered, "stopped": self.stopped}

    def owned(self) -> list[str]:
        """The bundles this broker serves now, ascending: none while it is not registered (a
        broker the leader expired, or one restarted that could not register yet, serves nothing
        until its registration is in the log: its bundles may be on their way elsewhere)."""
        if not self.registered:
            return []
        records = self.ownership.records
        return sorted(b for b in self.by_broker.involving(self.broker_id)
                      if (r := records[b]).state is BundleState.OWNED and r.dst == self.broker_id
                      and not self.is_void(b, r))

    def _report(self, now_ms: int) -> Effects:
        lost = self.last_published_ms > self.last_confirmed_ms  # the last report never reached the log
        if lost and now_ms - self.last_published_ms >= self.settings.retry_ms:
            self._reported = None  # whether the last one landed is not known: a full one
            return self._publish(now_ms)  # a liveness signal: retry soon, not a heartbeat later
        if now_ms < self._next_check_ms:
            return NOTHING
        self._next_check_ms = now_ms + self.config.load_balancer_report_update_min_interval_millis
        if lost:
            return NOTHING
        report, stats = self._load()
        due = now_ms - self.last_published_ms >= self.settings.heartbeat_ms
        if not due and not should_publish_report(self.last_report, report, now_ms=now_ms,
                                                 last_published_ms=self.last_published_ms,
                                                 config=self.config):
            return NOTHING
        return self._publish(now_ms, (report, stats))

    def _load(self) -> tuple[BrokerReport, list[BundleStats]]:
        stats = [self.workload.bundle_stats(b) for b in self.owned()]
        return broker_report(self.broker_id, stats, self.capacity), stats

    def _publish(self, now_ms: int, load: tuple[BrokerReport, list[BundleStats]] | None = None) -> Effects:
        """Append a load report; folding it back (``last_confirmed_ms``) proves it landed. It is
        a delta (the bundles whose stats changed) when the bundles are those of the last report
        and their changes fit one part, full otherwise and every ``FULL_EVERY`` reports."""
        report, stats = load or self._load()
        self.last_report, self.last_published_ms = report, now_ms
        changed = self._changed(stats)
        self._reported = {s.bundle: s for s in stats}
        if changed is None:
            self._since_full = 0
            return self._append(*LoadReported.parts(report, stats))
        self._since_full += 1
        return self._append(*LoadReported.parts(report, changed, delta=True))

    def _changed(self, stats: list[BundleStats]) -> list[BundleStats] | None:
        """The stats that differ from the last report's; None if this report must be full."""
        last = self._reported
        if last is None or len(last) != len(stats) or self._since_full + 1 >= FULL_EVERY:
            return None
        changed: list[BundleStats] = []
        for now in stats:
            before = last.get(now.bundle)
            if before is None:
                return None  # another set of bundles: a full report is the new base
            if now != before:
                changed.append(now)
        return changed if len(changed) <= BUNDLES_PER_PART else None

    # -- confirmations -----------------------------------------------------------------------
    def _waiting(self) -> Iterator[tuple[str, OwnershipRecord]]:
        me, records = self.broker_id, self.ownership.records
        for bundle in self.by_broker.involving(me):
            record = records[bundle]
            if (record.state is BundleState.ASSIGNING and record.dst == me) or (
                    record.state in (BundleState.RELEASING, BundleState.SPLITTING) and record.src == me):
                yield bundle, record

    def _confirmations(self, now_ms: int) -> Effects:
        waiting = sorted(self._waiting())
        self._storm = len(waiting) >= self.settings.confirm_backoff_from
        return combine(self._confirm(bundle, now_ms) for bundle, _ in waiting)

    def _confirm(self, bundle: str, now_ms: int) -> Effects:
        record = self.ownership.records.get(bundle)
        if record is None or not self.registered or self.is_void(bundle, record):
            return NOTHING  # a void record waits for the leader's reassignment, not for me
        last = self._sent.get(bundle)
        asked = (record, self._waits_since.get(bundle, 0), self.epoch, self.sessions)
        wait_ms = 0 if last is None else backoff_ms(self.settings, last[3] if self._storm else 0)
        if last is not None and last[2] == asked and now_ms - last[1] < wait_ms:
            # The same command, sent too recently: not built again (every tick walks every
            # waiting bundle). In a storm (``confirm_backoff_from`` waiting) each retry waits
            # twice as long, up to ``retry_backoff_max_ms`` (re-sends every 2 s were
            # 96% of the brokers' calls, most timing out in the shard's queue); otherwise every
            # ``retry_ms``, so a handover under load completes within the in-flight wait.
            return NOTHING
        command = self._confirmation(bundle, record)
        if command is None:
            return NOTHING
        again = last is not None and last[0] == command.command_id
        if again and last is not None and now_ms - last[1] < wait_ms:
            return NOTHING
        tries = last[3] + 1 if again and last is not None else 0
        self._sent[bundle] = (command.command_id, now_ms, asked, tries)
        return Effects(send=(command,))

    def _confirmation(self, bundle: str, record: OwnershipRecord) -> Command | None:
        # The seq of the event that started the wait is part of the id: a split that found no
        # boundary leaves the bundle Owned at version 1 again, so its next split is Splitting at
        # the same version as the one before.
        since = self._waits_since.get(bundle, 0)
        me, tag = self.broker_id, f"v{record.version}:q{since}:e{self.epoch}:s{self.sessions}"
        if record.state is BundleState.ASSIGNING and record.dst == me:
            return ConfirmOwnership(command_id=f"{me}:own:{bundle}:{tag}", epoch=self.epoch,
                                    bundle=bundle, owner=me, src=record.src)
        if record.state is BundleState.RELEASING and record.src == me:
            return ConfirmRelease(command_id=f"{me}:release:{bundle}:{tag}", epoch=self.epoch,
                                  bundle=bundle, src=me)
        if record.state is BundleState.SPLITTING and record.src == me:
            boundaries = self._boundaries(bundle)
            return ConfirmSplit(command_id=f"{me}:split:{bundle}:{tag}", epoch=self.epoch,
                                parent=bundle, children=[], owner=me, boundaries=boundaries)
        return None

    def _boundaries(self, bundle: str) -> list[int]:
        request = self.split_requests.get(bundle)
        algorithm = (request.algorithm if request is not None else "") or \
            self.config.default_namespace_bundle_split_algorithm
        positions = request.positions if request is not None else None
        try:
            cuts = split_boundaries(algorithm, BundleId.parse(bundle).range,
                                    self.workload.topic_loads(bundle), self.config, positions)
        except LoadBalancerError:
            return []  # the algorithm cannot cut this bundle: complete the split with no split
        return list(cuts)

    # -- graceful shutdown -------------------------------------------------------------------
    def _drain(self, now_ms: int) -> Effects:
        assert self.draining_since is not None
        me = self.broker_id
        records = self.ownership.records
        busy = [b for b in self.by_broker.involving(me)
                if ((r := records[b]).dst == me and r.state in ACTIVE) or (r.src == me and r.state in IN_FLIGHT)]
        if not busy or now_ms - self.draining_since >= self.settings.drain_timeout_ms:
            self.stopped = True
            return self._append(BrokerLeft(broker_id=me, reason="graceful"))
        requests: list[Effects] = [self._confirmations(now_ms)]
        for bundle in self.owned():
            command = DrainBundle(command_id=drain_request_id(me, bundle, self.epoch, now_ms),
                                  epoch=self.epoch, bundle=bundle, broker=me)
            last = self._sent.get(bundle)
            if last is None or now_ms - last[1] >= self.settings.retry_ms:
                self._sent[bundle] = (command.command_id, now_ms, None, 0)
                requests.append(Effects(send=(command,)))
        return combine(requests)
