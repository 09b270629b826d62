"""A cluster clock far from Kafka's, on real Kafka: records are stamped with cluster time, which a
sped-up or resumed virtual clock puts hours away from the broker's wall clock.

1. A topic this project creates takes a record stamped three hours ahead, and gives it back with
   its stamp (Kafka 4 refuses records more than an hour ahead by default).
2. On a topic that keeps Kafka's bound, such an append is refused at once with an error naming the
   setting, not retried until the append timeout, and it leaves nothing behind: no record, no
   seq used, no writer stuck; an append stamped with the broker's time then goes through.
3. Topic creation uses the names of those settings that the broker knows, oldest Kafka's last.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from balancer.errors import InvalidInput
from events.catalog import BundleAssigned
from events.envelope import Stamper
from events.log.kafka import KafkaEventLog
from events.log.kafka_topics import TIMESTAMP_WINDOWS, ensure_topic, topic_name
from tests.contracts.test_kafka_topics import _topic_config

pytestmark = pytest.mark.kafka
KEY = "t/clock"
HOURS_AHEAD_MS = 3 * 3_600_000
UNBOUNDED = str(2**63 - 1)


class Clock:
    """Wall time plus an offset the test moves."""

    def __init__(self, ahead_ms: int) -> None:
        self.ahead_ms = ahead_ms

    def __call__(self) -> int:
        return int(time.time() * 1000) + self.ahead_ms


def assigned(i: int) -> list[BundleAssigned]:
    return [BundleAssigned(bundle=f"{KEY}/0x{i:08x}_0x{i + 1:08x}", dst="b1")]


async def test_a_record_stamped_hours_ahead_of_kafka_is_kept_with_its_stamp(kafka: Any) -> None:
    cluster, clock = f"k{uuid.uuid4().hex[:8]}", Clock(HOURS_AHEAD_MS)
    async with KafkaEventLog(kafka.bootstrap_servers, cluster=cluster, writer_id="leader",
                             stamper=Stamper(clock_ms=clock)) as log:
        written = await log.append(KEY, assigned(0), epoch=1)
        config = await _topic_config(kafka.bootstrap_servers, log.topic)
        records = (await log.read()).records
    assert config["message.timestamp.after.max.ms"] == UNBOUNDED
    assert config["message.timestamp.before.max.ms"] == UNBOUNDED
    assert [(r.seq, r.envelope.ts_ms) for r in records] == [(1, written[0].envelope.ts_ms)]
    assert records[0].envelope.ts_ms > int(time.time() * 1000) + HOURS_AHEAD_MS - 60_000


async def test_a_topic_that_bounds_timestamps_refuses_at_once_and_keeps_nothing(kafka: Any) -> None:
    cluster, clock = f"k{uuid.uuid4().hex[:8]}", Clock(HOURS_AHEAD_MS)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    await admin.start()
    try:  # made by someone else, with Kafka's default bound
        await admin.create_topics([NewTopic(topic_name(cluster, "events"), 3, 1)])
    finally:
        await admin.close()
    # Retried like an outage, the refusal would take the whole append timeout and say "Unavailable".
    async with KafkaEventLog(kafka.bootstrap_servers, cluster=cluster, writer_id="leader",
                             stamper=Stamper(clock_ms=clock), append_timeout_s=600) as log:
        with pytest.raises(InvalidInput) as refused:
            await log.append(KEY, assigned(0), epoch=1)
        assert "message.timestamp.after.max.ms" in str(refused.value)
        assert log.topic in str(refused.value)
        clock.ahead_ms = 0
        again = await log.append(KEY, assigned(1), epoch=1)
        assert [r.seq for r in again] == [1]  # the refused record used no seq
        records = (await log.read()).records
    assert [(r.seq, r.envelope.payload["bundle"]) for r in records] == [(1, assigned(1)[0].bundle)]


async def test_topic_creation_uses_the_timestamp_settings_the_broker_knows(kafka: Any) -> None:
    servers = kafka.bootstrap_servers
    oldest_first = (TIMESTAMP_WINDOWS[1], TIMESTAMP_WINDOWS[0])  # Kafka 4 no longer knows the first
    topic = f"k{uuid.uuid4().hex[:8]}-events"
    await ensure_topic(servers, topic, partitions=1, timestamp_windows=oldest_first)
    config = await _topic_config(servers, topic)
    assert config["message.timestamp.after.max.ms"] == UNBOUNDED
    unknown = f"k{uuid.uuid4().hex[:8]}-events"
    await ensure_topic(servers, unknown, partitions=1, timestamp_windows=(TIMESTAMP_WINDOWS[1],))
    config = await _topic_config(servers, unknown)
    assert config["message.timestamp.after.max.ms"] == "3600000"  # the broker's own bound
