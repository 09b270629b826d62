"""Round-robin placement (Pulsar's ``RoundRobinBrokerSelector``, behaviour §5.6).

Invariants:
- the n-th call picks candidate ``n mod count`` of the id-sorted candidates; the counter wraps to
  0 after Java's ``Integer.MAX_VALUE``;
- load is ignored; the modular manager uses it for ``loadBalancerSheddingExcludedNamespaces``
  (PIP-380), whose bundles are never rebalanced automatically.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from balancer.config import LoadBalancerConfig
from balancer.placement.base import PlacementContext, Selection

JAVA_INT_MAX = 2**31 - 1


class RoundRobin:
    """Cycle through the candidates, whatever their load."""

    name: ClassVar[str] = "RoundRobin"

    def __init__(self, config: LoadBalancerConfig | None = None) -> None:
        self.count = 0

    def select(self, candidates: Sequence[str], context: PlacementContext) -> Selection:
        if not candidates:
            return Selection(None)
        index = self.count % len(candidates)
        self.count = 0 if self.count == JAVA_INT_MAX else self.count + 1
        chosen = sorted(candidates)[index]
        return Selection(chosen, {}, (chosen,))
