"""The test broker is a real Kafka: metadata, idempotent and transactional produce, restarts.

Invariants checked:
- The broker lists itself in cluster metadata at `kafka.bootstrap_servers`.
- 1000 messages from an idempotent producer to one partition come back complete and in order.
- A transactional producer works on one node (transaction state log settings are right):
  a read_committed consumer sees committed records and never aborted ones.
- Acknowledged records survive a graceful stop and a SIGKILL, each followed by `restart()` on the
  same data dir and ports.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from tests.kafka_server import KafkaHandle, KafkaServer

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

MakeTopic = Callable[..., Awaitable[str]]


async def consume_values(
    bootstrap: str, topic: str, count: int, isolation_level: str = "read_uncommitted"
) -> list[bytes]:
    """Read `count` values of `topic` from the beginning (no consumer group), or fail in 30 s."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level=isolation_level,
    )
    await consumer.start()
    values: list[bytes] = []
    try:
        async with asyncio.timeout(30):
            while len(values) < count:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    values.extend(r.value for r in records if r.value is not None)
    finally:
        await consumer.stop()
    return values


async def produce_idempotent(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Send all values with an idempotent producer and wait for every acknowledgement."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        futures = [await producer.send(topic, value) for value in values]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def restartable_server(kafka: KafkaHandle) -> KafkaServer:
    if not kafka.restartable or not isinstance(kafka, KafkaServer):
        pytest.skip("needs the restartable jars broker (not KAFKA_BOOTSTRAP_SERVERS / Docker)")
    return kafka


async def test_broker_answers_metadata(kafka: KafkaHandle, make_topic: MakeTopic) -> None:
    topic = await make_topic("meta", partitions=3)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    await admin.start()
    try:
        cluster = await admin.describe_cluster()
        [described] = await admin.describe_topics([topic])
    finally:
        await admin.close()
    assert len(cluster["brokers"]) == 1
    assert described["error_code"] == 0
    assert sorted(p["partition"] for p in described["partitions"]) == [0, 1, 2]


async def test_idempotent_producer_round_trip_in_order(
    kafka: KafkaHandle, make_topic: MakeTopic
) -> None:
    topic = await make_topic("idem")
    sent = [f"m{i:04d}".encode() for i in range(1000)]
    await produce_idempotent(kafka.bootstrap_servers, topic, sent)
    assert await consume_values(kafka.bootstrap_servers, topic, len(sent)) == sent


async def test_transactions_read_committed(kafka: KafkaHandle, make_topic: MakeTopic) -> None:
    topic = await make_topic("txn")
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka.bootstrap_servers, transactional_id=f"{topic}-tx"
    )
    await producer.start()
    try:
        async with producer.transaction():
            for i in range(10):
                await producer.send(topic, f"ok{i}".encode())
        await producer.begin_transaction()
        await producer.send(topic, b"aborted")
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send(topic, b"end")
    finally:
        await producer.stop()
    seen = await consume_values(kafka.bootstrap_servers, topic, 11, "read_committed")
    assert seen == [f"ok{i}".encode() for i in range(10)] + [b"end"]


@pytest.mark.parametrize("graceful", [True, False], ids=["stop", "kill"])
async def test_restart_keeps_data(
    kafka: KafkaHandle, make_topic: MakeTopic, graceful: bool
) -> None:
    server = restartable_server(kafka)
    bootstrap = server.bootstrap_servers
    topic = await make_topic("restart")
    before = [f"a{i}".encode() for i in range(100)]
    await produce_idempotent(bootstrap, topic, before)
    await server.restart_async(graceful=graceful)
    assert server.bootstrap_servers == bootstrap
    after = [f"b{i}".encode() for i in range(100)]
    await produce_idempotent(bootstrap, topic, after)
    assert await consume_values(bootstrap, topic, 200) == before + after
