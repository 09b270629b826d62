"""The log folded into moves: the one rule for what one move of a bundle is.

Every reader of moves (the run summary, the dashboard's list and tally, ``/metrics`` and
``explain``) takes its moves from ``MovesFold``, so they count the same moves on the same log.

A move is one of these ``KINDS``:
- ``assign``: an unowned bundle placed on a broker (``BundleAssigned`` without a source, not
  forced): a lookup's placement, or an admin's / an orphan sweep's assignment;
- ``transfer``: a bundle moved to a named destination (``TransferPrepared``, or an
  ``UnloadRequested`` whose decision names the destination). An ``UnloadRequested`` followed by
  a ``TransferPrepared`` of the same bundle from the same broker, before the unload ended
  (released, assigned or owned), is one move, told twice: the transfer replaces the unload;
- ``unload``: a bundle released with no destination (``UnloadRequested``); the children a split
  unloads are unloads with reason ``split`` (``Move.sheds`` is False for them: Pulsar's unload
  counter counts them as the split's);
- ``split``: ``SplitRequested`` of the parent; its ``SplitCompleted`` fills in the children; an
  admin's split has ``requested_by`` (the event's ``by``) as its decision, as an admin's unload;
- ``takeover``: a forced ``BundleAssigned`` (an expired owner's bundle, or an admin's forced
  assignment).
The second half of a transfer (``BundleAssigned`` with a source, not forced) is no move.

On a mirrored Pulsar cluster a move with reason ``pulsar`` is Pulsar's; it is ``driven`` when it
carried out an execution of this project's proposal (the oldest ``ExecutionRequested`` of the
bundle, not a split, not yet matched), and then takes that execution's decision; otherwise its
origin is ``pulsar``. An execution no move followed stays in ``unmatched``.

Invariants: pure (no clock, no I/O); ``take`` folds one record, in the order given, and returns
the change it made (a new move, or a move replaced: a transfer told twice, a split completed);
a record whose typed event cannot be built raises ``DecodeError`` to the caller, which names it;
what is kept between records is bounded (``MAX_OPEN`` open moves and executions, oldest dropped).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from events.catalog import (
    BundleAssigned,
    BundleOwned,
    BundleReleased,
    ExecutionAccepted,
    ExecutionConfirmed,
    ExecutionFailed,
    ExecutionRefused,
    ExecutionRequested,
    ExecutionUnanswered,
    LeaderElected,
    ProposalRecorded,
    SplitCompleted,
    SplitRequested,
    TransferPrepared,
    UnloadRequested,
)
from events.decisions import DecisionRecord
from events.log.port import Record

KINDS = ("assign", "transfer", "unload", "split", "takeover")
REQUESTED_BY = "requested_by"
"""The decision key naming the principal of an admin move (an admin's split: from its ``by``)."""
PULSAR_REASON = "pulsar"
NO_LEADER = "none"
MAX_OPEN = 10_000
_OUTCOMES = (ExecutionAccepted, ExecutionUnanswered, ExecutionRefused, ExecutionConfirmed, ExecutionFailed)
_ENDS = (BundleReleased, BundleOwned)
MOVE_TYPES = frozenset(cls.TYPE for cls in (
    BundleAssigned, BundleOwned, BundleReleased, UnloadRequested, TransferPrepared, SplitRequested,
    SplitCompleted, LeaderElected, ProposalRecorded, ExecutionRequested, *_OUTCOMES))
"""The types the fold reads: every other record is passed over without being typed."""


@dataclass(frozen=True)
class Move:
    """One move of a bundle: who, where, why (its decision) and where the record is."""

    kind: str
    bundle: str
    src: str | None
    dst: str | None
    reason: str
    """As logged: ``lookup``/``orphan``/``admin`` (assignments), the strategy's reason, ``split``
    (a split's children), ``pulsar`` (mirrored)..."""
    ts_ms: int
    epoch: int
    partition: int = 0
    offset: int = 0
    event: str = ""
    """The type of the record that started the move."""
    decision: Mapping[str, Any] = field(default_factory=dict)
    """The stored decision: label, reason, strategy, inputs, a placement's candidates and scores."""
    leader: str = NO_LEADER
    """The leader elected when the move was logged (what ``/metrics`` attributes it to)."""
    origin: str = ""
    """``pulsar``: Pulsar made it itself; ``driven``: Pulsar carried out this project's execution;
    ``execution``: an execution no move followed; empty: the project's own cluster moved it."""
    source_id: str | None = None
    """A mirrored record's causation id (Pulsar's message id)."""
    execution: Mapping[str, Any] = field(default_factory=dict)
    """The execution behind a driven move: id, proposal, strategy, mode, answer, outcome."""
    children: tuple[str, ...] = ()
    """A completed split's children."""

    @property
    def decided(self) -> DecisionRecord:
        return DecisionRecord.from_payload(self.decision)

    @property
    def label(self) -> str:
        return self.decided.label or ""

    @property
    def why(self) -> str:
        """The decision's reason when it has one (``Overloaded``...), else the logged reason."""
        return self.decided.reason or self.reason

    @property
    def sheds(self) -> bool:
        """A bundle taken from its owner by a decision: a transfer or an unload, not a split's
        children (counted as the split)."""
        return self.kind in ("transfer", "unload") and self.reason != "split"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "bundle": self.bundle, "src": self.src, "dst": self.dst,
                "reason": self.reason, "ts_ms": self.ts_ms, "epoch": self.epoch,
                "partition": self.partition, "offset": self.offset, "event": self.event,
                "decision": dict(self.decision), "leader": self.leader, "origin": self.origin,
                "source_id": self.source_id, "execution": dict(self.execution),
                "children": list(self.children), "label": self.label, "why": self.why}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Move:
        """The move ``to_dict`` gave (what ``/bb/v1/explain`` sends)."""
        names = set(cls.__dataclass_fields__)
        values = {k: v for k, v in data.items() if k in names}
        values["children"] = tuple(values.get("children") or ())
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Change:
    """What one record did: ``move`` is new, or replaces ``previous`` (the same move, told again)."""

    move: Move
    previous: Move | None = None


class MovesFold:
    """Folds records into moves, one at a time (see the module docstring for the rule)."""

    def __init__(self) -> None:
        self.leader, self.epoch = NO_LEADER, 0
        self._unloads: dict[str, Move] = {}  # bundle -> its unload, until it ends
        self._splits: dict[str, Move] = {}  # parent -> its split, until completed
        self._proposals: dict[str, tuple[str, str]] = {}  # id -> (strategy, mode)
        self._executions: dict[str, dict[str, Any]] = {}  # id -> what explain shows
        self._waiting: dict[str, list[dict[str, Any]]] = {}  # bundle -> unmatched executions

    def take(self, record: Record) -> Change | None:
        """Fold one record; the move it made or replaced, if any. ``DecodeError`` propagates."""
        env = record.envelope
        if env.type not in MOVE_TYPES:
            return None
        event = env.typed
        if isinstance(event, LeaderElected):
            if event.epoch >= self.epoch:
                self.leader, self.epoch = event.leader_id, event.epoch
            return None
        if isinstance(event, (ProposalRecorded, ExecutionRequested, *_OUTCOMES)):
            self._execution(record, event)
            return None
        if isinstance(event, _ENDS):
            self._unloads.pop(event.bundle, None)
            return None
        if isinstance(event, SplitCompleted):
            split = self._splits.pop(event.parent, None)
            if split is None:
                return None
            return Change(replace(split, children=tuple(event.children)), split)
        return self._moved(record, event)

    def unmatched(self, bundle: str | None = None) -> list[Move]:
        """Executions no move followed (refused, timed out, open; and every split), as moves."""
        waiting = self._waiting.values() if bundle is None else [self._waiting.get(bundle, [])]
        return [_unmatched(e) for found in waiting for e in found]

    # -- moves -------------------------------------------------------------------------------
    def _moved(self, record: Record, event: Any) -> Change | None:
        if isinstance(event, BundleAssigned):
            self._unloads.pop(event.bundle, None)
            if event.src and not event.force:
                return None  # a transfer's destination taking over: the transfer is the move
            kind = "takeover" if event.force else "assign"
            return Change(self._move(record, kind, event.bundle, event.src, event.dst, event.reason,
                                     dict(event.decision or {})))
        if isinstance(event, SplitRequested):
            # An admin's split names who asked, as an admin's unload does in its decision.
            asked = {REQUESTED_BY: event.by} if event.by else {}
            move = self._move(record, "split", event.bundle, event.src, None, event.reason, asked)
            _bounded(self._splits)[event.bundle] = move
            return Change(move)
        decision = dict(event.decision or {})
        dst = (event.dst if isinstance(event, TransferPrepared) else None) or event.decided().destination
        told = self._unloads.pop(event.bundle, None)
        if isinstance(event, TransferPrepared) and told is not None and told.src == event.src:
            # UnloadRequested then TransferPrepared: the same move, told twice.
            return Change(replace(told, kind="transfer", dst=dst, decision=told.decision or decision), told)
        move = self._move(record, "transfer" if dst else "unload", event.bundle, event.src, dst,
                          str(event.reason), decision)
        if event.reason == PULSAR_REASON:
            move = self._provenance(move)
        if isinstance(event, UnloadRequested):
            _bounded(self._unloads)[event.bundle] = move
        return Change(move)

    def _move(self, record: Record, kind: str, bundle: str, src: str | None, dst: str | None,
              reason: str, decision: dict[str, Any]) -> Move:
        env = record.envelope
        return Move(kind, bundle, src, dst, reason or "", env.ts_ms, env.epoch, record.partition,
                    record.offset, env.type, decision, self.leader, source_id=env.causation_id)

    # -- executions on a mirrored cluster ------------------------------------------------------
    def _execution(self, record: Record, event: Any) -> None:
        if isinstance(event, ProposalRecorded):
            _bounded(self._proposals)[event.proposal_id] = (event.strategy, event.mode)
        elif isinstance(event, ExecutionRequested):
            strategy, mode = self._proposals.get(event.proposal_id, ("", ""))
            execution: dict[str, Any] = {
                "id": event.execution_id, "proposal": event.proposal_id, "kind": event.kind,
                "strategy": strategy, "mode": mode, "bundle": event.bundle, "src": event.src,
                "dst": event.dst, "requested_ms": record.envelope.ts_ms, "decision": dict(event.decision),
                "request": event.request, "at": (record.partition, record.offset)}
            _bounded(self._executions)[event.execution_id] = execution
            _bounded(self._waiting).setdefault(event.bundle, []).append(execution)
        else:
            found = self._executions.get(event.execution_id)
            if found is not None:
                _outcome(found, event)

    def _provenance(self, move: Move) -> Move:
        """A move Pulsar made: driven when an execution of the bundle was requested before it."""
        waiting = self._waiting.get(move.bundle, [])
        for execution in waiting:
            if execution["kind"] != "split" and execution["requested_ms"] <= move.ts_ms:
                waiting.remove(execution)
                return replace(move, decision=execution["decision"], origin="driven",
                               execution=_shown(execution))
        return replace(move, origin=PULSAR_REASON)


def _outcome(execution: dict[str, Any], event: Any) -> None:
    if isinstance(event, ExecutionAccepted):
        execution["answer"] = f"accepted {event.status}"
    elif isinstance(event, ExecutionUnanswered):
        execution["answer"] = f"no answer ({event.error})"
    elif isinstance(event, ExecutionRefused):
        execution["answer"] = f"refused {event.status} {event.message}".rstrip()
        execution["outcome"] = "refused"
    elif isinstance(event, ExecutionConfirmed):
        execution["outcome"] = f"confirmed: Owned at {event.owner} after {event.waited_ms} ms ({event.evidence})"
    elif isinstance(event, ExecutionFailed):
        execution["outcome"] = f"{event.reason}: {event.detail}"


class _Shown(Mapping[str, Any]):
    """An execution as a move shows it: a live view of the fold's entry, so an outcome logged
    after the move (the confirmation comes last) is still shown."""

    def __init__(self, execution: dict[str, Any]) -> None:
        self._of = execution

    def _fresh(self) -> dict[str, Any]:
        return {k: v for k, v in self._of.items() if k not in ("decision", "at")}

    def __getitem__(self, key: str) -> Any:
        return self._fresh()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fresh())

    def __len__(self) -> int:
        return len(self._fresh())

    def __repr__(self) -> str:
        return repr(self._fresh())


def _shown(execution: dict[str, Any]) -> Mapping[str, Any]:
    return _Shown(execution)


def _unmatched(execution: dict[str, Any]) -> Move:
    partition, offset = execution["at"]
    return Move("split" if execution["kind"] == "split" else "transfer" if execution["dst"] else "unload",
                execution["bundle"], execution["src"], execution["dst"], execution.get("outcome", "open"),
                execution["requested_ms"], 0, partition, offset, "ExecutionRequested",
                execution["decision"], origin="execution", execution=_shown(execution))


def _bounded(table: dict[str, Any]) -> dict[str, Any]:
    """``table``, with its oldest entry dropped when it is full (its end was never logged)."""
    if len(table) >= MAX_OPEN:
        del table[next(iter(table))]
    return table
