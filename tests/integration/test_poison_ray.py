"""Poisoned records on Ray over real Kafka (the poison suite on the live host): each is a
well-framed record no writer of this cluster could have made (a string epoch, a load report
whose bundles are not maps, a seq or an epoch of 2^64-1), appended raw to the cluster's topic.
Before, each broke every later resume for good and an actor whose recovery raised restarted
forever. Now every actor goes on, lookups answer, an actor restarted after the poison recovers
through it, and the record is named (a dead letter at its partition and offset, and under a
namespace key a degraded view) in the client's view and in every actor's status.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import msgpack
import pytest
import pytest_asyncio

from actors.api import Cluster
from events.log.kafka import KafkaEventLog
from tests.integration.ray_scenarios import QUIET, SETTINGS, bundles, topic_in, unique, workload
from tests.support.patience import patient

pytestmark = [pytest.mark.ray, pytest.mark.kafka, pytest.mark.timeout(300),
              pytest.mark.asyncio(loop_scope="module")]

NS = "public/a"
HUGE = 2**64 - 1
LOAD = workload([NS])


def _envelope(kind: str, key: str, seq: int, epoch: int, payload: dict[str, Any]) -> bytes:
    fields = [str(uuid.uuid4()), kind, 1, key, seq, epoch, 1_700_000_100_000, None, None, payload]
    data: bytes = msgpack.packb(fields, use_bin_type=True)
    return data


BUNDLE = f"{NS}/0x00000000_0x40000000"
POISONS: dict[str, tuple[str, bytes]] = {
    "string epoch": ("_leader", _envelope("LeaderElected", "_leader", 50, 2, {"leader_id": "x", "epoch": "oops"})),
    "bundles not maps": ("broker-1", _envelope("LoadReported", "broker-1", 10_000, 1, {
        "broker_id": "broker-1", "broker_load": {}, "bundles": ["x"]})),
    "seq 2^64-1": (NS, _envelope("BundleOwned", NS, HUGE, 1, {"bundle": BUNDLE, "owner": "broker-evil"})),
    "epoch 2^64-1": (NS, _envelope("BundleOwned", NS, 10_000, HUGE, {"bundle": BUNDLE, "owner": "broker-evil"})),
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(ray_session: Any, kafka: Any) -> AsyncIterator[Cluster]:
    async with Cluster.start(brokers=2, workload=LOAD, settings=SETTINGS, overrides=QUIET,
                             bootstrap=kafka.bootstrap_servers, cluster_name=unique("poison"),
                             ray_namespace=unique("test-poison")) as started:
        await started.create_namespace(NS, bundles=4)
        for bundle in bundles(started, NS):
            await started.lookup(topic_in(LOAD, bundle))
        yield started


async def _poison(cluster: Cluster, kafka: Any, key: str, raw: bytes) -> tuple[int, int]:
    log = KafkaEventLog(kafka.bootstrap_servers, cluster=cluster.link.host.log.cluster, create_topic=False)
    try:
        await log.start()
        partition = log.partition_for(key)
        offset = (await log.end_offsets())[partition]
        await log.append_raw(key, [raw])
        return partition, offset
    finally:
        await log.close()


@pytest.mark.parametrize("case", list(POISONS))
async def test_a_poisoned_record_is_named_and_the_live_cluster_keeps_answering(
        cluster: Cluster, kafka: Any, case: str) -> None:
    key, raw = POISONS[case]
    partition, offset = await _poison(cluster, kafka, key, raw)

    def named() -> bool:  # at the end offset read before the append, or later: another
        # writer's record (or a transaction's marker) may land first
        return any(a.kind == "dead_letter" and a.offset >= offset and a.key == key
                   for a in cluster.ownership().anomalies)
    assert await cluster.link.wait_for(named, patient(30)), f"no dead letter at or after {partition}:{offset}"
    if key == NS:
        assert NS in cluster.ownership().degraded

    # An actor restarted after the poison recovers through it (no restart loop) and serves again.
    await cluster.kill_broker("broker-1", restart=True)
    await cluster.wait_ready(2, timeout_s=patient(60))
    for bundle in bundles(cluster, NS):
        assert (await cluster.lookup(topic_in(LOAD, bundle))).startswith("broker-")

    async def actors_named() -> bool:
        statuses = await cluster.statuses()
        return all(statuses[name]["dead_letters"] >= 1 and (key != NS or NS in statuses[name]["degraded"])
                   for name in ("leader", "ns:0"))  # never restarted: each read the poison in place
    deadline = time.monotonic() + patient(30)
    while time.monotonic() < deadline and not await actors_named():
        await asyncio.sleep(0.5)
    assert await actors_named(), await cluster.statuses()
