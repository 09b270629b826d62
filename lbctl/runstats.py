"""What ``lbctl run`` learns from the log while it runs: moves, broker loads, balance.

Invariants:
- a pure fold of the records it is given, in order (each record once): nothing is asked of the
  cluster, so the live view and the summary say what the log says;
- moves are ``projections.moves``' (the rule the dashboard and ``/metrics`` count by too): the
  view lists transfers, unloads, splits, takeovers and assignments other than a lookup's;
  placements of unowned bundles by lookups are counted apart (``placements``); a move told
  twice (a transfer after its unload) replaces the one listed;
- a broker's load is the max resource usage (``balancer.load.max_usage``: CPU, direct memory,
  bandwidth in/out, as a fraction) of its latest report; a broker that left is dropped;
- an expiry (``BrokerLeft`` with reason ``expired``) is kept in ``expiries`` (cluster time,
  broker), in log order, so the live view announces each one;
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
from events.catalog import BrokerLeft, LeaderElected, LoadReported
from events.log.port import Record
from projections.moves import Change, Move, MovesFold
from projections.tracking import Anomaly

KEPT_ANOMALIES = 100


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
    folded: MovesFold = field(default_factory=MovesFold)
    expiries: list[tuple[int, str]] = field(default_factory=list)
    """(cluster time, broker) of each broker the leader expired, in log order."""

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
            report = event.report()
            if report is not None:  # None: a later part of a report, bundles only
                self.loads[env.key] = max_usage(report)
                self.msg_rates[env.key] = report.msg_rate_in + report.msg_rate_out
        elif isinstance(event, BrokerLeft):
            self.loads.pop(env.key, None)
            self.msg_rates.pop(env.key, None)
            if event.reason == "expired":
                self.expiries.append((env.ts_ms, event.broker_id))
        elif isinstance(event, LeaderElected) and event.epoch >= self.epoch:
            self.epoch, self.leader_id = event.epoch, event.leader_id
        change = self.folded.take(record)
        return None if change is None else self._moved(change)

    def _moved(self, change: Change) -> Move | None:
        move, previous = change.move, change.previous
        if move.kind == "assign" and move.reason == "lookup":
            self.placements += 1
            return None
        if previous is not None:  # the same move told again: replace it where it is listed
            self.by_reason[(previous.kind, previous.reason or "-")] -= 1
            self.by_reason += Counter()  # drop a count that fell to zero
            self.moves = [move if m is previous else m for m in self.moves]
            self.by_reason[(move.kind, move.reason or "-")] += 1
            return None
        self.by_reason[(move.kind, move.reason or "-")] += 1
        return move

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

    def end(self, total_ms: int) -> None:
        """The run lasted ``total_ms`` of cluster time: a driver that looked after the end (a
        late wake-up, cluster time running on meanwhile) does not lengthen it."""
        self.now_ms = min(self.now_ms, self.start_ms + total_ms)

    def elapsed_ms(self) -> int:
        return max(0, self.now_ms - self.start_ms)

    def unloads(self) -> int:
        """Moves that take a bundle from its owner by a decision (transfers and unloads; the
        children a split unloads are the split's): what ``/metrics`` counts as unloads."""
        return sum(n for (kind, reason), n in self.by_reason.items()
                   if kind in ("transfer", "unload") and reason != "split")
