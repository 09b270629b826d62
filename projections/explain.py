"""Why did this bundle move? Every move of one bundle in the log, with the decision behind it.

A move is an ``UnloadRequested`` or ``TransferPrepared`` event of the bundle; the leader stores
the shedding decision (label, reason, strategy, the inputs and scores) in its ``decision``
payload. Invariants: moves come in log order (partition, offset); a transfer logged as both
``UnloadRequested`` and ``TransferPrepared`` with the same decision is one move; a move without
a decision (an admin unload from an older writer) is listed with empty inputs, never dropped; one
whose decision no fold can use (``events.usable``) is left out here and named by the ownership
view (``bad_event``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.errors import DecodeError
from events.catalog import TransferPrepared, UnloadRequested
from events.log.port import Record
from events.times import iso

MOVE_EVENTS = (UnloadRequested, TransferPrepared)
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

    def to_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "offset": self.offset, "ts_ms": self.ts_ms,
                "event": self.event, "epoch": self.epoch, "src": self.src, "dst": self.dst,
                "reason": self.reason, "decision": dict(self.decision)}


def moves_of(bundle: str, records: Iterable[Record]) -> list[MoveRecord]:
    """The bundle's moves in log order, one per decision."""
    found: list[MoveRecord] = []
    for record in sorted(records, key=lambda r: (r.envelope.ts_ms, r.partition, r.offset)):
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
                          event.src, dst, str(event.reason), decision)
        previous = found[-1] if found else None
        # UnloadRequested then TransferPrepared for one decision: the same move, told twice.
        if previous is not None and previous.decision == move.decision and move.decision \
                and (previous.src, previous.dst) == (move.src, move.dst):
            continue
        found.append(move)
    return found


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
        if decision:
            lines.append(f"   decision: {decision.get('strategy') or '-'} {decision.get('label', '')} "
                         f"{decision.get('reason', '')} {decision.get('kind', '')}".rstrip())
            for key, value in sorted((decision.get("inputs") or {}).items()):
                lines.append(f"   {key} = {_fmt(value)}")
            if "placement" in decision:
                lines.append(f"   placement = {decision['placement']}")
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
