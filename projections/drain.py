"""Drains as the log tells them: which brokers are drained now, and what each received meanwhile.

Invariants:
- folded from records in log order, any history (a recorded run, a kept cluster, a Kafka log);
  nothing here trusts a leader's soft state;
- a broker is drained from its ``BrokerDrainRequested`` (its ``since_ms``, the leader's time) until
  the ``BrokerUndrained`` of that drain; a later request for a drained broker changes its rate
  and keeps it drained;
- a bundle *received* by a broker is an assignment to it (``BundleAssigned``, not the second half
  of a transfer, which its ``TransferPrepared`` already counted) or a transfer to it
  (``TransferPrepared``), at the time its decision was made (the decision's ``started_ms``
  where the leader stamped one, else the record's time): a move decided before the drain, or
  in the very millisecond it was recorded, and recorded after it is not the drain's breach;
- ``violations`` lists, one line each, every bundle a broker received while drained, and names
  every record of these types that does not decode (never skipped in silence).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from events.catalog import (
    BrokerDrainRequested,
    BrokerUndrained,
    BundleAssigned,
    Message,
    TransferPrepared,
)
from events.log.port import Record
from projections.watched import watched_events

DRAIN_STRATEGY = "Drain"
"""The ``strategy`` a drain move's decision carries (not shedding: no grace period, no throttle)."""
DRAIN_REASON = "drain"
"""The ``reason`` of a drain move's ``UnloadBundle`` and of the events it makes."""
WATCHED = frozenset({"BrokerDrainRequested", "BrokerUndrained", "BundleAssigned", "TransferPrepared"})


@dataclass(frozen=True, slots=True)
class Drain:
    broker: str
    since_ms: int
    rate_per_minute: int
    by: str
    bundles: int

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "sinceMs": self.since_ms, "ratePerMinute": self.rate_per_minute,
                "by": self.by, "bundles": self.bundles}


@dataclass
class DrainFold:
    """The drains the log holds: broker -> its drain (until its ``BrokerUndrained``)."""

    drains: dict[str, Drain] = field(default_factory=dict)

    def fold(self, event: Message) -> None:
        if isinstance(event, BrokerDrainRequested):
            before = self.drains.get(event.broker)
            since = before.since_ms if before is not None else event.since_ms
            self.drains[event.broker] = Drain(event.broker, since, int(event.rate_per_minute),
                                              event.by, event.bundles if before is None else before.bundles)
        elif isinstance(event, BrokerUndrained):
            drain = self.drains.get(event.broker)
            if drain is not None and drain.since_ms == event.since_ms:
                del self.drains[event.broker]


def decided_ms(event: BundleAssigned | TransferPrepared, ts_ms: int) -> int:
    decision = event.decision if isinstance(event.decision, dict) else {}
    value = decision.get("started_ms", ts_ms)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else ts_ms


@dataclass
class DrainHistory:
    windows: dict[str, list[tuple[int, int | None]]] = field(default_factory=dict)
    """Broker -> its drains, (since, end or None while it holds), in log order."""
    received: list[tuple[str, str, str, int]] = field(default_factory=list)
    """(broker, bundle, what, decided ms) of every assignment and transfer."""
    unreadable: list[str] = field(default_factory=list)

    def take(self, event: Message, ts_ms: int) -> None:
        if isinstance(event, BrokerDrainRequested):
            spans = self.windows.setdefault(event.broker, [])
            if not spans or spans[-1][1] is not None:
                spans.append((event.since_ms, None))
        elif isinstance(event, BrokerUndrained):
            spans = self.windows.get(event.broker, [])
            if spans and spans[-1][1] is None and spans[-1][0] == event.since_ms:
                spans[-1] = (event.since_ms, event.at_ms)
        elif isinstance(event, TransferPrepared):
            self.received.append((event.dst, event.bundle, "transfer", decided_ms(event, ts_ms)))
        elif isinstance(event, BundleAssigned) and event.reason != "transfer":
            self.received.append((event.dst, event.bundle, f"assignment ({event.reason})",
                                  decided_ms(event, ts_ms)))

    def drained_at(self, broker: str, at_ms: int) -> tuple[int, int | None] | None:
        for since, end in self.windows.get(broker, ()):
            if since < at_ms and (end is None or at_ms < end):
                return since, end
        return None

    def violations(self) -> list[str]:
        out = list(self.unreadable)
        for broker, bundle, what, at in self.received:
            window = self.drained_at(broker, at)
            if window is not None:
                out.append(f"{at}: {broker} received {bundle} by {what} while drained (since {window[0]})")
        return out


def drain_history(records: Iterable[Record]) -> DrainHistory:
    """Fold ``records`` (log order) into the drains and every bundle each broker received."""
    history = DrainHistory()
    for event, ts_ms in watched_events(records, WATCHED, history.unreadable):
        history.take(event, ts_ms)
    return history
