"""An append whose commit looked lost, on real Kafka: no seq is ever written twice.

A commit can succeed and still answer with a timeout (the broker was slow, the connection
dropped before the answer). The writer then does not know whether its batch landed. These
tests make a real commit answer that way, and make the writer's look at its partition fail
too, the way it does when the broker is overloaded:

1. the retry that cannot read the partition waits and reads again instead of writing the batch
   a second time;
2. an append that gives up (``append_timeout_s``) leaves its partition in doubt: the next append
   there reads what landed first, so its seqs follow the batch that did commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError

from balancer.errors import Unavailable
from events.catalog import BundleAssigned
from events.log.kafka import KafkaEventLog
from events.log.port import Offsets, ReadResult

pytestmark = pytest.mark.kafka
KEY = "t/doubt"


class SlowAnswers(KafkaEventLog):
    """A real log whose next commit answers like a timeout (after committing), and whose next
    ``failing_reads`` reads of the partition fail."""

    lose_next_answer = False
    failing_reads = 0

    async def _produce(self, partition: int, key: bytes, values: list[tuple[bytes, int]]) -> list[int]:
        offsets = await super()._produce(partition, key, values)
        if self.lose_next_answer:
            self.lose_next_answer = False
            raise KafkaTimeoutError("injected: the commit's answer never came")
        return offsets

    async def _read_range(self, begin: Offsets, limit: int | None, *,
                          partitions: Sequence[int] | None = None,
                          from_ts_ms: int | None = None) -> ReadResult:
        if self.failing_reads:
            self.failing_reads -= 1
            raise Unavailable("injected: the partition cannot be read")
        return await super()._read_range(begin, limit, partitions=partitions, from_ts_ms=from_ts_ms)


def assigned(start: int, count: int) -> list[BundleAssigned]:
    return [BundleAssigned(bundle=f"{KEY}/0x{i:08x}_0x{i + 1:08x}", dst="b1")
            for i in range(start, start + count)]


async def seqs_of(servers: str, cluster: str) -> list[int]:
    async with KafkaEventLog(servers, cluster=cluster) as reader:
        return [r.seq for r in (await reader.read()).records if r.key == KEY]


@pytest.mark.parametrize("writer_id", ["shard-0", None], ids=["transactional", "idempotent"])
async def test_a_retry_that_cannot_read_its_partition_does_not_write_twice(
        kafka: Any, writer_id: str | None) -> None:
    cluster, servers = f"d{uuid.uuid4().hex[:8]}", kafka.bootstrap_servers
    async with SlowAnswers(servers, cluster=cluster, writer_id=writer_id) as writer:
        await writer.append(KEY, assigned(0, 3), epoch=1)
        writer.lose_next_answer, writer.failing_reads = True, 2
        records = await writer.append(KEY, assigned(3, 2), epoch=1)
        assert [r.seq for r in records] == [4, 5]
        await writer.append(KEY, assigned(5, 1), epoch=1)
    assert await seqs_of(servers, cluster) == [1, 2, 3, 4, 5, 6]


async def test_after_an_append_gave_up_the_next_one_follows_what_landed(kafka: Any) -> None:
    cluster, servers = f"d{uuid.uuid4().hex[:8]}", kafka.bootstrap_servers
    async with SlowAnswers(servers, cluster=cluster, writer_id="shard-0", append_timeout_s=1.0) as writer:
        await writer.append(KEY, assigned(0, 3), epoch=1)
        writer.lose_next_answer, writer.failing_reads = True, 1_000_000
        with pytest.raises(Unavailable):
            await writer.append(KEY, assigned(3, 2), epoch=1)  # it did commit: seqs 4 and 5
        writer.failing_reads = 0
        records = await writer.append(KEY, assigned(5, 1), epoch=1)
        assert [r.seq for r in records] == [6]
    assert await seqs_of(servers, cluster) == [1, 2, 3, 4, 5, 6]
