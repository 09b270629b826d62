"""The execution state machine of drive mode: which moves go out, and how each one ends.

An execution is one move of a proposal sent to the cluster: ``ExecutionRequested``, then the
admin API's answer (``ExecutionAccepted``; ``ExecutionUnanswered`` when none came), then exactly
one terminal event: ``ExecutionRefused`` (a non-2xx answer), ``ExecutionConfirmed`` (the
ownership view shows the bundle Owned at the destination, or the split done) or
``ExecutionFailed`` (``timeout``, ``diverted``: Owned elsewhere, ``gone``: the bundle ceased to
exist otherwise, ``shutdown``: attach stopped first).

Invariants:
- everything is folded from the log (the Execution* records and the ownership records after
  them), so a restarted attach knows every open execution, the caps' history and what happened
  since; an open execution is ended only by ``settle``, ``expire`` or ``shutdown``, each of
  which returns its terminal event once (the execution is closed when that event is folded
  back, and not offered again meanwhile);
- an outcome counts only from ownership records folded after the execution's request record
  (in one partition, after it in the log): the first change of the bundle's record after the
  request decides (Owned at the destination: confirmed; Owned elsewhere: diverted; the parent
  of a split: confirmed for that split, gone for anything else);
- at most one open execution per bundle; at most ``per_cycle`` requests per cycle and
  ``per_minute`` in any 60 s window of request times; given the throttle's ``caps``, at most
  ``caps.cluster`` open executions in all and ``caps.per_broker`` touching one broker (as
  source or destination), the same caps the project's own leader keeps; a move whose bundle is
  not Owned at its source in the ownership view, or is moving, is not sent; a move whose request
  the log already holds is never sent again (an approved proposal is offered every cycle);
- pure: times are passed in; nothing here does I/O.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from attach.proposals import SPLIT, TRANSFER, Proposal, ProposedMove
from balancer.control import Caps
from balancer.ownership import BundleState, OwnershipRecord
from events.catalog import (
    BundleAssigned,
    BundleOwned,
    Event,
    ExecutionAccepted,
    ExecutionConfirmed,
    ExecutionFailed,
    ExecutionRefused,
    ExecutionRequested,
    ExecutionUnanswered,
    SplitCompleted,
)
from events.envelope import Envelope
from projections.ownership import OwnershipProjection

MINUTE_MS = 60_000
TERMINAL = (ExecutionRefused, ExecutionConfirmed, ExecutionFailed)
HELD_IN_FLIGHT, HELD_CYCLE_CAP, HELD_MINUTE_CAP = "in_flight", "cycle_cap", "minute_cap"
HELD_MOVED, HELD_NO_DESTINATION = "moved", "no_destination"
HELD_CLUSTER_CAP, HELD_BROKER_CAP, HELD_PAUSED = "cluster_cap", "broker_cap", "paused"


@dataclass
class Execution:
    """One open execution, as its request and what followed tell it."""

    request: ExecutionRequested
    requested_ms: int
    answered: str = ""
    """``accepted``, ``unanswered`` or empty (no answer recorded yet)."""
    outcome: Event | None = None
    """The terminal event the records after the request decide (not yet recorded)."""
    ending: bool = False
    """A terminal event was handed out and is on its way to the log."""

    @property
    def execution_id(self) -> str:
        return self.request.execution_id

    @property
    def bundle(self) -> str:
        return self.request.bundle


@dataclass
class Selection:
    """What a cycle sends, and what it holds back and why."""

    send: list[ExecutionRequested] = field(default_factory=list)
    held: list[tuple[ProposedMove, str]] = field(default_factory=list)


class Executions:
    """Open executions and the caps' history, folded from the log."""

    def __init__(self, *, per_cycle: int, per_minute: int, timeout_ms: int, caps: Caps | None = None) -> None:
        self.per_cycle, self.per_minute, self.timeout_ms = per_cycle, per_minute, timeout_ms
        self.caps = caps
        self.open: dict[str, Execution] = {}
        self.by_bundle: dict[str, str] = {}
        self.requested: deque[int] = deque()
        """Request times of the last minute (and older ones not pruned yet)."""
        self.ended: dict[str, str] = {}
        """Execution id -> the type of its terminal event (what the log says)."""

    # -- folding ---------------------------------------------------------------------------
    def fold(self, envelope: Envelope, ownership: OwnershipProjection) -> None:
        """Fold one record, after the ownership view has folded it."""
        event = envelope.typed
        if isinstance(event, ExecutionRequested):
            self._requested(event, envelope.ts_ms)
        elif isinstance(event, TERMINAL):
            self._ended(event)
        elif isinstance(event, ExecutionAccepted | ExecutionUnanswered):
            found = self.open.get(event.execution_id)
            if found is not None:
                found.answered = "accepted" if isinstance(event, ExecutionAccepted) else "unanswered"
        elif isinstance(event, BundleOwned | BundleAssigned | SplitCompleted):
            self._observe(event, envelope, ownership)

    def _requested(self, event: ExecutionRequested, ts_ms: int) -> None:
        self.requested.append(ts_ms)
        if event.execution_id in self.ended:
            return
        self.open[event.execution_id] = Execution(event, ts_ms)
        self.by_bundle[event.bundle] = event.execution_id

    def _ended(self, event: ExecutionRefused | ExecutionConfirmed | ExecutionFailed) -> None:
        self.ended[event.execution_id] = event.TYPE
        found = self.open.pop(event.execution_id, None)
        if found is not None and self.by_bundle.get(found.bundle) == found.execution_id:
            del self.by_bundle[found.bundle]

    def _observe(self, event: BundleOwned | BundleAssigned | SplitCompleted, envelope: Envelope,
                 ownership: OwnershipProjection) -> None:
        bundle = str(event.parent if isinstance(event, SplitCompleted) else event.bundle)
        found = self.open.get(self.by_bundle.get(bundle, ""))
        if found is None or found.outcome is not None:
            return
        record = ownership.records.get(bundle)
        evidence = envelope.causation_id or f"{envelope.key}#{envelope.seq}"
        waited = max(0, envelope.ts_ms - found.requested_ms)
        request = found.request
        if isinstance(event, SplitCompleted):
            if record is not None and record.state is BundleState.DELETED:
                found.outcome = (_confirmed(request, str(event.owner), list(event.children), evidence, waited)
                                 if request.kind == SPLIT else
                                 _failed(request, "gone", f"split by another request ({evidence})", record, waited))
            return
        if record is None or record.state is not BundleState.OWNED or record.version <= request.from_version:
            return  # in flight still, or a record of what was before the request
        if request.kind == TRANSFER and record.dst == request.dst:
            found.outcome = _confirmed(request, str(record.dst), [], evidence, waited)
        elif request.kind == TRANSFER or record.dst != request.src:
            found.outcome = _failed(request, "diverted", f"Owned at {record.dst} ({evidence})", record, waited)

    # -- choosing --------------------------------------------------------------------------
    def select(self, proposal: Proposal, ownership: OwnershipProjection, now_ms: int) -> Selection:
        """The requests this cycle sends for ``proposal`` (caps and one per bundle)."""
        while self.requested and self.requested[0] <= now_ms - MINUTE_MS:
            self.requested.popleft()
        out = Selection()
        last_minute = len(self.requested)
        busy = self.busy()
        for index, move in enumerate(proposal.moves):
            if self.was_sent(f"{proposal.proposal_id}:{index}"):
                continue  # an approved proposal is offered again until each move went once
            record = ownership.records.get(move.bundle)
            if move.bundle in self.by_bundle:
                out.held.append((move, HELD_IN_FLIGHT))
            elif record is None or record.state is not BundleState.OWNED or record.dst != move.source:
                out.held.append((move, HELD_MOVED))
            elif len(out.send) >= self.per_cycle:
                out.held.append((move, HELD_CYCLE_CAP))
            elif last_minute + len(out.send) >= self.per_minute:
                out.held.append((move, HELD_MINUTE_CAP))
            elif move.kind != SPLIT and move.destination is None:
                out.held.append((move, HELD_NO_DESTINATION))
            elif (held := self._capped(move, busy, len(self.open) + len(out.send))) is not None:
                out.held.append((move, held))
            else:
                out.send.append(_request(proposal, index, move, record))
                for broker in _brokers(move.source, move.destination):
                    busy[broker] = busy.get(broker, 0) + 1
        return out

    def was_sent(self, execution_id: str) -> bool:
        """Whether the log holds the request of ``execution_id`` (open or ended)."""
        return execution_id in self.open or execution_id in self.ended

    def busy(self) -> dict[str, int]:
        """Broker -> open executions touching it (as source or destination)."""
        out: dict[str, int] = {}
        for execution in self.open.values():
            for broker in _brokers(execution.request.src, execution.request.dst):
                out[broker] = out.get(broker, 0) + 1
        return out

    def _capped(self, move: ProposedMove, busy: dict[str, int], flying: int) -> str | None:
        """Which of the throttle's in-flight caps holds ``move`` back (None: neither)."""
        if self.caps is None:
            return None
        if flying >= self.caps.cluster:
            return HELD_CLUSTER_CAP
        if any(busy.get(b, 0) >= self.caps.per_broker for b in _brokers(move.source, move.destination)):
            return HELD_BROKER_CAP
        return None

    # -- ending ----------------------------------------------------------------------------
    def settle(self) -> list[Event]:
        """The terminal events the folded records decided, for executions not ended yet."""
        out: list[Event] = []
        for execution in self.open.values():
            if execution.outcome is not None and not execution.ending:
                execution.ending = True
                out.append(execution.outcome)
        return out

    def expire(self, now_ms: int, ownership: OwnershipProjection) -> list[Event]:
        """``timeout`` for each open execution older than the timeout, undecided."""
        out: list[Event] = []
        for execution in self.open.values():
            waited = now_ms - execution.requested_ms
            if execution.ending or execution.outcome is not None or waited < self.timeout_ms:
                continue
            execution.ending = True
            record = ownership.records.get(execution.bundle)
            detail = f"not done in {self.timeout_ms // 1000} s ({execution.answered or 'no answer recorded'})"
            out.append(_failed(execution.request, "timeout", detail, record, waited))
        return out

    def shutdown(self, now_ms: int, ownership: OwnershipProjection) -> list[Event]:
        """Every open execution's terminal event as attach stops: its decided outcome, else
        ``shutdown`` with the state the ownership view shows."""
        out = self.settle()
        for execution in self.open.values():
            if execution.ending:
                continue
            execution.ending = True
            record = ownership.records.get(execution.bundle)
            waited = max(0, now_ms - execution.requested_ms)
            out.append(_failed(execution.request, "shutdown", "attach stopped before the move showed",
                               record, waited))
        return out

    def answer(self, request: ExecutionRequested, status: int | None, message: str) -> Event:
        """The event of the admin API's answer (None: no answer came); a refusal ends it."""
        if status is None:
            return ExecutionUnanswered(execution_id=request.execution_id, bundle=request.bundle, error=message)
        if 200 <= status < 300:
            return ExecutionAccepted(execution_id=request.execution_id, bundle=request.bundle,
                                     status=status, message=message)
        found = self.open.get(request.execution_id)
        if found is not None:
            found.ending = True
        return ExecutionRefused(execution_id=request.execution_id, bundle=request.bundle,
                                status=status, message=message)

    def in_flight(self) -> list[Execution]:
        return sorted(self.open.values(), key=lambda e: e.requested_ms)


def _brokers(src: str, dst: str | None) -> tuple[str, ...]:
    return (src,) if dst is None else (src, dst)


def _request(proposal: Proposal, index: int, move: ProposedMove, record: OwnershipRecord) -> ExecutionRequested:
    decision = {**move.decision, "proposal": proposal.proposal_id}  # as the leader's moves name theirs
    boundaries = [int(b) for b in decision.get("boundaries") or ()] if move.kind == SPLIT else None
    return ExecutionRequested(
        execution_id=f"{proposal.proposal_id}:{index}", proposal_id=proposal.proposal_id,
        bundle=move.bundle, kind=SPLIT if move.kind == SPLIT else TRANSFER, src=move.source,
        dst=move.destination, algorithm=str(decision.get("algorithm")) if move.kind == SPLIT else None,
        boundaries=boundaries or None, decision=decision, from_version=record.version)


def _state(record: OwnershipRecord | None) -> dict[str, Any]:
    if record is None:
        return {"state": None}
    return {"state": str(record.state), "owner": record.dst, "src": record.src, "version": record.version}


def _confirmed(request: ExecutionRequested, owner: str, children: list[str], evidence: str,
               waited: int) -> ExecutionConfirmed:
    return ExecutionConfirmed(execution_id=request.execution_id, bundle=request.bundle, owner=owner,
                              children=children, evidence=evidence, waited_ms=waited)


def _failed(request: ExecutionRequested, reason: str, detail: str, record: OwnershipRecord | None,
            waited: int) -> ExecutionFailed:
    return ExecutionFailed(execution_id=request.execution_id, bundle=request.bundle, reason=reason,
                           detail=detail, state=_state(record), waited_ms=max(0, waited))

