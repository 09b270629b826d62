"""The operator's hold on the balancer: a pause with an expiry and a throttle on moves.

Invariants:
- pure: every answer depends on the ``now_ms`` passed in (the leader's cluster time), never on a
  clock; nothing here sends, appends or reads the log;
- a pause holds from ``since_ms`` until ``until_ms`` or an earlier resume, whichever comes
  first; ``paused(now)`` is False from ``until_ms`` on, whether or not the resume is recorded yet;
- the throttle starts a queued move only while every cap holds once it has started: moves in
  flight touching its source or its destination below the per-broker cap, moves in flight in
  the cluster below the cluster cap, moves started in the 60 s before ``now`` below the
  per-minute cap; queued moves start in the order they were queued (one blocked by a busy
  broker lets later ones on other brokers pass, and keeps its place);
- a bundle is queued at most once, and never while a move of it is in flight;
- ``caps_exceeded`` is the same rule applied to a history of starts and ends: the audit uses
  it, so the leader and the audit cannot disagree about what a cap means.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.errors import MalformedInput

MINUTE_MS = 60_000


@dataclass(frozen=True, slots=True)
class Caps:
    """The throttle's caps (from broker.conf); each at least 1."""

    per_broker: int
    cluster: int
    per_minute: int

    def to_dict(self) -> dict[str, int]:
        return {"perBroker": self.per_broker, "cluster": self.cluster, "perMinute": self.per_minute}


@dataclass(frozen=True, slots=True)
class Pause:
    """A pause of shedding and splitting, as its ``BalancerPaused`` recorded it."""

    since_ms: int
    until_ms: int
    reason: str
    by: str

    def holds(self, now_ms: int) -> bool:
        return self.since_ms <= now_ms < self.until_ms

    def to_dict(self) -> dict[str, Any]:
        return {"sinceMs": self.since_ms, "untilMs": self.until_ms, "reason": self.reason, "by": self.by}


def pause_duration_ms(value: object, max_ms: int, what: str = "--for") -> int:
    """A pause's length in ms; 0, negative, NaN, infinite or longer than ``max_ms`` is refused
    naming the value (a pause with no end is what ``loadBalancerSheddingEnabled=false`` is for)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedInput(f"{what} {value!r}: expected a duration in ms", value=value)
    if not math.isfinite(value) or value <= 0:
        raise MalformedInput(f"{what} {value!r}: a pause must last a positive, finite time",
                             value=value)
    if value > max_ms:
        raise MalformedInput(f"{what} {_human(int(value))}: longer than the longest pause allowed, "
                             f"{_human(max_ms)} (loadBalancerMaxPauseMinutes)", value=value)
    return int(value)


UNITS_MS = {"ms": 1, "s": 1000, "m": MINUTE_MS, "h": 60 * MINUTE_MS, "d": 24 * 60 * MINUTE_MS}


def parse_duration(text: str, what: str = "--for") -> float:
    """``90s``, ``5m``, ``1h``, ``1.5h``, ``250ms`` (a bare number: seconds) -> ms; anything
    unreadable is refused naming it. The range is ``pause_duration_ms``'s to judge."""
    raw = text.strip().lower()
    unit = next((u for u in ("ms", "s", "m", "h", "d") if raw.endswith(u)), "")
    number = raw[: len(raw) - len(unit)] if unit else raw
    try:
        value = float(number)
    except ValueError:
        raise MalformedInput(f"{what} {text!r}: expected a duration such as 90s, 5m or 1h",
                             value=text) from None
    if not math.isfinite(value) or value <= 0:
        raise MalformedInput(f"{what} {text!r}: a pause must last a positive, finite time", value=text)
    return value * UNITS_MS[unit or "s"]


def _human(ms: int) -> str:
    for unit in ("d", "h", "m", "s"):
        size = UNITS_MS[unit]
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


@dataclass(frozen=True, slots=True)
class Move:
    """One move the leader wants: its bundle, source, destination (None: placement picks it when
    the move starts) and what to send then (``payload``: opaque to the throttle)."""

    bundle: str
    src: str
    dst: str | None
    queued_ms: int
    payload: Any = None

    def brokers(self) -> tuple[str, ...]:
        return (self.src,) if self.dst is None else (self.src, self.dst)


@dataclass
class Throttle:
    """Queued and in-flight moves against the caps; the leader's soft state."""

    caps: Caps
    queue: list[Move] = field(default_factory=list)
    in_flight: dict[str, Move] = field(default_factory=dict)
    started_at: dict[str, int] = field(default_factory=dict)
    recent: deque[int] = field(default_factory=deque)
    """Start times of the last minute, oldest first."""

    def offer(self, move: Move) -> bool:
        """Queue ``move`` unless its bundle is queued or moving already."""
        if move.bundle in self.in_flight or any(m.bundle == move.bundle for m in self.queue):
            return False
        self.queue.append(move)
        return True

    def due(self, now_ms: int) -> list[Move]:
        """The queued moves that may start now, in queue order (taken off the queue; the
        caller starts each with ``started`` or gives it up with ``dropped``)."""
        self._forget(now_ms)
        chosen: list[Move] = []
        busy = self.busy()
        flying, minute = len(self.in_flight), len(self.recent)
        for move in self.queue:
            if flying + len(chosen) >= self.caps.cluster or minute + len(chosen) >= self.caps.per_minute:
                break
            if all(busy.get(b, 0) < self.caps.per_broker for b in move.brokers()):
                chosen.append(move)
                for b in move.brokers():
                    busy[b] = busy.get(b, 0) + 1
        taken = {m.bundle for m in chosen}
        self.queue = [m for m in self.queue if m.bundle not in taken]
        return chosen

    def started(self, move: Move, dst: str | None, now_ms: int, payload: Any = None) -> None:
        """``move`` is on its way to ``dst``; ``payload`` replaces what it carried."""
        placed = Move(move.bundle, move.src, dst, move.queued_ms, payload)
        self.in_flight[move.bundle] = placed
        self.started_at[move.bundle] = now_ms
        self.recent.append(now_ms)

    def finished(self, bundle: str) -> None:
        self.in_flight.pop(bundle, None)
        self.started_at.pop(bundle, None)

    def full(self) -> tuple[str, ...]:
        """The brokers whose moves in flight reached the per-broker cap, sorted."""
        return tuple(sorted(b for b, n in self.busy().items() if n >= self.caps.per_broker))

    def busy(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for move in self.in_flight.values():
            for b in move.brokers():
                out[b] = out.get(b, 0) + 1
        return out

    def _forget(self, now_ms: int) -> None:
        while self.recent and self.recent[0] <= now_ms - MINUTE_MS:
            self.recent.popleft()

    def oldest_in_flight_ms(self, now_ms: int) -> int:
        """How long the longest move in flight has been moving (0: none)."""
        return max((now_ms - t for t in self.started_at.values()), default=0)

    def to_dict(self, now_ms: int) -> dict[str, Any]:
        self._forget(now_ms)
        return {"caps": self.caps.to_dict(), "inFlight": len(self.in_flight),
                "startedLastMinute": len(self.recent),
                "queue": [{"bundle": m.bundle, "src": m.src, "queuedMs": m.queued_ms} for m in self.queue],
                "moving": [{"bundle": m.bundle, "src": m.src, "dst": m.dst,
                            "startedMs": self.started_at.get(m.bundle)}
                           for m in sorted(self.in_flight.values(), key=lambda m: m.bundle)]}


@dataclass(frozen=True, slots=True)
class MoveSpan:
    """A move as the log shows it: started at ``start_ms``, done at ``end_ms`` (None: not yet)."""

    bundle: str
    src: str
    dst: str | None
    start_ms: int
    end_ms: int | None


def caps_exceeded(spans: Iterable[MoveSpan], caps: Caps) -> list[str]:
    """Each moment a start took a count over a cap, one line each (empty: never). A move that
    ended at or before another's start no longer counts at that start."""
    flying: dict[int, MoveSpan] = {}
    ends: list[tuple[int, int]] = []  # heap of (end, span number)
    starts: deque[int] = deque()
    found: list[str] = []
    ordered = sorted(enumerate(spans), key=lambda item: (item[1].start_ms, item[0]))
    for number, span in ordered:
        at = span.start_ms
        while ends and ends[0][0] <= at:
            flying.pop(heapq.heappop(ends)[1], None)
        while starts and starts[0] <= at - MINUTE_MS:
            starts.popleft()
        flying[number] = span
        starts.append(at)
        if span.end_ms is not None:
            heapq.heappush(ends, (span.end_ms, number))
        found += _over(at, span, list(flying.values()), len(starts), caps)
    return found


def _over(at: int, span: MoveSpan, flying: list[MoveSpan], minute: int, caps: Caps) -> list[str]:
    out: list[str] = []
    if len(flying) > caps.cluster:
        out.append(f"{at}: {span.bundle} made {len(flying)} moves in flight (cluster cap {caps.cluster})")
    if minute > caps.per_minute:
        out.append(f"{at}: {span.bundle} was start {minute} within a minute (cap {caps.per_minute})")
    for broker in (span.src,) if span.dst is None else (span.src, span.dst):
        count = sum(1 for s in flying if broker in (s.src, s.dst))
        if count > caps.per_broker:
            out.append(f"{at}: {span.bundle} made {count} moves in flight on {broker} "
                       f"(per-broker cap {caps.per_broker})")
    return out


def paused_at(pauses: Iterable[Pause], resumed: Mapping[int, int], at_ms: int) -> Pause | None:
    """The pause holding at ``at_ms``; ``resumed``: a pause's ``since_ms`` -> its early end."""
    for pause in pauses:
        end = min(pause.until_ms, resumed.get(pause.since_ms, pause.until_ms))
        if pause.since_ms <= at_ms < end:
            return pause
    return None
