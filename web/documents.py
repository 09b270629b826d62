"""The project's own documents of a cluster's views, one builder each: ``lbctl``'s ``--json`` output
and the ``/bb/v1`` reads are the same document, whichever way it travels.

Invariants: each builder reads the ``Cluster``'s view only (no command, nothing appended); keys
are sorted when serialised; a degraded namespace (a record under it cannot be read) says so in
``degraded`` rather than being shown as healthy; an unknown tenant or namespace is
``UnknownNamespace`` naming it and what exists.
"""

from __future__ import annotations

from typing import Any

from actors.api import Cluster
from balancer.bundles import BundleId, validate_namespace
from balancer.errors import Unavailable, UnknownNamespace
from balancer.load import max_usage
from events.reports import report_from_payload
from web.shapes import policies


def tenants(cluster: Cluster) -> list[str]:
    """The tenants: the first name of every namespace (this project keeps no tenant of its own)."""
    return sorted({n.split("/", 1)[0] for n in cluster.namespaces()})


def tenant_namespaces(cluster: Cluster, tenant: str) -> list[str]:
    """The namespaces of ``tenant``; a tenant with none does not exist."""
    found = [n for n in cluster.namespaces() if n.split("/", 1)[0] == tenant]
    if not found:
        raise UnknownNamespace(f"tenant {tenant!r} does not exist (it has no namespace); tenants: "
                               f"{', '.join(tenants(cluster)) or 'none'}", value=tenant)
    return found


def policies_document(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """Pulsar's ``Policies`` of ``namespace``, with what this project holds of them."""
    rows = cluster.bundles(validate_namespace(namespace))  # names an unknown namespace
    return policies(rows, cluster.anti_affinity_group(namespace))


def check_health(cluster: Cluster) -> None:
    """Nothing if the cluster can serve (a leader elected, a broker registered), else
    ``Unavailable`` saying what is missing: the broker health check of this project."""
    leader_id, epoch = cluster.leader()
    if leader_id is None or epoch == 0:
        raise Unavailable("unhealthy: no leader is elected", value="leader")
    if not cluster.brokers():
        raise Unavailable("unhealthy: no broker is registered", value="brokers")


def bundles_document(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """Each bundle of ``namespace`` with its state, owner and version, and the boundaries."""
    validate_namespace(namespace)
    known = cluster.ownership().namespaces
    if namespace not in known:
        raise UnknownNamespace(f"namespace {namespace!r} does not exist; known: "
                               f"{', '.join(sorted(known)) or 'none'}", value=namespace)
    rows = list(cluster.ownership().bundles(namespace))
    ranges = [BundleId.parse(row.bundle).range.name for row in rows]
    document: dict[str, Any] = {
        "numBundles": len(rows),
        "boundaries": [r.split("_")[0] for r in ranges] + ([ranges[-1].split("_")[1]] if ranges else []),
        "bundles": [{"range": r, "state": row.state, "owner": row.owner, "version": row.version}
                    for r, row in zip(ranges, rows, strict=True)],
    }
    degraded = cluster.ownership().degraded_reason(namespace)
    if degraded is not None:
        document["degraded"] = degraded
    return document


def brokers_document(cluster: Cluster) -> dict[str, Any]:
    """Each registered broker (url, failure domain, bundles owned, peak resource usage, version)
    and the leader with its epoch."""
    owners = cluster.ownership().owners()
    leader_id, epoch = cluster.leader()
    rows: list[dict[str, Any]] = []
    for broker, info in sorted(cluster.view.brokers.items()):
        load = cluster.load_report(broker)["broker_load"]
        usage = max_usage(report_from_payload(broker, load)) if load is not None else None
        rows.append({"broker": broker, "url": info.url, "failureDomain": info.failure_domain,
                     "bundles": sum(1 for o in owners.values() if o == broker),
                     "maxResourceUsage": usage, "version": info.version})
    return {"brokers": rows, "leader": leader_id, "epoch": epoch}
