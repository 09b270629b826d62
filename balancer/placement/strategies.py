"""The placement strategy registry: names (short or Pulsar class names) to instances.

Invariants:
- names resolve like every strategy key of ``broker.conf`` (``LeastLongTermMessageRate``,
  ``impl.LeastLongTermMessageRate`` or the full class name); an unknown name is an
  ``UnknownStrategy`` listing the accepted ones;
- ``LeastResourceUsageWithWeight`` is the modular variant unless ``extensible`` is asked for;
- each call returns a fresh instance (strategies with state keep it per instance);
- a shedding strategy that brings its own placement (``own_placement``) has it used instead of
  the configured one, by the simulator and the live leader alike (``paired_placement``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from balancer.config import PLACEMENT_STRATEGIES, LoadBalancerConfig, resolve_class_name
from balancer.errors import ConfigError, UnknownStrategy
from balancer.placement.avg import AvgShedderPlacement, HasPlan
from balancer.placement.base import PlacementStrategy
from balancer.placement.least_long_term_msg_rate import LeastLongTermMessageRate
from balancer.placement.least_resource_usage import (
    ExtensibleLeastResourceUsage,
    LeastResourceUsageWithWeight,
)
from balancer.placement.round_robin import RoundRobin


def resolve_placement_name(name: str) -> str:
    """The short name of a placement strategy."""
    try:
        return resolve_class_name(
            name, PLACEMENT_STRATEGIES, "placement strategy", "loadBalancerLoadPlacementStrategy"
        )
    except ConfigError:
        raise UnknownStrategy(
            f"unknown placement strategy {name!r}; accepted: {', '.join(sorted(PLACEMENT_STRATEGIES))}",
            value=name,
        ) from None


def create_placement_strategy(
    name: str,
    config: LoadBalancerConfig,
    *,
    avg_plan: HasPlan | None = None,
    extensible: bool = False,
) -> PlacementStrategy:
    """A new strategy instance; ``avg_plan`` is the AvgShedder whose plan placement follows."""
    short = resolve_placement_name(name)
    if short == "LeastResourceUsageWithWeight":
        if extensible:
            return ExtensibleLeastResourceUsage(config)
        return LeastResourceUsageWithWeight(config)
    if short == "AvgShedder":
        return AvgShedderPlacement(config, avg_plan)
    if short == "RoundRobin":
        return RoundRobin(config)
    return LeastLongTermMessageRate(config)


@runtime_checkable
class BringsPlacement(Protocol):
    """A shedding strategy that picks destinations with a placement of its own."""

    def own_placement(self) -> PlacementStrategy: ...


def paired_placement(shedder: object | None) -> PlacementStrategy | None:
    """The placement ``shedder`` brings with it (a fresh instance), None for Pulsar's strategies."""
    return shedder.own_placement() if isinstance(shedder, BringsPlacement) else None
