"""Exactly-once, in-order admission of events per log key, and the anomalies it finds.

Invariants:
- ``admit`` returns True at most once per (key, seq) and never for a seq below one already
  admitted for that key: folding through it is idempotent under redelivery;
- every refusal or irregularity becomes an ``Anomaly`` carrying the offset, key, seq, type and why;
- the tracker's state is plain data (``snapshot``/``restore``), stored with the view it guards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


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
    def payload(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Anomaly:
    """Something the fold refused or noticed: ``kind`` is gap, duplicate, stale_epoch,
    invalid_transition, bad_event or dead_letter."""

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
    """Last seq and highest epoch per key; the anomalies found so far."""

    last_seq: dict[str, int] = field(default_factory=dict)
    max_epoch: dict[str, int] = field(default_factory=dict)
    anomalies: list[Anomaly] = field(default_factory=list)

    def admit(self, offset: int, envelope: EnvelopeLike) -> bool:
        key = envelope.key
        seq = envelope.seq
        last = self.last_seq.get(key, 0)
        if seq <= last:
            self.record(offset, envelope, "duplicate", f"seq {seq} already applied (last {last})")
            return False
        epoch = envelope.epoch
        highest = self.max_epoch.get(key, epoch)
        if epoch < highest:
            self.record(offset, envelope, "stale_epoch", f"epoch {epoch} < {highest}")
            # The seq is consumed: a fenced writer's event must not let a later replay apply it.
            self.last_seq[key] = seq
            return False
        if seq > last + 1:
            self.record(offset, envelope, "gap", f"seq {last + 1}..{seq - 1} missing")
        self.last_seq[key] = seq
        self.max_epoch[key] = epoch
        return True

    def record(self, offset: int, envelope: EnvelopeLike, kind: str, detail: str) -> None:
        self.anomalies.append(
            Anomaly(kind, offset, envelope.key, envelope.seq, envelope.type, detail)
        )

    def snapshot(self) -> dict[str, Any]:
        return {
            "last_seq": dict(self.last_seq),
            "max_epoch": dict(self.max_epoch),
            "anomalies": [a.to_dict() for a in self.anomalies],
        }

    @classmethod
    def restore(cls, data: Mapping[str, Any]) -> SequenceTracker:
        return cls(
            last_seq={str(k): int(v) for k, v in data["last_seq"].items()},
            max_epoch={str(k): int(v) for k, v in data["max_epoch"].items()},
            anomalies=[Anomaly(**a) for a in data["anomalies"]],
        )
