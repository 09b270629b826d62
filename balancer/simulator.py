"""Trace-driven what-if core: a shedding strategy and a placement over load time series.

No actors, no log: one cycle = one report round from every live broker followed by one shedding
run; decisions move bundles at once. The same ``SheddingRun`` and strategies as the live leader.

Invariants:
- deterministic: equal inputs and seed give equal results (brokers and bundles iterate by id,
  randomness only through the seeded ``Random`` given);
- broker usage is derived from the bundles it owns in *this* run, with a per-broker linear model
  ``usage = base + per_byte * throughput`` (fitted on a recording, or given by a scenario); the
  CPU a broker reports is that usage capped at 100 % (a saturated broker), the stats keep it;
- every move is recorded with its cycle, source, destination, load and reason, so balance, moves
  and flaps are computed from the record, never estimated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from balancer.bundles import BundleId
from balancer.config import LoadBalancerConfig
from balancer.decisions import Decision
from balancer.errors import InvalidBundle
from balancer.load import BrokerReport, BundleData, BundleStats, LoadModel, ResourceUsage
from balancer.placement.avg import HasPlan
from balancer.placement.extensible import ExtensiblePlacement
from balancer.placement.modular import ModularPlacement
from balancer.placement.strategies import BringsPlacement, paired_placement
from balancer.shedding.base import ClusterView, NamespacePolicy, SheddingStrategy, create_strategy
from balancer.shedding.run import SheddingRun

if TYPE_CHECKING:
    from random import Random

CYCLE_MS = 60_000


@dataclass(frozen=True, slots=True)
class BrokerModel:
    """Linear usage model of one broker: fraction of capacity at a given throughput (bytes/s)."""

    base: float = 0.0
    per_byte: float = 1.0 / (100 * 1024 * 1024)

    def usage(self, throughput: float) -> float:
        return self.base + self.per_byte * throughput


@dataclass(frozen=True, slots=True)
class Move:
    cycle: int
    bundle: str
    source: str | None
    destination: str
    load: float
    reason: str
    strategy: str


@dataclass(frozen=True, slots=True)
class CycleStats:
    cycle: int
    brokers: int
    max_over_mean: float
    std: float
    moves: int
    load_moved: float
    usages: Mapping[str, float]


Placer = Callable[[ClusterView, str, "Random", str | None], str | None]
"""(view, bundle, rng, planned destination or None) -> chosen broker, None if there is none."""


def least_loaded_placer(view: ClusterView, bundle: str, rng: Random, planned: str | None) -> str | None:
    """Fallback placement: the planned broker if live, else the lowest usage (ties random)."""
    if planned is not None and planned in view.brokers:
        return planned
    if not view.brokers:
        return None
    usage = {b: d.report.cpu.percent() for b, d in view.brokers.items()}
    lowest = min(usage.values())
    return rng.choice(sorted(b for b, u in usage.items() if u == lowest))


def pulsar_placer(config: LoadBalancerConfig, strategy: SheddingStrategy) -> Placer:
    """The placement the configured load manager would use (behaviour §5.1 / §5.2); a modular
    shedder that brings its own placement (``paired_placement``) has it used, as the leader does."""
    if config.extensible:
        extensible = ExtensiblePlacement(config)

        def place_extensible(view: ClusterView, bundle: str, rng: Random,
                             planned: str | None) -> str | None:
            if planned is not None and planned in view.brokers:
                return planned
            # An unloaded bundle is Free again: place it as if unowned.
            owner = view.bundles.get(bundle)
            if owner is not None and owner.owner is not None:
                freed = ClusterView(view.now_ms, view.config, view.brokers,
                                    {**view.bundles, bundle: _unowned(owner)}, view.namespaces,
                                    view.failure_domains)
                return extensible.place(freed, bundle, rng).broker
            return extensible.place(view, bundle, rng).broker

        return place_extensible
    modular = ModularPlacement(config, paired_placement(strategy),
                               avg_plan=strategy if isinstance(strategy, HasPlan) else None)

    def place_modular(view: ClusterView, bundle: str, rng: Random, planned: str | None) -> str | None:
        return modular.place(view, bundle, rng).broker

    return place_modular


def _unowned(data: BundleData) -> BundleData:
    return BundleData(data.bundle, None, data.stats, data.short_term, data.long_term)


@dataclass
class SimState:
    """Where every bundle is, and who is live, as a run goes."""

    owners: dict[str, str]
    live: list[str]
    models: dict[str, BrokerModel]
    moves: list[Move] = field(default_factory=list)
    last_move: dict[str, Move] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Membership:
    """Brokers joining or leaving at a cycle (``leave`` = crash: its bundles are re-placed)."""

    cycle: int
    join: tuple[str, ...] = ()
    leave: tuple[str, ...] = ()


@dataclass
class SimResult:
    strategy: str
    cycles: list[CycleStats]
    moves: list[Move]

    def flaps(self, grace_cycles: int) -> int:
        """Moves of a bundle within the grace period of its previous move, plus moves that send a
        bundle straight back to the broker it last left."""
        previous: dict[str, Move] = {}
        count = 0
        for move in self.moves:
            before = previous.get(move.bundle)
            if before is not None and (
                move.cycle - before.cycle < grace_cycles or move.destination == before.source
            ):
                count += 1
            previous[move.bundle] = move
        return count


class Simulation:
    """Runs one strategy over a load trace."""

    def __init__(
        self,
        config: LoadBalancerConfig,
        *,
        rng: Random,
        strategy: SheddingStrategy | None = None,
        placer: Placer | None = None,
        namespaces: Mapping[str, NamespacePolicy] | None = None,
        start_ms: int = 1_700_000_000_000,
    ) -> None:
        self.config = config
        self.rng = rng
        self.strategy = strategy or create_strategy(config.load_balancer_load_shedding_strategy, config)
        self.shedding = SheddingRun(config, self.strategy)
        self.model = LoadModel(config)
        self.placer = placer or pulsar_placer(config, self.strategy)
        # A strategy with its own placement fills brokers by headroom: largest orphans first, so
        # the small ones even out what the large ones leave (LPT), as the leader orders them too.
        self.largest_first = isinstance(self.strategy, BringsPlacement)
        self.namespaces = dict(namespaces or {})
        self.start_ms = start_ms

    def run(
        self,
        owners: Mapping[str, str],
        brokers: Mapping[str, BrokerModel],
        trace: Iterable[Mapping[str, BundleStats]],
        membership: Sequence[Membership] = (),
    ) -> SimResult:
        """``trace`` yields, per cycle, every bundle's stats; ``owners`` is the starting layout."""
        state = SimState(dict(owners), sorted(brokers), dict(brokers))
        changes = {m.cycle: m for m in membership}
        cycles: list[CycleStats] = []
        for cycle, loads in enumerate(trace):
            self._membership(state, changes.get(cycle), loads, cycle)
            self._place_unowned(state, loads, cycle)
            view = self._view(state, loads, cycle)
            moves_before = len(state.moves)
            result = self.shedding.run(view)
            for decision in result.decisions:
                self._apply(state, view, decision, loads, cycle)
            cycles.append(self._stats(cycle, state, loads, state.moves[moves_before:]))
        return SimResult(self.strategy.name, cycles, state.moves)

    # -- one cycle ----------------------------------------------------------------------
    def _membership(self, state: SimState, change: Membership | None,
                    loads: Mapping[str, BundleStats], cycle: int) -> None:
        if change is None:
            return
        for broker in change.join:
            if broker not in state.live:
                state.live = sorted([*state.live, broker])
                state.models.setdefault(broker, BrokerModel())
        gone = set(change.leave)
        state.live = [b for b in state.live if b not in gone]
        for bundle, owner in list(state.owners.items()):
            if owner in gone:
                del state.owners[bundle]

    def _place_unowned(self, state: SimState, loads: Mapping[str, BundleStats], cycle: int) -> None:
        orphans = sorted(b for b in loads if b not in state.owners)
        if not orphans:
            return
        orphans = _inherit_splits(state.owners, loads, orphans)
        if self.largest_first:
            orphans.sort(key=lambda b: -loads[b].msg_throughput)  # stable: ties stay in id order
        view = self._view(state, loads, cycle, feed_model=False)
        for bundle in orphans:
            chosen = self.placer(view, bundle, self.rng, None)
            if chosen is not None:
                state.owners[bundle] = chosen

    def _view(self, state: SimState, loads: Mapping[str, BundleStats], cycle: int, *,
              feed_model: bool = True) -> ClusterView:
        now_ms = self.start_ms + cycle * CYCLE_MS
        reports = broker_reports(state, loads)
        if feed_model:
            bundles = {b: (state.owners.get(b), s) for b, s in loads.items() if b in state.owners}
            self.model.apply_round(now_ms, reports, bundles)
            brokers, bundle_data = dict(self.model.brokers), dict(self.model.bundles)
        else:
            brokers, bundle_data = dict(self.model.brokers), dict(self.model.bundles)
            for broker_id in state.live:
                if broker_id not in brokers:
                    scratch = LoadModel(self.config)
                    scratch.apply_round(now_ms, {broker_id: reports[broker_id]}, {})
                    brokers[broker_id] = scratch.brokers[broker_id]
            brokers = {b: brokers[b] for b in sorted(brokers) if b in state.live}
        return ClusterView(now_ms, self.config, brokers, bundle_data, dict(self.namespaces))

    def _apply(self, state: SimState, view: ClusterView, decision: Decision,
               loads: Mapping[str, BundleStats], cycle: int) -> None:
        source = state.owners.get(decision.bundle)
        if source is None or source != decision.source:
            return
        planned = decision.destination
        destination = planned if planned in state.live else self.placer(view, decision.bundle, self.rng, planned)
        if destination is None or destination == source:
            return
        stats = loads.get(decision.bundle)
        move = Move(cycle, decision.bundle, source, destination,
                    0.0 if stats is None else stats.msg_throughput, str(decision.reason),
                    decision.strategy or self.strategy.name)
        state.owners[decision.bundle] = destination
        state.moves.append(move)
        state.last_move[decision.bundle] = move

    def _stats(self, cycle: int, state: SimState, loads: Mapping[str, BundleStats],
               moves: list[Move]) -> CycleStats:
        usages = broker_usages(state, loads)
        return CycleStats(cycle, len(state.live), *balance(list(usages.values())), len(moves),
                          sum(m.load for m in moves), usages)


def broker_throughputs(state: SimState, loads: Mapping[str, BundleStats]) -> dict[str, float]:
    totals = {b: 0.0 for b in state.live}
    for bundle, owner in state.owners.items():
        stats = loads.get(bundle)
        if stats is not None and owner in totals:
            totals[owner] += stats.msg_throughput
    return totals


def broker_usages(state: SimState, loads: Mapping[str, BundleStats]) -> dict[str, float]:
    return {b: state.models[b].usage(t) for b, t in broker_throughputs(state, loads).items()}


def broker_reports(state: SimState, loads: Mapping[str, BundleStats]) -> dict[str, BrokerReport]:
    """One report per live broker: CPU carries the modelled usage; rates are its bundles' sums."""
    sums: dict[str, list[float]] = {b: [0.0, 0.0, 0.0, 0.0, 0.0] for b in state.live}
    for bundle, owner in state.owners.items():
        stats, row = loads.get(bundle), sums.get(owner)
        if stats is None or row is None:
            continue
        row[0] += stats.msg_rate_in
        row[1] += stats.msg_rate_out
        row[2] += stats.msg_throughput_in
        row[3] += stats.msg_throughput_out
        row[4] += 1
    reports: dict[str, BrokerReport] = {}
    for broker, row in sums.items():
        # A saturated broker reports 100 % CPU, never more: above its limit the report would take
        # the within-limit path (ThresholdShedder, behaviour §4.1) meant for bandwidth, and with no
        # bandwidth terms an overloaded broker would read as idle. Stats keep the model's usage.
        usage = min(1.0, state.models[broker].usage(row[2] + row[3]))
        reports[broker] = BrokerReport(
            broker, cpu=ResourceUsage(usage * 100.0, 100.0), memory=ResourceUsage(0.0, 100.0),
            msg_rate_in=row[0], msg_rate_out=row[1], msg_throughput_in=row[2],
            msg_throughput_out=row[3], bundles=int(row[4]),
        )
    return reports


def balance(usages: Sequence[float]) -> tuple[float, float]:
    """(max/mean, population std) of broker usages; (1.0, 0.0) when there is no load."""
    if not usages:
        return 1.0, 0.0
    mean = sum(usages) / len(usages)
    if mean <= 0:
        return 1.0, 0.0
    std = math.sqrt(max(0.0, sum(u * u for u in usages) / len(usages) - mean * mean))
    return max(usages) / mean, std


def _inherit_splits(owners: dict[str, str], loads: Mapping[str, BundleStats],
                    orphans: list[str]) -> list[str]:
    """A child of a split (a new bundle inside one that left the trace) stays with its parent's
    owner, as a split keeps it there; the parent is forgotten. Returns the orphans still unowned."""
    gone = {b: o for b, o in owners.items() if b not in loads}
    parents = {b: parsed for b in gone if (parsed := _bundle_id(b)) is not None}
    if not parents:
        return orphans
    left, split = [], set()
    for orphan in orphans:
        parent = _parent_of(orphan, parents)
        if parent is None:
            left.append(orphan)
        else:
            owners[orphan] = gone[parent]
            split.add(parent)
    for parent in split:
        del owners[parent]
    return left


def _parent_of(bundle: str, parents: Mapping[str, BundleId]) -> str | None:
    child = _bundle_id(bundle)
    if child is None:
        return None
    return next((p for p, pid in parents.items() if pid.namespace == child.namespace
                 and pid.range.lower <= child.range.lower
                 and child.range.upper <= pid.range.upper), None)


def _bundle_id(text: str) -> BundleId | None:
    try:
        return BundleId.parse(text)
    except InvalidBundle:
        return None
