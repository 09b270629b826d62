"""LeastLongTermMessageRate, the modular default placement strategy (behaviour §5.4).

Invariants:
- score(b) = +inf when b's modular weighted max usage exceeds the overload threshold (or b has no
  load data), else the long-term msg rate (in+out) of b's preallocated bundles plus b's own
  long-term rate (the sum over its bundles, or its report totals for ``lbctl decide place``);
  each sum is exact, rounded once (``balancer.exact_sum``: Pulsar sums in hash-map order, so
  no order is Pulsar's, and an exact sum can be kept per change);
- the pick is uniformly random among the candidates of minimum score; when every score is
  infinite that is every candidate (Pulsar's "assign randomly");
- stateless: equal inputs and an equal ``Random`` state give the same pick.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from balancer.config import LoadBalancerConfig
from balancer.exact_sum import exact_sum
from balancer.placement.base import PlacementContext, Selection, modular_usage, pick_uniform
from balancer.placement.index import Preallocations


def broker_long_term_rate(context: PlacementContext, broker: str) -> float:
    """A broker's own long-term msg rate (in+out), before its preallocations."""
    view = context.view
    if context.rate_from_report:
        data = view.brokers.get(broker)
        return 0.0 if data is None else data.report.msg_rate
    if view.index is not None:
        return view.index.long_term_rate(broker)  # the same sum, kept per event
    return exact_sum(bundle.long_term.msg_rate for bundle in view.bundles_of(broker))


def long_term_score(context: PlacementContext, broker: str) -> float:
    usage = modular_usage(context.view, broker)
    if usage is None or usage > context.view.config.overload_threshold:
        return math.inf
    if isinstance(context.preallocated, Preallocations):
        pending = context.preallocated.long_term_rate(broker)  # the same sum, kept per change
    else:
        preallocated = context.preallocated.get(broker, {})
        pending = exact_sum(data.long_term.msg_rate for data in preallocated.values())
    return pending + broker_long_term_rate(context, broker)


def long_term_scores(context: PlacementContext, candidates: Sequence[str]) -> dict[str, float]:
    """``long_term_score`` of each candidate; on an indexed view the per-context choices are
    made once, not once per broker (it runs for every candidate of every placement)."""
    view, pending = context.view, context.preallocated
    index = view.index
    if index is None or context.rate_from_report or not isinstance(pending, Preallocations):
        return {b: long_term_score(context, b) for b in candidates}
    threshold, scores = view.config.overload_threshold, {}
    for broker in candidates:
        usage = modular_usage(view, broker)
        scores[broker] = math.inf if usage is None or usage > threshold else \
            pending.long_term_rate(broker) + index.long_term_rate(broker)
    return scores


class LeastLongTermMessageRate:
    """Pick the broker with the least long-term message rate, preallocations included."""

    name: ClassVar[str] = "LeastLongTermMessageRate"

    def __init__(self, config: LoadBalancerConfig) -> None:
        self.config = config

    def select(self, candidates: Sequence[str], context: PlacementContext) -> Selection:
        if not candidates:
            return Selection(None)
        scores = long_term_scores(context, candidates)
        least = min(scores.values())
        best = tuple(b for b in candidates if scores[b] == least)
        return Selection(pick_uniform(best, context.rng), scores, best)
