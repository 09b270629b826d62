"""TransferShedder's data: Java arithmetic, the top-bundles report and the load statistics.

Invariants:
- ``java_div``, ``java_max0`` and ``java_sqrt`` give Java's double results where Python would
  raise or differ (x/0, NaN in max, sqrt of a negative), so thresholds compare as in Pulsar;
- ``report_top_bundles`` is each owner's top-k report of behaviour §3: ascending, without
  system, excluded, policy-bound (unless enabled) or zero-throughput bundles; it is a per-report
  product, one pass over the bundles;
- ``LoadStats`` keeps Pulsar's operation order: avg = sum/n, std = sqrt(sq/n - avg^2), and an
  offload replaces the pair's two loads in the sum of squares with avg kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.load import BundleStats, top_bundles
from balancer.shedding.base import ClusterView, NamespacePolicy, is_system_namespace

TopBundles = Mapping[str, tuple[BundleStats, ...]]
"""Broker id -> its top-bundles report, ascending (the heaviest last)."""


def java_div(a: float, b: float) -> float:
    """Java's double division: x/0 is +-inf, 0/0 and nan/0 are NaN (Python would raise)."""
    if b != 0:
        return a / b
    if a == 0 or math.isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def java_max0(x: float) -> float:
    """Java's ``Math.max(0, x)``: NaN stays NaN (Python's max would answer 0)."""
    return x if x > 0 or math.isnan(x) else 0.0


def java_sqrt(x: float) -> float:
    """Java's Math.sqrt: NaN for a negative argument (rounding can make sq/n - avg^2 < 0)."""
    return math.sqrt(x) if x >= 0 else math.nan


def report_top_bundles(view: ClusterView) -> dict[str, tuple[BundleStats, ...]]:
    """Every owner's top-bundles report from the view's bundle stats (behaviour §3).

    One pass over the bundles plus a sort per broker: O(bundles log bundles-per-broker).
    """
    exclusions = ReportExclusions(view.config, view.policy)
    grouped: dict[str, list[BundleStats]] = {}
    for data in view.bundles.values():
        if data.owner is not None:
            grouped.setdefault(data.owner, []).append(data.stats)
    k = view.config.load_balancer_max_number_of_bundles_in_bundle_load_report
    return {owner: broker_top_bundles(items, k, exclusions) for owner, items in grouped.items()}


def broker_top_bundles(
    bundles: Iterable[BundleStats], k: int, exclusions: ReportExclusions
) -> tuple[BundleStats, ...]:
    """One broker's report: its k heaviest reportable bundles, ascending (ties by id)."""
    kept = [s for s in bundles if not exclusions.excluded(namespace_of(s.bundle))]
    return tuple(top_bundles(kept, k))


class ReportExclusions:
    """Namespaces left out of top-bundle reports: system, excluded by config, and (unless
    ``loadBalancerSheddingBundlesWithPoliciesEnabled``) those with isolation or anti-affinity.
    Zero-throughput bundles are dropped by ``balancer.load.top_bundles`` itself."""

    def __init__(
        self, config: LoadBalancerConfig, policy: Callable[[str], NamespacePolicy]
    ) -> None:
        self.policy = policy
        self.named = frozenset(config.load_balancer_shedding_excluded_namespaces)
        self.with_policies = config.load_balancer_shedding_bundles_with_policies_enabled
        self.memo: dict[str, bool] = {}

    def excluded(self, namespace: str) -> bool:
        known = self.memo.get(namespace)
        if known is None:
            known = (
                is_system_namespace(namespace)
                or namespace in self.named
                or (not self.with_policies and self.policy(namespace).has_policies)
            )
            self.memo[namespace] = known
        return known


@dataclass
class LoadStats:
    """Pulsar's ``LoadStats``: the sorted brokers, the two cursors and the running std."""

    ranked: list[str]
    count: int = 0
    avg: float = 0.0
    sq_sum: float = 0.0
    std: float = 0.0
    min_idx: int = 0
    max_idx: int = -1
    sheddings: int = 0

    def __post_init__(self) -> None:
        self.max_idx = len(self.ranked) - 1

    def settle(self, total: float, sq_sum: float, count: int) -> None:
        self.count, self.sq_sum = count, sq_sum
        self.avg = total / count
        self.std = java_sqrt(sq_sum / count - self.avg * self.avg)

    def offload(self, max_load: float, min_load: float, moved: float) -> None:
        """Replace the pair's loads by their post-move values in the sum of squares."""
        self.sq_sum -= max_load * max_load + min_load * min_load
        max_after = java_max0(max_load - moved)
        min_after = min_load + moved
        self.sq_sum += max_after * max_after + min_after * min_after
        # abs(): the replaced loads no longer sum to count x avg, so the variance may go negative.
        self.std = java_sqrt(abs(self.sq_sum / self.count - self.avg * self.avg))
        self.sheddings += 1
        self.min_idx += 1

    def min_broker(self) -> str:
        return self.ranked[self.min_idx]

    def max_broker(self) -> str:
        return self.ranked[self.max_idx]
