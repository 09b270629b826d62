"""OverloadShedder (behaviour §4.2): shed from every broker at or above the overload threshold.

Invariants:
- usage is the modular weighted max of the current report (PIP-358), no EMA, no state;
- a broker with usage >= threshold meets the condition; its need is
  (usage - threshold + 0.05) x its report throughput, with no minimum-throughput gate;
- selection is the greedy one of §4.1.5 (heaviest first until the need is covered, at least one
  bundle, a sole bundle stays).
"""

from __future__ import annotations

from typing import ClassVar

from balancer.config import LoadBalancerConfig
from balancer.decisions import Decision, InputValue, Reason, ShedResult
from balancer.load import ResourceWeights, weighted_max_usage
from balancer.shedding.base import ClusterView
from balancer.shedding.selection import shed_greedy

ADDITIONAL_THRESHOLD_PERCENT_MARGIN = 0.05


class OverloadShedder:
    """Unloads enough of each overloaded broker to bring it just under the threshold."""

    name: ClassVar[str] = "OverloadShedder"
    extensible: ClassVar[bool] = False

    def __init__(self, config: LoadBalancerConfig) -> None:
        self.config = config
        self.weights = ResourceWeights.from_config(config)

    def shed(self, view: ClusterView) -> ShedResult:
        threshold = self.config.overload_threshold
        decisions: list[Decision] = []
        overloaded: list[str] = []
        for broker in sorted(view.brokers):
            report = view.brokers[broker].report
            usage = weighted_max_usage(report, self.weights)
            if usage < threshold:
                continue
            overloaded.append(broker)
            fraction = usage - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN
            need = report.msg_throughput * fraction
            inputs: dict[str, InputValue] = {
                "usage": usage,
                "threshold": threshold,
                "offload_fraction": fraction,
                "broker_throughput": report.msg_throughput,
                "need": need,
            }
            decisions.extend(
                shed_greedy(
                    view, broker, need, strategy=self.name, reason=Reason.OVERLOADED, inputs=inputs
                )
            )
        summary: dict[str, InputValue] = {"threshold": threshold, "overloaded": overloaded}
        if decisions:
            return ShedResult(tuple(decisions), None, summary)
        skip = Reason.NO_BUNDLES if overloaded else Reason.BALANCED
        return ShedResult.skipped(skip, **summary)


STRATEGY = OverloadShedder
