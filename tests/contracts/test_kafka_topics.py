"""Kafka topics as the log needs them: prefixed names, partitions and retention as configured,
and the compacted ``ownership`` snapshot topic keeping the latest record per bundle."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from events.log.kafka import KafkaEventLog
from events.log.kafka_topics import OwnershipSnapshots, topic_name

pytestmark = pytest.mark.kafka


async def _topic_config(servers: str, topic: str) -> dict[str, str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=servers)
    await admin.start()
    try:
        (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        entries = response.resources[0][4]
        return {entry[0]: entry[1] for entry in entries}
    finally:
        await admin.close()


async def test_topics_are_created_prefixed_with_partitions_and_retention(kafka: Any) -> None:
    cluster = f"c{uuid.uuid4().hex[:10]}"
    async with KafkaEventLog(kafka.bootstrap_servers, cluster=cluster, name="load", partitions=4,
                             retention_ms=3_600_000) as log:
        assert log.topic == topic_name(cluster, "load") == f"{cluster}-load"
        assert log.partitions == 4
        config = await _topic_config(kafka.bootstrap_servers, log.topic)
        assert (config["retention.ms"], config["cleanup.policy"]) == ("3600000", "delete")
    # Reopening with another partition count keeps the topic as it is: keys stay put.
    async with KafkaEventLog(kafka.bootstrap_servers, cluster=cluster, name="load", partitions=8) as again:
        assert again.partitions == 4
    async with KafkaEventLog(kafka.bootstrap_servers, cluster=cluster) as events:
        config = await _topic_config(kafka.bootstrap_servers, events.topic)
        assert config["retention.ms"] == "-1"  # the event history is kept forever


async def test_the_ownership_snapshot_keeps_the_latest_record_per_bundle(kafka: Any) -> None:
    cluster = f"c{uuid.uuid4().hex[:10]}"
    snapshots = OwnershipSnapshots(kafka.bootstrap_servers, cluster=cluster)
    await snapshots.start()
    try:
        a, b = "t/n/0x00000000_0x80000000", "t/n/0x80000000_0xffffffff"
        await snapshots.put({a: {"state": "Assigning", "dst": "b1", "version": 1},
                             b: {"state": "Owned", "dst": "b2", "version": 4}})
        await snapshots.put({a: {"state": "Owned", "dst": "b1", "version": 2}, b: None})
        assert await snapshots.load() == {a: {"state": "Owned", "dst": "b1", "version": 2}}
        config = await _topic_config(kafka.bootstrap_servers, snapshots.topic)
        assert config["cleanup.policy"] == "compact"
    finally:
        await snapshots.close()
