"""The decision side of attach: the project's leader, run on the log of a mirrored cluster.

Invariants:
- records are folded exactly as the leader folds them, by the what-if replay's
  ``LeaderReplay`` (ownership, load, registry, draining brokers, a fresh strategy at each
  ``LeaderElected``), and the same ``SheddingRun`` runs on the same view builder; each cycle
  stamps what it had folded (partition -> last offset);
- the grace-period memory is what was moved, never what was only proposed: a run starts from the
  memory folded from the log (the leader's rule, ``remember_shed``) over the moves Pulsar's
  shedder made (reason ``pulsar``, less an operator's, told apart by the leader's unload counts:
  ``attach.attribution``) and the executions requested; so an advised move Pulsar did not make, or a move a cap held back, may
  be proposed again next cycle;
- a drained broker (``projections.drain``, folded by the replay) is out of the shedding and
  placement views, so no proposal sends a bundle to it; ``place`` gives a drain's destinations;
- every move of a proposal has a source; transfers in drive mode always have a destination (the
  strategy's, else the project's placement on a view without the source, as the leader picks
  one); a move whose placement finds no broker other than its source is dropped, and a cycle
  left with none says ``NoBrokers``;
- in advise mode the cycles keep Pulsar's cadence: the first move of each Pulsar shedding run
  (a ``pulsar`` move an interval or more after the last one, less a half) sets the phase, and
  cycles then run ``PHASE_LEAD_MS`` before each of Pulsar's runs and decide for the time of
  that run: the time-bound rules (grace period, cool-down, data age) end when Pulsar's do (a run
  that moved nothing is seen by its ``SheddingSkipped``, which the mirror reads off Pulsar's
  leader's metrics, ``attach.shedder_runs``);
- a broker's extensible EMAs (``weightedMaxEMA``, ``msgThroughputEMA``) are the ones its own
  report carries when the mirror kept them: Pulsar's leader sheds on the EMAs each broker
  computes (one step per local update, several per published report), so the fold's own, one
  step per published report, would rank brokers differently when they are close;
- splits come from the leader's split rule (``split_decisions``, its hit counts kept across
  cycles) and only when the advisor is told to split;
- pure: time and randomness are passed in; nothing here reads a clock or does I/O.
"""

from __future__ import annotations

import math
from random import Random

from actors.leader_view import Placer, split_decisions
from attach.attribution import Attribution
from attach.proposals import (
    ADVISE,
    DRIVE,
    SPLIT,
    TRANSFER,
    UNLOAD,
    Proposal,
    ProposedMove,
    broker_summary,
    bundle_load,
    predict,
    proposal_id,
)
from balancer.config import LoadBalancerConfig
from balancer.decisions import Decision, Reason
from balancer.ownership import BundleState
from balancer.placement.avg import HasPlan
from balancer.placement.base import Placement
from balancer.proposals import split_move
from balancer.shedding.base import ClusterView
from balancer.shedding.run import SheddingMemory, SheddingRun
from balancer.split import SplitHitCounts
from events.catalog import (
    ExecutionRequested,
    LoadReported,
    ShedderUnloadsCounted,
    SheddingSkipped,
    TransferPrepared,
    UnloadRequested,
)
from events.envelope import Envelope
from projections.drain import DRAIN_STRATEGY
from projections.shed_replay import LeaderReplay, remember_shed

PULSAR_REASON = "pulsar"
"""The reason the mirror gives the moves Pulsar made itself."""
PHASE_LEAD_MS = 1500
"""In advise mode a cycle runs this long before Pulsar's next shedding run is due: Pulsar's
run and ours then read the same load reports."""


def interval_ms(config: LoadBalancerConfig) -> int:
    """Time between decision cycles: ``attachDecisionIntervalSeconds``, else Pulsar's shedding
    interval."""
    seconds = config.attach_decision_interval_seconds
    return seconds * 1000 if seconds > 0 else config.load_balancer_shedding_interval_minutes * 60_000


class Advisor:
    """Folds a mirrored log and proposes, cycle by cycle, what the project's leader would do."""

    def __init__(self, config: LoadBalancerConfig, mode: str, *, rng: Random, splits: bool = True) -> None:
        self.config, self.mode, self.rng, self.splits = config, mode, rng, splits
        self.replay = LeaderReplay(config)
        self.split_hits = SplitHitCounts()
        self.folded_to: dict[int, int] = {}
        self.next_ms: int | None = None
        self.phase_ms: int | None = None
        """Advise mode: a time one interval apart from each of Pulsar's shedding runs, less the lead."""
        self._last_pulsar: int | None = None
        self._burst_ms = 0
        self._placer: tuple[SheddingRun, Placer] | None = None
        self.shedders: Attribution[TransferPrepared] = Attribution()
        """Which of Pulsar's moves its shedder made (the others were an operator's)."""

    @property
    def strategy(self) -> str:
        return self.replay.run.strategy.name

    # -- folding ---------------------------------------------------------------------------
    def fold(self, partition: int, offset: int, envelope: Envelope) -> None:
        """Fold one record of the log, in log order."""
        if offset > self.folded_to.get(partition, -1):
            self.folded_to[partition] = offset
        self.replay.fold(offset, envelope)
        event = envelope.typed
        if isinstance(event, LoadReported):
            self._take_reported_emas(event)
        elif isinstance(event, SheddingSkipped):
            self._pulsar_ran(envelope.ts_ms)  # a run of Pulsar's that moved nothing keeps the phase too
        if isinstance(event, TransferPrepared | UnloadRequested) and event.reason == PULSAR_REASON:
            pulsar = TransferPrepared(bundle=event.bundle, src=str(event.src), dst="",
                                      reason=PULSAR_REASON, decision={"strategy": self.strategy})
            self._remember_pulsar(self.shedders.moved(envelope.ts_ms, pulsar))
        elif isinstance(event, ShedderUnloadsCounted):
            self._remember_pulsar(self.shedders.counted(event.since_ms, envelope.ts_ms, sum(event.unloaded.values())))
        elif isinstance(event, ExecutionRequested) and event.kind != SPLIT and event.decision.get("strategy") != DRAIN_STRATEGY:
            # A drain's move is the operator's, not shedding: no grace period (the leader's rule).
            ours = TransferPrepared(bundle=event.bundle, src=event.src, dst=event.dst or "",
                                    reason=str(event.decision.get("reason", "")),
                                    decision={**event.decision, "strategy": self.strategy})
            self._remember(ours, envelope.ts_ms)

    def _remember_pulsar(self, moves: list[tuple[int, TransferPrepared]]) -> None:
        """Pulsar's shedder's moves (an operator's are not remembered, as Pulsar does not)."""
        for ts_ms, move in moves:
            self._remember(move, self._pulsar_ran(ts_ms))

    def _remember(self, moved: TransferPrepared, when: int) -> None:
        strategy = self.replay.run.strategy
        remember_shed(self.replay.memory, strategy.name, strategy.extensible, moved, when)

    def _take_reported_emas(self, event: LoadReported) -> None:
        info = self.replay.load.brokers.get(str(event.broker_id))
        reported = event.broker_load.get("pulsar")
        if info is None or info.load is None or not isinstance(reported, dict):
            return
        for theirs, ours in (("weightedMaxEMA", "weighted_max_ema"), ("msgThroughputEMA", "msg_throughput_ema")):
            value = reported.get(theirs)
            if isinstance(value, int | float) and math.isfinite(value):
                setattr(info.load, ours, float(value))

    def _pulsar_ran(self, ts_ms: int) -> int:
        """A move of Pulsar's at ``ts_ms``; the time of the run it belongs to: its burst's first
        move (one run's moves can be seen a poll apart, and Pulsar remembers them at one time)."""
        gap = interval_ms(self.config)
        if self._last_pulsar is None or ts_ms - self._last_pulsar > gap // 2:
            self._burst_ms = ts_ms
            if self.mode == ADVISE:
                self.phase_ms = ts_ms - min(PHASE_LEAD_MS, gap // 10)
                self.next_ms = self.phase_ms + gap
        self._last_pulsar = ts_ms
        return self._burst_ms

    def _next(self, now_ms: int) -> int:
        """The next cycle's time: an interval on, or Pulsar's next run less the lead."""
        gap = interval_ms(self.config)
        if self.phase_ms is None:
            return now_ms + gap
        ahead = (self.phase_ms - now_ms) % gap
        return now_ms + ahead + (gap if ahead < gap // 2 else 0)

    def _decided_for(self, now_ms: int) -> int:
        """The time a cycle decides for: now, or in advise mode once phase-locked the time of
        Pulsar's run it precedes (grace periods and cool-downs then end when Pulsar's do)."""
        if self.mode != ADVISE or self.phase_ms is None:
            return now_ms
        return now_ms + min(PHASE_LEAD_MS, interval_ms(self.config) // 10)

    # -- cycles ----------------------------------------------------------------------------
    def due(self, now_ms: int) -> bool:
        """Whether a cycle runs at ``now_ms`` (the first one an interval after the first ask)."""
        if self.next_ms is None:
            self.next_ms = now_ms + interval_ms(self.config)
        return now_ms >= self.next_ms

    def decide(self, now_ms: int) -> Proposal:
        """One cycle: the strategy's moves (with destinations), then the splits."""
        self.next_ms = self._next(now_ms)
        run = self.replay.run
        memory = self.replay.memory
        run.memory = SheddingMemory(dict(memory.recently_unloaded), dict(memory.recently_unloaded_brokers))
        view = self.replay.view(self._decided_for(now_ms))
        result = run.run(view)
        moves = [m for m in (self._move(d, now_ms) for d in result.decisions) if m is not None]
        skip = None if result.skip is None else str(result.skip)
        if not moves and skip is None:
            skip = str(Reason.NO_BROKERS if result.decisions else Reason.BALANCED)
        if self.splits:
            moves += self._splits(now_ms, {m.bundle for m in moves})
        brokers = broker_summary(view)
        folded = {str(p): o for p, o in sorted(self.folded_to.items())}
        return Proposal(proposal_id(self.mode, now_ms), run.strategy.name, self.mode, now_ms, tuple(moves),
                        None if moves else skip, folded, brokers, predict(brokers, moves))

    def _move(self, decision: Decision, now_ms: int) -> ProposedMove | None:
        source = decision.source
        record = self.replay.ownership.records.get(decision.bundle)
        if source is None or record is None or record.state is not BundleState.OWNED or record.dst != source:
            return None
        stored = decision.to_dict()
        dst = decision.destination
        transfer = self.mode == DRIVE or not (self.config.extensible and not self.config.load_balancer_transfer_enabled)
        if dst is None and transfer:
            placement = self._placement().place(self._placing(now_ms, source), decision.bundle, self.rng)
            dst, stored["placement"] = placement.broker, placement.to_dict()
            if dst is None or dst == source:
                return None
        stored.update(destination=dst, kind=TRANSFER if dst else UNLOAD, run_ms=now_ms)
        return ProposedMove(decision.bundle, TRANSFER if dst else UNLOAD, source, dst, str(decision.reason),
                            stored, bundle_load(self.replay.load.bundles.get(decision.bundle)))

    def place(self, bundle: str, source: str, now_ms: int) -> Placement:
        """Where the project's placement puts ``bundle`` leaving ``source`` (drained brokers,
        and ``source``, left out): a drain's destination."""
        return self._placement().place(self._placing(now_ms, source), bundle, self.rng)

    def _placing(self, now_ms: int, source: str) -> ClusterView:
        return self.replay.view(now_ms, placing=True, exclude=(source,))

    def _placement(self) -> Placer:
        # A new strategy (a new leader term) brings a new placer: a paired placement reads it.
        run = self.replay.run
        if self._placer is None or self._placer[0] is not run:
            plan = run.strategy if isinstance(run.strategy, HasPlan) else None
            self._placer = (run, Placer(self.config, avg_plan=plan, shedder=run.strategy))
        return self._placer[1]

    def _splits(self, now_ms: int, moving: set[str]) -> list[ProposedMove]:
        decisions, self.split_hits = split_decisions(self.replay.ownership, self.replay.load,
                                                     self.split_hits, self.config)
        out: list[ProposedMove] = []
        for d in decisions:
            record = self.replay.ownership.records.get(d.bundle)
            if d.bundle in moving or record is None or record.dst is None:
                continue
            out.append(split_move(d, record.dst, now_ms, bundle_load(self.replay.load.bundles.get(d.bundle))))
        return out
