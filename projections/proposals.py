"""Proposals as recorded: the one proposal type, and the book of their statuses folded from the log.

Invariants:
- a proposal is immutable and self-explaining (``balancer.proposals.ProposedMove`` per move);
  it carries the load each broker showed the cycle and what the cycle had folded (``folded``);
  ``to_event`` and ``from_event`` round-trip (``ProposalRecorded``);
- the book is folded from records in log order, any history: ``ProposalRecorded`` of the
  leader's modes (``auto``: approved by ``auto`` at once; ``review``: pending), then
  ``ProposalApproved``, ``ProposalRejected``, ``ProposalCancelled`` and ``ProposalStale``; a
  status moves only forward (a verdict on a proposal in another status is ignored, as the
  leader refused it); an approved proposal all of whose moves started reads ``executed``;
- a shedding move names its proposal in its decision (``proposal``), a move drive mode sent to
  a real Pulsar in its ``ExecutionRequested``, a leader's split in its ``SplitRequested`` (v3);
  the book notes which of a proposal's bundles started, so ``executed`` and the audit need no
  other state;
- the book keeps the newest ``KEPT`` proposals (older ones are let go, oldest first).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.errors import UnknownProposal
from balancer.proposals import (
    APPROVED,
    AUTO,
    CANCELLED,
    EXECUTED,
    PENDING,
    REJECTED,
    REVIEW,
    STALE,
    ProposedMove,
)
from events.catalog import (
    ExecutionRequested,
    Message,
    ProposalApproved,
    ProposalCancelled,
    ProposalRecorded,
    ProposalRejected,
    ProposalStale,
    SplitRequested,
    TransferPrepared,
    UnloadRequested,
)
from events.log.port import Record
from projections.control import is_leaders_split, is_shedding, started_ms
from projections.watched import watched_events

KEPT = 10_000
WATCHED = frozenset({"ProposalRecorded", "ProposalApproved", "ProposalRejected", "ProposalCancelled",
                     "ProposalStale", "TransferPrepared", "UnloadRequested", "ExecutionRequested",
                     "SplitRequested"})


@dataclass(frozen=True)
class Proposal:
    """One cycle's proposal; ``moves`` may be empty (then ``skip`` says why)."""

    proposal_id: str
    strategy: str
    mode: str
    run_ms: int
    moves: tuple[ProposedMove, ...] = ()
    skip: str | None = None
    folded: Mapping[str, int] = field(default_factory=dict)
    brokers: Mapping[str, Any] = field(default_factory=dict)
    predicted: Mapping[str, Any] | None = None

    def to_event(self) -> ProposalRecorded:
        return ProposalRecorded(
            proposal_id=self.proposal_id, strategy=self.strategy, mode=self.mode, run_ms=self.run_ms,
            moves=[m.to_dict() for m in self.moves], skip=self.skip, folded=dict(self.folded),
            brokers={b: dict(v) for b, v in self.brokers.items()},
            predicted=None if self.predicted is None else dict(self.predicted))

    @classmethod
    def from_event(cls, event: ProposalRecorded) -> Proposal:
        return cls(str(event.proposal_id), str(event.strategy), str(event.mode), int(event.run_ms),
                   tuple(ProposedMove.from_dict(m) for m in event.moves or ()), event.skip,
                   dict(event.folded or {}), dict(event.brokers or {}),
                   None if event.predicted is None else dict(event.predicted))


@dataclass
class Entry:
    """A proposal and what became of it."""

    proposal: Proposal
    recorded_ms: int
    status: str
    by: str | None = None
    """Who approved, rejected or cancelled it (``auto`` for the auto mode)."""
    at_ms: int | None = None
    reason: str | None = None
    """Why it went stale (or the verdict's note)."""
    started: set[str] = field(default_factory=set)
    cancelled: list[str] = field(default_factory=list)
    approved_by: str | None = None
    """Who approved it (``auto`` in auto mode), kept when a later cancel or staleness sets ``by``."""
    approved_ms: int | None = None

    @property
    def state(self) -> str:
        """The status, ``executed`` once every move of an approved proposal started (a split:
        its ``SplitRequested`` names the proposal)."""
        moves = self.proposal.moves
        if self.status == APPROVED and moves and all(m.bundle in self.started for m in moves):
            return EXECUTED
        return self.status

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.proposal.proposal_id, "status": self.state, "mode": self.proposal.mode,
                "strategy": self.proposal.strategy, "runMs": self.proposal.run_ms,
                "recordedMs": self.recorded_ms, "by": self.by, "atMs": self.at_ms, "reason": self.reason,
                "moves": [m.to_dict() for m in self.proposal.moves],
                "started": sorted(self.started), "cancelled": list(self.cancelled),
                "approvedBy": self.approved_by, "approvedMs": self.approved_ms,
                "predicted": None if self.proposal.predicted is None else dict(self.proposal.predicted)}


@dataclass
class ProposalBook:
    """The leader's proposals (modes ``auto`` and ``review``) and their statuses."""

    entries: dict[str, Entry] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    """Records of a watched type that did not decode, named by position."""
    approved: list[str] = field(default_factory=list)
    """The ids of review proposals in the order they were approved (the leader queues their
    moves from it, a restarted one from the start)."""

    def fold(self, event: Message, ts_ms: int) -> None:
        if isinstance(event, ProposalRecorded):
            if event.mode in (AUTO, REVIEW) and event.proposal_id not in self.entries:
                auto = event.mode == AUTO
                self.entries[event.proposal_id] = Entry(
                    Proposal.from_event(event), ts_ms, APPROVED if auto else PENDING,
                    by=AUTO if auto else None, at_ms=ts_ms if auto else None,
                    approved_by=AUTO if auto else None, approved_ms=ts_ms if auto else None)
                while len(self.entries) > KEPT:
                    del self.entries[next(iter(self.entries))]
        elif isinstance(event, ProposalApproved | ProposalRejected | ProposalCancelled | ProposalStale):
            self._verdict(event, ts_ms)
        elif isinstance(event, UnloadRequested | TransferPrepared | ExecutionRequested | SplitRequested):
            entry = self.entries.get(_proposal_named(event) or "")
            if entry is not None:
                entry.started.add(event.bundle)

    def _verdict(self, event: ProposalApproved | ProposalRejected | ProposalCancelled | ProposalStale,
                 ts_ms: int) -> None:
        entry = self.entries.get(event.proposal_id)
        if entry is None:
            return
        if isinstance(event, ProposalApproved) and entry.status == PENDING:
            entry.status, entry.by, entry.at_ms = APPROVED, event.by, event.at_ms
            entry.approved_by, entry.approved_ms = event.by, event.at_ms
            self.approved.append(event.proposal_id)
            del self.approved[:-KEPT]
        elif isinstance(event, ProposalRejected) and entry.status == PENDING:
            entry.status, entry.by, entry.at_ms, entry.reason = REJECTED, event.by, event.at_ms, event.note
        elif isinstance(event, ProposalCancelled) and entry.status in (PENDING, APPROVED):
            entry.status, entry.by, entry.at_ms = CANCELLED, event.by, event.at_ms
            entry.cancelled = list(event.bundles)
        elif isinstance(event, ProposalStale) and entry.status in (PENDING, APPROVED):
            entry.status, entry.at_ms, entry.reason = STALE, event.at_ms, event.reason

    def entry(self, proposal_id: str) -> Entry:
        """The proposal ``proposal_id``; an unknown one is named (``UnknownProposal``)."""
        found = self.entries.get(proposal_id)
        if found is None:
            known = ", ".join(list(self.entries)[-5:]) or "none yet"
            raise UnknownProposal(f"proposal {proposal_id!r} does not exist (the newest: {known})",
                                  value=proposal_id)
        return found

    def status_of(self, proposal_id: str) -> str | None:
        entry = self.entries.get(proposal_id)
        return None if entry is None else entry.state

    def pending(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.status == PENDING]

    def listing(self) -> list[dict[str, Any]]:
        """Every kept proposal, oldest first, without its moves' details."""
        return [{k: v for k, v in e.to_dict().items() if k not in ("moves", "predicted")}
                | {"moves": len(e.proposal.moves)} for e in self.entries.values()]


def _proposal_named(event: UnloadRequested | TransferPrepared | ExecutionRequested | SplitRequested) -> str | None:
    """The proposal a move names: its decision's ``proposal`` (a drive execution's and a
    split's own field)."""
    if isinstance(event, ExecutionRequested) and event.proposal_id:
        return str(event.proposal_id)
    if isinstance(event, SplitRequested):
        return event.proposal
    decision = event.decision if isinstance(event.decision, dict) else {}
    named = decision.get("proposal")
    return None if named is None else str(named)


def proposal_book(records: Iterable[Record]) -> ProposalBook:
    """Fold ``records`` (log order) into the book; a record that does not decode is named."""
    book = ProposalBook()
    for event, envelope in watched_events(records, WATCHED, book.unreadable):
        book.fold(event, envelope.ts_ms)
    return book


@dataclass
class ApprovalHistory:
    """The audit's rule over a recorded history: in review mode no shedding move and no split of
    the leader's own starts without an approved proposal that was neither stale, rejected nor
    cancelled when it started (an operator's split, reason ``admin``, is the operator's own act;
    a split a real Pulsar made, reason ``pulsar``, is Pulsar's).

    A move names its proposal in its decision (``proposal``); a move of a ``review`` proposal is
    judged whatever the configuration says, and with ``review`` (the configuration's mode) a
    shedding move that names no proposal is one too. Records may come in any partition order:
    everything is collected first, then judged by the leader's times."""

    review: bool = False
    modes: dict[str, str] = field(default_factory=dict)
    approved: dict[str, tuple[int, str]] = field(default_factory=dict)
    closed: dict[str, tuple[int, str]] = field(default_factory=dict)
    moves: list[tuple[str, str | None, int, str]] = field(default_factory=list)
    """(bundle, the proposal it names, when it started, what it is)."""

    def take(self, event: Message, ts_ms: int) -> None:
        if isinstance(event, ProposalRecorded):
            self.modes.setdefault(event.proposal_id, event.mode)
        elif isinstance(event, ProposalApproved):
            self.approved.setdefault(event.proposal_id, (event.at_ms, event.by))
        elif isinstance(event, ProposalRejected | ProposalCancelled | ProposalStale):
            status = {ProposalRejected: REJECTED, ProposalCancelled: CANCELLED}.get(type(event), STALE)
            self.closed.setdefault(event.proposal_id, (event.at_ms, status))
        elif isinstance(event, UnloadRequested | TransferPrepared) and is_shedding(event):
            self.moves.append((event.bundle, _proposal_named(event), started_ms(event, ts_ms), "shedding move"))
        elif isinstance(event, ExecutionRequested):  # a move drive mode sent to a real Pulsar
            self.moves.append((event.bundle, _proposal_named(event), ts_ms, "shedding move"))
        elif isinstance(event, SplitRequested) and is_leaders_split(event):
            self.moves.append((event.bundle, event.proposal, ts_ms, "split"))

    def violations(self) -> list[tuple[str, int, str]]:
        """(bundle, start, one line) for each move the rule refuses."""
        out: list[tuple[str, int, str]] = []
        for bundle, pid, start, what in self.moves:
            why = self._why(pid, start)
            if why is not None:
                out.append((bundle, start, f"{start}: {what} of {bundle} {why}"))
        return out

    def _why(self, pid: str | None, start: int) -> str | None:
        if pid is None:
            return "named no proposal (loadBalancerExecution=review)" if self.review else None
        mode = self.modes.get(pid)
        if mode != REVIEW and not (self.review and mode is None):
            return None
        approved, closed = self.approved.get(pid), self.closed.get(pid)
        if closed is not None and closed[0] <= start:
            return f"ran proposal {pid}, {closed[1]} at {closed[0]}"
        if approved is None:
            return f"ran proposal {pid}, never approved"
        if approved[0] > start:
            return f"ran proposal {pid} before its approval at {approved[0]}"
        return None
