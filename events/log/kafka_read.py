"""Reading a Kafka topic of the event log: consumers, ranges, subscriptions and checkpoints.

What ``KafkaEventLog`` reads with, apart from its writer's state (the offsets it wrote, which
decide how long a read waits to see its own appends).

Invariants:
- every consumer is ``read_committed`` with auto-commit off: aborted and open transactions are
  never read, and nothing moves a position but the reader;
- a range read stops at the end offsets taken when it began; a partition whose position passed
  its end (the rest were transaction markers) is done, its next offset moved past them;
- a read that makes no progress for ``read_timeout_s`` is ``Unavailable``, never a silent stop;
- checkpoints are the committed offsets of the consumer group ``{cluster}-{name}-{checkpoint}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from balancer.errors import Unavailable
from events.log import kafka_client
from events.log.kafka_client import KafkaSecurity
from events.log.kafka_topics import SkipEarly
from events.log.port import Item, Offsets, ReadResult, to_item
from events.skim import Skim

FETCH_BYTES = 8 * 1024 * 1024


def item_of(message: Any, skim: Skim | None = None) -> Item:
    key = message.key.decode(errors="replace") if message.key is not None else None
    return to_item(message.partition, message.offset, message.value or b"", key, message.timestamp, skim)


def consumer(bootstrap_servers: str, security: KafkaSecurity | None,
             group_id: str | None = None) -> AIOKafkaConsumer:
    """A read_committed consumer that commits nothing by itself."""
    return kafka_client.consumer(
        bootstrap_servers, security, group_id=group_id,
        enable_auto_commit=False, auto_offset_reset="earliest",
        isolation_level="read_committed", fetch_max_bytes=FETCH_BYTES,
        max_partition_fetch_bytes=FETCH_BYTES, fetch_max_wait_ms=100,
    )


def plain_begin(start: Mapping[int, int] | None, partitions: int) -> Offsets:
    start = start or {}
    return {p: max(0, int(start.get(p, 0))) for p in range(partitions)}


async def begin_at(reader: AIOKafkaConsumer, tps: list[TopicPartition],
                   start: Mapping[int, int] | None, from_ts_ms: int | None) -> Offsets:
    """Where a read begins: ``start`` (default 0), or the first offset at ``from_ts_ms``."""
    if from_ts_ms is None:
        return plain_begin(start, len(tps))
    found = await reader.offsets_for_times({tp: from_ts_ms for tp in tps})
    ends = await reader.end_offsets(tps)
    return {tp.partition: ends[tp] if hit is None else hit.offset for tp, hit in found.items()}


async def fetch(reader: AIOKafkaConsumer, tps: list[TopicPartition], ends: Mapping[TopicPartition, int],
                begin: Offsets, limit: int | None, *, from_ts_ms: int | None,
                read_timeout_s: float, skim: Skim | None = None) -> ReadResult:
    """The records of ``tps`` from ``begin`` up to ``ends`` (at most ``limit``), those ``skim``
    covers with their header only."""
    skip = SkipEarly(from_ts_ms)
    nxt = {tp.partition: begin.get(tp.partition, 0) for tp in tps}
    for tp in tps:
        reader.seek(tp, nxt[tp.partition])
    pending = [tp for tp in tps if nxt[tp.partition] < ends[tp]]
    items: list[Item] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + read_timeout_s
    while pending and (limit is None or len(items) < limit):
        room = None if limit is None else limit - len(items)
        batch = await reader.getmany(*pending, timeout_ms=200, max_records=room)
        for tp, messages in batch.items():
            items.extend(item_of(m, skim) for m in skip.keep(tp.partition, messages))
            if messages:
                nxt[tp.partition] = messages[-1].offset + 1
                deadline = loop.time() + read_timeout_s
        pending = await _not_done(reader, pending, ends, nxt)
        if pending and loop.time() > deadline:
            topic = tps[0].topic if tps else "the topic"
            raise Unavailable(f"reading {topic}: no progress for {read_timeout_s}s")
    return ReadResult(items, nxt)


async def _not_done(reader: AIOKafkaConsumer, pending: list[TopicPartition],
                    ends: Mapping[TopicPartition, int], nxt: Offsets) -> list[TopicPartition]:
    still = []
    for tp in pending:
        position = await reader.position(tp)
        if position >= ends[tp]:
            # Past the end: the rest were transaction markers, skip them for good.
            nxt[tp.partition] = max(nxt[tp.partition], ends[tp])
        else:
            still.append(tp)
    return still


class GroupCheckpoints:
    """Named reader positions as consumer-group commits (one group per name)."""

    def __init__(self, bootstrap_servers: str, security: KafkaSecurity | None, *, topic: str,
                 group_prefix: str, partitions: int) -> None:
        self.bootstrap_servers, self.security = bootstrap_servers, security
        self.topic, self.group_prefix, self.partitions = topic, group_prefix, partitions
        self.consumers: dict[str, AIOKafkaConsumer] = {}

    def _tps(self) -> list[TopicPartition]:
        return [TopicPartition(self.topic, p) for p in range(self.partitions)]

    async def _group(self, name: str) -> AIOKafkaConsumer:
        found = self.consumers.get(name)
        if found is None:
            found = await kafka_client.started(
                consumer(self.bootstrap_servers, self.security, group_id=f"{self.group_prefix}-{name}"),
                self.bootstrap_servers, self.security, f"use the group of checkpoint {name!r}")
            found.assign(self._tps())
            self.consumers[name] = found
        return found

    async def save(self, name: str, offsets: Mapping[int, int]) -> None:
        group = await self._group(name)
        try:
            await group.commit({TopicPartition(self.topic, p): int(o) for p, o in offsets.items()})
        except (KafkaError, OSError) as exc:
            raise Unavailable(f"saving checkpoint {name!r} failed: {exc!r}") from exc

    async def load(self, name: str) -> Offsets | None:
        group = await self._group(name)
        found: Offsets = {}
        try:
            for tp in self._tps():
                offset = await group.committed(tp)
                if offset is not None:
                    found[tp.partition] = offset
        except (KafkaError, OSError) as exc:
            raise Unavailable(f"loading checkpoint {name!r} failed: {exc!r}") from exc
        return found or None

    def take_all(self) -> list[AIOKafkaConsumer]:
        """Every consumer opened so far (the caller stops them); the store forgets them."""
        taken, self.consumers = list(self.consumers.values()), {}
        return taken


def partitions_of(topic: str, partitions: Sequence[int]) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in partitions]
