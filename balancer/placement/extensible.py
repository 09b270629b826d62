"""The extensible manager's assignment (behaviour §5.2).

Invariants:
- a bundle owned by an available broker answers with its owner (the lookup needs no placement);
- otherwise every available broker goes through LoadManagerClass -> MaxTopicCount -> Version ->
  AntiAffinity -> Isolation; a failing filter is noted in the trail and ignored;
- no candidate left means no owner (``broker`` None); else LeastResourceUsageWithWeight on each
  broker's ``weightedMaxEMA`` picks, with the ``Random`` passed in;
- nothing is remembered here: an assignment counts for later ones once the ownership it leads to
  (Assigning, then Owned) is in the view the caller passes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.placement.base import (
    Placement,
    PlacementContext,
    PlacementStrategy,
    default_bundle_data,
)
from balancer.placement.filters import extensible_filter
from balancer.placement.least_resource_usage import ExtensibleLeastResourceUsage
from balancer.placement.pinned import pinned_owner

if TYPE_CHECKING:
    from random import Random

    from balancer.shedding.base import ClusterView


class ExtensiblePlacement:
    """Assigns unowned bundles for the extensible manager."""

    def __init__(self, config: LoadBalancerConfig, strategy: PlacementStrategy | None = None):
        self.config = config
        self.strategy = strategy or ExtensibleLeastResourceUsage(config)

    def place(self, view: ClusterView, bundle: str, rng: Random) -> Placement:
        """Choose an owner for ``bundle`` (None when every broker is filtered out)."""
        name = self.strategy.name
        data = view.bundles.get(bundle)
        if data is not None and data.owner is not None and data.owner in view.available:
            return Placement(bundle, data.owner, (data.owner,), strategy=name, source="owner")
        pin = pinned_owner(namespace_of(bundle), view.available)
        if pin is not None:  # heartbeat / SLA-monitor namespaces: their own broker, no strategy
            return Placement(bundle, pin.broker, tuple(filter(None, (pin.broker,))), strategy=name,
                             source=pin.reason)
        candidates, steps = extensible_filter(view, bundle, strict=False)
        context = PlacementContext(view, data or default_bundle_data(bundle), rng)
        chosen = self.strategy.select(candidates, context)
        return Placement(
            bundle,
            chosen.broker,
            tuple(candidates),
            chosen.scores,
            chosen.best,
            name,
            steps,
            "strategy" if chosen.broker is not None else "none",
        )
