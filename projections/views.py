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
from balancer.placement.index import BundleIndex
from balancer.shedding.base import ClusterView, IsolationPolicy, NamespacePolicy
from events.catalog import BrokerRegistered
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
                    registry: Mapping[str, BrokerRegistered]) -> dict[str, str]:
    """Broker -> domain: from registration, overridden by FailureDomainSet (the admin's word)."""
    domains = {b: str(e.failure_domain) for b, e in sorted(registry.items()) if e.failure_domain}
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


def sync_placing(index: BundleIndex, bundle: str, ownership: OwnershipProjection,
                 load: LoadProjection, *, reported: bool = False) -> None:
    """Bring ``bundle``'s entry of a placing index to what ``_bundles(placing=True)`` holds.

    ``reported``: its load data changed in place (a report), so the entry is copied again and
    the index notes the change for the preallocations that share that data."""
    if reported:
        index.refresh(bundle)
    record = ownership.records.get(bundle)
    held = record is not None and record.dst is not None and (
        record.state is BundleState.OWNED or record.state is BundleState.ASSIGNING)
    if not held:
        index.put(bundle, None)
        return
    assert record is not None and record.dst is not None
    current = index.bundles.get(bundle)
    if current is not None and current.owner == record.dst and not reported:
        return  # same owner, same data: nothing a placement reads changed
    data = load.bundles.get(bundle)
    index.put(bundle, _copy(data if data is not None else default_bundle_data(bundle), record.dst))


def placing_index(ownership: OwnershipProjection, load: LoadProjection) -> BundleIndex:
    """A placing index built from scratch (a recovered or replaced view)."""
    index = BundleIndex()
    for bundle in sorted(ownership.records):
        sync_placing(index, bundle, ownership, load)
    return index


def cluster_view(now_ms: int, config: LoadBalancerConfig, *, ownership: OwnershipProjection,
                 load: LoadProjection, registry: Mapping[str, BrokerRegistered],
                 exclude: Iterable[str] = (), placing: bool = False,
                 index: BundleIndex | None = None) -> ClusterView:
    """The view one shedding run (``placing=False``) or one placement (``True``) looks at.

    A placement view may take a placing ``index`` kept per event (``sync_placing``): its bundles
    are then the index's, shared, not rebuilt."""
    skipped = set(exclude)
    available = tuple(sorted(b for b in registry if b not in skipped))
    indexed = index if placing else None
    brokers = {b: info.load for b in available
               if (info := load.brokers.get(b)) is not None and info.load is not None}
    return ClusterView(
        now_ms=now_ms, config=config, brokers=brokers,
        bundles=indexed.bundles if indexed is not None else _bundles(ownership, load, placing),
        namespaces=namespace_policies(ownership), failure_domains=failure_domains(ownership, registry),
        available=available, index=indexed)
