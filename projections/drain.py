"""Drains as the log tells them: which brokers are drained now, and what each received meanwhile.

Invariants:
- folded from records in log order, any history (a recorded run, a kept cluster, a Kafka log);
  nothing here trusts a leader's soft state;
- a broker is drained from its ``BrokerDrainRequested`` (its ``since_ms``, the leader's time) until
  the ``BrokerUndrained`` of that drain; a later request for a drained broker changes its rate
  and keeps it drained;
- a bundle *received* by a broker is an assignment to it (``BundleAssigned``, not the second half
  of a transfer, which its ``TransferPrepared`` already counted) or a transfer to it
  (``TransferPrepared``);
- whether its writer knew of the drain is proved from the log, not from clocks: the namespace
  shard that writes a reception stamps it with the newest ``_leader`` seq it had folded
  (``SEEN_LEADER_SEQ``), and drains live under ``_leader``, whose seqs every reader orders alike
  (on any partitioning); a reception whose writer had folded the drain's request and not its
  undrain breaks the drain;
- a reception decided while a drain held (its decision's ``started_ms``, else its record's time)
  by a writer that had not folded the drain yet *raced* it: no rule broken, the drain moves the
  bundle away, and ``raced`` lists it; a record with no such stamp (a log from before it) is
  judged by time alone, as a breach;
- ``violations`` lists, one line each, every breach, and names every record of these types that
  does not decode (never skipped in silence).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
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
SEEN_LEADER_SEQ = "seen_leader_seq"
"""The decision key in which a namespace shard stamps an assignment or a transfer with the newest
``_leader`` seq it had folded: whether it knew of a drain is read from it, not from clocks."""
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


def seen_leader_seq(event: BundleAssigned | TransferPrepared) -> int | None:
    """The newest ``_leader`` seq the writer had folded when it made ``event`` (None: not stamped)."""
    decision = event.decision if isinstance(event.decision, dict) else {}
    value = decision.get(SEEN_LEADER_SEQ)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class DrainWindow:
    """One drain of a broker: from its request to its undrain (None while it holds), in the
    leader's time and in the ``_leader`` key's seqs (the order every reader agrees on)."""

    since_ms: int
    since_seq: int
    end_ms: int | None = None
    end_seq: int | None = None

    def holds_at(self, at_ms: int) -> bool:
        return self.since_ms < at_ms and (self.end_ms is None or at_ms < self.end_ms)

    def known_at(self, seen: int) -> bool:
        """A writer that had folded ``_leader`` up to ``seen`` knew this drain held."""
        return self.since_seq <= seen and (self.end_seq is None or seen < self.end_seq)


@dataclass(frozen=True, slots=True)
class Received:
    broker: str
    bundle: str
    what: str
    at_ms: int
    seen: int | None

    def line(self, window: DrainWindow, note: str = "") -> str:
        return (f"{self.at_ms}: {self.broker} received {self.bundle} by {self.what} while drained "
                f"(since {window.since_ms}){note}")


@dataclass
class DrainHistory:
    windows: dict[str, list[DrainWindow]] = field(default_factory=dict)
    """Broker -> its drains in log order."""
    received: list[Received] = field(default_factory=list)
    """Every assignment and transfer, with when it was decided and what its writer had folded."""
    unreadable: list[str] = field(default_factory=list)

    def take(self, event: Message, ts_ms: int, seq: int = 0) -> None:
        """Fold one watched event; ``seq``: its record's seq (its key's order)."""
        if isinstance(event, BrokerDrainRequested):
            spans = self.windows.setdefault(event.broker, [])
            if not spans or spans[-1].end_ms is not None:
                spans.append(DrainWindow(event.since_ms, seq))
        elif isinstance(event, BrokerUndrained):
            spans = self.windows.get(event.broker, [])
            if spans and spans[-1].end_ms is None and spans[-1].since_ms == event.since_ms:
                spans[-1] = DrainWindow(event.since_ms, spans[-1].since_seq, event.at_ms, seq)
        elif isinstance(event, TransferPrepared):
            self.received.append(Received(event.dst, event.bundle, "transfer", decided_ms(event, ts_ms),
                                          seen_leader_seq(event)))
        elif isinstance(event, BundleAssigned) and event.reason != "transfer":
            self.received.append(Received(event.dst, event.bundle, f"assignment ({event.reason})",
                                          decided_ms(event, ts_ms), seen_leader_seq(event)))

    def drained_at(self, broker: str, at_ms: int) -> DrainWindow | None:
        for window in self.windows.get(broker, ()):
            if window.holds_at(at_ms):
                return window
        return None

    def _judged(self) -> Iterator[tuple[Received, DrainWindow, bool]]:
        """Each reception that landed inside a drain of its broker, and whether its writer knew."""
        for got in self.received:
            if got.seen is not None:
                known = next((w for w in self.windows.get(got.broker, ()) if w.known_at(got.seen)), None)
                if known is not None:
                    yield got, known, True
                    continue
            window = self.drained_at(got.broker, got.at_ms)
            if window is None:
                continue
            if got.seen is None:
                yield got, window, True  # unstamped: judged by time alone
            elif got.seen < window.since_seq:
                yield got, window, False  # decided before its writer folded the drain

    def violations(self) -> list[str]:
        """Every bundle a drained broker received from a writer that knew of the drain (or, for
        a record with no stamp of what its writer had folded, decided while the drain held)."""
        return [*self.unreadable, *(got.line(window) for got, window, knew in self._judged() if knew)]

    def raced(self) -> list[str]:
        """Receptions decided while a drain held by a writer that had not folded it yet: no rule
        broken (the drain then moves the bundle away), listed so an audit can show them."""
        return [got.line(window, f"; its writer had folded _leader to seq {got.seen} only")
                for got, window, knew in self._judged() if not knew]


def drain_history(records: Iterable[Record]) -> DrainHistory:
    """Fold ``records`` (log order) into the drains and every bundle each broker received."""
    history = DrainHistory()
    for event, envelope in watched_events(records, WATCHED, history.unreadable):
        history.take(event, envelope.ts_ms, envelope.seq)
    return history
