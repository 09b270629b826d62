"""What the leader hands to the pure balancer code: cluster views, placement, split statistics.

Invariants:
- a ``ClusterView`` is built from the leader's projections only (ownership + load + registry);
  brokers are the registered ones minus those excluded (draining, the bundle's source), in
  ascending id order, and only brokers with a report carry load data;
- a bundle's owner in a view is the ownership view's answer, never the reporting broker: a shed
  view holds the Owned bundles that have load data, a placement view every Owned or Assigning
  bundle (what the extensible filters count), with Pulsar's default data when none was reported;
- ``Placer`` is the one place that picks the modular or the extensible placement pipeline
  (``balancer.placement``), so the leader never depends on which one runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from random import Random
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.load import BundleData
from balancer.ownership import BundleState
from balancer.placement.avg import HasPlan
from balancer.placement.base import Placement, default_bundle_data
from balancer.placement.extensible import ExtensiblePlacement
from balancer.placement.modular import ModularPlacement
from balancer.placement.strategies import paired_placement
from balancer.shedding.base import ClusterView, IsolationPolicy, NamespacePolicy
from balancer.split import BundleSplitStats
from projections.load import LoadProjection
from projections.ownership import OwnershipProjection


def isolation_policy(raw: Mapping[str, Any] | None) -> IsolationPolicy | None:
    """``{"primary": [regex], "secondary": [regex], "min_limit": n}`` -> IsolationPolicy."""
    if not raw:
        return None
    return IsolationPolicy(primary=tuple(raw.get("primary") or ()),
                           secondary=tuple(raw.get("secondary") or ()),
                           min_limit=int(raw.get("min_limit", 1)))


def namespace_policies(ownership: OwnershipProjection) -> dict[str, NamespacePolicy]:
    return {name: NamespacePolicy(name, info.anti_affinity_group, isolation_policy(info.isolation))
            for name, info in sorted(ownership.namespaces.items())}


def failure_domains(ownership: OwnershipProjection,
                    registry: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Broker -> domain: from registration, overridden by FailureDomainSet (the admin's word)."""
    domains = {b: str(p["failure_domain"]) for b, p in sorted(registry.items()) if p.get("failure_domain")}
    domains.update(ownership.failure_domains)
    return domains


def _copy(data: BundleData, owner: str) -> BundleData:
    # The projection's averages are shared, read-only: strategies never write bundle data.
    return BundleData(data.bundle, owner, data.stats, data.short_term, data.long_term)


def _bundles(ownership: OwnershipProjection, load: LoadProjection, placing: bool) -> dict[str, BundleData]:
    out: dict[str, BundleData] = {}
    for bundle in sorted(ownership.records):
        record = ownership.records[bundle]
        held = record.state is BundleState.OWNED or (placing and record.state is BundleState.ASSIGNING)
        if not held or record.dst is None:
            continue
        data = load.bundles.get(bundle)
        if data is not None:
            out[bundle] = _copy(data, record.dst)
        elif placing:
            out[bundle] = _copy(default_bundle_data(bundle), record.dst)
    return out


def cluster_view(now_ms: int, config: LoadBalancerConfig, *, ownership: OwnershipProjection,
                 load: LoadProjection, registry: Mapping[str, Mapping[str, Any]],
                 exclude: Iterable[str] = (), placing: bool = False) -> ClusterView:
    """The view one shedding run (``placing=False``) or one placement (``True``) looks at."""
    skipped = set(exclude)
    available = tuple(sorted(b for b in registry if b not in skipped))
    brokers = {b: info.load for b in available
               if (info := load.brokers.get(b)) is not None and info.load is not None}
    return ClusterView(
        now_ms=now_ms, config=config, brokers=brokers, bundles=_bundles(ownership, load, placing),
        namespaces=namespace_policies(ownership), failure_domains=failure_domains(ownership, registry),
        available=available)


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
