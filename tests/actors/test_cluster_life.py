"""The actors' life through ``Cluster`` on the in-process host: the same calls a Ray cluster
answers (tests/integration/test_ray_cluster.py), so the bench and the tests need no host of their
own. Each test asserts what an operator sees in the cluster's own views."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from actors.api import Cluster
from actors.settings import LEADER
from balancer.errors import InvalidInput, UnknownBroker

NS = "public/default"


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with Cluster.start(brokers=3, host="inproc") as started:
        await started.wait_ready(3)
        await started.create_namespace(NS, bundles=8)
        for bundle in range(8):
            await started.lookup(f"persistent://{NS}/t-{bundle}")
        yield started


async def test_a_killed_broker_restarts_from_the_log(cluster: Cluster) -> None:
    await cluster.kill_broker("broker-2")
    assert "error" in (await cluster.statuses())["broker:broker-2"]
    await cluster.kill_broker("broker-3", restart=True)
    status = (await cluster.statuses())["broker:broker-3"]
    assert status["registered"] and status["position"] == {0: sum(cluster.view.cursor.position.values())}


async def test_a_full_restart_keeps_every_bundle_owned(cluster: Cluster) -> None:
    ids = ["broker-1", "broker-2", "broker-3"]
    owned = {row.bundle for row in cluster.bundles(NS) if row.state == "Owned"}
    for broker_id in ids:
        await cluster.kill_broker(broker_id)
    assert all("error" in s for n, s in (await cluster.statuses()).items() if n.startswith("broker:"))
    await cluster.sleep(cluster.settings.session_timeout_ms + 5_000)
    assert not cluster.view.brokers  # the leader expired them all
    await cluster.add_brokers(ids, timeout_s=60)
    assert sorted(cluster.view.brokers) == ids

    async def served() -> bool:
        await cluster.sleep(500)
        return all(row.owner in ids and row.state == "Owned" for row in cluster.bundles(NS)
                   if row.bundle in owned)

    assert any([await served() for _ in range(60)]), cluster.bundles(NS)


async def test_a_new_broker_joins_and_a_graceful_one_leaves_with_its_bundles_moved(cluster: Cluster) -> None:
    assert await cluster.add_broker() == "broker-4"
    assert "broker-4" in cluster.view.brokers
    had = [row.bundle for row in cluster.bundles(NS) if row.owner == "broker-1"]
    await cluster.shutdown_broker("broker-1")
    assert "broker-1" not in cluster.view.brokers
    assert all(row.owner != "broker-1" for row in cluster.bundles(NS) if row.bundle in had)


async def test_a_killed_leader_is_followed_by_a_new_epoch(cluster: Cluster) -> None:
    epoch = cluster.leader().epoch
    await cluster.kill_leader()
    for _ in range(60):
        if (await cluster.statuses())[LEADER].get("leads") and cluster.leader().epoch > epoch:
            break
        await cluster.sleep(500)
    assert cluster.leader().epoch > epoch


async def test_every_body_view_equals_the_replay(cluster: Cluster) -> None:
    views = await cluster.actor_views()
    replay = (await cluster.replay()).snapshot()
    assert {"ns:0", LEADER, "broker:broker-1"} <= set(views)
    assert all(v.ownership.snapshot() == replay for v in views.values())


async def test_bad_names_and_ray_options_are_named(cluster: Cluster) -> None:
    with pytest.raises(UnknownBroker, match="broker-9"):
        await cluster.kill_broker("broker-9")
    with pytest.raises(InvalidInput, match="already hosted"):
        await cluster.add_broker("broker-1")
    with pytest.raises(InvalidInput, match="Ray only"):
        await cluster.add_broker("broker-5", options={"num_cpus": 1})
