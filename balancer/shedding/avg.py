"""AvgShedder, shedding side (behaviour §4.5, PIP-364): pair high with low brokers, with hit counts.

Invariants:
- score = 100 x modular weighted max of the current report; brokers sort by exact score, ties
  by id (project choice replacing Pulsar's ``int(a - b)`` comparator, behaviour §8);
- pairs are (0, n-1), (1, n-2), ... while i <= j; an odd middle broker pairs with itself;
- low/high hit counters are per broker; a pair fires when any of its four counters reached its
  threshold, and firing deletes all four; a run that emits no pair clears every counter;
- a fired pair moves rate when (maxRate - minRate) x pct > minUnloadMessage, else throughput
  when its requirement > minUnloadMessageThroughput, else nothing;
- every selected bundle is planned to the pair's low broker: ``planned[bundle] = broker`` (keyed
  by bundle id, behaviour §8), which AvgShedder placement reads; the decision's destination is
  that broker;
- counters and plans naming brokers missing from the round are forgotten (behaviour §8).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from balancer.config import LoadBalancerConfig
from balancer.decisions import Decision, InputValue, Reason, ShedResult
from balancer.load import ResourceWeights, weighted_max_usage
from balancer.shedding.base import ClusterView
from balancer.shedding.selection import (
    ranked,
    short_term_rate,
    short_term_throughput,
    take_fitting_positive,
    to_decisions,
)


@dataclass(frozen=True)
class Pair:
    """A low-score and a high-score broker whose difference reached the low threshold."""

    low: str
    high: str
    difference: float


class AvgShedder:
    """Shedding side of AvgShedder; ``planned`` tells placement where each bundle should go."""

    name: ClassVar[str] = "AvgShedder"
    extensible: ClassVar[bool] = False

    def __init__(self, config: LoadBalancerConfig) -> None:
        self.config = config
        self.weights = ResourceWeights.from_config(config)
        self.hits_low: dict[str, int] = {}
        self.hits_high: dict[str, int] = {}
        self.planned: dict[str, str] = {}
        self.scores: dict[str, float] = {}

    def planned_destination(self, bundle: str) -> str | None:
        """The broker this strategy last planned for ``bundle`` (None if none)."""
        return self.planned.get(bundle)

    def shed(self, view: ClusterView) -> ShedResult:
        self._prune(view)
        self.scores = {
            b: weighted_max_usage(view.brokers[b].report, self.weights) * 100.0
            for b in sorted(view.brokers)
        }
        order = sorted(self.scores, key=lambda b: (self.scores[b], b))
        pairs = self._find_pairs(order)
        summary: dict[str, InputValue] = {"scores": dict(self.scores)}
        if not pairs:
            self.hits_low.clear()
            self.hits_high.clear()
            return ShedResult.skipped(Reason.BALANCED, **summary)
        decisions: list[Decision] = []
        fired = 0
        for pair in pairs:
            counts = self._fire(pair)
            if counts is None:
                continue
            fired += 1
            decisions.extend(self._unload_pair(view, pair, counts))
        if decisions:
            return ShedResult(tuple(decisions), None, summary)
        return ShedResult.skipped(Reason.NO_BUNDLES if fired else Reason.HIT_COUNT, **summary)

    def _prune(self, view: ClusterView) -> None:
        for counters in (self.hits_low, self.hits_high):
            for broker in [b for b in counters if b not in view.brokers]:
                del counters[broker]
        self.planned = {b: dst for b, dst in self.planned.items() if dst in view.brokers}

    def _find_pairs(self, order: list[str]) -> list[Pair]:
        low_threshold = self.config.load_balancer_avg_shedder_low_threshold
        high_threshold = self.config.load_balancer_avg_shedder_high_threshold
        pairs: list[Pair] = []
        i, j = 0, len(order) - 1
        while i <= j:
            low, high = order[i], order[j]
            difference = self.scores[high] - self.scores[low]
            if difference < low_threshold:
                self._forget(low, high, self.hits_low, self.hits_high)
            else:
                pairs.append(Pair(low, high, difference))
                self._hit(low, high, self.hits_low)
                if difference < high_threshold:
                    self._forget(low, high, self.hits_high)
                else:
                    self._hit(low, high, self.hits_high)
            i += 1
            j -= 1
        return pairs

    @staticmethod
    def _hit(low: str, high: str, counters: dict[str, int]) -> None:
        # A self-paired middle broker is counted twice, as in Pulsar.
        counters[low] = counters.get(low, 0) + 1
        counters[high] = counters.get(high, 0) + 1

    @staticmethod
    def _forget(low: str, high: str, *counters: dict[str, int]) -> None:
        for table in counters:
            table.pop(low, None)
            table.pop(high, None)

    def _fire(self, pair: Pair) -> dict[str, InputValue] | None:
        """The pair's counters if it fires (and then forget them), None if it must wait."""
        counts: dict[str, InputValue] = {
            "low_hits_low_broker": self.hits_low.get(pair.low, 0),
            "low_hits_high_broker": self.hits_low.get(pair.high, 0),
            "high_hits_low_broker": self.hits_high.get(pair.low, 0),
            "high_hits_high_broker": self.hits_high.get(pair.high, 0),
        }
        need_low = self.config.load_balancer_avg_shedder_hit_count_low_threshold
        need_high = self.config.load_balancer_avg_shedder_hit_count_high_threshold
        fires = (
            self.hits_high.get(pair.low, 0) >= need_high
            or self.hits_high.get(pair.high, 0) >= need_high
            or self.hits_low.get(pair.low, 0) >= need_low
            or self.hits_low.get(pair.high, 0) >= need_low
        )
        if not fires:
            return None
        self._forget(pair.low, pair.high, self.hits_low, self.hits_high)
        return counts

    def _unload_pair(
        self, view: ClusterView, pair: Pair, counts: dict[str, InputValue]
    ) -> list[Decision]:
        conf = self.config
        low_report = view.brokers[pair.low].report
        high_report = view.brokers[pair.high].report
        rate_required = (high_report.msg_rate - low_report.msg_rate) * conf.max_unload_percentage
        tput_required = (
            high_report.msg_throughput - low_report.msg_throughput
        ) * conf.max_unload_percentage
        if rate_required > conf.min_unload_message:
            by_rate, required = True, rate_required
        elif tput_required > conf.min_unload_message_throughput:
            by_rate, required = False, tput_required
        else:
            return []
        inputs: dict[str, InputValue] = dict(
            counts,
            low_broker=pair.low,
            low_score=self.scores[pair.low],
            high_score=self.scores[pair.high],
            score_difference=pair.difference,
            mode="msgRate" if by_rate else "throughput",
            required=required,
        )
        value = short_term_rate if by_rate else short_term_throughput
        chosen, _ = take_fitting_positive(ranked(view, pair.high, value), required)
        for candidate in chosen:
            self.planned[candidate.bundle] = pair.low
        return to_decisions(
            chosen,
            source=pair.high,
            strategy=self.name,
            reason=Reason.OVERLOADED,
            inputs=inputs,
            value_key="selected_msg_rate" if by_rate else "selected_throughput",
            destination=pair.low,
        )


STRATEGY = AvgShedder
