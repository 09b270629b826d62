"""PlannedTransferShedder, placement side: each bundle to the broker with the most headroom.

A broker's load is its reported throughput (bytes/s in+out) plus the bundles placed on it and
not yet reported (the modular preallocations); its capacity is the shedder's estimate (throughput
at 100 % usage), the median of the candidates' estimates when it has none (a broker that just
(re)joined is idle and has none yet), 1.0 for all when nobody has one (load alone decides).

Invariants:
- the pick minimises (load + pending + the bundle's load) / capacity over the candidates it is
  given, so placements already run by the pipeline's filters (isolation, anti-affinity with
  failure domains, topic cap, versions) are honoured; ties keep the lowest id, no randomness;
- the capacities are the paired shedder's (``estimates.capacity``, read afresh on every call);
  without a shedder every broker weighs the same;
- a placement fills the emptiest broker first: the orphans of a leaving broker flow to the one
  that rejoined empty, so the shedder has nothing left to move after the orphans land.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import ClassVar, Protocol

from balancer.config import LoadBalancerConfig
from balancer.placement.base import PlacementContext, Selection


class CapacityEstimates(Protocol):
    """Anything holding per-broker capacity estimates, such as PlannedTransferShedder."""

    @property
    def capacity(self) -> Mapping[str, float]: ...


class _NoEstimates:
    capacity: Mapping[str, float] = {}


class HeadroomPlacement:
    """Place a bundle where its load leaves the lowest utilisation relative to capacity."""

    name: ClassVar[str] = "Headroom"

    def __init__(self, config: LoadBalancerConfig, estimates: CapacityEstimates | None = None) -> None:
        self.config = config
        self.estimates: CapacityEstimates = estimates if estimates is not None else _NoEstimates()

    def select(self, candidates: Sequence[str], context: PlacementContext) -> Selection:
        if not candidates:
            return Selection(None)
        capacity = self._capacities(candidates)
        load = context.bundle.stats.msg_throughput
        scores = {b: (broker_load(context, b) + load) / capacity[b] for b in candidates}
        best = min(candidates, key=lambda b: scores[b])  # the first of the lowest: lowest id
        return Selection(best, scores, (best,))

    def _capacities(self, candidates: Sequence[str]) -> dict[str, float]:
        known = self.estimates.capacity
        estimates = [known[b] for b in candidates if known.get(b, 0.0) > 0]
        default = statistics.median(estimates) if estimates else 1.0
        return {b: known[b] if known.get(b, 0.0) > 0 else default for b in candidates}


def broker_load(context: PlacementContext, broker: str) -> float:
    """Reported throughput plus the throughput of the bundles placed and not yet reported."""
    data = context.view.brokers.get(broker)
    reported = 0.0 if data is None else data.report.msg_throughput
    pending = context.preallocated.get(broker, {})
    return reported + sum(p.stats.msg_throughput for p in pending.values())
