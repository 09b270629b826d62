"""The operator's hold as the log proves it: pauses, and the shedding moves with their spans.

Invariants:
- folded from records in log order, any history (a recorded run, a kept cluster, a Kafka log);
  nothing here trusts the leader's soft state;
- a shedding move (``is_shedding``) starts at its decision's
  ``started_ms`` (``run_ms`` for a log from before the throttle) and ends at the record of its
  bundle that puts it at rest: ``BundleOwned``, or ``BundleReleased`` of an unload; one never
  seen to end is in flight at the end of the log;
- a move that drive mode sent to a real Pulsar (``ExecutionRequested`` of a transfer) starts at
  its request and ends at its terminal record (``ExecutionConfirmed``, ``ExecutionFailed``,
  ``ExecutionRefused``): the same rules hold for the moves of ``lbctl attach --mode drive``;
- a pause holds from its ``since_ms`` until the earliest of its ``until_ms``, its
  ``BalancerResumed`` and the next pause (which replaces it);
- ``violations`` lists, one line each, every shedding move that started while a pause held
  and, given caps, every moment a cap was exceeded (``balancer.control.caps_exceeded``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from balancer.control import Caps, MoveSpan, Pause, caps_exceeded
from events.catalog import (
    BalancerPaused,
    BalancerResumed,
    BundleOwned,
    BundleReleased,
    ExecutionConfirmed,
    ExecutionFailed,
    ExecutionRefused,
    ExecutionRequested,
    Message,
    TransferPrepared,
    UnloadRequested,
)
from events.log.port import Record
from projections.watched import watched_events

WATCHED = frozenset({"BalancerPaused", "BalancerResumed", "BundleOwned", "BundleReleased",
                     "TransferPrepared", "UnloadRequested", "ExecutionRequested", "ExecutionConfirmed",
                     "ExecutionFailed", "ExecutionRefused"})
EXECUTION_ENDS = (ExecutionConfirmed, ExecutionFailed, ExecutionRefused)


NOT_SHEDDING = ("admin", "shutdown", "GracefulShutdown", "drain", "Drain")


def is_shedding(event: UnloadRequested | TransferPrepared) -> bool:
    """A move the balancer chose by itself (not an operator's unload, not a drain)."""
    decision = event.decision if isinstance(event.decision, dict) else {}
    return (str(event.reason) not in NOT_SHEDDING and bool(decision.get("strategy"))
            and decision.get("strategy") not in NOT_SHEDDING)


def run_ms(event: UnloadRequested | TransferPrepared, ts_ms: int) -> int:
    """When the run that chose the move ran."""
    decision = event.decision if isinstance(event.decision, dict) else {}
    value = decision.get("run_ms", ts_ms)
    return int(value) if isinstance(value, int | float) else ts_ms


def started_ms(event: UnloadRequested | TransferPrepared, ts_ms: int) -> int:
    decision = event.decision if isinstance(event.decision, dict) else {}
    value = decision.get("started_ms", decision.get("run_ms", ts_ms))
    return int(value) if isinstance(value, int | float) else ts_ms


@dataclass
class ControlHistory:
    pauses: list[Pause] = field(default_factory=list)
    ends: dict[int, int] = field(default_factory=dict)
    """A pause's ``since_ms`` -> when it ended before its time (resumed or replaced)."""
    spans: list[MoveSpan] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    _open: dict[str, int] = field(default_factory=dict)
    """Bundle -> the index in ``spans`` of its shedding move not yet seen to end."""

    def window(self, pause: Pause) -> tuple[int, int]:
        return pause.since_ms, min(pause.until_ms, self.ends.get(pause.since_ms, pause.until_ms))

    def paused_at(self, at_ms: int) -> Pause | None:
        for pause in self.pauses:
            start, end = self.window(pause)
            if start <= at_ms < end:
                return pause
        return None

    def take(self, event: Message, ts_ms: int) -> None:
        """Fold one event (log order within a key; pauses and moves may come from any partition)."""
        if isinstance(event, BalancerPaused):
            if self.pauses:
                last = self.pauses[-1].since_ms
                self.ends[last] = min(self.ends.get(last, event.since_ms), event.since_ms)
            self.pauses.append(Pause(event.since_ms, event.until_ms, event.reason, event.by))
        elif isinstance(event, BalancerResumed):
            self.ends[event.since_ms] = min(self.ends.get(event.since_ms, event.at_ms), event.at_ms)
        elif isinstance(event, UnloadRequested | TransferPrepared):
            if is_shedding(event):
                dst = event.dst if isinstance(event, TransferPrepared) else None
                self._open[event.bundle] = len(self.spans)
                self.spans.append(MoveSpan(event.bundle, event.src, dst, started_ms(event, ts_ms), None))
        elif isinstance(event, ExecutionRequested):
            if event.dst is not None:  # a transfer; a split moves no load between brokers
                self._open[event.bundle] = len(self.spans)
                self.spans.append(MoveSpan(event.bundle, event.src, event.dst, ts_ms, None))
        elif isinstance(event, EXECUTION_ENDS):
            self._end(event.bundle, ts_ms)
        elif isinstance(event, BundleOwned | BundleReleased):
            index = self._open.get(event.bundle)
            if index is not None and (isinstance(event, BundleOwned) or self.spans[index].dst is None):
                self._end(event.bundle, ts_ms)

    def _end(self, bundle: str, ts_ms: int) -> None:
        index = self._open.pop(bundle, None)
        if index is not None:
            span = self.spans[index]
            self.spans[index] = MoveSpan(span.bundle, span.src, span.dst, span.start_ms, ts_ms)

    def paused_moves(self) -> list[tuple[MoveSpan, Pause, str]]:
        """Each shedding move that started while a pause held, with the pause and one line."""
        out: list[tuple[MoveSpan, Pause, str]] = []
        for span in self.spans:
            pause = self.paused_at(span.start_ms)
            if pause is not None:
                out.append((span, pause, f"{span.start_ms}: shedding move of {span.bundle} started "
                                         f"while paused (since {pause.since_ms}, by {pause.by}: {pause.reason})"))
        return out

    def violations(self, caps: Caps | None = None) -> list[str]:
        out = list(self.unreadable)
        out += [line for _, _, line in self.paused_moves()]
        if caps is not None:
            out += caps_exceeded(self.spans, caps)
        return out


def control_history(records: Iterable[Record]) -> ControlHistory:
    """Fold ``records`` (log order) into the pauses and the shedding moves' spans."""
    history = ControlHistory()
    for event, envelope in watched_events(records, WATCHED, history.unreadable):
        history.take(event, envelope.ts_ms)
    return history
