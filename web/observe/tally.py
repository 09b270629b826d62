"""The log, counted the way Pulsar's load managers count: what ``/metrics`` exports.

``Tally.take(record)`` folds one log record into counters under
Pulsar's meanings (the extensible manager's ``UnloadCounter``, ``SplitCounter``,
``AssignCounter``, docs/operations.md#metrics; the latencies are ``web.observe.latency``'s):

- moves are ``projections.moves``' (the fold the run summary and the dashboard read, so they
  count the same moves): a transfer or an unload is a ``Success`` under its decision's reason
  (an admin unload: ``Admin``; the children a split unloads are the split's, not unloads:
  ``Move.sheds``), an assignment (or a takeover with no source) an ``AssignCounter``
  ``Success``; a skipped shedding run (``SheddingSkipped``) a ``Skip`` under its reason; a refused unload command (``CommandRejected``) a
  ``Failure``/``Unknown``. A broker counts once per shedding run it lost bundles in;
- counters are attributed to the leader that was elected when the event was logged (the
  ``broker`` label): after an election the new leader's series starts at 0, as in Pulsar, and a
  ``sum()`` over brokers is the cluster's total;
- memory is bounded: a split is forgotten once it settles, and at most ``MAX_PENDING``
  unsettled ones are kept (the oldest go first); the moves fold bounds its own.

A record whose payload no fold can use (``events.usable``) is counted in ``bad_events`` and
folds nothing. Pure: no clock, no I/O; the exporter owns one and feeds it every record once, in log order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from balancer.errors import DecodeError
from events.log.port import Record
from projections.moves import MOVE_TYPES, Change, MovesFold

MAX_PENDING = 10_000

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


class Tally:
    """Counters folded from the log (see the module docstring for meanings)."""

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
        if change.previous is not None:
            return  # told again (a transfer after its unload): counted once
        if move.kind == "assign" or (move.kind == "takeover" and not move.src):
            self.assign_breakdown[move.leader, "Success"] += 1
        if move.kind not in ("transfer", "unload") or not move.sheds:
            return  # a split's children: counted as the split (Pulsar's unload counter skips them)
        decided = move.decided
        reason = "Admin" if move.reason.lower() == "admin" else (decided.reason or "Unknown")
        self.unload_bundles[move.leader] += 1
        self.unload_breakdown[move.leader, "Success",
                              reason if reason in UNLOAD_SUCCESS_REASONS else "Unknown"] += 1
        if decided.run_ms is not None and reason != "Admin":
            if self._run[0] != decided.run_ms:
                self._run = (decided.run_ms, set())
            src = move.src or ""
            if src not in self._run[1]:
                self._run[1].add(src)
                self.unload_brokers[move.leader] += 1

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


_HANDLERS = {
    "LeaderElected": Tally._elected,
    "SplitRequested": Tally._split_requested,
    "SplitCompleted": Tally._split_completed,
    "SheddingSkipped": Tally._skipped,
    "CommandRejected": Tally._rejected,
}
