"""Anti-affinity groups and failure domains (behaviour §5.3).

Invariants:
- groups compare case-insensitively; a namespace without a group is never filtered or held back;
- count(b), modular: how many namespaces of the group have at least one bundle on b, owned or
  preallocated (the namespace being placed included); extensible: how many owned bundles of the
  group's namespaces b has; a broker absent from the counts has count 0;
- with ``failureDomainsEnabled`` and at least one mapped broker, only candidates of the domains
  with the least summed count stay (unmapped brokers form the domain ``default``);
- then, if some candidate has count 0, exactly the candidates with count 0 stay; otherwise those
  with the least count; a non-empty candidate list never filters down to empty;
- shed time (modular): a grouped bundle may leave its broker c, judged over the isolation
  candidates (none: no), when the least count is 0, or count(c) exceeds it (c outside the
  candidates counts 0), or not every candidate has it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from balancer.bundles import namespace_of
from balancer.placement.base import bundles_by_broker_namespace
from balancer.placement.isolation import isolation_candidates

if TYPE_CHECKING:
    from balancer.shedding.base import ClusterView

DEFAULT_DOMAIN = "default"


def group_of(view: ClusterView, namespace: str) -> str | None:
    """The namespace's anti-affinity group, lower-cased; None (or blank) means no group."""
    group = view.policy(namespace).anti_affinity_group
    if group is None or not group.strip():
        return None
    return group.lower()


def modular_counts(
    view: ClusterView, namespace: str, preallocated: Mapping[str, str] | None = None
) -> dict[str, int] | None:
    """Broker -> namespaces of ``namespace``'s group on it; None if it has no group."""
    group = group_of(view, namespace)
    if group is None:
        return None
    counts: dict[str, int] = {}
    for broker, namespaces in bundles_by_broker_namespace(view, preallocated).items():
        hits = sum(
            1 for ns, bundles in namespaces.items() if bundles and group_of(view, ns) == group
        )
        if hits:
            counts[broker] = hits
    return counts


def extensible_counts(view: ClusterView, namespace: str) -> dict[str, int] | None:
    """Broker -> owned bundles of ``namespace``'s group on it; None if it has no group."""
    group = group_of(view, namespace)
    if group is None:
        return None
    counts: dict[str, int] = {}
    for bundle_id in sorted(view.bundles):
        owner = view.bundles[bundle_id].owner
        if owner and group_of(view, namespace_of(bundle_id)) == group:
            counts[owner] = counts.get(owner, 0) + 1
    return counts


def filter_by_counts(
    view: ClusterView, candidates: Sequence[str], counts: Mapping[str, int] | None
) -> list[str]:
    """Keep the candidates a grouped namespace should go to (failure domains first)."""
    kept = list(candidates)
    if counts is None or not kept:
        return kept
    if view.config.failure_domains_enabled and view.failure_domains:
        kept = _least_loaded_domains(view, kept, counts)
    least = min(counts.get(b, 0) for b in kept)
    return [b for b in kept if counts.get(b, 0) == least]


def _least_loaded_domains(
    view: ClusterView, candidates: list[str], counts: Mapping[str, int]
) -> list[str]:
    per_domain: dict[str, int] = {}
    for broker in candidates:
        domain = view.failure_domains.get(broker, DEFAULT_DOMAIN)
        per_domain[domain] = per_domain.get(domain, 0) + counts.get(broker, 0)
    least = min(per_domain.values())
    return [
        b for b in candidates if per_domain[view.failure_domains.get(b, DEFAULT_DOMAIN)] == least
    ]


def may_leave_broker(view: ClusterView, bundle: str, source: str) -> bool:
    """Modular shed-time check: may this grouped bundle leave ``source``?"""
    namespace = namespace_of(bundle)
    counts = modular_counts(view, namespace)
    # Pulsar only holds a bundle back when some broker already hosts the group.
    if not counts:
        return True
    candidates = isolation_candidates(view, namespace)
    if not candidates:
        return False
    least = min(counts.get(b, 0) for b in candidates)
    # As in Pulsar, a source outside the candidates counts as hosting nothing.
    current = counts.get(source, 0) if source in candidates else 0
    if least == 0 or current > least:
        return True
    return any(counts.get(b, 0) != least for b in candidates)
