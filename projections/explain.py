"""Why did this bundle move? Every move of one bundle in the log, with the decision behind it.

A move is an ``UnloadRequested`` or ``TransferPrepared`` event of the bundle; the leader stores
the shedding decision (label, reason, strategy, the inputs and scores) in its ``decision``
payload. On a mirrored Pulsar cluster a move Pulsar made has reason ``pulsar`` and carries its
channel message id as causation id: it is the project's when it carried out an execution of a
proposal (``ExecutionRequested`` of the bundle before it, not yet matched to a move), and then
names that proposal, its decision and the execution's outcome; otherwise Pulsar made it itself.

Invariants: moves come in log order (partition, offset); a transfer logged as both
``UnloadRequested`` and ``TransferPrepared`` with the same decision is one move; a move without
a decision (an admin unload from an older writer) is listed with empty inputs, never dropped; an
execution no move of Pulsar's followed (refused, timed out) is listed on its own, never dropped;
a move whose decision no fold can use (``events.usable``) is left out here and named by the
ownership view (``bad_event``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.errors import DecodeError
from events.catalog import (
    ExecutionAccepted,
    ExecutionConfirmed,
    ExecutionFailed,
    ExecutionRefused,
    ExecutionRequested,
    ExecutionUnanswered,
    ProposalRecorded,
    TransferPrepared,
    UnloadRequested,
)
from events.log.port import Record
from events.times import iso

MOVE_EVENTS = (UnloadRequested, TransferPrepared)
PULSAR_REASON = "pulsar"
_EXECUTION_EVENTS = (ExecutionAccepted, ExecutionUnanswered, ExecutionRefused, ExecutionConfirmed,
                     ExecutionFailed)
_EXECUTION_TYPES = frozenset(cls.TYPE for cls in (ProposalRecorded, ExecutionRequested, *_EXECUTION_EVENTS))
MOVE_TYPES = frozenset(cls.TYPE for cls in MOVE_EVENTS)


@dataclass(frozen=True)
class MoveRecord:
    """One move of the bundle, as the log tells it."""

    partition: int
    offset: int
    ts_ms: int
    event: str
    epoch: int
    src: str | None
    dst: str | None
    reason: str
    decision: Mapping[str, Any] = field(default_factory=dict)
    origin: str = ""
    """``pulsar``: Pulsar made it itself; ``driven``: Pulsar carried out this project's execution;
    ``execution``: an execution no move followed; empty: the project's own cluster moved it."""
    source_id: str | None = None
    """Where the record came from: a mirrored record's causation id (Pulsar's message id)."""
    execution: Mapping[str, Any] = field(default_factory=dict)
    """The execution behind a driven move: id, proposal, strategy, answer, outcome."""

    def to_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "offset": self.offset, "ts_ms": self.ts_ms,
                "event": self.event, "epoch": self.epoch, "src": self.src, "dst": self.dst,
                "reason": self.reason, "decision": dict(self.decision), "origin": self.origin,
                "source_id": self.source_id, "execution": dict(self.execution)}


def moves_of(bundle: str, records: Iterable[Record]) -> list[MoveRecord]:
    """The bundle's moves in log order, one per decision."""
    found: list[MoveRecord] = []
    ordered = sorted(records, key=lambda r: (r.envelope.ts_ms, r.partition, r.offset))
    executions = _executions(bundle, ordered)
    waiting = [e for e in executions.values() if e["kind"] != "split"]
    splits = [e for e in executions.values() if e["kind"] == "split"]
    for record in ordered:
        env = record.envelope
        if env.type not in MOVE_TYPES:
            continue
        try:
            event = env.typed
        except DecodeError:
            continue  # a decision no fold can use: the ownership view names it (bad_event)
        if not isinstance(event, MOVE_EVENTS) or event.bundle != bundle:
            continue
        decision = event.decision or {}
        dst = (event.dst if isinstance(event, TransferPrepared) else None) or decision.get("destination")
        move = MoveRecord(record.partition, record.offset, env.ts_ms, env.type, env.epoch,
                          event.src, dst, str(event.reason), decision, source_id=env.causation_id)
        if event.reason == PULSAR_REASON:
            move = _provenance(move, waiting)
        previous = found[-1] if found else None
        # UnloadRequested then TransferPrepared for one decision: the same move, told twice.
        if previous is not None and previous.decision == move.decision and move.decision \
                and (previous.src, previous.dst) == (move.src, move.dst):
            continue
        found.append(move)
    found += [_unmatched(e) for e in (*waiting, *splits)]
    found.sort(key=lambda m: (m.ts_ms, m.partition, m.offset))
    return found


def _executions(bundle: str, ordered: list[Record]) -> dict[str, dict[str, Any]]:
    """The bundle's executions in request order, each with its proposal, answer and outcome."""
    proposals: dict[str, ProposalRecorded] = {}
    out: dict[str, dict[str, Any]] = {}
    for record in ordered:
        if record.envelope.type not in _EXECUTION_TYPES:
            continue
        try:
            event = record.envelope.typed
        except DecodeError:
            continue  # named by the folds that read it (bad_event)
        if isinstance(event, ProposalRecorded):
            proposals[event.proposal_id] = event
        elif isinstance(event, ExecutionRequested) and event.bundle == bundle:
            proposal = proposals.get(event.proposal_id)
            out[event.execution_id] = {
                "id": event.execution_id, "proposal": event.proposal_id, "kind": event.kind,
                "strategy": proposal.strategy if proposal is not None else "",
                "mode": proposal.mode if proposal is not None else "", "src": event.src, "dst": event.dst,
                "requested_ms": record.envelope.ts_ms, "decision": dict(event.decision),
                "request": event.request, "at": (record.partition, record.offset)}
        elif isinstance(event, _EXECUTION_EVENTS) and event.execution_id in out:
            _outcome(out[event.execution_id], event)
    return out


def _outcome(execution: dict[str, Any], event: Any) -> None:
    if isinstance(event, ExecutionAccepted):
        execution["answer"] = f"accepted {event.status}"
    elif isinstance(event, ExecutionUnanswered):
        execution["answer"] = f"no answer ({event.error})"
    elif isinstance(event, ExecutionRefused):
        execution["answer"] = f"refused {event.status} {event.message}".rstrip()
        execution["outcome"] = "refused"
    elif isinstance(event, ExecutionConfirmed):
        execution["outcome"] = f"confirmed: Owned at {event.owner} after {event.waited_ms} ms ({event.evidence})"
    elif isinstance(event, ExecutionFailed):
        execution["outcome"] = f"{event.reason}: {event.detail}"


def _provenance(move: MoveRecord, waiting: list[dict[str, Any]]) -> MoveRecord:
    """A move Pulsar made: the oldest execution of the bundle requested before it, if any."""
    for execution in waiting:
        if execution["requested_ms"] <= move.ts_ms:
            waiting.remove(execution)
            shown = {k: v for k, v in execution.items() if k not in ("decision", "at")}
            return MoveRecord(move.partition, move.offset, move.ts_ms, move.event, move.epoch, move.src,
                              move.dst, move.reason, execution["decision"], "driven", move.source_id, shown)
    return MoveRecord(move.partition, move.offset, move.ts_ms, move.event, move.epoch, move.src, move.dst,
                      move.reason, move.decision, PULSAR_REASON, move.source_id)


def _unmatched(execution: dict[str, Any]) -> MoveRecord:
    partition, offset = execution["at"]
    shown = {k: v for k, v in execution.items() if k not in ("decision", "at")}
    return MoveRecord(partition, offset, execution["requested_ms"], "ExecutionRequested", 0, execution["src"],
                      execution["dst"], execution.get("outcome", "open"), execution["decision"], "execution",
                      None, shown)


def render(bundle: str, moves: list[MoveRecord]) -> str:
    """One block per move: who, when, why, and the numbers that decided it."""
    if not moves:
        return f"{bundle}: no moves in the log"
    lines = [f"{bundle}: {len(moves)} move(s)"]
    for number, move in enumerate(moves, start=1):
        decision = move.decision
        lines.append(f"#{number} {move.partition}:{move.offset} ts={iso(move.ts_ms)} epoch={move.epoch} "
                     f"{move.event}: {move.src or '-'} -> {move.dst or '(placement)'} "
                     f"reason={move.reason}")
        lines += _origin_lines(move)
        if decision:
            lines.append(f"   decision: {decision.get('strategy') or '-'} {decision.get('label', '')} "
                         f"{decision.get('reason', '')} {decision.get('kind', '')}".rstrip())
            for key, value in sorted((decision.get("inputs") or {}).items()):
                lines.append(f"   {key} = {_fmt(value)}")
            if "placement" in decision:
                lines.append(f"   placement = {decision['placement']}")
    return "\n".join(lines)


def _origin_lines(move: MoveRecord) -> list[str]:
    run = move.execution
    if move.origin == PULSAR_REASON:
        return [f"   made by Pulsar itself, not by this project: {move.source_id or 'no message id'}"]
    if move.origin not in ("driven", "execution"):
        return []
    lines = [f"   {'driven by' if move.origin == 'driven' else 'execution of'} proposal {run.get('proposal')} "
             f"({run.get('strategy') or '-'}, {run.get('mode') or '-'} mode), execution {run.get('id')}"]
    if move.origin == "driven":
        lines.append(f"   carried out by Pulsar: {move.source_id or 'no message id'}")
    lines.append(f"   execution: requested {iso(int(run.get('requested_ms', 0)))} {run.get('request', '')}; "
                 f"{run.get('answer', 'no answer recorded')}; {run.get('outcome', 'open')}")
    return lines


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
