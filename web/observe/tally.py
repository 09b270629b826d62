"""The log, counted the way Pulsar's load managers count: what ``/metrics`` exports.

``Tally.take(record)`` folds one log record into counters and latency observations under
Pulsar's meanings (the extensible manager's ``UnloadCounter``, ``SplitCounter``,
``AssignCounter`` and PIP-307's ``UnloadManager`` latencies, docs/operations.md#metrics):

- moves are ``projections.moves``' (the fold the run summary and the dashboard read, so they
  count the same moves): a transfer or an unload is a ``Success`` under its decision's reason
  (an admin unload: ``Admin``; the children a split unloads are the split's, not unloads:
  ``Move.sheds``), an assignment (or a takeover with no source) an ``AssignCounter``
  ``Success``; a skipped shedding run (``SheddingSkipped``) a
  ``Skip`` under its reason; a refused unload command (``CommandRejected``) a
  ``Failure``/``Unknown``. A broker counts once per shedding run it lost bundles in;
- counters are attributed to the leader that was elected when the event was logged (the
  ``broker`` label): after an election the new leader's series starts at 0, as in Pulsar, and a
  ``sum()`` over brokers is the cluster's total;
- latencies are the gaps between a bundle's events in the log's own timestamps (cluster time:
  on Ray at ``--speed 60`` one wall second is 60 s of cluster time), in seconds;
- memory is bounded: per-bundle starts are dropped once the bundle settles, and at most
  ``MAX_PENDING`` unfinished ones are kept (the oldest go first).

A record whose payload no fold can use (``events.usable``) is counted in ``bad_events`` and
folds nothing. Pure: no clock, no I/O; the exporter owns one and feeds it every record once, in log order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.errors import DecodeError
from events.log.port import Record
from projections.moves import MOVE_TYPES, Change, MovesFold

MAX_PENDING = 10_000
LATENCY_BUCKETS_S = (0.001, 0.01, 0.1, 0.2, 1.0)
"""PIP-307's buckets (1, 10, 100, 200, 1000 ms), in seconds."""
OUR_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

UNLOAD_SUCCESS_REASONS = frozenset({"Overloaded", "Underloaded", "Admin"})
SPLIT_REASONS = frozenset({"Topics", "Sessions", "MsgRate", "Bandwidth", "Admin"})
NO_LEADER = "none"
UNLOAD_KEYS = (("Success", "Overloaded"), ("Success", "Underloaded"), ("Success", "Admin"),
               ("Skip", "HitCount"), ("Skip", "NoBundles"), ("Skip", "CoolDown"),
               ("Skip", "OutDatedData"), ("Skip", "NoLoadData"), ("Skip", "NoBrokers"),
               ("Skip", "Unknown"), ("Failure", "Unknown"))
"""Pulsar's ``UnloadCounter`` breakdown: every (result, reason) is exported from 0."""
SPLIT_KEYS = (*(("Success", r) for r in ("Topics", "Sessions", "MsgRate", "Bandwidth", "Admin")),
              ("Failure", "Unknown"))
ASSIGN_KEYS = ("Success", "Failure", "Skip")


@dataclass
class Histogram:
    """Cumulative-free bucket counts of one series (the exposition makes them cumulative)."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    observations: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf

    def observe(self, value: float) -> None:
        index = next((i for i, bound in enumerate(self.bounds) if value <= bound), len(self.bounds))
        self.counts[index] += 1
        self.total += value
        self.observations += 1

    def cumulative(self) -> list[tuple[str, int]]:
        out, running = [], 0
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out


@dataclass
class Pending:
    """When a bundle's operation started in the log, and who it is measured for."""

    started_ms: int
    broker: str
    dst: str | None = None


class Tally:
    """Counters and histograms folded from the log (see the module docstring for meanings)."""

    def __init__(self) -> None:
        self.appended: Counter[str] = Counter()
        self.leader, self.epoch = NO_LEADER, 0
        self.unload_bundles: Counter[str] = Counter()
        self.unload_brokers: Counter[str] = Counter()
        self.unload_breakdown: Counter[tuple[str, str, str]] = Counter()  # broker, result, reason
        self.splits: Counter[str] = Counter()
        self.split_breakdown: Counter[tuple[str, str, str]] = Counter()
        self.assign_breakdown: Counter[tuple[str, str]] = Counter()  # broker, result
        self.rejected: Counter[tuple[str, str]] = Counter()  # command, code
        self.latency: dict[tuple[str, str], Histogram] = {}  # (metric, broker)
        self._releasing: dict[str, Pending] = {}
        self._unloading: dict[str, Pending] = {}
        self._assigning: dict[str, Pending] = {}
        self._looking_up: dict[str, Pending] = {}
        self._split_reasons: dict[str, str] = {}
        self._run: tuple[Any, set[str]] = (None, set())
        self.bad_events = 0
        """Records whose payload no fold can use (``events.usable``): counted, not folded."""
        self.moves = MovesFold()

    def leaders(self) -> list[str]:
        """Every leader a counter is attributed to, the current one included."""
        found = {*self.unload_bundles, *self.splits, *(k[0] for k in self.unload_breakdown),
                 *(k[0] for k in self.assign_breakdown), *(k[0] for k in self.split_breakdown)}
        return sorted(found | {self.leader})

    def take(self, record: Record) -> Change | None:
        """Fold one record; the move it made or told again (``projections.moves``), if any."""
        env = record.envelope
        self.appended[env.type] += 1
        handler = _HANDLERS.get(env.type)
        if handler is None and env.type not in MOVE_TYPES:
            return None
        try:
            change = self.moves.take(record)  # types the event: its rules refuse what no fold can use
        except DecodeError:
            self.bad_events += 1  # the ownership view names it (the dashboard's anomalies)
            return None
        if handler is not None:
            handler(self, env.payload, env.ts_ms)
        if change is not None:
            self._moved(change)
        return change

    # -- elections and moves --------------------------------------------------------------------
    def _elected(self, payload: Mapping[str, Any], ts_ms: int) -> None:
        if int(payload["epoch"]) >= self.epoch:
            self.leader, self.epoch = str(payload["leader_id"]), int(payload["epoch"])

    def _moved(self, change: Change) -> None:
        move = change.move
        if change.previous is not None:  # told again (a transfer after its unload): counted once
            for table in (self._unloading, self._releasing):
                if move.bundle in table:
                    table[move.bundle].dst = move.dst
            return
        if move.kind == "assign" or (move.kind == "takeover" and not move.src):
            self.assign_breakdown[move.leader, "Success"] += 1
        if move.kind not in ("transfer", "unload"):
            return
        src = move.src or ""
        self._start(self._unloading, move.bundle, Pending(move.ts_ms, src, move.dst))
        self._start(self._releasing, move.bundle, Pending(move.ts_ms, src, move.dst))
        if not move.sheds:
            return  # a split's children: counted as the split (Pulsar's unload counter skips them)
        decided = move.decided
        reason = "Admin" if move.reason.lower() == "admin" else (decided.reason or "Unknown")
        self.unload_bundles[move.leader] += 1
        self.unload_breakdown[move.leader, "Success",
                              reason if reason in UNLOAD_SUCCESS_REASONS else "Unknown"] += 1
        if decided.run_ms is not None and reason != "Admin":
            if self._run[0] != decided.run_ms:
                self._run = (decided.run_ms, set())
            if src not in self._run[1]:
                self._run[1].add(src)
                self.unload_brokers[move.leader] += 1

    def _released(self, payload: Mapping[str, Any], ts_ms: int) -> None:
        bundle = str(payload["bundle"])
        release = self._releasing.pop(bundle, None)
        if release is not None:
            self._observe("release", release.broker, ts_ms - release.started_ms)
        unload = self._unloading.get(bundle)
        if unload is not None and unload.dst is None:  # a plain unload ends Free
            del self._unloading[bundle]
            self._observe("unload", unload.broker, ts_ms - unload.started_ms)

    def _assigned(self, payload: Mapping[str, Any], ts_ms: int) -> None:
        # Latencies only: the assignment itself is a move (``_moved`` counts it).
        bundle, dst = str(payload["bundle"]), str(payload["dst"])
        if payload.get("src"):  # the destination's half of a transfer
            self._start(self._assigning, bundle, Pending(ts_ms, dst))
            return
        if payload.get("reason") == "lookup":
            self._start(self._looking_up, bundle, Pending(ts_ms, dst))

    def _owned(self, payload: Mapping[str, Any], ts_ms: int) -> None:
        bundle = str(payload["bundle"])
        for table, metric in ((self._assigning, "assign"), (self._unloading, "unload"),
                              (self._looking_up, "bb_lookup")):
            started = table.pop(bundle, None)
            if started is not None:
                self._observe(metric, started.broker, ts_ms - started.started_ms)
                if metric == "unload":
                    self._observe("bb_transfer", started.broker, ts_ms - started.started_ms)
        self._releasing.pop(bundle, None)

    # -- splits, skips, refusals ----------------------------------------------------------------
    def _split_requested(self, payload: Mapping[str, Any], ts_ms: int) -> None:
        reason = str(payload.get("reason") or "")
        reason = "Admin" if reason.lower() == "admin" else reason
        if len(self._split_reasons) < MAX_PENDING:
            self._split_reasons[str(payload["bundle"])] = reason if reason in SPLIT_REASONS else "Unknown"

    def _split_completed(self, payload: Mapping[str, Any], ts_ms: int) -> None:
        reason = self._split_reasons.pop(str(payload["parent"]), "Unknown")
        self.splits[self.leader] += 1
        self.split_breakdown[self.leader, "Success", reason] += 1

    def _skipped(self, payload: Mapping[str, Any], ts_ms: int) -> None:
        self.unload_breakdown[self.leader, "Skip", str(payload.get("reason") or "Unknown")] += 1

    def _rejected(self, payload: Mapping[str, Any], ts_ms: int) -> None:
        command, error = str(payload.get("command", "")), payload.get("error") or {}
        self.rejected[command, str(error.get("code", "unknown"))] += 1
        if command in ("UnloadBundle", "UnloadNamespace"):
            self.unload_breakdown[self.leader, "Failure", "Unknown"] += 1
        elif command == "SplitBundle":
            self.split_breakdown[self.leader, "Failure", "Unknown"] += 1
        elif command == "AssignBundle":
            self.assign_breakdown[self.leader, "Failure"] += 1

    # -- helpers ----------------------------------------------------------------------------
    @staticmethod
    def _start(table: dict[str, Pending], bundle: str, pending: Pending) -> None:
        if bundle not in table and len(table) >= MAX_PENDING:
            del table[next(iter(table))]  # the oldest unfinished start: its end was never logged
        table[bundle] = pending

    def _observe(self, metric: str, broker: str, elapsed_ms: int) -> None:
        key = (metric, broker or NO_LEADER)
        histogram = self.latency.get(key)
        if histogram is None:
            bounds = OUR_BUCKETS_S if metric.startswith("bb_") else LATENCY_BUCKETS_S
            histogram = self.latency[key] = Histogram(bounds)
        histogram.observe(max(0, elapsed_ms) / 1000.0)


_HANDLERS = {
    "LeaderElected": Tally._elected,
    "BundleReleased": Tally._released,
    "BundleAssigned": Tally._assigned,
    "BundleOwned": Tally._owned,
    "SplitRequested": Tally._split_requested,
    "SplitCompleted": Tally._split_completed,
    "SheddingSkipped": Tally._skipped,
    "CommandRejected": Tally._rejected,
}
