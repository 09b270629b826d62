"""LeaderBody: election, placement, shedding, auto-split, broker expiry (docs/design/actors.md §4-5).

Invariants:
- a fresh body (new or restarted) is a candidate: it appends ``LeaderElected(epoch = newest + 1)``
  with ``expected_seq`` = the last seq of ``_leader`` it folded (compare-and-set); it leads only
  once its own election is in the log, follows when another election of an epoch at least its
  own is, and steps down on any newer one; only a leader acts, and everything it sends carries
  its epoch;
- leader liveness: the leader writes under ``_leader`` at least every ``heartbeat_ms`` (a
  ``LeaderHeartbeat`` when nothing else), and a candidate that lost (or a deposed leader) runs
  again once the elected leader wrote nothing there for ``session_timeout_ms`` of time the log
  was available: an election naming a leader that never acts does not leave the cluster without
  one;
- it writes ``_leader`` (LeaderElected, LeaderHeartbeat, SheddingSkipped, rejected lookups), ``_cluster``
  (FailureDomainSet) and the key of a broker it expires (BrokerLeft(expired)); every ownership
  change it wants is a command to the namespace that writes it;
- every decision carries its reasons: shed moves carry ``Decision.to_dict()`` (+ the placement
  that chose the destination, ``run_ms``: when the run ran, and ``folded``: partition -> the last
  offset folded then) into UnloadRequested/TransferPrepared; a skipped run is a SheddingSkipped
  stamped at the run's time, with the same ``folded``; an auto-split's reason becomes
  SplitRequested.reason (``auto:<Reason>`` ids); a placement the leader makes rides on the
  assignment (``AssignBundle.decision``, bounded by ``events.decisions.stored_placement``);
- no decision is executed twice: the shedding memory (grace period, cool-down sources) is folded
  from the decision events of the log, so a restarted leader knows what its predecessor shed; a
  placement waits for the state it caused (one request per bundle version at a time);
- timers (sweep, monitor, shedding, split) run on the ``now_ms`` of ticks, never a clock;
- while an operator's pause holds (``BalancerPaused``, on the leader's own time) no shedding
  move starts and no auto-split is asked; placing unowned bundles never pauses. Shedding moves
  wait in the throttle's queue (``actors.leader_control``) and start as its caps allow, each
  stamped with the run that chose it and ``started_ms``; each shedding run (or skipped run)
  replaces what still waits, so no move starts on load older than the last run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from random import Random
from typing import Any

from actors.body import Follower
from actors.effects import (
    NOTHING,
    Effects,
    Outcomes,
    Receipt,
    appending,
    combine,
    rejection,
)
from actors.leader_control import Control, ControlFold
from actors.leader_drain import Draining
from actors.leader_hold import Holding
from actors.leader_proposals import SHED, Proposing, shed_moves
from actors.leader_sweep import Sweeping
from actors.leader_view import (
    Placer,
    PlacingViews,
    check_domain,
    cluster_view,
    split_decisions,
)
from actors.limits import check_command
from actors.namespace import AUTO_PREFIX
from actors.settings import LEADER, ActorSettings, backoff_ms
from balancer.bundles import BundleId, namespace_of
from balancer.config import LoadBalancerConfig
from balancer.control import Move
from balancer.decisions import Decision, Reason, ShedResult
from balancer.errors import (
    InputTooLarge,
    InvalidInput,
    LoadBalancerError,
    NoBrokerAvailable,
    StaleEpoch,
    Unavailable,
    UnknownBundle,
    UnknownNamespace,
)
from balancer.liveness import LogOutages
from balancer.ownership import BundleState, OwnershipRecord
from balancer.placement.avg import HasPlan
from balancer.placement.index import BundleIndex
from balancer.shedding.base import ClusterView
from balancer.shedding.run import SheddingMemory, SheddingRun
from balancer.split import SplitHitCounts
from events.catalog import (
    CLUSTER_KEY,
    LEADER_KEY,
    AssignBundle,
    BrokerLeft,
    BrokerRegistered,
    Command,
    DrainBroker,
    DrainBundle,
    FailureDomainSet,
    LeaderElected,
    LeaderHeartbeat,
    LoadReported,
    LookupBundle,
    Message,
    PauseBalancer,
    ResumeBalancer,
    ReviewProposal,
    SetFailureDomain,
    SplitBundle,
    SplitCompleted,
    TransferPrepared,
    UndrainBroker,
    UnloadBundle,
    UnloadRequested,
)
from events.decisions import stored_placement
from events.log.port import Record
from projections.drain import DrainFold
from projections.load import LoadProjection
from projections.ownership_index import BUNDLE_EVENTS, touched
from projections.proposals import Proposal, ProposalBook
from projections.shed_replay import remember_shed
from projections.views import placing_index, sync_placing

_DECISION_EVENTS = (UnloadRequested, TransferPrepared)
_BROKER_EVENTS = (BrokerLeft, BrokerRegistered, LoadReported)


class Role(StrEnum):
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(slots=True)
class _Timers:
    sweep: int = 0
    monitor: int = 0
    shed: int = 0
    split: int = 0


class LeaderBody(Holding, Draining, Proposing, Follower, Sweeping):
    """The cluster's decision loop, active only while it holds the newest epoch."""

    def __init__(self, config: LoadBalancerConfig, *, rng: Random, settings: ActorSettings | None = None,
                 leader_id: str = LEADER, name: str = LEADER) -> None:
        super().__init__(config)
        self.name, self.candidate_id, self.rng = name, leader_id, rng
        self.settings = settings or ActorSettings()
        self.load = LoadProjection(config)
        self.role = Role.CANDIDATE
        self.attempt: int | None = None
        self._attempt_ms = -(1 << 62)
        self.leader_since: int | None = None
        self.shedding = SheddingRun(config)
        plan = self.shedding.strategy if isinstance(self.shedding.strategy, HasPlan) else None
        self.placer = Placer(config, avg_plan=plan, shedder=self.shedding.strategy)
        self.split_hits = SplitHitCounts()
        self.pending: dict[str, tuple[int, int, int]] = {}
        """Bundle -> (record version, when, tries before) of the last command sent about it (one
        at a time); the same version is asked again after ``backoff_ms`` of its tries (in a
        storm a fixed ``retry_ms`` sent every bundle's assignment again while the first
        still waited in the shard's queue)."""
        self.draining: dict[str, int] = {}
        self.views = PlacingViews()  # soft: rebuilt on demand
        self.parents: dict[str, str] = {}
        """Child bundle -> the bundle it was split from (its traffic until it reports its own)."""
        self.timers = _Timers()
        self.placing = BundleIndex()
        self._recovering = False
        """The placing view's bundles, kept per record (no placement walks them all)."""
        self.outcomes = Outcomes(self.settings.outcomes_kept)
        self.shed_folded = SheddingMemory()
        """The shedding memory as the log's decision events make it (what a restarted leader
        starts from); ``shedding.memory`` is that plus what its own runs added and purged."""
        self.outages = LogOutages()
        """Log outages this body observed (soft state: a new leader gives every broker a session)."""
        self.folded_to: dict[int, int] = {}
        """Partition -> the last offset folded: stamped on each shedding run's events, so a
        what-if replays the run over exactly what this body had seen."""
        self._expiries: dict[str, tuple[int, int]] = {}
        """Broker -> (expiries tried, not again before): soft state, like the timers."""
        self.held = ControlFold()
        """The operator's pause and the recent shedding moves, as the log says."""
        self.control = Control(config)
        self.drains = DrainFold()
        """The operator's drains, as the log says (``actors.leader_drain``)."""
        self.drain_pace: dict[tuple[str, int], list[int]] = {}
        self.book = ProposalBook()
        """The proposals and what became of them, as the log says."""
        self.stale_sent: set[str] = set()
        self.approved_seen = 0
        self.splits_held: list[Proposal] = []
        self.alive_ms: int | None = None
        """When the elected leader last wrote under ``_leader`` (its election included)."""
        self._beat_ms = -(1 << 62)

    SNAPSHOT_FIELDS = (*Follower.SNAPSHOT_FIELDS, "load", "outcomes", "shed_folded", "parents",
                       "folded_to", "held", "drains", "book")
    """Not the live shedding memory (a run adds and purges), nor the placing index (rebuilt
    by ``recover``), nor anything a tick or a command sets."""

    def restore_state(self, state: Mapping[str, Any]) -> None:
        super().restore_state(state)
        self.load.config = self.config
        self.shedding.memory = SheddingMemory(dict(self.shed_folded.recently_unloaded),
                                              dict(self.shed_folded.recently_unloaded_brokers))

    @property
    def leads(self) -> bool:
        return self.role is Role.LEADER

    @property
    def my_epoch(self) -> int:
        return self.attempt or 0

    def status(self) -> dict[str, Any]:
        return {**super().status(), "leads": self.leads, "my_epoch": self.my_epoch, "role": str(self.role),
                "attempt": self.attempt, "leader_heard_ms": self.alive_ms,
                "control": {**self.control.status(self.held), "drains": self.drain_status()}, "folded_to": self._position(),
                "proposals": {"mode": self.config.load_balancer_execution, "pending": len(self.book.pending())},
                "load_seen": {b: info.last_seen_ms for b, info in sorted(self.load.brokers.items())}}

    # -- folding ---------------------------------------------------------------------------
    def fold_more(self, record: Record, event: Message) -> None:
        envelope = record.envelope
        if record.offset > self.folded_to.get(record.partition, -1):
            self.folded_to[record.partition] = record.offset
        self.load.apply(record.offset, envelope)
        if type(event) not in BUNDLE_EVENTS:
            self.views.changed()  # the registry, a report or a policy: what a placement view holds
        if not self._recovering:
            self._index(event)
        if envelope.key in (LEADER_KEY, CLUSTER_KEY):
            self.outcomes.fold(event, envelope.causation_id)
        self.held.fold(event, envelope.ts_ms)
        self.drains.fold(event)
        self.book.fold(event, envelope.ts_ms)
        if self.control.throttle.in_flight and type(event) in BUNDLE_EVENTS:
            self.control.settle(self.ownership.records, set())
        if envelope.key == LEADER_KEY and envelope.epoch == self.epoch:
            self.alive_ms = max(self.alive_ms or envelope.ts_ms, envelope.ts_ms)
        if isinstance(event, _BROKER_EVENTS):
            self._expiries.pop(envelope.key, None)  # heard from, or gone: a fresh backoff
        if isinstance(event, LeaderElected):
            self._election(event.epoch, event.leader_id, envelope.ts_ms)
        elif isinstance(event, BrokerLeft):
            self.draining.pop(event.broker_id, None)
        elif isinstance(event, _DECISION_EVENTS):
            self._remember(event, envelope.ts_ms)
        elif isinstance(event, SplitCompleted):
            for child in event.children:
                if child != event.parent:  # a split without a boundary: the bundle is its own child
                    self.parents[child] = event.parent

    def recover(self, history: Iterable[Record]) -> None:
        """Fold the history, then build the placing index once from what it left (the same
        index a per-record upkeep ends with, without re-copying every report's bundles)."""
        self._recovering = True
        try:
            super().recover(history)
        finally:
            self._recovering = False
        self.placing = placing_index(self.ownership, self.load)

    def _index(self, event: Message) -> None:
        """Keep the placing index (what a placement reads) in step with this record."""
        if isinstance(event, LoadReported):
            # The bundles the report sampled: a delta's unchanged ones took a sample too.
            for bundle in self.load.sampled:
                sync_placing(self.placing, bundle, self.ownership, self.load, reported=True)
            return
        for bundle in touched(event):
            sync_placing(self.placing, bundle, self.ownership, self.load)

    def _election(self, epoch: int, leader_id: str, ts_ms: int) -> None:
        if self.attempt is not None and epoch == self.attempt and leader_id == self.candidate_id:
            self.role, self.leader_since = Role.LEADER, ts_ms
            self.timers = _Timers(sweep=ts_ms, monitor=ts_ms, shed=ts_ms + self._shed_interval(),
                                  split=ts_ms + self._split_interval())
            self._new_term()
        elif self.attempt is not None and epoch >= self.attempt:
            self.role = Role.FOLLOWER
            self._new_term()

    def _new_term(self) -> None:
        """Forget the plans of an earlier term, as a restarted leader has none: held splits
        are dropped (a still-hot bundle is proposed again), approvals are queued again from the
        book, with their staleness checked, and the queue is rebuilt by the next run."""
        self.splits_held, self.approved_seen = [], 0
        self.control.throttle.queue.clear()

    def _remember(self, event: UnloadRequested | TransferPrepared, ts_ms: int) -> None:
        # Admin unloads and drains are not shedding: no grace period (the what-if replay folds
        # the same rule).
        strategy = self.shedding.strategy
        remember_shed(self.shedding.memory, strategy.name, strategy.extensible, event, ts_ms)
        remember_shed(self.shed_folded, strategy.name, strategy.extensible, event, ts_ms)

    # -- commands --------------------------------------------------------------------------
    def on_command(self, command: Command, now_ms: int) -> Effects:
        self.control.now_ms = max(self.control.now_ms, now_ms)
        if not self.leads:
            return Effects(error=Unavailable(f"{self.name} is not the leader ({self.role})"))
        repeated = self.outcomes.repeat(command)
        if repeated is not None:
            return repeated
        try:
            check_command(command, self.config)
        except InputTooLarge as exc:
            return Effects(error=exc)  # nothing recorded: even its key may be too large to write
        try:
            if command.epoch < self.epoch:
                raise StaleEpoch(f"{command.TYPE} {command.command_id} carries epoch {command.epoch}; "
                                 f"the newest leader epoch is {self.epoch}", epoch=command.epoch)
            if isinstance(command, SetFailureDomain):
                return self._set_domain(command)
            if isinstance(command, PauseBalancer | ResumeBalancer):
                return self._hold(command, now_ms)
            if isinstance(command, DrainBroker | UndrainBroker):
                return self._drain_command(command, now_ms)
            if isinstance(command, ReviewProposal):
                return self._review(command, now_ms)
            if isinstance(command, LookupBundle | DrainBundle):
                return self._lookup(command, now_ms)
            raise InvalidInput(f"the leader takes no {command.TYPE}", value=command.TYPE)
        except LoadBalancerError as exc:
            if exc.retriable:
                return Effects(error=exc)
            return rejection(command, exc, key=command.default_key(), under=LEADER_KEY, epoch=self.my_epoch)

    def _set_domain(self, command: SetFailureDomain) -> Effects:
        check_domain(self.brokers, self.ownership.failure_domains, command)
        event = FailureDomainSet(domain=command.domain, brokers=list(command.brokers), by=command.by)
        return appending(CLUSTER_KEY, [event], epoch=self.my_epoch, causation_id=command.command_id,
                         reply=Receipt(command.command_id, ((event.TYPE, event.to_payload()),)))

    def _lookup(self, command: LookupBundle | DrainBundle, now_ms: int) -> Effects:
        """Place an unowned bundle (a drain request for a bundle no longer owned is one too)."""
        bundle = command.bundle
        self._check_bundle(bundle)
        record = self.ownership.records.get(bundle)
        state = BundleState.INIT if record is None else record.state
        if isinstance(command, DrainBundle) and record is not None and state is BundleState.OWNED:
            if command.broker == record.dst:
                return self._drain_request(command, record, now_ms)
            # The draining broker's view lags: the bundle is no longer its own, nothing to move.
            return Effects(reply=Receipt(command.command_id, detail={"state": str(state), "owner": record.dst}))
        if state not in (BundleState.INIT, BundleState.FREE):
            owner = record.dst if record is not None else None
            return Effects(reply=Receipt(command.command_id, detail={"state": str(state), "owner": owner}))
        placed = self._place(bundle, record, now_ms, reason="lookup")
        if placed is None:
            raise NoBrokerAvailable(f"no broker can take {bundle}", bundle=bundle)
        return placed

    def _check_bundle(self, bundle: str) -> None:
        namespace = namespace_of(bundle)
        info = self.ownership.namespaces.get(namespace)
        if info is None:
            raise UnknownNamespace(f"namespace {namespace!r} does not exist", value=namespace)
        if BundleId.parse(bundle).range not in info.layout:
            raise UnknownBundle(f"{bundle} is not a bundle of {namespace}", value=bundle)

    def _drain_request(self, command: DrainBundle, record: OwnershipRecord, now_ms: int) -> Effects:
        source = record.dst
        assert source is not None
        self.draining.setdefault(source, now_ms)
        decision = Decision(command.bundle, source, None, reason=Reason.ADMIN, strategy="GracefulShutdown",
                            inputs={"requested_by": command.command_id})
        return self._move(decision, now_ms, reason="shutdown")

    # -- placement ---------------------------------------------------------------------------
    def _view(self, now_ms: int, exclude: tuple[str, ...] = (), placing: bool = True) -> ClusterView:
        skipped = (*exclude, *self.draining, *self.drains.drains)
        def build() -> ClusterView:
            return cluster_view(now_ms, self.config, ownership=self.ownership, load=self.load,
                                registry=self.brokers, exclude=skipped, placing=placing,
                                index=self.placing)

        return self.views.get(now_ms, (skipped, self.placing), build) if placing else build()

    def _waiting(self, bundle: str, record: OwnershipRecord | None, now_ms: int, cap_ms: int | None = None) -> bool:
        """A command about ``bundle`` is on its way and the bundle has not moved since."""
        version = 0 if record is None else record.version
        sent = self.pending.get(bundle)
        return sent is not None and sent[0] == version and now_ms - sent[1] < backoff_ms(self.settings, sent[2], cap_ms)

    def _sent(self, bundle: str, record: OwnershipRecord | None, now_ms: int) -> None:
        version = 0 if record is None else record.version
        before = self.pending.get(bundle)
        tries = before[2] + 1 if before is not None and before[0] == version else 0
        self.pending[bundle] = (version, now_ms, tries)

    def _place(self, bundle: str, record: OwnershipRecord | None, now_ms: int, *, reason: str,
               force: bool = False, dst: str | None = None, exclude: tuple[str, ...] = ()) -> Effects | None:
        """Send the AssignBundle that places ``bundle``; None when no broker qualifies."""
        cap = self.settings.orphan_retry_max_ms if reason == "orphan" else None
        if self._waiting(bundle, record, now_ms, cap):
            return Effects(reply=Receipt(f"{self.candidate_id}:pending", detail={"pending": bundle}))
        decision: dict[str, Any] | None = None
        if dst in self.drains.drains:
            dst = None  # a drained broker receives nothing: placement chooses another
        if dst is None:
            placement = self.placer.place(self._view(now_ms, exclude), bundle, self.rng)
            dst, decision = placement.broker, {"kind": "assign", "placement": stored_placement(placement.to_dict()),
                                               "started_ms": now_ms}
        if dst is None:
            return None
        version = 0 if record is None else record.version
        self._sent(bundle, record, now_ms)
        command = AssignBundle(command_id=f"{self.candidate_id}:assign:{bundle}:v{version}:e{self.my_epoch}:{now_ms}",
                               epoch=self.my_epoch, bundle=bundle, dst=dst, reason=reason, force=force,
                               decision=decision)
        return Effects(send=(command,), reply=Receipt(command.command_id, detail={"dst": dst}))

    def _move(self, decision: Decision, now_ms: int, *, reason: str,
              run: tuple[int, dict[str, int]] | None = None, proposal: str | None = None,
              avoid: tuple[str, ...] = ()) -> Effects:
        """Unload ``decision.bundle`` from its source, to a destination placement picks if none
        (never one of ``avoid``); ``run``: (when, folded) of the shedding run that chose it, if
        not now; ``proposal``: the proposal it belongs to."""
        source = decision.source
        record = self.ownership.records.get(decision.bundle)
        if record is None or record.state is not BundleState.OWNED or record.dst != source or source is None:
            return NOTHING
        if self._waiting(decision.bundle, record, now_ms):
            return NOTHING
        stored = decision.to_dict()
        dst = decision.destination
        if dst is None and not (self.config.extensible and not self.config.load_balancer_transfer_enabled):
            placement = self.placer.place(self._view(now_ms, (source, *avoid)), decision.bundle, self.rng)
            dst, stored["placement"] = placement.broker, placement.to_dict()
            if dst is None or dst == source:
                return NOTHING  # behaviour §4.0 step 3: no broker, or only its owner
        if dst in self.drains.drains:
            return NOTHING  # chosen before its broker was drained: it receives nothing now
        # run_ms and folded: when the run that decided it ran and how much of the log it had seen
        # (a what-if replays the run over exactly that).
        run_ms, folded = run if run is not None else (now_ms, self._position())
        stored.update(destination=dst, kind="transfer" if dst else "unload", run_ms=run_ms,
                      folded=folded, started_ms=now_ms)
        if proposal is not None:
            stored["proposal"] = proposal
        self._sent(decision.bundle, record, now_ms)
        command = UnloadBundle(command_id=f"{self.candidate_id}:{reason}:{decision.bundle}:e{self.my_epoch}:{now_ms}",
                               epoch=self.my_epoch, bundle=decision.bundle, dst=dst, reason=reason,
                               decision=stored)
        return Effects(send=(command,), reply=Receipt(command.command_id, detail={"dst": dst}))

    def _position(self) -> dict[str, int]:
        return {str(partition): offset for partition, offset in sorted(self.folded_to.items())}

    # -- ticks -----------------------------------------------------------------------------
    def on_tick(self, now_ms: int) -> Effects:
        if self.role is Role.FOLLOWER and self._leader_silent(now_ms):
            self.role = Role.CANDIDATE  # the elected leader never acts: run again
        if self.role is Role.CANDIDATE:
            return self._campaign(now_ms)
        if not self.leads:
            return NOTHING
        if not self.config.load_balancer_enabled:
            return self._heartbeat(now_ms)
        self.control.now_ms = max(self.control.now_ms, now_ms)
        parts: list[Effects] = [self._heartbeat(now_ms), self._pause_ended(now_ms), self._queue_approved(now_ms),
                                self._release_splits(now_ms), self._start_due(now_ms), self._stale_check(now_ms),
                                self._drain_moves(now_ms)]
        if now_ms >= self.timers.sweep:
            self.timers.sweep = now_ms + self.settings.sweep_ms
            parts += [self._expire(now_ms), self._orphans(now_ms), self._free_with_traffic(now_ms)]
        if now_ms >= self.timers.monitor:
            self.timers.monitor = now_ms + self.config.load_balancer_service_unit_state_monitor_interval_in_seconds * 1000
            parts.append(self._stuck(now_ms))
        if now_ms >= self.timers.shed:
            self.timers.shed = now_ms + self._shed_interval()
            parts.append(self._shed(now_ms))
        if now_ms >= self.timers.split:
            self.timers.split = now_ms + self._split_interval()
            parts.append(self._auto_split(now_ms))
        return combine(parts)

    def _shed_interval(self) -> int:
        return self.config.load_balancer_shedding_interval_minutes * 60_000

    def _split_interval(self) -> int:
        return self.config.load_balancer_split_interval_minutes * 60_000

    def _leader_silent(self, now_ms: int) -> bool:
        """The elected leader wrote nothing under ``_leader`` for a session timeout of log time."""
        alive = self.alive_ms
        return alive is not None and self.outages.available_ms(alive, now_ms) > self.settings.session_timeout_ms

    def _heartbeat(self, now_ms: int) -> Effects:
        """A ``LeaderHeartbeat`` when this leader wrote nothing under ``_leader`` for a heartbeat."""
        since = max(self.alive_ms or 0, self._beat_ms)
        if now_ms - since < self.settings.heartbeat_ms:
            return NOTHING
        self._beat_ms = now_ms
        return Effects(append=((LEADER_KEY, LeaderHeartbeat(leader_id=self.candidate_id)),), epoch=self.my_epoch)

    def _campaign(self, now_ms: int) -> Effects:
        if now_ms - self._attempt_ms < self.settings.retry_ms:
            return NOTHING
        self.attempt, self._attempt_ms = self.epoch + 1, now_ms
        event = LeaderElected(leader_id=self.candidate_id, epoch=self.attempt)
        return Effects(append=((LEADER_KEY, event),), epoch=self.attempt,
                       expected_seq={LEADER_KEY: self.leader_seq})

    def on_log_health(self, healthy: bool, now_ms: int) -> None:
        self.outages.observe(healthy, now_ms)

    # -- shedding and splitting ----------------------------------------------------------------
    def _shed(self, now_ms: int) -> Effects:
        if not self.config.load_balancer_shedding_enabled:
            return NOTHING
        if self.held.paused(now_ms) is not None:
            return self._skipped(now_ms, "Paused")
        view = self._view(now_ms, placing=False)
        if self.reviewing:  # only executed moves count for the grace period, not proposed ones
            self.shedding.memory = SheddingMemory(dict(self.shed_folded.recently_unloaded),
                                                  dict(self.shed_folded.recently_unloaded_brokers))
        result: ShedResult = self.shedding.run(view)
        run = (now_ms, self._position())
        moves = shed_moves(result.decisions, view, now_ms)
        pid, recorded = self._propose(SHED, self.shedding.strategy.name, moves, view, now_ms) if moves else (None, NOTHING)
        if self.reviewing and moves:
            self.control.last.at_ms, self.control.last.outcome = now_ms, "proposed"
            self.control.last.moves, self.control.last.inputs = len(moves), dict(result.inputs)
            return combine([recorded, self._start_due(now_ms)])
        self.control.throttle.queue.clear()  # each run replaces the plan: queued moves were chosen on older load
        queued = self.control.queue([Move(d.bundle, d.source or "", d.destination, now_ms, (d, run, pid))
                                     for d in result.decisions if d.source is not None])
        started = combine([recorded, self._start_due(now_ms)])
        if self.control.alive(queued):  # else each was dropped: no destination but its owner
            self.control.last.at_ms, self.control.last.outcome = now_ms, "moves"
            self.control.last.moves, self.control.last.inputs = len(queued), dict(result.inputs)
            return started
        if result.skip is not None:
            skip = str(result.skip)
        else:  # decisions without a destination other than their owner, or none at all
            skip = str(Reason.NO_BROKERS if result.decisions else Reason.BALANCED)
        return combine([started, self._skipped(now_ms, skip, result.inputs)])  # earlier runs' moves may start

    def _auto_split(self, now_ms: int) -> Effects:
        if self.held.paused(now_ms) is not None:
            return NOTHING
        decisions, self.split_hits = split_decisions(self.ownership, self.load, self.split_hits, self.config)
        ready = [d for d in decisions  # a move of the bundle on its way (or away): split it later, if still hot
                 if not self._waiting(d.bundle, self.ownership.records.get(d.bundle), now_ms)
                 and not self._on_drained(d.bundle)]
        proposed = self._split_proposal(ready, self._view(now_ms, placing=False), now_ms) if ready else None
        recorded = NOTHING if proposed is None else proposed[1]
        if self.reviewing:
            return recorded
        pid = None if proposed is None else proposed[0]
        commands: list[SplitBundle] = []
        for d in ready:
            record = self.ownership.records.get(d.bundle)
            self._sent(d.bundle, record, now_ms)
            commands.append(SplitBundle(
                command_id=f"{AUTO_PREFIX}{d.reason}:{d.bundle}:e{self.my_epoch}:{now_ms}",
                epoch=self.my_epoch, namespace=namespace_of(d.bundle), bundle=d.bundle,
                algorithm=d.algorithm, unload=d.unload_children, proposal=pid))
        return combine([recorded, Effects(send=tuple(commands))])
