"""PlannedTransferShedder: plans transfers for the whole cluster at once, fewest bundles first.

Model: a broker's load is its reported throughput (bytes/s in+out); its capacity is the
throughput at 100 % usage, estimated as throughput / CPU usage from reports taken while it is
neither idle nor saturated, and remembered (a saturated broker's CPU says nothing about its
capacity); a broker never estimated gets the median estimate. U = sum load / sum capacity is the
cluster's mean utilisation, a broker's ratio r = load / capacity / U, and its distance is how far
r lies outside the tolerance band: max(0, |r - 1| - tolerance).

Invariants:
- transfer only: every decision names a destination other than its source that the §5.2 filters
  (anti-affinity with failure domains, isolation, version, topic cap) accept for that bundle, and
  never the broker the bundle last left (no send-backs); a run moves at most one bundle of an
  anti-affinity group, since the filters count the group's bundles in the view, not in the plan;
- a move is taken only if the destination's distance grows by less than the source's shrinks,
  by at least the minimum gain, and the pair's worst end gets better (the destination ends below
  where the source started, the source above where the destination started): the summed
  distance strictly falls with every move, so on a constant load planning terminates and no
  sequence of moves can cycle;
- hand-ons last: a move that leaves its destination above both the trigger band and the
  source's new ratio (or the source below both the underload band and the destination's) hands
  the imbalance on - that broker must pass load on in turn, each hop counted as moved - so it is
  taken only when the broker being planned has no other move; the source sheds its smaller
  bundles first and then, usually, the lumpy one could only make a destination worse than the
  source has become, and stays (the old "worst end gets better" rule refuses it);
- make room: a broker still above ``1 + make_room_trigger`` (25 %) with no single move gets a
  two-hop step (``balancer.shedding.make_room``): a destination first passes bundles on, then
  takes one of the broker's lumpy bundles; taken whole, only if its worst end gets better and its
  summed distance falls by the minimum gain, with no broker of the step left above the trigger;
  below that level the lump stays (the load would travel twice for an imbalance the plan
  tolerates);
- residuals stay spread: bundles are lumpy next to the band, so a broker's last bundle usually
  lands past the mean; an unclean move between brokers inside the trigger bands only swaps one
  residual for another at the cost of a bundle's load, so it is taken only while one side of the
  mean has at most one broker outside the band (the others' residuals all land on it: the hot
  broker that cannot shed its bundle, the one a refill fills); with several out on each side the
  plan stops, short of the mean on both sides (steady-zipf: 0.98x the minimum moved, was 1.004x);
- fewest bundles: among moves of one tier (clean, unclean, hand-on), the one with the largest
  gain, ties to the larger bundle, so the bundle closest to the gap goes first and a broker
  reaches the band with as few moves as fit;
- hysteresis: planning starts when a broker is above 1 + trigger, or a warmed-up broker below
  1 - underload trigger, and continues run after run while it moves something towards the band;
- never moved: bundles shed within the grace period (``view.recently_unloaded``), bundles of
  system or excluded namespaces, and a bundle already moved in this run;
- warm-up: a broker first seen less than ``warmup`` ago is never a source, and receives load only
  to relieve a broker above the trigger (not to be filled to the mean): a restarted broker is
  refilled by the placement of later orphans first; leaving resets its warm-up and its estimate;
- placement side (``own_placement``, ``balancer.placement.headroom``): orphans and new bundles
  go to the candidate with the most headroom by these capacity estimates, so they land where the
  plan would send them and are not moved twice;
- deterministic: brokers and bundles are visited in id order and ties keep the first found.
"""

from __future__ import annotations

import statistics
from typing import ClassVar

from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.decisions import Decision, InputValue, Reason, ShedResult
from balancer.errors import LoadBalancerError
from balancer.placement.anti_affinity import group_of
from balancer.placement.base import PlacementStrategy
from balancer.placement.filters import extensible_candidates
from balancer.placement.headroom import HeadroomPlacement
from balancer.shedding.base import ClusterView, is_system_namespace
from balancer.shedding.make_room import make_room
from balancer.shedding.plan_model import (
    CLEAN,
    EPS,
    HANDS_ON,
    UNCLEAN,
    Checks,
    Move,
    Node,
    PlanSettings,
)

IDLE_USAGE = 0.02  # below: too little load to read a capacity from
SATURATED_USAGE = 0.98  # above: the CPU is capped, the throughput is not the capacity
_NO_POLICY = ""  # the filter-cache key shared by namespaces without policies


class Plan:
    """The cluster's brokers and movable bundles, and the greedy planner over them."""

    def __init__(self, nodes: dict[str, Node], settings: PlanSettings, checks: Checks) -> None:
        self.nodes = nodes
        self.settings = settings
        self.checks = checks
        total_capacity = sum(n.capacity for n in nodes.values())
        self.util = sum(n.load for n in nodes.values()) / total_capacity if total_capacity else 0.0
        self.one_sided = self.util > 0 and self._one_sided()

    def ratio(self, node: Node, delta: float = 0.0) -> float:
        return (node.load + delta) / node.capacity / self.util

    def distance(self, ratio: float) -> float:
        return max(0.0, abs(ratio - 1.0) - self.settings.tolerance)

    def _one_sided(self) -> bool:
        """Whether at most one broker lies outside the band on one side of the mean: only then
        are unclean moves between brokers inside the trigger bands taken (``gain``)."""
        tol = self.settings.tolerance
        above = sum(1 for n in self.nodes.values() if self.ratio(n) > 1 + tol)
        below = sum(1 for n in self.nodes.values() if self.ratio(n) < 1 - tol)
        return min(above, below) <= 1

    def triggered(self, warmed: set[str]) -> bool:
        """Hysteresis entry: a broker above the trigger, a warmed-up one far below, or one
        that just finished its warm-up outside the band (relief stopped short of filling it)."""
        return any(self.ratio(n) > 1 + self.settings.trigger
                   or (not n.warming and self.ratio(n) < 1 - self.settings.underload_trigger)
                   or (n.broker in warmed and self.distance(self.ratio(n)) > 0)
                   for n in self.nodes.values())

    def run(self) -> list[Move]:
        """Moves, worst broker first, until every broker is in the band or none can improve."""
        moves: list[Move] = []
        stuck: set[str] = set()
        while len(moves) < self.settings.max_moves:
            worst = self._worst(stuck)
            if worst is None:
                break
            step = self._step(worst)
            if not step or len(moves) + len(step) > self.settings.max_moves:
                stuck.add(worst.broker)
                continue
            for move in step:
                self._apply(move)
            moves.extend(step)
        return moves

    def _step(self, worst: Node) -> list[Move]:
        """The worst broker's best move; for one far above the mean with none, a make-room step
        (``balancer.shedding.make_room``): hops off a destination, then the move into the room."""
        move = self._relieve(worst) if self.ratio(worst) > 1 else self._fill(worst)
        if move is not None:
            return [move]
        if self.ratio(worst) <= 1 + self.settings.make_room_trigger:
            return []
        room = make_room(self, worst)
        return [] if room is None else room.moves()

    def _worst(self, stuck: set[str]) -> Node | None:
        worst, worst_distance = None, 0.0
        for node in self.nodes.values():
            ratio = self.ratio(node)
            # A warming broker below the mean waits: later orphans refill it first.
            if node.broker in stuck or (node.warming and ratio < 1):
                continue
            if self.distance(ratio) > worst_distance:
                worst, worst_distance = node, self.distance(ratio)
        return worst

    def gain(self, source: Node, destination: Node, load: float) -> tuple[float, int] | None:
        """(summed distance removed, tier) by moving ``load``; None when the move is refused.

        Refused when the pair's worst end gets no better (the destination ends at or above
        where the source started, or the source at or below where the destination started)
        or the gain is below the minimum, or it is unclean between brokers inside the trigger
        bands while the residuals are spread (``_one_sided``). Tiers, best first: 2 clean -
        neither end is pushed out through the far side of the band; 1 unclean; 0 hand-on - the
        destination ends above the trigger and above the source (or the source below the
        underload trigger and below the destination), so it must pass load on in turn and the
        load travels twice.
        """
        rs, rd = self.ratio(source), self.ratio(destination)
        rs2, rd2 = self.ratio(source, -load), self.ratio(destination, load)
        tol, settings = self.settings.tolerance, self.settings
        if rd2 >= max(rs, 1 + tol) or rs2 <= min(rd, 1 - tol):
            return None
        better = self.distance(rs) - self.distance(rs2) + self.distance(rd) - self.distance(rd2)
        if better < settings.min_gain:
            return None
        if rs2 >= min(rs, 1 - tol) - EPS and rd2 <= max(rd, 1 + tol) + EPS:
            return better, CLEAN
        if not (self.one_sided or rs > 1 + settings.trigger or rd < 1 - settings.underload_trigger):
            return None  # finishing: see ``_one_sided``
        hands_on = (rd2 > max(rs2, 1 + settings.trigger) + EPS
                    or rs2 < min(rd2, 1 - settings.underload_trigger) - EPS)
        return better, HANDS_ON if hands_on else UNCLEAN

    def _relieve(self, source: Node) -> Move | None:
        relief = self.ratio(source) > 1 + self.settings.trigger
        best: Move | None = None
        for bundle, load in source.bundles.items():
            for destination in self.nodes.values():
                if destination is source or (destination.warming and not relief):
                    continue
                best = self._better(best, source, destination, bundle, load, Reason.OVERLOADED)
        return best

    def _fill(self, destination: Node) -> Move | None:
        best: Move | None = None
        for source in self.nodes.values():
            if source is destination or source.warming or self.ratio(source) <= self.ratio(destination):
                continue
            for bundle, load in source.bundles.items():
                best = self._better(best, source, destination, bundle, load, Reason.UNDERLOADED)
        return best

    def _better(self, best: Move | None, source: Node, destination: Node, bundle: str,
                load: float, reason: Reason) -> Move | None:
        if load <= 0:
            return best
        scored = self.gain(source, destination, load)
        if scored is None:
            return best
        move = Move(bundle, load, source.broker, destination.broker, scored[0], scored[1], reason)
        if best is not None and move.rank() <= best.rank():
            return best
        return move if self.checks.allowed(bundle, destination.broker) else best

    def _apply(self, move: Move) -> None:
        source, destination = self.nodes[move.source], self.nodes[move.destination]
        del source.bundles[move.bundle]  # moved once per run: it does not join the destination's
        self.checks.taken(move.bundle)
        source.load -= move.load
        destination.load += move.load
        self.one_sided = self._one_sided()


class PlannedTransferShedder:
    """Plans the fewest transfers that bring every broker within a band of the mean."""

    name: ClassVar[str] = "PlannedTransferShedder"
    extensible: ClassVar[bool] = False

    def __init__(self, config: LoadBalancerConfig) -> None:
        self.config = config
        self.settings = PlanSettings.from_config(config)
        self.excluded = frozenset(config.load_balancer_shedding_excluded_namespaces)
        self.capacity: dict[str, float] = {}
        self.first_seen: dict[str, int] = {}
        self.left: dict[str, str] = {}  # bundle -> the broker it last left
        self.active = False
        self.warming: set[str] = set()  # brokers warming at the last run

    def own_placement(self) -> PlacementStrategy:
        """Where orphans and new bundles go: most headroom by this shedder's capacity estimates."""
        return HeadroomPlacement(self.config, self)

    def shed(self, view: ClusterView) -> ShedResult:
        self._observe(view)
        if len(view.brokers) < 2:
            return ShedResult.skipped(Reason.NO_BROKERS, brokers=len(view.brokers))
        plan = Plan(self._nodes(view), self.settings, _Filters(view, self.left))
        if plan.util <= 0:
            return ShedResult.skipped(Reason.NO_LOAD_DATA, load=0.0)
        summary = self._summary(plan)
        warming = {n.broker for n in plan.nodes.values() if n.warming}
        warmed, self.warming = self.warming - warming, warming
        if not (self.active or plan.triggered(warmed)):
            return ShedResult.skipped(Reason.BALANCED, **summary)
        moves = plan.run()
        # Hysteresis exit: stay active only while planning still moves something.
        self.active = bool(moves)
        if not moves:
            return ShedResult.skipped(Reason.BALANCED, **summary)
        for move in moves:
            self.left[move.bundle] = move.source
        return ShedResult(tuple(self._decision(plan, m, summary) for m in moves), None, summary)

    # -- state across runs ------------------------------------------------------------------
    def _observe(self, view: ClusterView) -> None:
        """Warm-up clocks and capacity estimates; forget brokers that left and gone bundles."""
        for broker in [b for b in self.first_seen if b not in view.brokers]:
            del self.first_seen[broker]
            self.capacity.pop(broker, None)
        # Brokers there at the first run were there before this leader: they are warm.
        joined = view.now_ms if self.first_seen or self.capacity else view.now_ms - self.settings.warmup_ms
        for broker, data in view.brokers.items():
            self.first_seen.setdefault(broker, joined)
            usage = data.report.cpu.percent() / 100.0
            throughput = data.report.msg_throughput
            if IDLE_USAGE < usage < SATURATED_USAGE and throughput > 0:
                self.capacity[broker] = throughput / usage
        for bundle in [b for b in self.left if b not in view.bundles]:
            del self.left[bundle]

    def _nodes(self, view: ClusterView) -> dict[str, Node]:
        known = [self.capacity[b] for b in view.brokers if b in self.capacity]
        default = statistics.median(known) if known else 1.0
        nodes = {
            broker: Node(broker, data.report.msg_throughput, self.capacity.get(broker, default),
                         view.now_ms - self.first_seen[broker] < self.settings.warmup_ms)
            for broker, data in view.brokers.items()
        }
        for owner, bundles in view.bundles_by_owner.items():
            node = nodes.get(owner)
            if node is None or node.warming:
                continue
            for data in bundles:
                if self._movable(view, data.bundle):
                    node.bundles[data.bundle] = data.stats.msg_throughput
        return nodes

    def _movable(self, view: ClusterView, bundle: str) -> bool:
        namespace = namespace_of(bundle)
        return (bundle not in view.recently_unloaded and namespace not in self.excluded
                and not is_system_namespace(namespace))

    # -- decisions as data ------------------------------------------------------------------
    def _summary(self, plan: Plan) -> dict[str, InputValue]:
        ratios = [plan.ratio(n) for n in plan.nodes.values()]
        return {"mean_utilisation": plan.util, "max_ratio": max(ratios), "min_ratio": min(ratios),
                "trigger": self.settings.trigger, "tolerance": self.settings.tolerance,
                "active": self.active}

    def _decision(self, plan: Plan, move: Move, summary: dict[str, InputValue]) -> Decision:
        source, destination = plan.nodes[move.source], plan.nodes[move.destination]
        inputs: dict[str, InputValue] = {
            "bundle_load": move.load,
            "source_ratio_after": plan.ratio(source),
            "destination_ratio_after": plan.ratio(destination),
            "source_capacity": source.capacity,
            "destination_capacity": destination.capacity,
            "destination_warming": destination.warming,
            "gain": move.gain,
            "mean_utilisation": summary["mean_utilisation"],
            "max_ratio_before": summary["max_ratio"],
            "min_ratio_before": summary["min_ratio"],
        }
        if move.room_for is not None:
            inputs["make_room_for"] = move.room_for
        if move.hops:
            inputs["room_made_by_hops"] = move.hops
        return Decision(move.bundle, move.source, move.destination, reason=move.reason,
                        strategy=self.name, inputs=inputs)


class _Filters:
    """Destination checks of one run: §5.2 filters (cached), no send-back, one move per group."""

    def __init__(self, view: ClusterView, left: dict[str, str]) -> None:
        self.view = view
        self.left = left
        self.cache: dict[str, frozenset[str] | None] = {}
        self.groups_moved: set[str] = set()

    def allowed(self, bundle: str, destination: str) -> bool:
        if self.left.get(bundle) == destination:
            return False
        namespace = namespace_of(bundle)
        group = group_of(self.view, namespace)
        if group is not None and group in self.groups_moved:
            return False
        candidates = self._candidates(bundle, namespace)
        return candidates is not None and destination in candidates

    def taken(self, bundle: str) -> None:
        group = self.group(bundle)
        if group is not None:
            self.groups_moved.add(group)

    def group(self, bundle: str) -> str | None:
        return group_of(self.view, namespace_of(bundle))

    def _candidates(self, bundle: str, namespace: str) -> frozenset[str] | None:
        key = namespace if self.view.policy(namespace).has_policies else _NO_POLICY
        if key not in self.cache:
            try:
                self.cache[key] = frozenset(extensible_candidates(self.view, bundle))
            except LoadBalancerError:
                self.cache[key] = None  # a failing filter: the bundle is not transferable
        return self.cache[key]


STRATEGY = PlannedTransferShedder
