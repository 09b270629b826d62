"""ThresholdShedder, the modular manager's default strategy (behaviour §4.1).

Invariants:
- each run updates every broker's usage EMA exactly once, and a second time when the lower
  boundary pass runs (Pulsar's double update, behaviour §8, reproduced);
- usage is the modular weighted max, used as is even above 1.0 (the within-limit fallback of Pulsar
  PR #16937 was removed by PR #18645, issue #18598);
- a broker sheds only when its EMA is at least avg + t and its need passes the minimum
  throughput gate; it then "meets the condition" (NoBundles rather than Balanced if nothing
  goes);
- the lower boundary pass (``lowerBoundarySheddingEnabled``) runs only when the normal pass
  selected nothing, and its decisions carry reason ``Underloaded``;
- EMAs of brokers missing from the round are forgotten (behaviour §8, project choice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from balancer.config import LoadBalancerConfig
from balancer.decisions import Decision, InputValue, Reason, ShedResult
from balancer.load import (
    MIB,
    BrokerReport,
    ResourceWeights,
    ema,
    weighted_max_usage,
)
from balancer.shedding.base import ClusterView
from balancer.shedding.selection import shed_greedy

ADDITIONAL_THRESHOLD_PERCENT_MARGIN = 0.05
LOWER_BOUNDARY_THRESHOLD_MARGIN = 0.5


@dataclass
class _Pass:
    """What one pass (normal or lower boundary) produced."""

    decisions: list[Decision]
    condition_met: bool = False


class ThresholdShedder:
    """Sheds from brokers whose usage EMA is above the cluster average plus a threshold."""

    name: ClassVar[str] = "ThresholdShedder"
    extensible: ClassVar[bool] = False

    def __init__(self, config: LoadBalancerConfig) -> None:
        self.config = config
        self.weights = ResourceWeights.from_config(config)
        self.emas: dict[str, float] = {}

    def usage(self, report: BrokerReport) -> float:
        """The sample fed into the EMA: the weighted max, uncapped (behaviour §4.1)."""
        return weighted_max_usage(report, self.weights)

    def shed(self, view: ClusterView) -> ShedResult:
        self.emas = {b: v for b, v in self.emas.items() if b in view.brokers}
        threshold = self.config.load_balancer_broker_threshold_shedder_percentage / 100.0
        avg = self._update_emas(view)
        summary: dict[str, InputValue] = {"average": avg, "threshold": threshold}
        if avg == 0:
            return ShedResult.skipped(Reason.BALANCED, **summary)
        normal = self._normal_pass(view, avg, threshold)
        result = normal
        if not normal.decisions and self.config.lower_boundary_shedding_enabled:
            lower = self._lower_boundary_pass(view, threshold)
            result = _Pass(lower.decisions, normal.condition_met or lower.condition_met)
        if result.decisions:
            return ShedResult(tuple(result.decisions), None, summary)
        skip = Reason.NO_BUNDLES if result.condition_met else Reason.BALANCED
        return ShedResult.skipped(skip, **summary)

    def _update_emas(self, view: ClusterView) -> float:
        """Feed every broker's usage into its EMA; return the mean of the EMAs."""
        if not view.brokers:
            return 0.0
        history = self.config.history
        total = 0.0
        for broker in sorted(view.brokers):
            sample = self.usage(view.brokers[broker].report)
            self.emas[broker] = ema(self.emas.get(broker), sample, history)
            total += self.emas[broker]
        return total / len(view.brokers)

    def _min_throughput(self) -> float:
        return self.config.load_balancer_bundle_unload_min_throughput_threshold * MIB

    def _normal_pass(self, view: ClusterView, avg: float, threshold: float) -> _Pass:
        out = _Pass([])
        for broker in sorted(view.brokers):
            current = self.emas.get(broker, 0.0)
            if current < avg + threshold:
                continue
            fraction = current - avg - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN
            throughput = view.brokers[broker].report.msg_throughput
            need = throughput * fraction
            if need < self._min_throughput():
                continue
            out.condition_met = True
            inputs: dict[str, InputValue] = {
                "ema": current,
                "average": avg,
                "threshold": threshold,
                "offload_fraction": fraction,
                "broker_throughput": throughput,
                "need": need,
            }
            out.decisions.extend(
                shed_greedy(
                    view, broker, need, strategy=self.name, reason=Reason.OVERLOADED, inputs=inputs
                )
            )
        return out

    def _lower_boundary_pass(self, view: ClusterView, threshold: float) -> _Pass:
        # Pulsar recomputes the average here, which feeds every EMA a second sample.
        avg = self._update_emas(view)
        source, below = self._lower_boundary_source(view, avg - threshold)
        if source is None or not below:
            return _Pass([])
        throughput = view.brokers[source].report.msg_throughput
        need = throughput * threshold * LOWER_BOUNDARY_THRESHOLD_MARGIN
        if self._min_throughput() > need:
            return _Pass([])
        inputs: dict[str, InputValue] = {
            "ema": self.emas[source],
            "average": avg,
            "threshold": threshold,
            "lower_boundary": avg - threshold,
            "broker_throughput": throughput,
            "need": need,
        }
        decisions = shed_greedy(
            view, source, need, strategy=self.name, reason=Reason.UNDERLOADED, inputs=inputs
        )
        return _Pass(decisions, condition_met=True)

    def _lower_boundary_source(self, view: ClusterView, bound: float) -> tuple[str | None, bool]:
        """The busiest multi-bundle broker above ``bound``, and whether any broker is below it."""
        source: str | None = None
        best = bound
        below = False
        for broker in sorted(view.brokers):
            current = self.emas.get(broker, 0.0)
            if current > best and view.bundle_count(broker) > 1:
                best, source = current, broker
            if current < bound:
                below = True
        return source, below


STRATEGY = ThresholdShedder
