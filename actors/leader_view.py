"""What the leader hands to the pure balancer code: cluster views, placement, split statistics.

Invariants:
- views come from ``projections.views`` (one builder for the leader and the what-if replay of
  its runs; re-exported here);
- ``Placer`` is the one place that picks the modular or the extensible placement pipeline
  (``balancer.placement``), so the leader never depends on which one runs;
- ``PlacingViews`` hands out the last placement view again (with the new time) until the
  leader says something it holds changed: a fold of anything but a bundle's ownership event
  (registry, reports, policies), another exclusion, another placing index.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from random import Random
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.errors import BrokerInOtherDomain, UnknownBroker
from balancer.load import BundleData
from balancer.ownership import BundleState
from balancer.placement.avg import HasPlan
from balancer.placement.base import Placement
from balancer.placement.extensible import ExtensiblePlacement
from balancer.placement.modular import ModularPlacement
from balancer.placement.strategies import paired_placement
from balancer.shedding.base import ClusterView
from balancer.split import (
    BundleSplitStats,
    SplitDecision,
    SplitHitCounts,
    extensible_split_candidates,
    modular_split_candidates,
)
from events.catalog import SetFailureDomain
from projections.load import LoadProjection
from projections.ownership import OwnershipProjection
from projections.views import cluster_view, failure_domains, isolation_policy, namespace_policies

__all__ = ["Placer", "PlacingViews", "bundle_counts", "cluster_view", "failure_domains", "isolation_policy",
           "namespace_policies", "split_decisions", "split_stats"]


class PlacingViews:
    """The leader's placement view, built once per change instead of once per placement (a
    view is a pass over every broker: a cold start placed 65,536 bundles on 100 brokers)."""

    def __init__(self) -> None:
        self.version = 0
        self._key: tuple[Any, ...] | None = None
        self._view: ClusterView | None = None

    def changed(self) -> None:
        """Something a placement view holds changed: the next one is built anew."""
        self.version += 1

    def get(self, now_ms: int, key: tuple[Any, ...], build: Callable[[], ClusterView]) -> ClusterView:
        """The view for ``key`` at ``now_ms``: ``build()`` unless nothing changed since the last."""
        key = (self.version, *key)
        if self._view is None or key != self._key:
            self._view, self._key = build(), key
            return self._view
        # A fresh object: a view caches per-view answers (its bundles by owner) on itself.
        return dataclasses.replace(self._view, now_ms=now_ms)


class Placer:
    """The configured placement pipeline: modular (§5.1) or extensible (§5.2); under the modular
    manager a shedder that brings its own placement (``paired_placement``) has it used, exactly
    as ``balancer.simulator.pulsar_placer`` does."""

    def __init__(self, config: LoadBalancerConfig, avg_plan: HasPlan | None = None,
                 shedder: object | None = None) -> None:
        self.config = config
        self.modular = None if config.extensible else ModularPlacement(
            config, paired_placement(shedder), avg_plan=avg_plan)
        self.extensible = ExtensiblePlacement(config) if config.extensible else None

    def place(self, view: ClusterView, bundle: str, rng: Random) -> Placement:
        if self.extensible is not None:
            return self.extensible.place(view, bundle, rng)
        assert self.modular is not None
        if not view.available:
            # Nothing to place on; a modular preallocation must not answer for a gone broker.
            return Placement(bundle, None, (), strategy=self.modular.strategy.name, source="none")
        return self.modular.place(view, bundle, rng)


def split_stats(ownership: OwnershipProjection, load: LoadProjection, *,
                long_term: bool) -> list[BundleSplitStats]:
    """Auto-split inputs for every Owned bundle with load data (M: long-term rates; E: current)."""
    out: list[BundleSplitStats] = []
    for bundle in sorted(ownership.records):
        record = ownership.records[bundle]
        data = load.bundles.get(bundle)
        if record.state is not BundleState.OWNED or data is None:
            continue
        stats = data.stats
        rate = data.long_term.msg_rate if long_term else stats.msg_rate
        tput = data.long_term.msg_throughput if long_term else stats.msg_throughput
        out.append(BundleSplitStats(bundle, topics=stats.topics, sessions=stats.sessions,
                                    msg_rate=rate, throughput=tput))
    return out


def bundle_counts(ownership: OwnershipProjection) -> dict[str, int]:
    return {name: len(info.layout) for name, info in ownership.namespaces.items()}


def has_traffic(bundle: str, reported: Mapping[str, BundleData], parents: Mapping[str, str]) -> bool:
    """Its last report shows load; never reported: its parent's (the children of a split).
    Ends on any ``parents`` map: a bundle seen twice has no traffic known."""
    seen: set[str] = set()
    while bundle not in seen:
        seen.add(bundle)
        data = reported.get(bundle)
        if data is not None:
            return data.stats.msg_rate > 0 or data.stats.topics > 0
        parent = parents.get(bundle)
        if parent is None:
            return False
        bundle = parent
    return False


def check_domain(brokers: Mapping[str, Any], domains: Mapping[str, str],
                 command: SetFailureDomain) -> None:
    """A failure domain may name registered brokers only, none that another domain holds (as
    Pulsar's ``validateBrokerExistsInOtherDomain``: delete or shrink that domain first)."""
    unknown = [b for b in command.brokers if b not in brokers]
    if unknown:
        raise UnknownBroker(f"brokers {unknown} are not registered; registered: "
                            f"{', '.join(sorted(brokers)) or 'none'}", value=unknown)
    for broker in command.brokers:
        held = domains.get(broker)
        if held is not None and held != command.domain:
            raise BrokerInOtherDomain(f"broker {broker} is already in failure domain {held!r}; "
                                      f"remove it there before adding it to {command.domain!r}",
                                      value=broker)


def split_decisions(view: OwnershipProjection, load: LoadProjection, hits: SplitHitCounts,
                    config: LoadBalancerConfig) -> tuple[tuple[SplitDecision, ...], SplitHitCounts]:
    """The bundles the configured manager splits now, and the hit counts it keeps (extensible:
    short-term stats, a bundle must be hot several runs in a row; modular: long-term stats)."""
    counts = bundle_counts(view)
    if not config.extensible:
        return modular_split_candidates(split_stats(view, load, long_term=True), counts, config), hits
    splitting = [b for b, r in view.records.items() if r.state is BundleState.SPLITTING]
    result = extensible_split_candidates(split_stats(view, load, long_term=False), counts, hits,
                                         config, splitting)
    return result.decisions, result.hit_counts
