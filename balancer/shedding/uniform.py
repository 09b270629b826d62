"""UniformLoadShedder (behaviour §4.3): narrow the spread between the busiest and idlest broker.

Invariants:
- rates and throughputs are the brokers' report totals (in+out); the max and min brokers are
  found independently per metric with strict comparisons in ascending id order (first wins),
  max starting at -1 and min at Integer.MAX_VALUE; a minimum within 1e-6 of 0 counts as 1.0;
- the rate rule wins when exceeded (no fallback to throughput even if its amount is too small);
- the required amount is truncated to a Java int, and so is each selected bundle's value
  before it is subtracted (Pulsar's ``MutableInt``);
- at most one source per run; zero-traffic bundles can be selected (behaviour §8);
- no state across runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from balancer.config import LoadBalancerConfig
from balancer.decisions import InputValue, Reason, ShedResult
from balancer.shedding.base import ClusterView
from balancer.shedding.selection import (
    java_int,
    ranked,
    short_term_rate,
    short_term_throughput,
    take_fitting_int,
    to_decisions,
)

EPS = 1e-6
JAVA_INTEGER_MAX_VALUE = 2147483647


@dataclass(frozen=True)
class _Extremes:
    """The max and min broker of one metric, and their values."""

    max_broker: str | None
    max_value: float
    min_broker: str | None
    min_value: float


def _extremes(values: dict[str, float]) -> _Extremes:
    max_broker: str | None = None
    min_broker: str | None = None
    max_value = -1.0
    min_value = float(JAVA_INTEGER_MAX_VALUE)
    for broker in sorted(values):
        value = values[broker]
        if value > max_value:
            max_broker, max_value = broker, value
        if value < min_value:
            min_broker, min_value = broker, value
    # A zero minimum would divide by zero; Pulsar treats it as 1.0.
    if -EPS <= min_value <= EPS:
        min_value = 1.0
    return _Extremes(max_broker, max_value, min_broker, min_value)


class UniformLoadShedder:
    """Moves part of the rate (or throughput) gap from the busiest broker."""

    name: ClassVar[str] = "UniformLoadShedder"
    extensible: ClassVar[bool] = False

    def __init__(self, config: LoadBalancerConfig) -> None:
        self.config = config

    def shed(self, view: ClusterView) -> ShedResult:
        conf = self.config
        rate = _extremes({b: d.report.msg_rate for b, d in view.brokers.items()})
        tput = _extremes({b: d.report.msg_throughput for b, d in view.brokers.items()})
        rate_spread = (rate.max_value - rate.min_value) * 100 / rate.min_value
        tput_ratio = tput.max_value / tput.min_value
        rate_limit = conf.load_balancer_msg_rate_difference_shedder_threshold
        tput_limit = conf.load_balancer_msg_throughput_multiplier_difference_shedder_threshold
        rate_exceeded = rate_limit > 0 and rate_spread > rate_limit
        tput_exceeded = tput_limit > 0 and tput_ratio > tput_limit
        summary: dict[str, InputValue] = {
            "rate_spread_percent": rate_spread,
            "rate_threshold": rate_limit,
            "throughput_ratio": tput_ratio,
            "throughput_threshold": tput_limit,
        }
        if not (rate_exceeded or tput_exceeded):
            return ShedResult.skipped(Reason.BALANCED, **summary)
        if rate_exceeded:
            required = java_int((rate.max_value - rate.min_value) * conf.max_unload_percentage)
            return self._shed_from(view, rate, required, conf.min_unload_message, True, summary)
        required = java_int((tput.max_value - tput.min_value) * conf.max_unload_percentage)
        return self._shed_from(
            view, tput, required, conf.min_unload_message_throughput, False, summary
        )

    def _shed_from(
        self,
        view: ClusterView,
        extremes: _Extremes,
        required: int,
        minimum: int,
        by_rate: bool,
        summary: dict[str, InputValue],
    ) -> ShedResult:
        source = extremes.max_broker
        inputs: dict[str, InputValue] = dict(
            summary,
            mode="msgRate" if by_rate else "throughput",
            source_value=extremes.max_value,
            min_broker=extremes.min_broker,
            min_value=extremes.min_value,
            required=required,
            minimum=minimum,
        )
        if required < minimum or source is None:
            return ShedResult.skipped(Reason.BALANCED, **inputs)
        # The condition is met from here on: an empty selection is NoBundles.
        if view.bundle_count(source) <= 1:
            return ShedResult.skipped(Reason.NO_BUNDLES, **inputs)
        value = short_term_rate if by_rate else short_term_throughput
        cap = self.config.max_unload_bundle_num_per_shedding
        chosen, left = take_fitting_int(ranked(view, source, value), required, cap)
        if not chosen:
            return ShedResult.skipped(Reason.NO_BUNDLES, **inputs)
        decisions = to_decisions(
            chosen,
            source=source,
            strategy=self.name,
            reason=Reason.OVERLOADED,
            inputs=inputs,
            value_key="selected_msg_rate" if by_rate else "selected_throughput",
        )
        return ShedResult(tuple(decisions), None, dict(inputs, required_left=left))


STRATEGY = UniformLoadShedder
