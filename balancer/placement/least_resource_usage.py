"""LeastResourceUsageWithWeight, modular and extensible (behaviour §5.5).

Invariants:
- modular: every call first updates each candidate's EMA of its modular weighted max usage with
  ``loadBalancerHistoryResourcePercentage``; a broker with no bundles or a zero msg rate (in and
  out) restarts its EMA at the current usage (Pulsar 3.x); EMAs of brokers no longer available
  are forgotten;
- extensible: a broker's usage is its ``weightedMaxEMA`` (behaviour §3); no state here;
- best = candidates whose usage + ``loadBalancerAverageResourceUsageDifferenceThresholdPercentage``
  /100 is at most the average usage over the candidates; an empty best means every candidate;
- brokers without load data take no part in the average or the best set (Pulsar's extensible
  rule; project choice for the modular one, where Pulsar would fail), but remain candidates for
  the fallback;
- the pick is uniformly random within the set chosen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from balancer.config import LoadBalancerConfig
from balancer.load import ema
from balancer.placement.base import PlacementContext, Selection, modular_usage, pick_uniform

if TYPE_CHECKING:
    from balancer.shedding.base import ClusterView


def _draw(
    candidates: Sequence[str], usages: Mapping[str, float], config: LoadBalancerConfig
) -> tuple[str, ...]:
    """The brokers clearly below the average usage, or every candidate if none is."""
    if not usages:
        return tuple(candidates)
    average = sum(usages.values()) / len(usages)
    margin = config.load_balancer_average_resource_usage_difference_threshold_percentage / 100.0
    best = tuple(b for b in candidates if b in usages and usages[b] + margin <= average)
    return best or tuple(candidates)


class LeastResourceUsageWithWeight:
    """Modular variant: a per-call EMA of each candidate's weighted max usage."""

    name: ClassVar[str] = "LeastResourceUsageWithWeight"

    def __init__(self, config: LoadBalancerConfig) -> None:
        self.config = config
        self.history: dict[str, float] = {}

    def select(self, candidates: Sequence[str], context: PlacementContext) -> Selection:
        if not candidates:
            return Selection(None)
        view = context.view
        for broker in [b for b in self.history if b not in view.available]:
            del self.history[broker]
        usages: dict[str, float] = {}
        for broker in candidates:
            updated = self._update(view, broker)
            if updated is not None:
                usages[broker] = updated
        best = _draw(candidates, usages, self.config)
        return Selection(pick_uniform(best, context.rng), usages, best)

    def _update(self, view: ClusterView, broker: str) -> float | None:
        usage = modular_usage(view, broker)
        if usage is None:
            return None
        report = view.brokers[broker].report
        idle = not (view.bundles_of(broker) or report.bundles) or (
            report.msg_rate_in == 0 and report.msg_rate_out == 0
        )
        previous = None if idle else self.history.get(broker)
        self.history[broker] = ema(previous, usage, self.config.history)
        return self.history[broker]


class ExtensibleLeastResourceUsage:
    """Extensible variant: reads each broker's ``weightedMaxEMA`` from its load data."""

    name: ClassVar[str] = "LeastResourceUsageWithWeight"

    def __init__(self, config: LoadBalancerConfig) -> None:
        self.config = config

    def select(self, candidates: Sequence[str], context: PlacementContext) -> Selection:
        if not candidates:
            return Selection(None)
        brokers = context.view.brokers
        usages = {b: brokers[b].weighted_max_ema for b in candidates if b in brokers}
        best = _draw(candidates, usages, self.config)
        return Selection(pick_uniform(best, context.rng), usages, best)
