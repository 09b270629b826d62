"""Review mode of drive: ``lbctl attach --mode drive`` with ``loadBalancerExecution=review``.

A drive cycle's proposal then waits for an operator's verdict, as the project's own leader's
does (``actors/leader_proposals.py``): ``lbctl proposals approve|reject|cancel ID`` or the REST
form against the attach run's web service; only an approved proposal's moves are sent to
Pulsar, through the same caps, pause and execution records as auto drive mode.

Invariants:
- a proposal with moves is recorded with mode ``review`` (pending in ``ProposalBook``); one
  without moves keeps mode ``drive`` (nothing to review; the drive report still reads it);
- a new plan supersedes the waiting ones unless one of them proposes the same moves, which then
  stands and nothing is recorded (``balancer.proposals.supersession``); a waiting proposal goes
  stale by age, moved load or a bundle no longer on its source (``stale_reason``), recorded
  once each;
- a verdict the proposal cannot take is refused naming it and nothing is recorded; approving
  one found stale records its staleness, not the approval; cancel names the bundles whose
  moves had not been sent;
- an approved proposal's moves are offered every cycle until each one was requested once or
  its bundle left its source; a cancelled or stale one is never offered again;
- pure: times and the current load are passed in; nothing here sends, appends or reads the log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from attach.proposals import Proposal, ProposedMove
from balancer.config import LoadBalancerConfig
from balancer.errors import ProposalClosed, UnknownProposal
from balancer.proposals import (
    APPROVE,
    APPROVED,
    CANCEL,
    REJECT,
    REVIEW,
    Staleness,
    stale_reason,
    supersession,
    verdict_refusal,
)
from events.catalog import (
    Event,
    Message,
    ProposalApproved,
    ProposalCancelled,
    ProposalRejected,
    ProposalStale,
    ReviewProposal,
)
from projections.proposals import WATCHED, Entry, ProposalBook

Owners = Callable[[ProposedMove], str | None]
"""A move's bundle -> its owner at rest (None: not Owned)."""


def reviewing(config: LoadBalancerConfig) -> bool:
    return config.load_balancer_execution == REVIEW


class DriveReview:
    """The book of drive mode's proposals, the verdicts on them and what approved ones still send."""

    def __init__(self, config: LoadBalancerConfig) -> None:
        self.config = config
        self.rule = Staleness(config.load_balancer_proposal_max_age_seconds * 1000,
                              config.load_balancer_proposal_load_tolerance)
        self.book = ProposalBook()
        self.stale_sent: set[str] = set()
        """Proposals found stale or superseded whose record may not be folded back yet."""
        self.finished: set[str] = set()
        """Approved proposals with nothing left to send."""

    def fold(self, event: Message, ts_ms: int) -> None:
        if event.TYPE in WATCHED:
            self.book.fold(event, ts_ms)

    # -- a new plan --------------------------------------------------------------------------
    def to_record(self, proposal: Proposal, now_ms: int) -> tuple[Proposal | None, list[Event]]:
        """What a cycle's plan records: itself as a review proposal, after the staleness of the
        waiting ones it supersedes; None when a waiting one with the same moves stands."""
        if not proposal.moves:
            return proposal, []
        waiting = [(e.proposal.proposal_id, e.proposal.moves) for e in self._waiting()]
        standing, superseded = supersession(waiting, proposal.moves)
        if standing is not None:
            return None, []
        self.stale_sent.update(superseded)
        stale: list[Event] = [ProposalStale(proposal_id=old, at_ms=now_ms,
                                            reason=f"superseded by {proposal.proposal_id}")
                              for old in superseded]
        return dataclasses.replace(proposal, mode=REVIEW), stale

    def stale(self, now_ms: int, throughputs: Mapping[str, float], owners: Owners) -> list[Event]:
        """The waiting proposals that must no longer run, each recorded once."""
        out: list[Event] = []
        for entry in self._waiting():
            reason = self._reason(entry, now_ms, throughputs, owners)
            if reason is not None:
                self.stale_sent.add(entry.proposal.proposal_id)
                out.append(ProposalStale(proposal_id=entry.proposal.proposal_id, reason=reason, at_ms=now_ms))
        return out

    # -- verdicts ----------------------------------------------------------------------------
    def verdict(self, command: ReviewProposal, now_ms: int, throughputs: Mapping[str, float],
                owners: Owners) -> Event:
        """The record of an operator's verdict (a staleness instead of an approval that comes
        too late); a verdict the proposal cannot take raises, naming it."""
        pid = command.proposal_id
        status = self.book.status_of(pid)
        if pid in self.stale_sent and status is not None:
            status = "stale"
        refusal = verdict_refusal(pid, status, command.verdict)
        if refusal is not None:
            raise (UnknownProposal if status is None else ProposalClosed)(refusal, value=pid)
        entry = self.book.entries[pid]
        if command.verdict == APPROVE:
            reason = self._reason(entry, now_ms, throughputs, owners)
            if reason is not None:
                self.stale_sent.add(pid)
                return ProposalStale(proposal_id=pid, reason=reason, at_ms=now_ms)
            return ProposalApproved(proposal_id=pid, by=command.by, at_ms=now_ms)
        if command.verdict == REJECT:
            return ProposalRejected(proposal_id=pid, by=command.by, at_ms=now_ms, note=command.note)
        assert command.verdict == CANCEL
        unsent = sorted(m.bundle for m in entry.proposal.moves if m.bundle not in entry.started)
        return ProposalCancelled(proposal_id=pid, by=command.by, at_ms=now_ms, bundles=unsent)

    # -- what approved proposals still send ----------------------------------------------------
    def approved(self) -> list[Proposal]:
        """The approved proposals not finished, in the order of their approvals."""
        out: list[Proposal] = []
        for pid in self.book.approved:
            entry = self.book.entries.get(pid)
            if entry is not None and entry.status == APPROVED and pid not in self.finished:
                out.append(entry.proposal)
        return out

    def left(self, proposal: Proposal, requested: Callable[[str], bool], owners: Owners) -> bool:
        """Whether ``proposal`` still has a move to send: one not requested yet (by execution
        id) whose bundle is still on its source; when none, it is finished for good."""
        for index, move in enumerate(proposal.moves):
            if not requested(f"{proposal.proposal_id}:{index}") and owners(move) == move.source:
                return True
        self.finished.add(proposal.proposal_id)
        return False

    def _waiting(self) -> list[Entry]:
        return [e for e in self.book.pending() if e.proposal.proposal_id not in self.stale_sent]

    def _reason(self, entry: Entry, now_ms: int, throughputs: Mapping[str, float], owners: Owners) -> str | None:
        proposal = entry.proposal
        return stale_reason(run_ms=proposal.run_ms, now_ms=now_ms, then=proposal.brokers, now=throughputs,
                            moves=proposal.moves, owners={m.bundle: owners(m) for m in proposal.moves},
                            rule=self.rule)
