"""A Kafka writer's heads checkpoint on a real broker: a restarted
transactional writer reads only the tail of its partition after its checkpoint, continues every
key's seq exactly, and ignores a checkpoint it cannot use (reading from offset 0 instead).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from events.catalog import LoadReported
from events.log.kafka import KafkaEventLog
from events.log.kafka_topics import HEADS_STREAM, OwnershipSnapshots

pytestmark = pytest.mark.kafka

KEY, OTHER = "broker-1", "broker-2"


def _reports(broker: str, count: int) -> list[LoadReported]:
    return [LoadReported(broker_id=broker, broker_load={"topics": i}) for i in range(count)]


async def _history(servers: str, cluster: str) -> None:
    """120 records under KEY by a writer saving its heads every 25 appends, then 7 by another
    process under a key of the same partition (the writer never saw them)."""
    first = KafkaEventLog(servers, cluster=cluster, partitions=1, writer_id="broker-broker-1",
                          heads_checkpoint_every=25)
    other = KafkaEventLog(servers, cluster=cluster, partitions=1)
    try:
        for _ in range(12):
            await first.append(KEY, _reports(KEY, 10), epoch=0)
    finally:
        await first.close()  # saves its heads
    try:
        await other.append(OTHER, _reports(OTHER, 7), epoch=0)
        await other.append(KEY, _reports(KEY, 2), epoch=0)  # another writer of the same key
    finally:
        await other.close()


async def test_a_restarted_writer_reads_only_the_tail_after_its_checkpoint(kafka: Any) -> None:
    servers, cluster = kafka.bootstrap_servers, f"h{uuid.uuid4().hex[:8]}"
    await _history(servers, cluster)
    again = KafkaEventLog(servers, cluster=cluster, partitions=1, writer_id="broker-broker-1")
    scratch = KafkaEventLog(servers, cluster=cluster, partitions=1, writer_id="broker-broker-1",
                            heads_checkpoint_every=0)
    try:
        landed = await again.append(KEY, _reports(KEY, 1), epoch=0)
        assert [r.envelope.seq for r in landed] == [123]  # 120 + the other writer's 2, then ours
        assert again.heads_read == 9  # the 7 + 2 after the checkpoint written at close
        landed = await scratch.append(KEY, _reports(KEY, 1), epoch=0)
        assert [r.envelope.seq for r in landed] == [124]
        assert scratch.heads_read == 130  # without a checkpoint: the whole partition
    finally:
        await again.close()
        await scratch.close()


async def test_a_checkpoint_that_cannot_be_used_is_ignored(kafka: Any) -> None:
    servers, cluster = kafka.bootstrap_servers, f"h{uuid.uuid4().hex[:8]}"
    await _history(servers, cluster)
    topic = OwnershipSnapshots(servers, cluster=cluster, stream=HEADS_STREAM)
    try:  # the checkpoint claims offsets past the partition's end (a recreated topic)
        await topic.put({f"{cluster}-broker-broker-1": {"heads": {KEY: [999, 0]}, "elected": None,
                                                        "at": {"0": 10_000}}})
    finally:
        await topic.close()
    again = KafkaEventLog(servers, cluster=cluster, partitions=1, writer_id="broker-broker-1")
    try:
        landed = await again.append(KEY, _reports(KEY, 1), epoch=0)
        assert [r.envelope.seq for r in landed] == [123]  # not 1000: the checkpoint was not used
        assert again.heads_read == 129
    finally:
        await again.close()


async def _checkpoint_of(servers: str, cluster: str) -> dict[str, Any]:
    topic = OwnershipSnapshots(servers, cluster=cluster, stream=HEADS_STREAM)
    try:
        return (await topic.load())[f"{cluster}-broker-broker-1"]
    finally:
        await topic.close()


@pytest.mark.parametrize("stray", ["reset", "another cluster's"])
async def test_a_stray_checkpoint_resets_no_key(kafka: Any, stray: str) -> None:
    """A record put in the heads topic by hand (heads all at 0, standing at the partition's end),
    or a sealed checkpoint of another cluster's writer, must not make the writer reuse seqs."""
    servers, cluster = kafka.bootstrap_servers, f"h{uuid.uuid4().hex[:8]}"
    await _history(servers, cluster)
    reader = KafkaEventLog(servers, cluster=cluster, partitions=1)
    try:
        end = (await reader.end_offsets())[0]
    finally:
        await reader.close()
    if stray == "reset":
        forged: dict[str, Any] = {"heads": {}, "elected": None, "at": {"0": end}}
    else:
        other = f"h{uuid.uuid4().hex[:8]}"
        await _history(servers, other)
        forged = await _checkpoint_of(servers, other)
    topic = OwnershipSnapshots(servers, cluster=cluster, stream=HEADS_STREAM)
    try:
        await topic.put({f"{cluster}-broker-broker-1": forged})
    finally:
        await topic.close()
    again = KafkaEventLog(servers, cluster=cluster, partitions=1, writer_id="broker-broker-1")
    try:
        landed = await again.append(KEY, _reports(KEY, 1), epoch=0)
        assert [r.envelope.seq for r in landed] == [123], "the writer reused a seq"
        assert again.heads_read == 129  # the checkpoint was not used: the whole partition
    finally:
        await again.close()
