"""The leader's hold on its own shedding, as a part of ``LeaderBody``: pause, resume, throttle.

Invariants:
- a pause is a ``BalancerPaused`` under ``_leader`` stamped with the leader's time, its end a
  ``BalancerResumed`` (an operator's, or ``expired``, recorded once by the leader that sees its
  time is up); a resume with no pause holding records nothing;
- a queued shedding move starts only while no pause holds and the throttle's caps allow it, and
  carries the run that chose it (``run_ms``, ``folded``) so a what-if replays that run;
- a move without a destination of its own gets one from placement at its start, among the
  brokers below the per-broker cap counting the moves started in the same tick; a move whose
  broker such a start filled goes back to the head of the queue;
- a move whose bundle has not moved ``loadBalancerStalledMoveSeconds`` after the leader started
  it (its command lost on the way) frees its throttle slot; until then the status says stalled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.effects import NOTHING, Effects, Receipt, appending, combine, unanswered
from actors.leader_control import Control, ControlFold, expiry_event, hold_event
from balancer.config import LoadBalancerConfig
from balancer.control import Move
from balancer.decisions import Decision
from balancer.shedding.run import SheddingRun
from events.catalog import (
    LEADER_KEY,
    PauseBalancer,
    ResumeBalancer,
    SheddingSkipped,
)
from projections.ownership import OwnershipProjection


class Holding:
    """The pause and throttle half of the leader (mixed into ``LeaderBody``)."""

    config: LoadBalancerConfig
    ownership: OwnershipProjection
    held: ControlFold
    control: Control
    shedding: SheddingRun

    @property
    def my_epoch(self) -> int:
        raise NotImplementedError

    def _position(self) -> dict[str, int]:
        raise NotImplementedError

    def _move(self, decision: Decision, now_ms: int, *, reason: str,
              run: tuple[int, dict[str, int]] | None = None, proposal: str | None = None,
              avoid: tuple[str, ...] = ()) -> Effects:
        raise NotImplementedError

    def _hold(self, command: PauseBalancer | ResumeBalancer, now_ms: int) -> Effects:
        """Pause (refused beyond ``loadBalancerMaxPauseMinutes``) or resume, on this leader's time."""
        event = hold_event(command, self.held, self.config, now_ms)
        if event is None:
            return Effects(reply=Receipt(command.command_id, detail={"paused": False}))
        return appending(LEADER_KEY, [event], epoch=self.my_epoch, causation_id=command.command_id,
                         reply=Receipt(command.command_id, ((event.TYPE, event.to_payload()),)))

    def _skipped(self, now_ms: int, skip: str, inputs: Mapping[str, Any] | None = None) -> Effects:
        if self.config.load_balancer_execution != "review":  # approved moves wait on, whatever the load
            self.control.throttle.queue.clear()  # nothing to do now: what waited was for older load
        self.control.last.at_ms, self.control.last.outcome, self.control.last.moves = now_ms, skip, 0
        self.control.last.inputs = dict(inputs or {})  # the status says why with the run's figures
        event = SheddingSkipped(strategy=self.shedding.strategy.name, reason=skip, folded=self._position())
        return appending(LEADER_KEY, [event], epoch=self.my_epoch)

    def _start_due(self, now_ms: int) -> Effects:
        """Start the queued shedding moves the throttle lets through (none while paused)."""
        throttle = self.control.throttle
        if not throttle.queue and not throttle.in_flight:
            return NOTHING
        # A command may arrive late (a slow or busy link): its slot is held until the stall bound,
        # so a late one never makes two moves where the caps allow one.
        bound = self.config.load_balancer_stalled_move_seconds * 1000
        given_up = {b for b, m in throttle.in_flight.items()
                    if now_ms - throttle.started_at.get(b, now_ms) > bound and self._unmoved(b, m.payload)}
        self.control.settle(self.ownership.records, given_up)
        if self.held.paused(now_ms) is not None:
            return NOTHING
        parts: list[Effects] = []
        back: list[Move] = []
        for move in throttle.due(now_ms):
            # The throttle admitted a move without a destination on its source alone: placement
            # picks the destination now, among the brokers below the per-broker cap counting the
            # moves started this tick (several moves of one run would otherwise all go to the
            # one new broker at once).
            full = throttle.full()
            if any(b in full for b in move.brokers()):
                back.append(move)  # a move started this tick took its broker's last slot
                continue
            decision, run, proposal = move.payload
            record = self.ownership.records.get(move.bundle)
            effects = self._move(decision, now_ms, reason=str(decision.reason), run=run, proposal=proposal,
                                 avoid=full)
            if effects.send and record is not None:
                throttle.started(move, getattr(effects.send[0], "dst", None), now_ms, record.version)
                parts.append(effects)
        throttle.queue[:0] = back  # they keep their place at the head of the queue
        return unanswered(combine(parts))

    def _unmoved(self, bundle: str, version: object) -> bool:
        record = self.ownership.records.get(bundle)
        return record is not None and record.version == version and not record.state.in_flight

    def _pause_ended(self, now_ms: int) -> Effects:
        """Record the end of a pause whose time is up, once (on this leader's clock)."""
        event = expiry_event(self.held, now_ms, self.control.expired_sent)
        if event is None:
            return NOTHING
        self.control.expired_sent = event.since_ms  # once; the fold clears the pause
        return appending(LEADER_KEY, [event], epoch=self.my_epoch)

