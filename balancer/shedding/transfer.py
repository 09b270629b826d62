"""TransferShedder, the extensible load manager's strategy (behaviour §4.4, PIP-220).

Invariants:
- a broker's score is its ``weighted_max_ema`` (E's weighted max including memory, one EMA
  sample per report); brokers with load data sort by score ascending, ties by id, and outdated
  brokers stay in that order although the statistics skip them (as Pulsar's sorted store does);
- statistics (avg, population std) cover brokers whose data is within the TTL; a recent source
  whose data is less than ``loadBalanceSheddingDelayInSeconds`` newer than its unload stops the
  run (CoolDown), an expired one leaves ``view.recently_unloaded_brokers``;
- the hit count is the only cross-run state: +1 per run whose condition holds, 0 otherwise and
  after a run that made decisions; a run acts on hit > threshold;
- at most ``loadBalancerMaxNumberOfBrokerSheddingPerCycle`` (max, min) pairs shed, the max index
  always advances, the min index only after a pair moved load;
- a max broker never gives up its last top bundle; bundles go in top-bundle (ascending) order;
  swapped-back bundles (min -> max) come right before the bundle they make room for, and count
  towards the pair's balance only with ``loadBalancerDebugModeEnabled`` (behaviour §8);
- arithmetic is Java's double arithmetic in Pulsar's operation order (division by zero gives
  inf/NaN, sqrt of a negative NaN), so thresholds compare exactly as in Pulsar;
- top bundles are a per-report product (each broker's top-k of behaviour §3), computed once per
  view by ``report_top_bundles``, never per pair or per bundle; the §5.2 filters run once per
  run for all policy-free namespaces and once per policy-bound namespace, so a run is
  O(brokers log brokers + polled brokers x top-k + filter passes x brokers), independent of
  the number of bundles.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.decisions import Decision, InputValue, Label, Reason, ShedResult
from balancer.errors import LoadBalancerError
from balancer.load import BundleStats, is_outdated
from balancer.placement.filters import extensible_candidates
from balancer.shedding.base import ClusterView
from balancer.shedding.transfer_stats import LoadStats, TopBundles, java_div, report_top_bundles

UNDERLOADED_MULTIPLIER_CAP = 0.5
SWAP_MAX_SHARE = 0.75  # a swap must leave the max broker under 75 % of its throughput
_NO_POLICY = ""  # the filter-cache key shared by namespaces without policies (never a namespace)


@dataclass
class _Pair:
    """One (max, min) pairing and the throughput it has marked to move so far."""

    max_broker: str
    min_broker: str
    reason: Reason
    max_load: float
    min_load: float
    max_tput: float
    min_tput: float
    offload: float = field(init=False)
    target: float = field(init=False)
    marked: float = 0.0
    gained: float = 0.0

    def __post_init__(self) -> None:
        self.offload = (self.max_load - self.min_load) / 2
        self.target = java_div(self.max_tput * self.offload, self.max_load)

    def inputs(self, stats: LoadStats) -> dict[str, InputValue]:
        return {
            "max_broker": self.max_broker,
            "min_broker": self.min_broker,
            "max_load": self.max_load,
            "min_load": self.min_load,
            "avg": stats.avg,
            "std": stats.std,
            "offload": self.offload,
            "offload_throughput": self.target,
            "max_throughput": self.max_tput,
            "min_throughput": self.min_tput,
        }


@dataclass
class _Swap:
    """Min-broker bundles that make room for one max-broker bundle."""

    bundles: list[BundleStats]
    throughput: float


@dataclass
class _Run:
    """Per-run scratch: the view, the statistics, skip counters and the decisions made."""

    view: ClusterView
    stats: LoadStats
    top: TopBundles
    # Filter survivors by namespace (or _NO_POLICY); None = the pipeline failed.
    candidates: dict[str, frozenset[str] | None] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    empty_data: int = 0
    few_bundles: int = 0


class TransferShedder:
    """Moves load from the most to the least loaded brokers until the std meets the target."""

    name: ClassVar[str] = "TransferShedder"
    extensible: ClassVar[bool] = True

    def __init__(self, config: LoadBalancerConfig) -> None:
        self.config = config
        self.hit_count = 0
        self.multiplier = min(
            UNDERLOADED_MULTIPLIER_CAP, max(0.0, config.load_balancer_broker_load_target_std / 2.0)
        )
        self.excluded_namespaces = frozenset(config.load_balancer_shedding_excluded_namespaces)
        self._top_view: ClusterView | None = None
        self._top: TopBundles = {}

    def prepare(self, view: ClusterView, top: TopBundles | None = None) -> None:
        """Take the view's top-bundle reports (computed here unless given): a per-report cost."""
        self._top_view = view
        self._top = report_top_bundles(view) if top is None else top

    def shed(self, view: ClusterView) -> ShedResult:
        try:
            if self._top_view is not view:
                self.prepare(view)
            return self._shed(view)
        except Exception as exc:
            # Pulsar catches Throwable here: any error ends the run as Failure/Unknown.
            return ShedResult.skipped(
                Reason.UNKNOWN, label=str(Label.FAILURE), error=f"{type(exc).__name__}: {exc}"
            )

    def _shed(self, view: ClusterView) -> ShedResult:
        brokers = view.brokers
        ranked = sorted(brokers, key=lambda b: (brokers[b].weighted_max_ema, b))
        stats = LoadStats(ranked)
        skip = self._statistics(view, stats)
        if skip is not None:
            return ShedResult.skipped(skip, brokers=len(ranked))
        if self._condition(view, stats):
            self.hit_count += 1
        else:
            self.hit_count = 0
        summary = self._summary(stats)
        if self.hit_count <= self.config.load_balancer_shedding_condition_hit_count_threshold:
            return ShedResult.skipped(Reason.HIT_COUNT, **summary)
        run = _Run(view, stats, self._top)
        self._pairs(run)
        if not run.decisions:
            return ShedResult.skipped(self._empty_reason(run), **summary)
        self.hit_count = 0
        return ShedResult(tuple(run.decisions), None, summary)

    def _summary(self, stats: LoadStats) -> dict[str, InputValue]:
        return {
            "avg": stats.avg,
            "std": stats.std,
            "target_std": self.config.load_balancer_broker_load_target_std,
            "brokers": stats.count,
            "hit_count": self.hit_count,
        }

    @staticmethod
    def _empty_reason(run: _Run) -> Reason:
        if run.empty_data > 0:
            return Reason.NO_LOAD_DATA
        return Reason.NO_BUNDLES if run.few_bundles > 0 else Reason.HIT_COUNT

    # -- statistics, condition, reason -------------------------------------------------------
    def _statistics(self, view: ClusterView, stats: LoadStats) -> Reason | None:
        """Fill avg/std (broker id order); return why the run stops, if it does."""
        config = self.config
        delay_ms = config.load_balance_shedding_delay_in_seconds * 1000
        recent = view.recently_unloaded_brokers
        outdated = False
        total = sq_sum = 0.0
        count = 0
        for broker in sorted(view.brokers):
            data = view.brokers[broker]
            if is_outdated(data, view.now_ms, config):
                outdated = True
                continue
            unloaded_at = recent.get(broker)
            if unloaded_at is not None:
                if data.updated_ms - unloaded_at < delay_ms:
                    return Reason.COOL_DOWN
                del recent[broker]
            load = data.weighted_max_ema
            total += load
            sq_sum += load * load
            count += 1
        if count == 0:
            return Reason.OUTDATED_DATA if outdated else Reason.NO_BROKERS
        if any(b not in view.brokers for b in view.available):
            return Reason.NO_LOAD_DATA
        stats.settle(total, sq_sum, count)
        return None

    def _underloaded(self, view: ClusterView, broker: str, stats: LoadStats) -> bool:
        data = view.brokers[broker]
        if data.weighted_max_ema < stats.avg * self.multiplier:
            return True
        top = view.brokers[stats.max_broker()]
        return data.msg_throughput_ema < top.msg_throughput_ema * self.multiplier

    def _overloaded(self, view: ClusterView, broker: str, avg: float) -> bool:
        load = view.brokers[broker].weighted_max_ema
        target = self.config.load_balancer_broker_load_target_std
        return load > self.config.overload_threshold and load > avg + target

    def _condition(self, view: ClusterView, stats: LoadStats) -> bool:
        return (
            stats.std > self.config.load_balancer_broker_load_target_std
            or self._underloaded(view, stats.min_broker(), stats)
            or self._overloaded(view, stats.max_broker(), stats.avg)
        )

    def _reason(self, view: ClusterView, stats: LoadStats) -> Reason | None:
        if stats.std > self.config.load_balancer_broker_load_target_std:
            return Reason.OVERLOADED
        if self._underloaded(view, stats.min_broker(), stats):
            return Reason.UNDERLOADED
        if self._overloaded(view, stats.max_broker(), stats.avg):
            return Reason.OVERLOADED
        return None

    # -- pairs ----------------------------------------------------------------------------
    def _pairs(self, run: _Run) -> None:
        stats = run.stats
        limit = self.config.load_balancer_max_number_of_broker_shedding_per_cycle
        while stats.sheddings < limit and stats.min_idx < stats.max_idx:
            reason = self._reason(run.view, stats)
            if reason is None:
                return
            max_broker = stats.max_broker()
            stats.max_idx -= 1
            pair = self._pair(run.view, max_broker, stats.min_broker(), reason)
            self._shed_pair(run, pair)

    @staticmethod
    def _pair(view: ClusterView, max_broker: str, min_broker: str, reason: Reason) -> _Pair:
        high, low = view.brokers[max_broker], view.brokers[min_broker]
        return _Pair(
            max_broker,
            min_broker,
            reason,
            max_load=high.weighted_max_ema,
            min_load=low.weighted_max_ema,
            max_tput=high.report.msg_throughput,
            min_tput=low.report.msg_throughput,
        )

    def _shed_pair(self, run: _Run, pair: _Pair) -> None:
        tops = run.top.get(pair.max_broker, ())
        if not tops:
            run.empty_data += 1
            return
        if len(tops) == 1:
            run.few_bundles += 1
            return
        self._walk(run, pair, tops)
        if pair.marked > 0:
            moved = java_div((pair.marked - pair.gained) * pair.max_load, pair.max_tput)
            run.stats.offload(pair.max_load, pair.min_load, moved)
        else:
            run.few_bundles += 1

    def _walk(self, run: _Run, pair: _Pair, tops: tuple[BundleStats, ...]) -> None:
        """Mark the max broker's top bundles, lightest first, until the next overshoots T."""
        transfer = self.config.load_balancer_transfer_enabled
        # One iterator per max broker: a min bundle offered to one swap is not offered again.
        min_tops = iter(run.top.get(pair.min_broker, ()))
        remaining = len(tops)
        for stats in tops:
            if not self._movable(run, pair, stats):
                continue
            if remaining <= 1:
                return
            size = stats.msg_throughput
            swap: _Swap | None = None
            if pair.marked - pair.gained + size > pair.target:
                swap = self._swap(run, pair, size, min_tops) if transfer else None
                if swap is None:
                    return
                self._emit_swap(run, pair, stats.bundle, swap)
            destination = pair.min_broker if transfer else None
            extra: dict[str, InputValue] = {
                "move": "offload",
                "swapped_in": [s.bundle for s in swap.bundles] if swap else [],
                "swapped_throughput": swap.throughput if swap else 0.0,
            }
            self._emit(run, pair, stats, pair.max_broker, destination, extra)
            pair.marked += size
            remaining -= 1

    def _movable(self, run: _Run, pair: _Pair, stats: BundleStats) -> bool:
        view = run.view
        bundle = stats.bundle
        owned = view.bundles.get(bundle)
        return (
            owned is not None
            and owned.owner == pair.max_broker
            and namespace_of(bundle) not in self.excluded_namespaces
            and bundle not in view.recently_unloaded
            and self._transferable(run, bundle, pair.max_broker, pair.min_broker)
            and stats.msg_throughput != 0
        )

    def _swap(
        self, run: _Run, pair: _Pair, size: float, min_tops: Iterator[BundleStats]
    ) -> _Swap | None:
        """Tentatively move min bundles to max until both sides balance; None if they never do."""
        max_new = pair.max_tput - pair.marked + pair.gained - size
        min_new = pair.min_tput + pair.marked - pair.gained + size
        swap = _Swap([], 0.0)
        for candidate in min_tops:
            # Pulsar's swap walk forgets the grace period; behaviour §4.0 applies it to every
            # selection, and so do we: a bundle just shed to min must not come straight back.
            if candidate.bundle in run.view.recently_unloaded:
                continue
            if not self._transferable(run, candidate.bundle, pair.min_broker, pair.max_broker):
                continue
            gain = candidate.msg_throughput
            if gain == 0:
                continue
            if max_new + gain < pair.max_tput and min_new - gain < pair.max_tput:
                swap.bundles.append(candidate)
                max_new += gain
                min_new -= gain
                swap.throughput += gain
                if min_new <= max_new and max_new < pair.max_tput * SWAP_MAX_SHARE:
                    return swap
        return None

    def _emit_swap(self, run: _Run, pair: _Pair, making_room_for: str, swap: _Swap) -> None:
        for candidate in swap.bundles:
            extra: dict[str, InputValue] = {"move": "swap", "swap_for": making_room_for}
            self._emit(run, pair, candidate, pair.min_broker, pair.max_broker, extra)
        # Pulsar adds the swapped throughput inside its debug-logging branch (behaviour §8).
        if self.config.load_balancer_debug_mode_enabled:
            pair.gained += swap.throughput

    def _emit(
        self,
        run: _Run,
        pair: _Pair,
        stats: BundleStats,
        source: str,
        destination: str | None,
        extra: dict[str, InputValue],
    ) -> None:
        inputs = pair.inputs(run.stats)
        inputs.update(
            bundle_throughput=stats.msg_throughput,
            marked_throughput=pair.marked,
            gained_throughput=pair.gained,
            hit_count=self.hit_count,
        )
        inputs.update(extra)
        decision = Decision(
            stats.bundle, source, destination, Label.SUCCESS, pair.reason, self.name, inputs
        )
        run.decisions.append(decision)

    # -- transferability (behaviour §4.4 'Transferable') -----------------------------------
    def _transferable(self, run: _Run, bundle: str, source: str, destination: str) -> bool:
        config = self.config
        view = run.view
        if (
            not config.load_balancer_shedding_bundles_with_policies_enabled
            and view.policy(namespace_of(bundle)).has_policies
        ):
            return False
        candidates = self._candidates(run, bundle)
        if candidates is None or destination not in candidates:
            return False
        others = len(candidates) - (1 if source in candidates else 0)
        if not config.load_balancer_transfer_enabled:
            return others > 0
        return destination != source

    @staticmethod
    def _candidates(run: _Run, bundle: str) -> frozenset[str] | None:
        """The §5.2 filter result over every available broker, memoised for the run.

        Every §5.2 filter looks at a bundle only through its namespace's policies (anti-affinity
        group, isolation), so namespaces without policies share one result: the default run pays
        for one pipeline pass, not one per bundle (O(brokers) each).
        """
        namespace = namespace_of(bundle)
        key = namespace if run.view.policy(namespace).has_policies else _NO_POLICY
        if key not in run.candidates:
            try:
                found: frozenset[str] | None = frozenset(extensible_candidates(run.view, bundle))
            except LoadBalancerError:
                # Pulsar logs a failing filter and answers "not transferable". Anything else
                # is a bug, and ends the run as Failure/Unknown instead of hiding here.
                found = None
            run.candidates[key] = found
        return run.candidates[key]


STRATEGY = TransferShedder
