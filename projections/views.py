"""The views the leader's decisions look at, built from projections only: the shedding and
placement ``ClusterView`` (used alike by the live leader and the what-if replay of its runs).

Invariants:
- a ``ClusterView`` is built from projections only (ownership + load + registry); brokers are
  the registered ones minus those excluded (draining, the bundle's source), in ascending id
  order, and only brokers with a report carry load data;
- a bundle's owner in a view is the ownership view's answer, never the reporting broker: a shed
  view holds the Owned bundles that have load data, a placement view every Owned or Assigning
  bundle (what the extensible filters count), with Pulsar's default data when none was reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.load import BundleData
from balancer.ownership import BundleState
from balancer.placement.base import default_bundle_data
from balancer.shedding.base import ClusterView, IsolationPolicy, NamespacePolicy
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
