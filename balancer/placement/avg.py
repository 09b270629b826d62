"""AvgShedder, placement side (behaviour §5.6, PIP-364).

Invariants:
- the plan (bundle id -> broker) is the one AvgShedder's shedding side writes (its ``planned``
  attribute, read afresh on every call, so the shedder may rebind it); without a shedder the
  strategy keeps a plan of its own;
- a bundle whose planned broker is a candidate goes there, with no randomness;
- otherwise the pick is ``sorted(candidates)[crc32(str(n)) mod count]`` for a random Java int n
  from the ``Random`` passed in (Pulsar hashes a random number so that the bundles of a lost
  broker do not all land on one broker), and the pick is recorded as the new plan.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import ClassVar, Protocol, runtime_checkable

from balancer.config import LoadBalancerConfig
from balancer.placement.base import PlacementContext, Selection

JAVA_INT_MIN = -(2**31)
JAVA_INT_MAX = 2**31 - 1


@runtime_checkable
class HasPlan(Protocol):
    """Anything holding AvgShedder's plan, such as ``balancer.shedding.avg.AvgShedder`` (a
    shedding strategy whose placement follows it is one: ``isinstance(strategy, HasPlan)``)."""

    planned: dict[str, str]


class _OwnPlan:
    def __init__(self) -> None:
        self.planned: dict[str, str] = {}


class AvgShedderPlacement:
    """Send a shed bundle to the broker its shedding pair planned for it."""

    name: ClassVar[str] = "AvgShedder"

    def __init__(self, config: LoadBalancerConfig, shedder: HasPlan | None = None) -> None:
        self.config = config
        self.holder: HasPlan = shedder if shedder is not None else _OwnPlan()

    @property
    def plan(self) -> dict[str, str]:
        return self.holder.planned

    def select(self, candidates: Sequence[str], context: PlacementContext) -> Selection:
        if not candidates:
            return Selection(None)
        bundle = context.bundle.bundle
        planned = self.plan.get(bundle)
        if planned is not None and planned in candidates:
            return Selection(planned, {}, (planned,))
        ordered = sorted(candidates)
        draw = context.rng.randint(JAVA_INT_MIN, JAVA_INT_MAX)
        chosen = ordered[zlib.crc32(str(draw).encode("utf-8")) % len(ordered)]
        self.plan[bundle] = chosen
        return Selection(chosen, {}, tuple(ordered))
