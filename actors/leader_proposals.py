"""The leader's proposals, as a part of ``LeaderBody``: each shedding or split cycle's moves recorded
as one ``ProposalRecorded``, executed at once (``loadBalancerExecution=auto``) or on approval
(``review``), going stale when the load they were computed on moved.

Invariants:
- a cycle that moves something records exactly one proposal, under ``_leader``, before any of
  its moves starts; each move names it in its decision (``proposal``); a cycle that moves
  nothing records none (its ``SheddingSkipped`` says why);
- auto mode moves exactly what it moved before proposals were recorded: the proposal is
  written beside the moves, never in their way;
- review mode: a proposal waits; only an approval (``ProposalApproved``, with who) sends its
  moves to the throttle (shedding moves, queued once the approval is folded, so that a leader
  restarted from the log queues the approved moves that had not started yet, unless the
  proposal went stale meanwhile) or to the namespace (splits, sent with the approval, or held
  by this leader while a pause holds and sent by its first tick after the pause); a newer
  proposal of the same kind makes the waiting ones stale (``superseded``), as does age or moved
  load (``balancer.proposals.stale_reason``); each stale proposal is recorded once, with its
  reason; a cycle that proposes exactly the moves of a waiting proposal records nothing: the
  waiting one stands;
- a verdict the proposal cannot take is refused naming the proposal (``UnknownProposal``,
  ``ProposalClosed``) and nothing is recorded for it; approving one found stale records its
  staleness, not the approval;
- cancel drops the proposal's moves still queued in the throttle and its held splits; moves
  already handing over finish.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actors.effects import NOTHING, Effects, Receipt, appending, combine
from actors.leader_control import Control, ControlFold
from actors.namespace import AUTO_PREFIX
from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.control import Move
from balancer.decisions import Decision, Label, Reason
from balancer.errors import ProposalClosed, UnknownProposal
from balancer.ownership import BundleState, OwnershipRecord
from balancer.proposals import (
    APPROVE,
    APPROVED,
    AUTO,
    CANCEL,
    PENDING,
    REJECT,
    REVIEW,
    SPLIT,
    TRANSFER,
    UNLOAD,
    ProposedMove,
    Staleness,
    broker_summary,
    bundle_load,
    predict,
    split_move,
    stale_reason,
    supersession,
    verdict_refusal,
)
from balancer.shedding.base import ClusterView
from balancer.split import SplitDecision
from events.catalog import (
    LEADER_KEY,
    Event,
    ProposalApproved,
    ProposalCancelled,
    ProposalRejected,
    ProposalStale,
    ReviewProposal,
    SplitBundle,
)
from projections.load import LoadProjection
from projections.ownership import OwnershipProjection
from projections.proposals import Entry, Proposal, ProposalBook

SHED, SPLITS = "shed", "split"


def staleness(config: LoadBalancerConfig) -> Staleness:
    return Staleness(config.load_balancer_proposal_max_age_seconds * 1000,
                     config.load_balancer_proposal_load_tolerance)


def shed_moves(decisions: Sequence[Decision], view: ClusterView, now_ms: int) -> list[ProposedMove]:
    """A shedding run's decisions as a proposal's moves (a destination ``None``: placement picks
    it when the move starts)."""
    out: list[ProposedMove] = []
    for d in decisions:
        if d.source is None:
            continue
        stored = {**d.to_dict(), "run_ms": now_ms}
        out.append(ProposedMove(d.bundle, TRANSFER if d.destination else UNLOAD, d.source, d.destination,
                                str(d.reason), stored, bundle_load(view.bundles.get(d.bundle))))
    return out


def owner_at_rest(record: OwnershipRecord | None) -> str | None:
    return record.dst if record is not None and record.state is BundleState.OWNED else None


class Proposing:
    """The proposals half of the leader (mixed into ``LeaderBody``)."""

    config: LoadBalancerConfig
    ownership: OwnershipProjection
    load: LoadProjection
    control: Control
    held: ControlFold
    book: ProposalBook
    splits_held: list[Proposal]
    """Approved proposals whose splits wait for the pause to end (soft: a new term drops them,
    as a crash drops a split sent and lost; a still-hot bundle is proposed again)."""
    stale_sent: set[str]
    approved_seen: int
    """How many of ``book.approved`` this leader has queued (soft: a new term starts at 0)."""

    @property
    def my_epoch(self) -> int:
        raise NotImplementedError

    def _position(self) -> dict[str, int]:
        raise NotImplementedError

    @property
    def reviewing(self) -> bool:
        return self.config.load_balancer_execution == REVIEW

    def _propose(self, kind: str, strategy: str, moves: list[ProposedMove], view: ClusterView,
                 now_ms: int) -> tuple[str, Effects]:
        """Record ``moves`` as one proposal (its id, and the append); in review mode the waiting
        proposals of the same kind go stale, superseded by it, unless one of them already proposes
        the same moves: that one stands (its id, nothing appended), so that an operator reviewing
        it is not overtaken by an identical copy every cycle."""
        superseded: list[str] = []
        if self.reviewing:
            waiting = [(e.proposal.proposal_id, e.proposal.moves) for e in self.book.pending()
                       if e.proposal.proposal_id.startswith(f"{kind}-")
                       and e.proposal.proposal_id not in self.stale_sent]
            standing, superseded = supersession(waiting, moves)
            if standing is not None:
                return standing, NOTHING
        pid = f"{kind}-{now_ms}"
        if pid in self.book.entries:
            pid = f"{pid}-e{self.my_epoch}"
        brokers = broker_summary(view, light=True)
        proposal = Proposal(pid, strategy, REVIEW if self.reviewing else AUTO, now_ms, tuple(moves),
                            None, self._position(), brokers, predict(brokers, moves, place_unplaced=True))
        self.stale_sent.update(superseded)
        events: list[Event] = [ProposalStale(proposal_id=old, at_ms=now_ms, reason=f"superseded by {pid}")
                               for old in superseded]
        events.append(proposal.to_event())
        return pid, appending(LEADER_KEY, events, epoch=self.my_epoch)

    def _stale_check(self, now_ms: int) -> Effects:
        """Record, once each, the waiting proposals that must no longer run."""
        pending = [e for e in self.book.pending() if e.proposal.proposal_id not in self.stale_sent]
        if not pending:
            return NOTHING
        now = self._throughputs()
        rule = staleness(self.config)
        events: list[Event] = []
        for entry in pending:
            reason = self._stale(entry, now, now_ms, rule)
            if reason is not None:
                self.stale_sent.add(entry.proposal.proposal_id)
                events.append(ProposalStale(proposal_id=entry.proposal.proposal_id, reason=reason, at_ms=now_ms))
        return appending(LEADER_KEY, events, epoch=self.my_epoch) if events else NOTHING

    def _stale(self, entry: Entry, now: dict[str, float], now_ms: int, rule: Staleness) -> str | None:
        proposal = entry.proposal
        owners = {m.bundle: owner_at_rest(self.ownership.records.get(m.bundle)) for m in proposal.moves}
        return stale_reason(run_ms=proposal.run_ms, now_ms=now_ms, then=proposal.brokers, now=now,
                            moves=proposal.moves, owners=owners, rule=rule)

    def _review(self, command: ReviewProposal, now_ms: int) -> Effects:
        """An operator's verdict: approve (moves to the throttle), reject, or cancel."""
        pid = command.proposal_id
        status = self.book.status_of(pid)
        refusal = verdict_refusal(pid, status, command.verdict)
        if refusal is not None:
            raise (UnknownProposal if status is None else ProposalClosed)(refusal, value=pid)
        entry = self.book.entries[pid]
        event: Event
        effects = NOTHING
        if command.verdict == APPROVE:
            reason = self._stale(entry, self._throughputs(), now_ms, staleness(self.config))
            if reason is not None:
                self.stale_sent.add(pid)
                event = ProposalStale(proposal_id=pid, reason=reason, at_ms=now_ms)
                return appending(LEADER_KEY, [event], epoch=self.my_epoch, causation_id=command.command_id,
                                 reply=Receipt(command.command_id, ((event.TYPE, event.to_payload()),)))
            event = ProposalApproved(proposal_id=pid, by=command.by, at_ms=now_ms)
            effects = self._approved_splits(entry.proposal, now_ms)
        elif command.verdict == REJECT:
            event = ProposalRejected(proposal_id=pid, by=command.by, at_ms=now_ms, note=command.note)
        else:
            assert command.verdict == CANCEL
            event = ProposalCancelled(proposal_id=pid, by=command.by, at_ms=now_ms, bundles=self._cancel(entry))
        recorded = appending(LEADER_KEY, [event], epoch=self.my_epoch, causation_id=command.command_id,
                             reply=Receipt(command.command_id, ((event.TYPE, event.to_payload()),)))
        return combine([recorded, effects])

    def _approved_splits(self, proposal: Proposal, now_ms: int) -> Effects:
        """An approved proposal's splits: sent now, or held while a pause holds."""
        if self.held.paused(now_ms) is None:
            return self._splits(proposal, now_ms)
        if any(m.kind == SPLIT for m in proposal.moves):
            self.splits_held.append(proposal)
        return NOTHING

    def _release_splits(self, now_ms: int) -> Effects:
        """The held splits, once no pause holds."""
        if not self.splits_held or self.held.paused(now_ms) is not None:
            return NOTHING
        held, self.splits_held = self.splits_held, []
        return combine([self._splits(p, now_ms) for p in held])

    def _splits(self, proposal: Proposal, now_ms: int) -> Effects:
        """An approved proposal's splits, sent to their namespace."""
        splits: list[SplitBundle] = []
        for m in proposal.moves:
            if m.kind == SPLIT:
                raw = m.decision
                splits.append(SplitBundle(
                    command_id=f"{AUTO_PREFIX}{str(m.reason).removeprefix('split:')}:{m.bundle}:"
                               f"e{self.my_epoch}:{now_ms}",
                    epoch=self.my_epoch, namespace=namespace_of(m.bundle), bundle=m.bundle,
                    algorithm=str(raw.get("algorithm")), unload=bool(raw.get("unloadChildren")),
                    proposal=proposal.proposal_id))
        return Effects(send=tuple(splits))

    def _queue_approved(self, now_ms: int) -> Effects:
        """Queue the shedding moves of the approvals folded since the last tick that have not
        started (after a restart: of every approval in the book), unless the proposal went stale."""
        fresh = self.book.approved[self.approved_seen:]
        if not fresh:
            return NOTHING
        self.approved_seen = len(self.book.approved)
        events: list[Event] = []
        now: dict[str, float] | None = None
        for pid in fresh:
            entry = self.book.entries.get(pid)
            if entry is None or entry.status != APPROVED:
                continue
            left = [m for m in entry.proposal.moves if m.kind != SPLIT and m.bundle not in entry.started]
            if not left:
                continue
            if entry.at_ms is not None and now_ms - entry.at_ms > 60_000:  # an approval this leader did not see made
                now = now if now is not None else self._throughputs()
                owners = {m.bundle: owner_at_rest(self.ownership.records.get(m.bundle)) for m in left}
                reason = stale_reason(run_ms=entry.proposal.run_ms, now_ms=now_ms, then=entry.proposal.brokers,
                                      now=now, moves=left, owners=owners, rule=staleness(self.config))
                if reason is not None:
                    events.append(ProposalStale(proposal_id=pid, reason=reason, at_ms=now_ms))
                    continue
            run = (entry.proposal.run_ms, dict(entry.proposal.folded))
            self.control.queue([Move(m.bundle, m.source, m.destination, now_ms, (stored_decision(m), run, pid))
                                for m in left])
        return appending(LEADER_KEY, events, epoch=self.my_epoch) if events else NOTHING

    def _throughputs(self) -> dict[str, float]:
        return self.load.throughputs()

    def _cancel(self, entry: Entry) -> list[str]:
        """Drop the proposal's moves still queued; those in flight finish."""
        pid = entry.proposal.proposal_id
        self.splits_held = [p for p in self.splits_held if p.proposal_id != pid]
        throttle = self.control.throttle
        dropped = [m.bundle for m in throttle.queue if _proposal_of(m) == pid]
        throttle.queue = [m for m in throttle.queue if _proposal_of(m) != pid]
        if entry.status == PENDING:
            return sorted(m.bundle for m in entry.proposal.moves)
        return sorted(dropped)

    def _split_proposal(self, decisions: Sequence[SplitDecision], view: ClusterView,
                        now_ms: int) -> tuple[str, Effects] | None:
        moves = []
        for d in decisions:
            record = self.ownership.records.get(d.bundle)
            if record is not None and record.dst is not None:
                moves.append(split_move(d, record.dst, now_ms, bundle_load(view.bundles.get(d.bundle))))
        if not moves:
            return None
        return self._propose(SPLITS, "split", moves, view, now_ms)


def _proposal_of(move: Move) -> str | None:
    payload: Any = move.payload
    return str(payload[2]) if isinstance(payload, tuple) and len(payload) > 2 else None


def stored_decision(move: ProposedMove) -> Decision:
    """The strategy's decision behind a proposed shedding move, as the throttle starts it."""
    raw = move.decision
    inputs = raw.get("inputs")
    return Decision(move.bundle, move.source, move.destination,
                    label=Label(str(raw.get("label", Label.SUCCESS))),
                    reason=Reason(str(raw.get("reason", move.reason))),
                    strategy=str(raw.get("strategy", "")),
                    inputs=dict(inputs) if isinstance(inputs, dict) else {})
