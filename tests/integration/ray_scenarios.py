"""Helpers for the scenarios of the live system on real Ray (``test_ray_*.py``).

Timers are short (a 3 s session) so that crashes resolve in seconds; ``assert_consistent`` is the
check every scenario ends with: once nothing is in flight, the client's view and every actor's
live view equal a fresh replay of the log, the replay refused nothing, and no bundle is Owned by
a broker that is not registered.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping
from random import Random
from typing import Any

from actors.api import Cluster
from actors.settings import ActorSettings
from actors.workload import Workload
from balancer.ownership import AcceptMode, BundleState
from events.log.port import Offsets, Record
from projections.ownership import OwnershipProjection
from tests.support.patience import patient

NAMESPACES = ("public/a", "public/b")
SESSION_MS = 3_000
SETTINGS = ActorSettings(session_timeout_ms=SESSION_MS, heartbeat_ms=1_000, retry_ms=1_000,
                         sweep_ms=200, lookup_retry_ms=500, drain_timeout_ms=10_000)
QUIET: Mapping[str, Any] = {
    "loadBalancerReportUpdateMinIntervalMillis": 500,
    "loadBalancerAutoBundleSplitEnabled": False,
    "loadBalancerSheddingEnabled": False,
}
"""Reports every 0.5 s; no auto-split and no shedding to move bundles under a scenario's feet."""


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def workload(namespaces: Iterable[str] = NAMESPACES, *, seed: int = 7, rate: float = 4_000.0,
             topics: int = 40) -> Workload:
    return Workload.zipf(Random(seed), list(namespaces), topics_per_namespace=topics,
                         total_msg_rate=rate)


def topic_in(load: Workload, bundle: str) -> str:
    topics = load.topics_in(bundle)
    assert topics, bundle
    return topics[0].name


def bundles(cluster: Cluster, namespace: str | None = None) -> list[str]:
    return [row.bundle for row in cluster.ownership().bundles(namespace)]


def owner(cluster: Cluster, bundle: str) -> str:
    found = cluster.ownership().owner(bundle)
    assert found is not None, (bundle, cluster.ownership().state(bundle))
    return found


def settled(cluster: Cluster) -> bool:
    return not any(r.state.in_flight for r in cluster.ownership().records.values())


async def place_all(cluster: Cluster, load: Workload, namespaces: Iterable[str] = NAMESPACES) -> None:
    for namespace in namespaces:
        for bundle in bundles(cluster, namespace):
            if cluster.ownership().state(bundle) is not BundleState.OWNED:
                await cluster.lookup(topic_in(load, bundle))


async def mark(cluster: Cluster) -> Offsets:
    """Where the log ends now (per partition): ``since(cluster, mark)`` reads what came after."""
    return await cluster.view.log.end_offsets()


async def since(cluster: Cluster, start: Offsets | None = None) -> list[Record]:
    """Records past ``start`` (all without), the periodic ones (load reports, the leader's
    heartbeats) left out; in order per partition, and so per key (a Kafka log orders nothing
    across partitions)."""
    found = (await cluster.view.log.read(start)).records
    return [r for r in found if r.envelope.type not in ("LoadReported", "LeaderHeartbeat")]


def replay_upto(found: list[Record], position: Offsets, cluster: Cluster) -> OwnershipProjection:
    """A fresh fold of the records below ``position`` (the prefix a live view has folded)."""
    # As the live views read it: several partitions are no one ordered stream.
    projection = OwnershipProjection(mode=AcceptMode.from_config(cluster.config), ordered=cluster.view.ownership.ordered)
    for record in found:
        if record.offset < position.get(record.partition, 0):
            projection.apply(record.offset, record.envelope)
    return projection


async def assert_consistent(cluster: Cluster, *, timeout_s: float = 15.0) -> None:
    """Every live view equals a fresh replay of the log up to the position it has folded (so
    the check holds while the leader keeps moving bundles), the replay refused nothing, nothing
    stays in flight, and every Owned bundle's owner is registered."""
    assert await cluster.view.wait_for(lambda: settled(cluster), timeout_s), "still in flight"
    await cluster.view.catch_up()
    client = OwnershipProjection.restore(cluster.ownership().snapshot())
    client_at, registered = dict(cluster.view.cursor.position), dict(cluster.view.brokers)
    actors = await cluster.actor_views()
    found = (await cluster.view.log.read()).records  # read last: it covers every position
    replay = replay_upto(found, client_at, cluster)
    assert replay.anomalies == [], replay.anomalies[:5]
    assert client.state_equals(replay)
    for name, live in actors.items():
        assert live.ownership.state_equals(replay_upto(found, live.position, cluster)), name
    for row in client.bundles():
        if row.state == BundleState.OWNED:
            assert row.owner in registered, row


def read_until_kept(run: subprocess.Popen[str], timeout_s: float = 180) -> str:
    """What ``lbctl run --keep`` printed up to its ``kept:`` line (the cluster then stays up)."""
    assert run.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + patient(timeout_s)
    while time.monotonic() < deadline and not any(line.startswith("kept:") for line in lines):
        line = run.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
    return "\n".join(lines)
