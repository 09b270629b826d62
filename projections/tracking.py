"""Exactly-once, in-order admission of events per log key, and the anomalies it finds.

Invariants:
- ``admit`` returns True at most once per (key, seq) and never for a seq below one already
  admitted for that key: folding through it is idempotent under redelivery;
- a record beyond its key's reach (``events.bounds.beyond_reach``: a seq or epoch more than 2^40
  past the key's) is ``out_of_range``: refused, and it moves neither the key's seq nor its epoch,
  as the log's writers ignore it too, so the key goes on from its last record in reach;
- every refusal or irregularity becomes an ``Anomaly`` carrying the offset, key, seq, type and why;
- the tracker's state is plain data (``snapshot``/``restore``), stored with the view it guards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from events.bounds import beyond_reach
from events.catalog import Message


class EnvelopeLike(Protocol):
    """What a projection needs of an envelope (events.envelope.Envelope satisfies it)."""

    @property
    def type(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def ts_ms(self) -> int: ...
    @property
    def typed(self) -> Message:
        """The typed event (``DecodeError`` if the type is unknown or the payload does not fit)."""


@dataclass(frozen=True, slots=True)
class Anomaly:
    """Something the fold refused or noticed: ``kind`` is gap, duplicate, stale_epoch,
    out_of_range, invalid_transition, bad_event (a payload its schema allows but a fold cannot
    use), dead_letter, retained (a replay of a log whose first records retention dropped: the
    offset is the first one held), or, of who wrote it: forged (not signed by an identity of the
    log's root, in a signed log), unauthorized (its writer's role or key does not write it),
    unelected_epoch (held until an election) and unregistered_owner."""

    kind: str
    offset: int
    key: str
    seq: int | None
    event_type: str
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "offset": self.offset, "key": self.key, "seq": self.seq,
                "event_type": self.event_type, "detail": self.detail}


@dataclass
class SequenceTracker:
    """Per key, the last seq admitted and the highest epoch seen; the anomalies found so far.

    ``positions`` maps key -> ``[last seq, highest epoch]``: one lookup and two list reads is the
    whole check a fold's hot path makes (``next_in_order``), and it is mutated in place.
    """

    positions: dict[str, list[int]] = field(default_factory=dict)
    anomalies: list[Anomaly] = field(default_factory=list)
    kept: int = field(default=1_000, compare=False)
    """At most about this many anomalies are kept, the newest (memory stays bounded
    over a long run); ``dropped`` counts the older ones let go."""
    dropped: int = 0

    def admit(self, offset: int, envelope: EnvelopeLike) -> bool:
        key, seq, epoch = envelope.key, envelope.seq, envelope.epoch
        position = self.positions.get(key)
        last, highest = (0, epoch) if position is None else position
        far = beyond_reach(last, 0 if position is None else highest, seq, epoch)
        if far is not None:
            self.record(offset, envelope, "out_of_range", far)
            return False
        if seq <= last:
            self.record(offset, envelope, "duplicate", f"seq {seq} already applied (last {last})")
            return False
        if epoch < highest:
            # The seq is consumed: a fenced writer's event must not let a later replay apply it.
            position[0] = seq  # type: ignore[index]  # (a known key: highest came from it)
            self.record(offset, envelope, "stale_epoch", f"epoch {epoch} < {highest}")
            return False
        if seq > last + 1:
            self.record(offset, envelope, "gap", f"seq {last + 1}..{seq - 1} missing")
        if position is None:
            self.positions[key] = [seq, epoch]
        else:
            position[0], position[1] = seq, epoch
        return True

    def record(self, offset: int, envelope: EnvelopeLike, kind: str, detail: str) -> None:
        self.anomalies.append(
            Anomaly(kind, offset, envelope.key, envelope.seq, envelope.type, detail)
        )
        if len(self.anomalies) > self.kept + self.kept // 4:  # trimmed in batches: O(1) amortised
            excess = len(self.anomalies) - self.kept
            del self.anomalies[:excess]
            self.dropped += excess

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "last_seq": {key: position[0] for key, position in self.positions.items()},
            "max_epoch": {key: position[1] for key, position in self.positions.items()},
            "anomalies": [a.to_dict() for a in self.anomalies],
        }
        if self.dropped:  # the format stays as it was until anomalies were let go
            out["dropped"] = self.dropped
        return out

    @classmethod
    def restore(cls, data: Mapping[str, Any]) -> SequenceTracker:
        epochs = data["max_epoch"]
        return cls(
            positions={str(k): [int(v), int(epochs[k])] for k, v in data["last_seq"].items()},
            anomalies=[Anomaly(**a) for a in data["anomalies"]],
            dropped=int(data.get("dropped", 0)),
        )
