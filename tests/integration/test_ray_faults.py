"""The live system on real Ray under faults, and placement across failure domains.

1. The leader is killed while it sheds (Kafka, time sped up x60 so shedding runs every second):
   Ray restarts it, it wins a higher epoch, rebuilds its shedding memory from the log and never
   sheds a bundle twice within the grace period; the deposed epoch is refused everywhere.
2. Anti-affinity across two failure domains, behaviour §5.3's example (embedded log).
3. Several Ray nodes on one machine: a node is removed and the bundles of the brokers on it are
   owned elsewhere within the session timeout + 2 s (embedded log).
4. Placed ``spread``, the brokers share the nodes evenly, a broker added later goes to the node
   holding fewer, and a broker pinned by its own options stays where they say.
Each scenario ends with ``assert_consistent`` (live views equal a fresh replay of the log).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from actors.api import Cluster
from actors.settings import ActorSettings
from balancer.errors import StaleEpoch
from balancer.ownership import BundleState
from events.catalog import UnloadBundle
from projections.control import is_shedding
from tests.conftest import RAY_HEAD_RESOURCE
from tests.integration.ray_scenarios import (
    NAMESPACES,
    QUIET,
    SESSION_MS,
    SETTINGS,
    assert_consistent,
    bundles,
    owner,
    place_all,
    since,
    topic_in,
    unique,
    workload,
)
from tests.support.patience import patient

pytestmark = [pytest.mark.ray, pytest.mark.timeout(180)]

SPEED = 60.0


def scaled(settings: ActorSettings, factor: float) -> ActorSettings:
    """The same wall-clock timers at ``factor`` x speed (timers are in cluster time)."""
    return dataclasses.replace(settings, **{f.name: int(getattr(settings, f.name) * factor)
                                            for f in dataclasses.fields(settings)
                                            if f.name.endswith("_ms")})


def shed_moves(found: list[Any]) -> list[tuple[int, str, int]]:
    out = []
    for record in found:
        envelope = record.envelope
        if envelope.type in ("TransferPrepared", "UnloadRequested"):
            decision = envelope.payload.get("decision") or {}
            if decision.get("strategy") == "ThresholdShedder":
                out.append((envelope.ts_ms, envelope.payload["bundle"], envelope.epoch))
    return out


@pytest.mark.kafka
async def test_a_killed_leader_is_replaced_with_a_higher_epoch_and_sheds_nothing_twice(
        ray_session: Any, kafka: Any) -> None:
    load = workload(rate=80_000.0)
    overrides = {"loadBalancerReportUpdateMinIntervalMillis": int(500 * SPEED),
                 "loadBalancerAutoBundleSplitEnabled": False,
                 "loadBalancerInFlightServiceUnitStateWaitingTimeInMillis": int(30_000 * SPEED)}
    async with Cluster.start(brokers=3, workload=load, settings=scaled(SETTINGS, SPEED),
                             overrides=overrides, speed=SPEED, bootstrap=kafka.bootstrap_servers,
                             cluster_name=unique("leader"), ray_namespace=unique("test-leader")) as cluster:
        for namespace in NAMESPACES:
            await cluster.create_namespace(namespace, bundles=4)
        await place_all(cluster, load)
        for bundle in bundles(cluster):  # everything on broker-1: the shedder has work to do
            if owner(cluster, bundle) != "broker-1":
                namespace, hash_range = bundle.rsplit("/", 1)
                await cluster.unload(namespace, hash_range, destination="broker-1")
        found = await _wait_for_sheds(cluster, 1, timeout_s=patient(40))
        await cluster.kill_leader()
        if not await cluster.view.wait_for(lambda: cluster.leader().epoch == 2, patient(30)):
            told = [(r.envelope.ts_ms, r.envelope.type, r.envelope.epoch) for r in await since(cluster)
                    if r.envelope.key == "_leader"]
            raise AssertionError(f"no epoch 2 at {cluster.now_ms()}; the leader key's last records: "
                                 f"{told[-8:]}; the leader's actor says {await _leader_says(cluster)}")
        await _wait_for_sheds(cluster, len(found) + 1, timeout_s=patient(40), epoch=2)
        log = await since(cluster)
        elected = [r.envelope.payload["epoch"] for r in log if r.envelope.type == "LeaderElected"]
        assert elected == [1, 2]
        seen: dict[str, int] = {}
        for ts, bundle, _ in shed_moves(log):
            assert bundle not in seen or ts - seen[bundle] > cluster.config.grace_period_ms, bundle
            seen[bundle] = ts
        for record in log:
            if record.envelope.type == "TransferPrepared" and is_shedding(record.envelope.typed):
                decision = record.envelope.payload["decision"]
                assert decision["destination"] == record.envelope.payload["dst"] and decision["inputs"]
        zombie = UnloadBundle(command_id="zombie-1", epoch=1, bundle=bundles(cluster)[0])
        reply, error = await cluster.link.transport.call("ns:0", zombie)
        assert reply is None and isinstance(error, StaleEpoch)
        rejected = [r for r in await since(cluster) if r.envelope.type == "CommandRejected"]
        assert [r.envelope.payload["command_id"] for r in rejected][-1:] == ["zombie-1"]
        await assert_consistent(cluster)


async def _wait_for_sheds(cluster: Cluster, count: int, *, timeout_s: float,
                          epoch: int | None = None) -> list[tuple[int, str, int]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = shed_moves(await since(cluster))
        if len(found) >= count and (epoch is None or any(e == epoch for _, _, e in found)):
            return found
        await asyncio.sleep(0.5)
    skipped = [(r.envelope.epoch, r.envelope.payload.get("reason")) for r in await since(cluster)
               if r.envelope.type == "SheddingSkipped"]
    owners = [owner(cluster, b) for b in bundles(cluster)]
    raise AssertionError(f"fewer than {count} shed moves (epoch {epoch}) within {timeout_s}s; skipped "
                         f"(epoch, reason): {skipped[-12:]}; owners: {owners}; the leader's actor says "
                         f"{await _leader_says(cluster)}")


async def _leader_says(cluster: Cluster) -> object:
    """The leader actor's own status (its role, attempt, failed appends), or why there is none."""
    try:
        handle = await cluster.link.transport.handle("leader")
        return await asyncio.wait_for(handle.status.remote(), 10)
    except Exception as exc:
        return repr(exc)


async def test_anti_affinity_across_two_failure_domains(ray_session: Any, tmp_path: Path) -> None:
    """Behaviour §5.3: D1 = {b1, b2}, D2 = {b3, b4}, four namespaces of one group."""
    group = [f"public/ns{i}" for i in range(1, 5)]
    load = workload(group, topics=10)
    brokers = ["b1", "b2", "b3", "b4"]
    async with Cluster.start(brokers=brokers, workload=load, settings=SETTINGS,
                             overrides={**QUIET, "failureDomainsEnabled": True},
                             log_dir=tmp_path / "log", ray_namespace=unique("test-aa")) as cluster:
        await cluster.set_failure_domain("d1", ["b1", "b2"])
        await cluster.set_failure_domain("d2", ["b3", "b4"])
        for namespace in group:
            await cluster.create_namespace(namespace, 1)
            await cluster.set_anti_affinity_group(namespace, "G1")
        placed = [await cluster.lookup(topic_in(load, bundles(cluster, n)[0])) for n in group]
        domain = {"b1": "d1", "b2": "d1", "b3": "d2", "b4": "d2"}
        assert domain[placed[0]] != domain[placed[1]]  # ns2 goes to the other domain
        # ns3: both domains tie (one each), so either one's free broker; ns4: the other domain's.
        assert domain[placed[2]] != domain[placed[3]]
        assert sorted(placed) == brokers  # every namespace of the group on its own broker
        await assert_consistent(cluster)
        other = await Cluster.connect(log_dir=tmp_path / "log")  # by ray.json in the log dir
        try:
            assert other.ownership().state_equals(cluster.ownership())
            assert {b.broker_id: b.failure_domain for b in other.brokers()} == domain
        finally:
            await other.close()


async def test_removing_a_ray_node_reowns_the_bundles_of_its_brokers(ray_session: Any,
                                                                    tmp_path: Path) -> None:
    node = ray_session.add_node(num_cpus=0, resources={"zone-b": 10})
    head = {"resources": {RAY_HEAD_RESOURCE: 1}}
    zone_b = {"resources": {"zone-b": 1}}
    options = {"ns:0": head, "leader": head, "broker:broker-1": head, "broker:broker-2": head,
               "broker:broker-3": zone_b, "broker:broker-4": zone_b}
    load = workload()
    async with Cluster.start(brokers=4, workload=load, settings=SETTINGS, overrides=QUIET,
                             log_dir=tmp_path / "log", actor_options=options,
                             ray_namespace=unique("test-nodes")) as cluster:
        statuses = await cluster.statuses()
        assert {statuses[f"broker:broker-{i}"]["node_id"] for i in (3, 4)} == {node.node_id}
        for namespace in NAMESPACES:
            await cluster.create_namespace(namespace, bundles=4)
        await place_all(cluster, load)
        lost = ("broker-3", "broker-4")
        held = [b for b in bundles(cluster) if owner(cluster, b) in lost]
        assert held
        started = time.monotonic()
        ray_session.remove_node(node)
        assert await cluster.view.wait_for(lambda: all(
            cluster.ownership().state(b) is BundleState.OWNED
            and owner(cluster, b) not in lost for b in held), 20)
        assert time.monotonic() - started <= SESSION_MS / 1000 + 2.0
        left = sorted(r.envelope.payload["broker_id"] for r in await since(cluster)
                      if r.envelope.type == "BrokerLeft")
        assert left == list(lost)
        for broker in lost:  # they wait for a node that will not come back: end them
            await cluster.kill_broker(broker)
        await assert_consistent(cluster)


async def test_spread_placement_shares_the_nodes_evenly(ray_session: Any, tmp_path: Path) -> None:
    import ray

    node = ray_session.add_node(num_cpus=0, resources={"zone-b": 10})
    try:
        ids = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
        pinned = {"broker:broker-5": {"resources": {"zone-b": 1}}}
        async with Cluster.start(brokers=4, settings=SETTINGS, overrides=QUIET, log_dir=tmp_path / "log",
                                 placement="spread", actor_options=pinned,
                                 ray_namespace=unique("test-spread")) as cluster:
            await cluster.wait_ready(4, patient(60))

            async def where() -> dict[str, int]:
                return {n.split(":")[1]: ids.index(s["node_id"])
                        for n, s in (await cluster.statuses()).items() if n.startswith("broker:")}

            # In turn, the node holding fewer brokers first (ties: the first node id).
            assert await where() == {"broker-1": 0, "broker-2": 1, "broker-3": 0, "broker-4": 1}
            await cluster.kill_broker("broker-2")
            await cluster.add_brokers(["broker-6"], timeout_s=patient(60))
            assert (await where())["broker-6"] == 1  # where one is missing
            await cluster.add_brokers(["broker-5"], timeout_s=patient(60))
            assert (await where())["broker-5"] == ids.index(node.node_id)  # its own options win
            await cluster.kill_broker("broker-5")
    finally:
        ray_session.remove_node(node)
