"""Draining a broker before a planned restart: which of its bundles move next, and how fast.

Invariants:
- pure: every answer depends on the arguments (``now_ms`` is the leader's cluster time), never
  on a clock; nothing here sends, appends or reads the log;
- a rate is a whole number of moves per minute from 1 to ``MAX_RATE`` (a finer one is rounded
  to the nearest whole); anything else (0, negative, NaN, infinite, under one a minute, over
  the bound) is refused naming it;
- a drain paced from ``anchor_ms`` has started at most ``allowance`` moves: one at once, then one
  more each ``60 / rate`` s; after a gap (a leader that was away) it never starts more than a
  second's worth (at least one) at once, so the rate is a bound and no burst follows an outage;
- the bundles of a drained broker move in a stable order (by id), each once while its move is
  under way (``busy``);
- a drain is refused for an unknown broker and for one whose drain would leave no registered
  broker to take bundles (the last one, or every one left): a cluster must keep a home for
  its bundles.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from balancer.errors import InvalidInput, MalformedInput, UnknownBroker

MINUTE_MS = 60_000
MAX_RATE = 1_000_000
"""The fastest drain accepted, in moves per minute (faster is no drain, it is a stampede)."""
PER = {"s": 60.0, "sec": 60.0, "min": 1.0, "m": 1.0, "h": 1 / 60, "hour": 1 / 60}


def check_rate(value: object, what: str = "--rate") -> int:
    """A drain's rate in whole moves per minute (see the module's invariants)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedInput(f"{what} {value!r}: expected a number of moves per minute", value=value)
    if not math.isfinite(value) or value <= 0:
        raise MalformedInput(f"{what} {value!r}: a drain's rate must be a positive, finite number "
                             "of moves per minute", value=value)
    if value < 1 or value > MAX_RATE:
        raise MalformedInput(f"{what} {value!r}: a drain's rate must be from 1 to {MAX_RATE} moves "
                             "per minute", value=value)
    return round(value)


def parse_rate(text: str, what: str = "--rate") -> int:
    """``120/min``, ``2/s``, ``600/h`` or a bare number (per minute) -> moves per minute."""
    raw = text.strip().lower()
    number, _, unit = raw.partition("/")
    factor = PER.get(unit or "min")
    try:
        value = float(number)
    except ValueError:
        value = math.nan if factor is None else -1.0
        factor = None
    if factor is None:
        raise MalformedInput(f"{what} {text!r}: expected a rate such as 120/min, 2/s or 600/h",
                             value=text)
    if not math.isfinite(value) or value <= 0:
        raise MalformedInput(f"{what} {text!r}: a drain's rate must be a positive, finite number "
                             "of moves per minute", value=text)
    per_minute = value * factor
    if per_minute < 1 or per_minute > MAX_RATE:
        raise MalformedInput(f"{what} {text!r}: a drain's rate must be from 1 to {MAX_RATE} moves "
                             "per minute", value=text)
    return check_rate(per_minute, what)


def allowance(rate_per_minute: int, anchor_ms: int, now_ms: int, started: int) -> int:
    """How many more moves the drain may start now (see the module's invariants)."""
    if now_ms < anchor_ms:
        return 0
    due = 1 + math.floor((now_ms - anchor_ms) * rate_per_minute / MINUTE_MS)
    burst = max(1, math.ceil(rate_per_minute / 60))
    return max(0, min(due - started, burst))


def next_bundles(owned: Iterable[str], busy: Collection[str], count: int) -> list[str]:
    """The next ``count`` bundles of the drained broker to move: by id, none already moving."""
    if count <= 0:
        return []
    return sorted(b for b in owned if b not in busy)[:count]


def check_drain(broker: str, registered: Collection[str], drained: Collection[str]) -> None:
    """Refuse a drain of an unknown broker, or one that would leave no broker to take bundles."""
    if broker not in registered:
        known = ", ".join(sorted(registered)) or "none"
        raise UnknownBroker(f"broker {broker!r} is not registered; brokers: {known}", value=broker)
    others = [b for b in registered if b != broker and b not in drained]
    if not others:
        raise InvalidInput(f"broker {broker!r} is the last broker not drained: draining it would "
                           "leave no broker to take its bundles", value=broker)


@dataclass(frozen=True, slots=True)
class Progress:
    """A drain's progress: bundles it started with, bundles still on the broker, its rate, and
    how many of those left stay whatever the drain asks (``kept``: why; e.g. ``pulsar/system``
    where drive mode drains a real Pulsar's broker, ``attach.drain``)."""

    total: int
    left: int
    rate_per_minute: int
    stays: int = 0
    kept: str = ""

    @property
    def finished(self) -> bool:
        """Nothing left that the drain can move."""
        return self.left <= self.stays

    @property
    def done(self) -> int:
        return max(0, self.total - self.left)

    def eta_s(self) -> float:
        """Seconds until the broker is empty at the drain's rate (0: empty)."""
        moving = max(0, self.left - self.stays)
        return moving * 60.0 / max(1, self.rate_per_minute) if moving else 0.0

    def bar(self, width: int = 30) -> str:
        """``[#####.....] 12 of 40 moved, 28 left, 120/min, ETA 14 s``."""
        share = 1.0 if self.total <= 0 else min(1.0, self.done / self.total)
        filled = round(share * width)
        stay = f" ({self.stays} stay: {self.kept})" if self.stays else ""
        return (f"[{'#' * filled}{'.' * (width - filled)}] {self.done} of {self.total} moved, "
                f"{self.left} left{stay}, {self.rate_per_minute:g}/min, ETA {math.ceil(self.eta_s())} s")
