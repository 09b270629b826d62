"""The operator's hold as the log proves it: pauses, and the shedding moves with their spans.

Invariants:
- folded from records in log order, any history (a recorded run, a kept cluster, a Kafka log);
  nothing here trusts the leader's soft state;
- a shedding move (``is_shedding``) starts at its decision's
  ``started_ms`` (``run_ms`` for a log from before the throttle) and ends at the record of its
  bundle that puts it at rest: ``BundleOwned``, or ``BundleReleased`` of an unload; one never
  seen to end is in flight at the end of the log;
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
    TransferPrepared,
    UnloadRequested,
)
from events.log.port import Record

WATCHED = frozenset({"BalancerPaused", "BalancerResumed", "BundleOwned", "BundleReleased",
                     "TransferPrepared", "UnloadRequested"})


NOT_SHEDDING = ("admin", "shutdown", "GracefulShutdown")


def is_shedding(event: UnloadRequested | TransferPrepared) -> bool:
    """A move the balancer chose by itself (not an operator's unload, not a drain)."""
    decision = event.decision if isinstance(event.decision, dict) else {}
    return (str(event.reason) not in NOT_SHEDDING and bool(decision.get("strategy"))
            and decision.get("strategy") not in NOT_SHEDDING)


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

    def window(self, pause: Pause) -> tuple[int, int]:
        return pause.since_ms, min(pause.until_ms, self.ends.get(pause.since_ms, pause.until_ms))

    def paused_at(self, at_ms: int) -> Pause | None:
        for pause in self.pauses:
            start, end = self.window(pause)
            if start <= at_ms < end:
                return pause
        return None

    def violations(self, caps: Caps | None = None) -> list[str]:
        out = list(self.unreadable)
        for span in self.spans:
            pause = self.paused_at(span.start_ms)
            if pause is not None:
                out.append(f"{span.start_ms}: shedding move of {span.bundle} started while paused "
                           f"(since {pause.since_ms}, by {pause.by}: {pause.reason})")
        if caps is not None:
            out += caps_exceeded(self.spans, caps)
        return out


def control_history(records: Iterable[Record]) -> ControlHistory:
    """Fold ``records`` (log order) into the pauses and the shedding moves' spans."""
    history = ControlHistory()
    open_moves: dict[str, tuple[int, MoveSpan]] = {}  # bundle -> (index in spans, span)
    for record in records:
        envelope = record.envelope
        if envelope.type not in WATCHED:
            continue
        try:
            event = envelope.typed
        except Exception as exc:  # a record that does not decode is named, never skipped
            history.unreadable.append(f"{record.partition}:{record.offset}: {envelope.type} unreadable ({exc})")
            continue
        if isinstance(event, BalancerPaused):
            if history.pauses:
                last = history.pauses[-1]
                history.ends[last.since_ms] = min(history.ends.get(last.since_ms, event.since_ms), event.since_ms)
            history.pauses.append(Pause(event.since_ms, event.until_ms, event.reason, event.by))
        elif isinstance(event, BalancerResumed):
            history.ends[event.since_ms] = min(history.ends.get(event.since_ms, event.at_ms), event.at_ms)
        elif isinstance(event, UnloadRequested | TransferPrepared):
            if is_shedding(event):
                dst = event.dst if isinstance(event, TransferPrepared) else None
                span = MoveSpan(event.bundle, event.src, dst, started_ms(event, envelope.ts_ms), None)
                open_moves[event.bundle] = (len(history.spans), span)
                history.spans.append(span)
        elif isinstance(event, BundleOwned | BundleReleased):
            found = open_moves.get(event.bundle)
            if found is not None and (isinstance(event, BundleOwned) or found[1].dst is None):
                index, span = open_moves.pop(event.bundle)
                history.spans[index] = MoveSpan(span.bundle, span.src, span.dst, span.start_ms,
                                                envelope.ts_ms)
    return history
