"""The live system on real Ray over a real Kafka: 3 brokers, 2 namespaces.

One cluster serves the module (the scenarios run in file order; the crash scenarios last). After
every scenario, the client's and every actor's live ownership view equal a fresh replay of the
log (``assert_consistent``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from actors.api import Cluster
from balancer.bundles import BundleId
from balancer.errors import (
    InvalidInput,
    LoadBalancerError,
    NamespaceExists,
    TransferToCurrentOwner,
    Unavailable,
    UnknownBroker,
    UnknownBundle,
    UnknownNamespace,
    UnknownStrategy,
    UnsplittableBundle,
)
from balancer.ownership import BundleState
from events.catalog import UnloadBundle
from tests.integration.ray_scenarios import (
    NAMESPACES,
    QUIET,
    SESSION_MS,
    SETTINGS,
    assert_consistent,
    bundles,
    mark,
    owner,
    since,
    topic_in,
    unique,
    workload,
)
from tests.support.patience import patient

pytestmark = [pytest.mark.ray, pytest.mark.kafka, pytest.mark.timeout(180),
              pytest.mark.asyncio(loop_scope="module")]

LOAD = workload()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(ray_session: Any, kafka: Any) -> AsyncIterator[Cluster]:
    async with Cluster.start(brokers=3, workload=LOAD, settings=SETTINGS, overrides=QUIET,
                             bootstrap=kafka.bootstrap_servers, cluster_name=unique("ray"),
                             ray_namespace=unique("test-ray-cluster")) as started:
        for namespace in NAMESPACES:
            await started.create_namespace(namespace, bundles=4)
        await started.create_namespace("public/tiny", boundaries=[0, 1, 0xFFFFFFFF])
        yield started


@pytest_asyncio.fixture(loop_scope="module", autouse=True)
async def consistent(cluster: Cluster) -> AsyncIterator[None]:
    yield
    await assert_consistent(cluster)


# -- lookups ----------------------------------------------------------------------------------


async def test_lookups_assign_every_bundle(cluster: Cluster) -> None:
    before = await mark(cluster)
    for namespace in NAMESPACES:
        for bundle in bundles(cluster, namespace):
            topic = topic_in(LOAD, bundle)
            found = await cluster.lookup(topic)
            assert found == owner(cluster, bundle) == cluster.ownership().lookup(topic)
    trail = await since(cluster, before)
    assigned = [r.envelope.payload for r in trail if r.envelope.type == "BundleAssigned"]
    assert len(assigned) == 8 and {p["reason"] for p in assigned} == {"lookup"}
    assert len([r for r in trail if r.envelope.type == "BundleOwned"]) == 8
    assert {owner(cluster, b) for n in NAMESPACES for b in bundles(cluster, n)} == {
        "broker-1", "broker-2", "broker-3"}


async def test_a_lookup_storm_is_placed_and_the_shard_commits_it_in_groups(cluster: Cluster) -> None:
    """Every topic of a fresh namespace looked up at once: every bundle is placed and owned
    (the fixture checks that every view equals a replay of the log), and the namespace shard
    wrote the storm's assignments and confirmations in fewer transactions than commands."""
    await cluster.create_namespace("public/storm", bundles=32)
    before = (await cluster.statuses())["ns:0"]["counts"]
    topics = [f"persistent://public/storm/t{i}" for i in range(256)]
    found = await asyncio.gather(*(cluster.lookup(topic) for topic in topics))
    assert found == [cluster.ownership().lookup(topic) for topic in topics]
    assert set(found) == {"broker-1", "broker-2", "broker-3"}
    after = (await cluster.statuses())["ns:0"]["counts"]
    commands, appends = after["commands"] - before["commands"], after["appends"] - before["appends"]
    assert commands >= 64 and after["groups"] > before["groups"] and appends < commands


async def test_lookup_of_an_owned_topic_is_a_local_read(cluster: Cluster,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    topic = topic_in(LOAD, bundles(cluster, "public/a")[0])
    expected = cluster.ownership().lookup(topic)

    async def no_round_trip(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an owned lookup must not call any actor")

    monkeypatch.setattr(cluster.link.transport, "call", no_round_trip)
    assert expected is not None and await cluster.lookup(topic) == expected


async def test_a_second_client_connects_by_ray_namespace(cluster: Cluster) -> None:
    other = await Cluster.connect(ray_namespace=cluster.link.ray_namespace)
    try:
        assert other.link.host.log == cluster.link.host.log and other.config == cluster.config
        assert other.ownership().state_equals(cluster.ownership())
        topic = topic_in(LOAD, bundles(cluster, "public/b")[3])
        assert await other.lookup(topic) == await cluster.lookup(topic)
        with pytest.raises(InvalidInput):
            await other.kill_broker("broker-1")  # only the starting process manages actors
    finally:
        await other.close()
    assert sorted(cluster.view.brokers) == ["broker-1", "broker-2", "broker-3"]  # nothing ended


# -- unload and transfer ----------------------------------------------------------------------


async def test_unload_to_a_destination_is_a_graceful_transfer(cluster: Cluster) -> None:
    bundle = bundles(cluster, "public/a")[1]
    src = owner(cluster, bundle)
    dst = next(b for b in ("broker-1", "broker-2", "broker-3") if b != src)
    before = await mark(cluster)
    receipt = await cluster.unload("public/a", BundleId.parse(bundle).range.name, destination=dst)
    assert receipt.types() == ["TransferPrepared"] and owner(cluster, bundle) == dst
    trail = [(r.envelope.type, r.envelope.payload) for r in await since(cluster, before)]
    assert [t for t, _ in trail] == ["TransferPrepared", "BundleAssigned", "BundleOwned"]
    assert trail[0][1]["src"] == src and trail[0][1]["dst"] == dst
    assert trail[1][1]["reason"] == "transfer" and trail[1][1]["src"] == src
    assert trail[2][1] == {"bundle": bundle, "owner": dst, "src": src}


async def test_events_stream_the_moves_as_they_happen(cluster: Cluster) -> None:
    bundle = bundles(cluster, "public/a")[2]
    dst = next(b for b in ("broker-1", "broker-2", "broker-3") if b != owner(cluster, bundle))
    stream = cluster.events("TransferPrepared", "BundleAssigned", "BundleOwned")

    async def three() -> list[str]:
        return [(await anext(stream)).envelope.type for _ in range(3)]

    collecting = asyncio.ensure_future(three())
    await asyncio.sleep(0.05)  # the stream listens from its first step on
    await cluster.unload("public/a", bundle, destination=dst)
    assert await asyncio.wait_for(collecting, patient(10)) == ["TransferPrepared", "BundleAssigned", "BundleOwned"]
    await stream.aclose()
    history = cluster.events("NamespaceCreated", from_start=True)
    # The whole log first (in order per partition; Kafka orders nothing across partitions, and
    # other tests of this module create namespaces of their own).
    created: set[str] = set()
    while not {*NAMESPACES, "public/tiny"} <= created:
        created.add((await asyncio.wait_for(anext(history), patient(10))).envelope.payload["namespace"])
    await history.aclose()


async def test_unload_without_destination_frees_then_the_leader_places_again(cluster: Cluster) -> None:
    bundle = bundles(cluster, "public/b")[0]
    await asyncio.sleep(1.5)  # a report or two: the leader learns the bundle has traffic
    before = await mark(cluster)
    await cluster.unload("public/b", bundle)
    assert await cluster.view.wait_for(
        lambda: cluster.ownership().state(bundle) is BundleState.OWNED, 10)
    kinds = [r.envelope.type for r in await since(cluster, before)]
    assert kinds == ["UnloadRequested", "BundleReleased", "BundleAssigned", "BundleOwned"]


# -- split ------------------------------------------------------------------------------------


async def test_split_with_unload_then_lookups_place_the_children(cluster: Cluster) -> None:
    parent = bundles(cluster, "public/a")[0]
    src = owner(cluster, parent)
    before = await mark(cluster)
    receipt = await cluster.split_bundle("public/a", BundleId.parse(parent).range.name,
                                         "topic_count_equally_divide", unload=True)
    assert receipt.first("SplitRequested") is not None
    assert cluster.ownership().state(parent) is BundleState.DELETED
    trail = await since(cluster, before)
    done = next(r.envelope.payload for r in trail if r.envelope.type == "SplitCompleted")
    assert done["parent"] == parent and done["owner"] == src and len(done["children"]) == 2
    unloaded = [r.envelope.payload["bundle"] for r in trail if r.envelope.type == "UnloadRequested"]
    assert unloaded == done["children"]
    for child in done["children"]:
        assert await cluster.lookup(topic_in(LOAD, child)) == owner(cluster, child)


# -- bad input --------------------------------------------------------------------------------

Verb = Callable[[Cluster], Any]
BAD_INPUT: dict[str, tuple[type[LoadBalancerError], Verb]] = {
    "unknown_namespace": (UnknownNamespace, lambda c: c.unload("public/nope", "0x00000000_0xffffffff")),
    "unknown_bundle": (UnknownBundle, lambda c: c.unload("public/a", "0x00000000_0x20000000")),
    "unknown_broker": (UnknownBroker, lambda c: c.unload(
        "public/b", bundles(c, "public/b")[1], destination="broker-9")),
    "unsplittable": (UnsplittableBundle, lambda c: c.split_bundle(
        "public/tiny", "0x00000000_0x00000001", "range_equally_divide")),
    "transfer_to_owner": (TransferToCurrentOwner, lambda c: c.unload(
        "public/b", bundles(c, "public/b")[1], destination=owner(c, bundles(c, "public/b")[1]))),
    "namespace_exists": (NamespaceExists, lambda c: c.create_namespace("public/a", 2)),
    "unknown_algorithm": (UnknownStrategy, lambda c: c.split_bundle("public/a", "LARGEST", "halve_it")),
    "unknown_domain_broker": (UnknownBroker, lambda c: c.set_failure_domain("d9", ["broker-1", "nope"])),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
async def test_bad_input_is_a_typed_error_and_appends_nothing(cluster: Cluster, case: str) -> None:
    error, verb = BAD_INPUT[case]
    snapshot = cluster.ownership().snapshot()
    before = await mark(cluster)
    with pytest.raises(error) as raised:
        await verb(cluster)
    assert type(raised.value) is error  # the project's class itself, not a Ray wrapper
    assert await since(cluster, before) == []
    await cluster.view.catch_up()
    snapshot["tracker"] = cluster.ownership().snapshot()["tracker"]  # only seq bookkeeping moved
    snapshot["applied"] = cluster.ownership().snapshot()["applied"]
    assert cluster.ownership().snapshot() == snapshot


async def test_lookup_of_an_unknown_namespace_fails_without_an_event(cluster: Cluster) -> None:
    before = len(await since(cluster))
    with pytest.raises(UnknownNamespace):
        await cluster.lookup("persistent://public/nope/t1")
    with pytest.raises(InvalidInput):
        await cluster.lookup("not-a-topic")
    assert len(await since(cluster)) == before


# -- brokers come and go ----------------------------------------------------------------------


async def test_graceful_shutdown_transfers_every_bundle_then_leaves(cluster: Cluster) -> None:
    joined = await cluster.add_broker("broker-4")
    bundle = bundles(cluster, "public/b")[2]
    await cluster.unload("public/b", bundle, destination=joined)
    before = await mark(cluster)
    await cluster.shutdown_broker(joined)
    assert joined not in cluster.view.brokers and owner(cluster, bundle) != joined
    trail = await since(cluster, before)
    transfers = [r.envelope.payload for r in trail if r.envelope.type == "TransferPrepared"]
    assert [p["bundle"] for p in transfers] == [bundle] and transfers[0]["reason"] == "shutdown"
    left = [r.envelope.payload for r in trail if r.envelope.type == "BrokerLeft"]
    assert left == [{"broker_id": joined, "reason": "graceful"}]


async def test_a_restarted_broker_rebuilds_from_the_log(cluster: Cluster) -> None:
    held = sorted(b for b in bundles(cluster) if cluster.ownership().owner(b) == "broker-2")
    before = (await cluster.statuses())["broker:broker-2"]["pid"]
    await cluster.kill_broker("broker-2", restart=True)

    async def restarted() -> dict[str, Any]:
        while True:
            status = (await cluster.statuses())["broker:broker-2"]
            # A new process answers before it has registered: wait for both.
            if status.get("pid") not in (None, before) and status.get("registered"):
                return status
            await asyncio.sleep(0.2)

    status = await asyncio.wait_for(restarted(), patient(30))
    assert status["registered"] is True and not status["stopped"]
    # On Kafka the actor has a snapshot store on its node (none written yet: the history is
    # shorter than a snapshot's interval), so it folded the whole topic and says where it looked.
    start = status["start"]
    assert start["from_snapshot"] == 0 and start["folded"] > 0, start
    assert any("no usable snapshot in" in n and "bundle-balancer" in n for n in start["notes"]), start
    # Back within its session: it was never expired and serves what the log says it owns.
    if not any(r.envelope.type == "BrokerLeft" for r in await since(cluster)):
        assert sorted(b for b in bundles(cluster) if cluster.ownership().owner(b) == "broker-2") == held


async def test_a_killed_broker_bundles_are_owned_elsewhere_within_the_session(cluster: Cluster) -> None:
    lost = "broker-3"
    held = [b for b in bundles(cluster) if cluster.ownership().owner(b) == lost]
    assert held
    before = await mark(cluster)
    await cluster.kill_broker(lost)
    assert await cluster.view.wait_for(
        lambda: all(cluster.ownership().owner(b) not in (None, lost) for b in held), patient(60))
    trail = await since(cluster, before)
    left = [r.envelope for r in trail if r.envelope.type == "BrokerLeft"]
    assert [(e.payload["broker_id"], e.payload["reason"], e.key) for e in left] == [(lost, "expired", lost)]
    # Judged on the cluster's own clock (the records' times), not the test's: expired no sooner
    # than a session after it was last heard, and its bundles placed again within a session of
    # the expiry, plus however late the expiry itself was (a busy machine delays every actor).
    heard = max(r.envelope.ts_ms for r in await since(cluster) if r.envelope.key == lost
                and r.envelope.type in ("LoadReported", "BrokerRegistered"))
    late = left[0].ts_ms - heard - SESSION_MS
    assert late >= 0, (heard, left[0].ts_ms)
    placed = [r.envelope.ts_ms for r in trail if r.envelope.type == "BundleAssigned"]
    assert max(placed) - left[0].ts_ms <= SESSION_MS + late, (left[0].ts_ms, late, placed)
    forced = [r.envelope.payload for r in trail if r.envelope.type == "BundleAssigned"]
    assert sorted(p["bundle"] for p in forced) == sorted(held), [
        (r.partition, r.offset, r.envelope.type, r.envelope.payload) for r in trail]
    assert all(p["force"] and p["reason"] == "orphan" and p["src"] == lost for p in forced)


async def test_verbs_on_a_missing_actor_are_unavailable_not_hung(cluster: Cluster) -> None:
    command = UnloadBundle(command_id="to-nobody", epoch=0, bundle="public/a/0x00000000_0xffffffff")
    reply, error = await cluster.link.transport.call("broker:nobody", command, timeout_s=2)
    assert reply is None and isinstance(error, Unavailable)
