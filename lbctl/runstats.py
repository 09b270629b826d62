"""What ``lbctl run`` learns from the log while it runs: moves, broker loads, balance.

Invariants:
- a pure fold of the records it is given, in order (each record once): nothing is asked of the
  cluster, so the live view and the summary say what the log says;
- a *move* is a decision that takes a bundle from its broker: ``TransferPrepared`` (transfer),
  ``UnloadRequested`` (unload), ``SplitRequested`` (split) and a forced ``BundleAssigned``
  (orphan reassignment); placements of unowned bundles (lookups) are counted apart;
- a broker's load is the max resource usage (``balancer.load.max_usage``: CPU, direct memory,
  bandwidth in/out, as a fraction) of its latest report; a broker that left is dropped;
- balance is over the brokers that reported: ``max/mean`` of their loads and the population
  standard deviation; ``sample`` records it, the summary gives the last and the mean of samples;
- total: a record whose typed event cannot be built (``events.usable``) folds nothing and is
  named in ``anomalies`` (``bad_event``, the newest ``KEPT_ANOMALIES``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from balancer.errors import DecodeError
from balancer.load import max_usage
from events.catalog import (
    BrokerLeft,
    BundleAssigned,
    LeaderElected,
    LoadReported,
    SplitRequested,
    TransferPrepared,
    UnloadRequested,
)
from events.envelope import Envelope
from events.log.port import Record
from events.report_parts import is_continuation
from projections.load import report_from_payload
from projections.tracking import Anomaly

KEPT_ANOMALIES = 100

Moved = TransferPrepared | UnloadRequested | SplitRequested | BundleAssigned
"""The events the view lists as moves (an assignment only when forced: a reassignment)."""


@dataclass(frozen=True, slots=True)
class Move:
    """One bundle move as the live view shows it."""

    ts_ms: int
    kind: str
    bundle: str
    src: str | None
    dst: str | None
    reason: str
    epoch: int


@dataclass(frozen=True, slots=True)
class Balance:
    brokers: int
    mean: float
    max_over_mean: float
    std: float


@dataclass
class RunStats:
    """Folds the records of a run (``fold``) into what the view and the summary print."""

    start_ms: int
    loads: dict[str, float] = field(default_factory=dict)
    msg_rates: dict[str, float] = field(default_factory=dict)
    moves: list[Move] = field(default_factory=list)
    by_reason: Counter[tuple[str, str]] = field(default_factory=Counter)
    types: Counter[str] = field(default_factory=Counter)
    placements: int = 0
    epoch: int = 0
    leader_id: str | None = None
    balances: list[Balance] = field(default_factory=list)
    loads_over_time: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    """(elapsed ms, broker -> load) at each ``sample``: what ``--plot`` draws."""
    now_ms: int = 0
    """The cluster's clock at the last ``tick`` (the run's progress)."""
    anomalies: list[Anomaly] = field(default_factory=list)
    """Records no fold can use (``bad_event``), the newest ``KEPT_ANOMALIES``."""

    def fold(self, records: list[Record]) -> list[Move]:
        """Fold new records; the moves among them."""
        fresh: list[Move] = []
        for record in records:
            move = self._fold_one(record)
            if move is not None:
                fresh.append(move)
        self.moves.extend(fresh)
        return fresh

    def _fold_one(self, record: Record) -> Move | None:
        env = record.envelope
        self.types[env.type] += 1
        try:
            event = env.typed
        except DecodeError as exc:
            self.anomalies = [*self.anomalies[-KEPT_ANOMALIES + 1:], Anomaly(
                "bad_event", record.offset, env.key, env.seq, env.type, exc.message)]
            return None
        if isinstance(event, LoadReported):
            if not is_continuation(event.broker_load):
                report = report_from_payload(env.key, event.broker_load)
                self.loads[env.key] = max_usage(report)
                self.msg_rates[env.key] = report.msg_rate_in + report.msg_rate_out
        elif isinstance(event, BrokerLeft):
            self.loads.pop(env.key, None)
            self.msg_rates.pop(env.key, None)
        elif isinstance(event, LeaderElected):
            if event.epoch >= self.epoch:
                self.epoch, self.leader_id = event.epoch, event.leader_id
        elif isinstance(event, TransferPrepared):
            return self._move(env, "transfer", event, event.dst)
        elif isinstance(event, UnloadRequested):
            return self._move(env, "unload", event, None)
        elif isinstance(event, SplitRequested):
            return self._move(env, "split", event, None)
        elif isinstance(event, BundleAssigned):
            if event.force:
                return self._move(env, "reassign", event, event.dst)
            if event.reason == "lookup":
                self.placements += 1
        return None

    def _move(self, env: Envelope, kind: str, event: Moved, dst: str | None) -> Move:
        reason = event.reason or "-"
        self.by_reason[(kind, reason)] += 1
        return Move(env.ts_ms, kind, event.bundle, event.src, dst, reason, env.epoch)

    # -- balance -----------------------------------------------------------------------------
    def balance(self) -> Balance | None:
        values = list(self.loads.values())
        if not values:
            return None
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        return Balance(len(values), mean, max(values) / mean if mean > 0 else 1.0, std)

    def sample(self) -> None:
        found = self.balance()
        if found is not None and found.mean > 0:
            self.balances.append(found)
            if not self.loads_over_time or self.loads_over_time[-1][0] < self.elapsed_ms():
                self.loads_over_time.append((self.elapsed_ms(), dict(self.loads)))

    def tick(self, now_ms: int) -> int:
        """Note the cluster's clock; the run's elapsed time."""
        self.now_ms = max(self.now_ms, now_ms)
        return self.elapsed_ms()

    def elapsed_ms(self) -> int:
        return max(0, self.now_ms - self.start_ms)

    def unloads(self) -> int:
        """Moves that take a bundle from its owner (transfers and unloads)."""
        return sum(n for (kind, _), n in self.by_reason.items() if kind in ("transfer", "unload"))
