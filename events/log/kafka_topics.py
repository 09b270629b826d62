"""Kafka topics of a cluster: names, key -> partition, creation with partitions and retention,
the ownership snapshot, and the time-lookup correction readers need.

Invariants:
- every topic name is ``{cluster}-{stream}`` (``lb-events``, ``lb-load``, ``lb-commands``,
  ``lb-ownership``): two clusters never share a topic;
- the event streams use ``cleanup.policy=delete`` (``events``: retention forever by default);
  only ``ownership`` is compacted: it holds the latest record per bundle and is a cache that can
  always be rebuilt from ``events``, never the source of truth;
- a topic that exists keeps its partition count (changing it would remap keys and break the
  per-key order); ``ensure_topic`` only creates what is missing and reports what is there;
- a record's Kafka timestamp is its envelope's ``ts_ms``, cluster time, which a sped-up or
  resumed virtual clock puts hours away from the broker's wall clock: a topic is created with
  no bound on how far a timestamp may be from the broker's (Kafka 4 refuses records more than
  an hour ahead by default), in the names the broker knows (``TIMESTAMP_WINDOWS``, newest first).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import msgpack
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import (
    InvalidConfigurationError,
    KafkaError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
)
from aiokafka.partitioner import murmur2

from balancer.errors import InvalidInput, Unavailable
from events.log import kafka_client
from events.log.kafka_client import DENIED, KafkaSecurity

logger = logging.getLogger(__name__)

OWNERSHIP_STREAM = "ownership"
HEADS_STREAM = "writer-heads"
"""Compacted: each transactional writer's heads checkpoint, keyed by its id (events.log.kafka_heads)."""
COMPACTED_STREAMS = frozenset({OWNERSHIP_STREAM, HEADS_STREAM})
TOPIC_ALREADY_EXISTS = TopicAlreadyExistsError.errno
_UNBOUNDED = str(2**63 - 1)
TIMESTAMP_WINDOWS: tuple[Mapping[str, str], ...] = (
    {"message.timestamp.before.max.ms": _UNBOUNDED, "message.timestamp.after.max.ms": _UNBOUNDED},
    {"message.timestamp.difference.max.ms": _UNBOUNDED},  # Kafka before 3.6 (gone in 4.0)
)
"""The settings that accept any record timestamp, as each generation of Kafka names them."""


def topic_name(cluster: str, stream: str) -> str:
    """The Kafka topic of ``stream`` (events, load, commands, ownership) in ``cluster``."""
    return f"{cluster}-{stream}"


async def ensure_topic(
    bootstrap_servers: str, topic: str, *, partitions: int, replication_factor: int | None = None,
    config: Mapping[str, str] | None = None, timeout_s: float = 30.0, create: bool = True,
    security: KafkaSecurity | None = None,
    timestamp_windows: Sequence[Mapping[str, str]] = TIMESTAMP_WINDOWS,
) -> int:
    """Create ``topic`` unless it exists (or, with ``create=False``, refuse a missing one with
    ``InvalidInput``); returns its partition count once every partition has a leader."""
    admin = kafka_client.admin(bootstrap_servers, security, request_timeout_ms=15000)
    what = f"describe or create topic {topic}"
    try:
        async with asyncio.timeout(timeout_s):
            await kafka_client.started(admin, bootstrap_servers, security, what)
            if topic not in await admin.list_topics():
                if not create:
                    raise _missing(topic, bootstrap_servers, security)
                await _create(admin, topic, partitions, replication_factor, dict(config or {}),
                              timestamp_windows)
            return await _wait_for_leaders(admin, topic)
    except DENIED as exc:
        raise kafka_client.refused(exc, bootstrap_servers, security or kafka_client.PLAINTEXT,
                                   what) from None
    except (KafkaError, OSError, TimeoutError) as exc:
        raise Unavailable(f"cannot create or describe topic {topic!r} at {bootstrap_servers}: {exc!r}",
                          topic=topic) from exc
    finally:
        with contextlib.suppress(Exception):
            await admin.close()


def _missing(topic: str, bootstrap_servers: str, security: KafkaSecurity | None) -> InvalidInput:
    if security is None or security.protocol == "PLAINTEXT":
        return InvalidInput(f"no topic {topic!r} at {bootstrap_servers}", topic=topic)
    return kafka_client.KafkaRefused(
        f"Kafka cluster {security.cluster!r} at {bootstrap_servers}: no topic {topic!r} visible to "
        f"{security.principal} (missing, or no DESCRIBE ACL on it)", value=topic)


async def _create(
    admin: AIOKafkaAdminClient, topic: str, partitions: int, replication: int | None,
    config: dict[str, str], windows: Sequence[Mapping[str, str]],
) -> None:
    if replication is None:
        brokers = (await admin.describe_cluster()).get("brokers") or [None]
        replication = min(3, len(brokers))
    if replication >= 3:
        config.setdefault("min.insync.replicas", "2")
    for window in windows:  # the first the broker knows; a broker knowing none gets its own
        code, rest = await _create_once(admin, NewTopic(topic, partitions, replication,
                                                        topic_configs={**window, **config}))
        if code != InvalidConfigurationError.errno:
            break
    else:
        logger.warning("Kafka knows none of %s: topic %s keeps the broker's bound on record "
                       "timestamps (a cluster clock running ahead of it will be refused)",
                       [sorted(w) for w in windows], topic)
        code, rest = await _create_once(admin, NewTopic(topic, partitions, replication, topic_configs=config))
    if code == TopicAuthorizationFailedError.errno:
        raise TopicAuthorizationFailedError(topic)
    if code not in (0, TOPIC_ALREADY_EXISTS):
        raise KafkaError(f"create_topics({topic}) failed with error {code}: {rest}")


async def _create_once(admin: AIOKafkaAdminClient, new: NewTopic) -> tuple[int, list[Any]]:
    response = await admin.create_topics([new])
    ((_name, code, *rest),) = response.topic_errors
    return code, rest


async def _wait_for_leaders(admin: AIOKafkaAdminClient, topic: str) -> int:
    while True:
        described: list[Any] = await admin.describe_topics([topic])
        if described and described[0]["error_code"] == TopicAuthorizationFailedError.errno:
            raise TopicAuthorizationFailedError(topic)
        parts = described[0]["partitions"] if described and described[0]["error_code"] == 0 else []
        if parts and all(p["leader"] >= 0 for p in parts):
            return len(parts)
        await asyncio.sleep(0.05)


def stream_config(stream: str, retention_ms: int | None = None) -> dict[str, str]:
    """Topic configuration for a stream of ARCHITECTURE §2."""
    if stream in COMPACTED_STREAMS:
        return {
            "cleanup.policy": "compact",
            "min.compaction.lag.ms": "0",
            "segment.ms": "60000",
            "delete.retention.ms": "86400000",
        }
    retention = -1 if retention_ms is None else retention_ms
    return {"cleanup.policy": "delete", "retention.ms": str(retention)}


def kafka_partition(key: str, partitions: int) -> int:
    """Java's DefaultPartitioner: murmur2 of the key bytes, positive, modulo the partitions."""
    hashed: int = murmur2(key.encode())
    return (hashed & 0x7FFFFFFF) % partitions


class SkipEarly:
    """Drops, per partition, the records before the first with timestamp >= ``from_ts_ms``.

    Kafka's time lookup also counts transaction markers, stamped with the broker's clock, so
    the offset it gives can be early (never late): the records in between are skipped here.
    """

    def __init__(self, from_ts_ms: int | None) -> None:
        self.from_ts_ms = from_ts_ms
        self.found: set[int] = set()

    def keep(self, partition: int, messages: list[Any]) -> list[Any]:
        if self.from_ts_ms is None or partition in self.found:
            return messages
        for i, message in enumerate(messages):
            if message.timestamp >= self.from_ts_ms:
                self.found.add(partition)
                return messages[i:]
        return []


class OwnershipSnapshots:
    """The compacted ``{cluster}-ownership`` topic: the latest ownership record per bundle.

    Values are msgpack maps (the projection's record of a bundle); ``None`` writes a tombstone.
    """

    def __init__(self, bootstrap_servers: str, *, cluster: str = "lb", partitions: int = 1,
                 security: KafkaSecurity | None = None, stream: str = OWNERSHIP_STREAM) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.security = kafka_client.for_cluster(security, cluster)
        self.stream = stream
        self.topic = topic_name(cluster, stream)
        self.partitions = partitions
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        self.partitions = await ensure_topic(
            self.bootstrap_servers, self.topic, partitions=self.partitions,
            config=stream_config(self.stream), security=self.security,
        )
        if self._producer is None:
            self._producer = await kafka_client.started(
                kafka_client.producer(self.bootstrap_servers, self.security, enable_idempotence=True),
                self.bootstrap_servers, self.security, f"write to {self.topic}")

    async def close(self) -> None:
        if self._producer is not None:
            await kafka_client.stop_producer(self._producer)
            self._producer = None

    async def put(self, records: Mapping[str, Mapping[str, Any] | None]) -> None:
        """Write the latest record of each bundle (None = tombstone), then wait for the acks."""
        if self._producer is None:
            await self.start()
        assert self._producer is not None
        futures = [
            await self._producer.send(
                self.topic, key=bundle.encode(),
                value=None if record is None else msgpack.packb(dict(record), use_bin_type=True),
            )
            for bundle, record in records.items()
        ]
        await asyncio.gather(*futures)

    async def load(self, timeout_s: float = 30.0) -> dict[str, dict[str, Any]]:
        """Every bundle's latest record (tombstoned bundles are absent)."""
        consumer = await kafka_client.started(
            kafka_client.consumer(self.bootstrap_servers, self.security, enable_auto_commit=False,
                                  isolation_level="read_committed"),
            self.bootstrap_servers, self.security, f"read {self.topic}")
        try:
            tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends = await consumer.end_offsets(tps)
            latest: dict[str, dict[str, Any]] = {}
            async with asyncio.timeout(timeout_s):
                while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                    for messages in (await consumer.getmany(timeout_ms=200)).values():
                        for m in messages:
                            _fold_snapshot(latest, m.key, m.value)
            return latest
        finally:
            await consumer.stop()


def _fold_snapshot(latest: dict[str, dict[str, Any]], key: bytes | None, value: bytes | None) -> None:
    if key is None:
        return
    bundle = key.decode()
    if value is None:
        latest.pop(bundle, None)
    else:
        latest[bundle] = msgpack.unpackb(value, raw=False, strict_map_key=False)
