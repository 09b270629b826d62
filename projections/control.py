"""The operator's hold as the log proves it: pauses, the shedding moves with their spans, and
the leader's own splits.

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
- a leader's own split (``is_leaders_split``) was sent no earlier than its proposal's run and
  approval (``ProposalRecorded.run_ms``, ``ProposalApproved.at_ms``) and no later than its
  ``SplitRequested``; it breaks a pause when both bounds fall inside the pause, since the leader's
  send time between them is not recorded (a split decided before a pause and requested after its
  start raced it, and one held through the pause is requested after its end); a split whose
  proposal is not in the log (its record lost while the log was down: auto mode sends the
  splits beside it, never behind it; or a log from before splits named their proposal) has no
  known decision and is not judged;
- ``violations`` lists, one line each, every shedding move that started and every leader's
  split sent while a pause held and, given caps, every moment a cap was exceeded
  (``balancer.control.caps_exceeded``; a split moves no load and is not throttled).
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
    ProposalApproved,
    ProposalRecorded,
    SplitRequested,
    TransferPrepared,
    UnloadRequested,
)
from events.log.port import Record
from projections.watched import watched_events

WATCHED = frozenset({"BalancerPaused", "BalancerResumed", "BundleOwned", "BundleReleased",
                     "TransferPrepared", "UnloadRequested", "ExecutionRequested", "ExecutionConfirmed",
                     "ExecutionFailed", "ExecutionRefused", "SplitRequested", "ProposalRecorded",
                     "ProposalApproved"})
EXECUTION_ENDS = (ExecutionConfirmed, ExecutionFailed, ExecutionRefused)


NOT_SHEDDING = ("admin", "shutdown", "GracefulShutdown", "drain", "Drain")
NOT_LEADERS_SPLITS = ("admin", "pulsar")
"""Reasons of splits the leader did not decide: an operator's, and one mirrored from Pulsar."""


def is_leaders_split(event: SplitRequested) -> bool:
    """A split the leader decided on its own (its split cycle, alone or through a proposal)."""
    return str(event.reason) not in NOT_LEADERS_SPLITS


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
    splits: list[tuple[str, str | None, int]] = field(default_factory=list)
    """The leader's own splits: (bundle, the proposal it names, when it was requested)."""
    proposed: dict[str, int] = field(default_factory=dict)
    """A proposal's id -> its run time, then its approval's time when later."""
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
        elif isinstance(event, SplitRequested):
            if is_leaders_split(event):
                self.splits.append((event.bundle, event.proposal, ts_ms))
        elif isinstance(event, ProposalRecorded | ProposalApproved):
            at = event.run_ms if isinstance(event, ProposalRecorded) else event.at_ms
            self.proposed[event.proposal_id] = max(at, self.proposed.get(event.proposal_id, at))
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
        """Each shedding move that started, and each leader's split sent, while a pause held,
        with the pause and one line (a split as a span from its earliest send to its request)."""
        out: list[tuple[MoveSpan, Pause, str]] = []
        for span in self.spans:
            pause = self.paused_at(span.start_ms)
            if pause is not None:
                out.append((span, pause, f"{span.start_ms}: shedding move of {span.bundle} started "
                                         f"while paused ({_named(pause)})"))
        for bundle, pid, requested_ms in self.splits:
            decided = self.proposed.get(pid) if pid is not None else None
            if decided is None:
                continue
            earliest = min(decided, requested_ms)
            pause = self.paused_at(earliest)
            if pause is not None and requested_ms < self.window(pause)[1]:
                out.append((MoveSpan(bundle, "", None, earliest, requested_ms), pause,
                            f"{requested_ms}: split of {bundle} sent while paused ({_named(pause)}; "
                            f"decided or approved at {earliest})"))
        return out

    def violations(self, caps: Caps | None = None) -> list[str]:
        out = list(self.unreadable)
        out += [line for _, _, line in self.paused_moves()]
        if caps is not None:
            out += caps_exceeded(self.spans, caps)
        return out


def _named(pause: Pause) -> str:
    return f"since {pause.since_ms}, by {pause.by}: {pause.reason}"


def control_history(records: Iterable[Record]) -> ControlHistory:
    """Fold ``records`` (log order) into the pauses and the shedding moves' spans."""
    history = ControlHistory()
    for event, envelope in watched_events(records, WATCHED, history.unreadable):
        history.take(event, envelope.ts_ms)
    return history
