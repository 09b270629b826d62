"""Namespace isolation policies (behaviour §5.1 step 3, Pulsar's ``applyNamespacePolicies``).

Invariants:
- brokers are matched by host: the broker id up to its port (``host:8080`` -> ``host``), and a
  regex must match the whole host (Java's ``Matcher.matches``);
- a namespace with a policy may use its primary brokers, plus its secondary brokers when fewer
  than ``min_limit`` primaries are available; brokers matching neither are never candidates;
- a namespace without a policy may use the shared brokers: those that are a primary of no
  namespace's policy (secondaries of other policies stay shared);
- the result lists available brokers only, in ascending id order; an invalid regex is a
  ``ConfigError`` naming it.

Not modelled: Pulsar's per-broker switches for persistent and non-persistent topics (no broker
report carries them), so every broker accepts both kinds.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from balancer.errors import ConfigError

if TYPE_CHECKING:
    from balancer.shedding.base import ClusterView, IsolationPolicy


def host_of(broker: str) -> str:
    """The host part of a broker id, as ``new URL("http://" + id).getHost()`` gives it."""
    if broker.startswith("["):
        end = broker.find("]")
        return broker if end < 0 else broker[: end + 1]
    return re.split(r"[:/]", broker, maxsplit=1)[0]


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigError(
            f"isolation policy: {pattern!r} is not a valid broker regex ({exc})", value=pattern
        ) from None


def matches_any(patterns: tuple[str, ...], host: str) -> bool:
    return any(_compiled(p).fullmatch(host) for p in patterns)


def is_primary(policy: IsolationPolicy, broker: str) -> bool:
    return matches_any(policy.primary, host_of(broker))


def is_shared_broker(view: ClusterView, broker: str) -> bool:
    """Not a primary broker of any namespace's isolation policy."""
    return not any(
        policy.isolation is not None and is_primary(policy.isolation, broker)
        for policy in view.namespaces.values()
    )


def isolation_candidates(view: ClusterView, namespace: str) -> list[str]:
    """Brokers that may serve ``namespace`` under its isolation policy (ascending ids)."""
    available = sorted(view.available)
    policy = view.policy(namespace).isolation
    if policy is None:
        isolated = [p.isolation for p in view.namespaces.values() if p.isolation is not None]
        if not isolated:  # the usual cluster: every broker is shared (one pass, not one per broker)
            return available
        return [b for b in available if not any(is_primary(i, b) for i in isolated)]
    primaries = [b for b in available if is_primary(policy, b)]
    # Pulsar's min_available failover: secondaries join only while primaries are too few.
    if len(primaries) >= policy.min_limit:
        return primaries
    secondaries = {
        b for b in available if b not in primaries and matches_any(policy.secondary, host_of(b))
    }
    return sorted({*primaries, *secondaries})
