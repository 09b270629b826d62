"""The leader's control state: the operator's pause, the throttle, what the last cycle did.

Invariants:
- the pause and the moves of the last hour are folded from the log (``BalancerPaused``,
  ``BalancerResumed``, the shedding moves' decisions), so a restarted leader knows them; the
  throttle's queue and its moves in flight, and the last cycle, are soft state of the leader
  that made them;
- a shedding move is in flight from the moment the leader starts it until the bundle's record
  shows another version at rest (owned or free), or the bundle is gone; a move whose command
  was lost on the way frees its slot after ``loadBalancerStalledMoveSeconds`` (a late command
  must not make two moves where the caps allow one);
- only shedding moves (``Decision.strategy`` other than the graceful shutdown's) count; admin
  unloads and drains are not throttled and are not paused.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.control import Caps, Move, Pause, Throttle, pause_duration_ms
from balancer.ownership import OwnershipRecord
from events.catalog import (
    BalancerPaused,
    BalancerResumed,
    Message,
    PauseBalancer,
    ResumeBalancer,
    SheddingSkipped,
    TransferPrepared,
    UnloadRequested,
)
from projections.control import is_shedding, run_ms, started_ms

HOUR_MS = 3_600_000


def caps_of(config: LoadBalancerConfig) -> Caps:
    return Caps(per_broker=config.load_balancer_max_moves_in_flight_per_broker,
                cluster=config.load_balancer_max_moves_in_flight,
                per_minute=config.load_balancer_max_moves_per_minute)


@dataclass
class LastCycle:
    at_ms: int | None = None
    outcome: str = ""
    moves: int = 0
    inputs: dict[str, Any] = field(default_factory=dict)
    """The strategy's own figures of that run (``ShedResult.inputs``: its averages, spread,
    thresholds); empty when the run is only known from the log."""

    def to_dict(self) -> dict[str, Any]:
        return {"atMs": self.at_ms, "outcome": self.outcome, "moves": self.moves, "inputs": self.inputs}


@dataclass
class ControlFold:
    """What the log says of the operator's hold: the newest pause and the recent moves."""

    pause: Pause | None = None
    resumed: dict[int, int] = field(default_factory=dict)
    hour: deque[int] = field(default_factory=deque)
    last: LastCycle = field(default_factory=lambda: LastCycle())
    """The last shedding cycle the log shows (a restarted leader's until it runs its own)."""
    seen_ms: int = 0
    """The newest record time folded: cluster time has reached at least this."""

    def fold(self, event: Message, ts_ms: int) -> None:
        self.seen_ms = max(self.seen_ms, ts_ms)
        if isinstance(event, SheddingSkipped):
            self.last = LastCycle(ts_ms, str(event.reason), 0)
        elif isinstance(event, UnloadRequested | TransferPrepared) and is_shedding(event):
            run = run_ms(event, ts_ms)
            moves = self.last.moves + 1 if self.last.at_ms == run and self.last.outcome == "moves" else 1
            self.last = LastCycle(run, "moves", moves)
        if isinstance(event, BalancerPaused):
            self.pause = Pause(event.since_ms, event.until_ms, event.reason, event.by)
        elif isinstance(event, BalancerResumed):
            self.resumed[event.since_ms] = event.at_ms
            if self.pause is not None and self.pause.since_ms == event.since_ms:
                self.pause = None
        elif isinstance(event, UnloadRequested | TransferPrepared) and is_shedding(event):
            self.hour.append(started_ms(event, ts_ms))
            while len(self.hour) > 10_000:  # a bound on memory: the status counts an hour
                self.hour.popleft()

    def paused(self, now_ms: int) -> Pause | None:
        return self.pause if self.pause is not None and self.pause.holds(now_ms) else None

    def moves_last_hour(self, now_ms: int) -> int:
        return sum(1 for t in self.hour if now_ms - HOUR_MS < t <= now_ms)


class Control:
    """The leader's hold on its own shedding: pause, throttle, the last cycle."""

    def __init__(self, config: LoadBalancerConfig) -> None:
        self.config = config
        self.throttle = Throttle(caps_of(config))
        self.last = LastCycle()
        self.now_ms = 0
        self.expired_sent: int | None = None
        """The pause whose expiry this leader recorded (sent once)."""
        """The leader's time at its last tick (what ``status`` is answered at)."""

    def settle(self, records: Mapping[str, OwnershipRecord], given_up: set[str]) -> None:
        """End the moves in flight that are done: another version at rest, gone, or given up."""
        for bundle, move in list(self.throttle.in_flight.items()):
            record = records.get(bundle)
            version = move.payload if isinstance(move.payload, int) else -1
            if record is None or bundle in given_up or (
                    record.version != version and not record.state.in_flight):
                self.throttle.finished(bundle)

    def queue(self, moves: list[Move]) -> list[str]:
        """The bundles of ``moves`` queued (not those queued or moving already)."""
        return [m.bundle for m in moves if self.throttle.offer(m)]

    def alive(self, bundles: list[str]) -> int:
        """How many of ``bundles`` are still queued or moving (the others were dropped)."""
        queued = {m.bundle for m in self.throttle.queue}
        return sum(1 for b in bundles if b in queued or b in self.throttle.in_flight)

    def status(self, folded: ControlFold) -> dict[str, Any]:
        now_ms = max(self.now_ms, folded.seen_ms)
        pause = folded.pause  # the reader judges it at the host's time (this one may be older)
        return {"paused": None if pause is None else pause.to_dict(),
                "throttle": self.throttle.to_dict(now_ms),
                "oldestMoveMs": self.throttle.oldest_in_flight_ms(now_ms),
                "lastCycle": (self.last if self.last.at_ms is not None else folded.last).to_dict(),
                "movesLastHour": folded.moves_last_hour(now_ms), "nowMs": now_ms,
                "maxPauseMs": self.config.load_balancer_max_pause_minutes * 60_000}


def hold_event(command: PauseBalancer | ResumeBalancer, held: ControlFold, config: LoadBalancerConfig,
               now_ms: int) -> BalancerPaused | BalancerResumed | None:
    """What a pause or a resume records at ``now_ms`` (None: a resume with no pause holding);
    a pause longer than ``loadBalancerMaxPauseMinutes`` is refused naming its length."""
    if isinstance(command, PauseBalancer):
        duration = pause_duration_ms(command.duration_ms, config.load_balancer_max_pause_minutes * 60_000)
        return BalancerPaused(since_ms=now_ms, until_ms=now_ms + duration, reason=command.reason,
                              by=command.by)
    pause = held.paused(now_ms)
    if pause is None:
        return None
    return BalancerResumed(since_ms=pause.since_ms, at_ms=now_ms, by=command.by)


def expiry_event(held: ControlFold, now_ms: int, sent: int | None) -> BalancerResumed | None:
    """The end of the newest pause once its time is up, unless the log shows it already or it
    was recorded by this writer (``sent``: the ``since_ms`` of the pause it ended last)."""
    pause = held.pause
    if pause is None or now_ms < pause.until_ms or sent == pause.since_ms:
        return None
    return BalancerResumed(since_ms=pause.since_ms, at_ms=pause.until_ms, by="expired")
