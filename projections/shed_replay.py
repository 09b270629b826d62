"""The leader's shedding runs replayed over its own log, run by run (what-if's "as recorded").

Invariants:
- a run is known by what it left in the log: a ``SheddingSkipped`` (stamped at the run's time) or
  the moves it caused (UnloadRequested/TransferPrepared whose decision names the strategy; the
  run's time is the decision's ``run_ms``, else the time that ends the leader's command id, else
  the event's own time);
- at a run the replay has folded exactly what the leader had: the records up to the run's
  ``folded`` positions (partition -> last offset, stamped by the leader on the run's events),
  or, for runs recorded without them, the records stamped before the run's time; either way in
  (time, partition, offset) order, each partition in offset order, into what the leader folds:
  the ownership projection (splits included), the load projection
  (every report: latest report per broker, EMAs, bundle averages), the broker registry, the
  draining brokers and the grace-period memory folded from decision events (``remember_shed``,
  the leader's own rule); the view comes from the leader's builder (``projections.views``) and
  the same ``SheddingRun`` runs on it;
- the strategy's state (EMAs, hit counts) lives through one leader term and starts afresh at
  each ``LeaderElected``, as a new leader body does;
- a recorded move matches a replayed decision of the same run by bundle and source, and by
  destination when the strategy chose it (one a placement chose after the run is not compared);
- a record whose payload no fold can use (``events.usable``) is a ``bad_event`` of the replay's
  projections and takes no other part;
- recorded moves no shedding run made (split children, admin unloads, drains, another strategy's)
  are counted by reason in ``Alignment.unmodelled``: never matched, never silently dropped.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.decisions import Decision, ShedResult
from balancer.errors import DecodeError
from balancer.ownership import AcceptMode
from balancer.shedding.base import ClusterView
from balancer.shedding.run import SheddingMemory, SheddingRun
from events.catalog import (
    BrokerLeft,
    BrokerRegistered,
    LeaderElected,
    SheddingSkipped,
    TransferPrepared,
    UnloadRequested,
)
from events.envelope import Envelope
from projections.drain import DrainFold
from projections.load import LoadProjection
from projections.ownership import OwnershipProjection
from projections.views import cluster_view

MOVE_EVENTS = (UnloadRequested, TransferPrepared)
DRAIN_REASON = "shutdown"


def remember_shed(memory: SheddingMemory, strategy: str, extensible: bool,
                  event: UnloadRequested | TransferPrepared, ts_ms: int) -> bool:
    """Fold one decision event into the grace-period memory (the leader's rule): only moves of
    ``strategy`` count (admin unloads and drains have no grace period). True if it counted."""
    decision = event.decision
    if not isinstance(decision, dict) or decision.get("strategy") != strategy:
        return False
    bundle = str(event.bundle)
    memory.recently_unloaded[bundle] = max(ts_ms, memory.recently_unloaded.get(bundle, ts_ms))
    if extensible:
        memory.recently_unloaded_brokers[str(event.src)] = ts_ms
    return True


# -- what the log says the leader did -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordedMove:
    bundle: str
    source: str
    destination: str | None
    """The destination the strategy chose; None when it only unloaded or placement chose."""
    reason: str
    offset: int


@dataclass
class RecordedRun:
    now_ms: int
    moves: list[RecordedMove] = field(default_factory=list)
    skip: str | None = None
    folded: dict[int, int] | None = None
    """Partition -> the last offset the leader had folded when it ran (None: recorded without)."""


def folded_positions(value: Any) -> dict[int, int] | None:
    """A ``folded`` stamp as partition -> offset (None when absent or not a mapping)."""
    if not isinstance(value, Mapping):
        return None
    return {int(partition): int(offset) for partition, offset in value.items()}


def _typed(envelope: Envelope) -> Any:
    """The typed event, or None for a payload no fold can use (the projections name it)."""
    try:
        return envelope.typed
    except DecodeError:
        return None


def run_time(envelope: Envelope) -> int:
    """When the leader ran the shedding that caused this decision event."""
    event = _typed(envelope)
    decision = event.decision if isinstance(event, MOVE_EVENTS) else None
    if isinstance(decision, dict) and isinstance(decision.get("run_ms"), int):
        return int(decision["run_ms"])
    tail = str(envelope.causation_id or "").rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else int(envelope.ts_ms)


def _strategy_destination(decision: Mapping[str, Any]) -> str | None:
    if "placement" in decision:
        return None
    dst = decision.get("destination")
    return None if dst is None else str(dst)


@dataclass
class RecordedRuns:
    runs: list[RecordedRun]
    unmodelled: dict[str, int]
    """Reason -> recorded moves no run of the strategy made (split, admin, shutdown, ...)."""


def recorded_runs(items: Iterable[tuple[int, Envelope]], strategy: str) -> RecordedRuns:
    """The strategy's runs in time order, from (offset, envelope) pairs in log order."""
    runs: dict[int, RecordedRun] = {}
    unmodelled: dict[str, int] = {}
    for offset, envelope in items:
        event = _typed(envelope)
        if isinstance(event, SheddingSkipped) and event.strategy == strategy:
            run = runs.setdefault(envelope.ts_ms, RecordedRun(envelope.ts_ms))
            run.skip, run.folded = str(event.reason), folded_positions(event.folded)
        elif isinstance(event, MOVE_EVENTS):
            decision = event.decision
            if not isinstance(decision, dict) or decision.get("strategy") != strategy:
                reason = str(event.reason or "")
                unmodelled[reason] = unmodelled.get(reason, 0) + 1
                continue
            now = run_time(envelope)
            run = runs.setdefault(now, RecordedRun(now))
            run.folded = folded_positions(decision.get("folded"))
            run.moves.append(RecordedMove(str(event.bundle), str(event.src),
                                          _strategy_destination(decision), str(event.reason or ""),
                                          offset))
    return RecordedRuns([runs[t] for t in sorted(runs)], unmodelled)


# -- the replay --------------------------------------------------------------------------------


class LeaderReplay:
    """The leader's shedding state, folded from the log the way the leader folds it."""

    def __init__(self, config: LoadBalancerConfig) -> None:
        self.config = config
        # Records come merged across partitions by time (``LogCursor``), not as one stream.
        self.ownership = OwnershipProjection(mode=AcceptMode.from_config(config), ordered=False)
        self.load = LoadProjection(config)
        self.registry: dict[str, BrokerRegistered] = {}
        self.draining: set[str] = set()
        self.drains = DrainFold()
        """The operator's drains: out of the leader's views as they are out of this one's."""
        self.memory = SheddingMemory()
        self.run = SheddingRun(config)

    def fold(self, offset: int, envelope: Envelope) -> None:
        self.ownership.apply(offset, envelope)
        self.load.apply(offset, envelope)
        event = _typed(envelope)  # None for a bad_event: the projections named it
        if event is not None:
            self.drains.fold(event)
        if isinstance(event, BrokerRegistered):
            self.registry[str(event.broker_id)] = event
        elif isinstance(event, BrokerLeft):
            self.registry.pop(str(event.broker_id), None)
            self.draining.discard(str(event.broker_id))
        elif isinstance(event, LeaderElected):
            self._new_term()
        elif isinstance(event, MOVE_EVENTS):
            strategy = self.run.strategy
            for memory in (self.memory, self.run.memory):
                remember_shed(memory, strategy.name, strategy.extensible, event, envelope.ts_ms)
            if event.reason == DRAIN_REASON and event.src is not None:
                self.draining.add(str(event.src))

    def _new_term(self) -> None:
        """A new leader body: a fresh strategy; its memory is what the log tells."""
        self.run = SheddingRun(self.config)
        self.run.memory = SheddingMemory(dict(self.memory.recently_unloaded),
                                         dict(self.memory.recently_unloaded_brokers))

    def view(self, now_ms: int, *, placing: bool = False, exclude: Iterable[str] = ()) -> ClusterView:
        """The leader's view at ``now_ms``: a shedding run's, or a placement's (``placing``)
        without the draining brokers and those in ``exclude``."""
        return cluster_view(now_ms, self.config, ownership=self.ownership, load=self.load,
                            registry=self.registry, exclude=(*self.draining, *self.drains.drains, *exclude),
                            placing=placing)

    def shed(self, now_ms: int) -> ShedResult:
        return self.run.run(self.view(now_ms))


@dataclass(frozen=True)
class RunReplay:
    """One recorded run next to its replay."""

    now_ms: int
    recorded: tuple[RecordedMove, ...]
    recorded_skip: str | None
    replayed: tuple[Decision, ...]
    replayed_skip: str | None
    missed: tuple[RecordedMove, ...]

    @property
    def agrees(self) -> bool:
        moved = {(d.bundle, d.source) for d in self.replayed}
        return not self.missed and len(moved) == len(self.recorded)


@dataclass
class Alignment:
    runs: list[RunReplay]
    unmodelled: dict[str, int]

    @property
    def decisions(self) -> int:
        return sum(len(r.recorded) for r in self.runs)

    @property
    def matched(self) -> int:
        return sum(len(r.recorded) - len(r.missed) for r in self.runs)

    @property
    def reproduced(self) -> float:
        """Share of the recorded decisions the replay makes in the same run (no decision
        recorded: 1.0 if the replay made none either)."""
        if not self.decisions:
            return 1.0 if not any(r.replayed for r in self.runs) else 0.0
        return self.matched / self.decisions


def _missed(recorded: list[RecordedMove], replayed: tuple[Decision, ...]) -> tuple[RecordedMove, ...]:
    left = list(replayed)
    missed: list[RecordedMove] = []
    for move in recorded:
        hit = next((d for d in left if d.bundle == move.bundle and d.source == move.source
                    and (move.destination is None or d.destination == move.destination)), None)
        if hit is None:
            missed.append(move)
        else:
            left.remove(hit)
    return tuple(missed)


class LogCursor:
    """The log, partition by partition in offset order, handed out up to a run's horizon in
    (time, partition, offset) order: each record once."""

    def __init__(self, records: Iterable[tuple[int, int, Envelope]]) -> None:
        queues: dict[int, list[tuple[int, Envelope]]] = {}
        for partition, offset, envelope in records:
            queues.setdefault(partition, []).append((offset, envelope))
        self.queues = {p: deque(sorted(q, key=lambda item: item[0])) for p, q in queues.items()}

    def until(self, run: RecordedRun) -> Iterator[tuple[int, Envelope]]:
        """(offset, envelope) of the records the leader had folded at ``run``, not handed out yet."""
        heads = [(q[0][1].ts_ms, p, q[0][0]) for p, q in self.queues.items() if q and _seen(run, p, q[0])]
        heapq.heapify(heads)
        while heads:
            _, partition, _ = heapq.heappop(heads)
            queue = self.queues[partition]
            yield queue.popleft()
            if queue and _seen(run, partition, queue[0]):
                heapq.heappush(heads, (queue[0][1].ts_ms, partition, queue[0][0]))


def _seen(run: RecordedRun, partition: int, item: tuple[int, Envelope]) -> bool:
    if run.folded is not None:
        return item[0] <= run.folded.get(partition, -1)
    return item[1].ts_ms < run.now_ms


def align(records: Iterable[tuple[int, int, Envelope]], runs: RecordedRuns,
          config: LoadBalancerConfig) -> Alignment:
    """Replay every recorded run over ``records`` ((partition, offset, envelope), any order)."""
    replay = LeaderReplay(config)
    log = LogCursor(records)
    out: list[RunReplay] = []
    for run in runs.runs:
        for offset, envelope in log.until(run):
            replay.fold(offset, envelope)
        result = replay.shed(run.now_ms)
        out.append(RunReplay(run.now_ms, tuple(run.moves), run.skip, result.decisions,
                             None if result.skip is None else str(result.skip),
                             _missed(run.moves, result.decisions)))
    return Alignment(out, dict(runs.unmodelled))
