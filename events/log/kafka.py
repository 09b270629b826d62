"""``KafkaEventLog``: one topic of the event log on Apache Kafka, through aiokafka.

Invariants:
- the producer is idempotent (acks=all); a log opened with a ``writer_id`` is transactional
  with ``transactional.id = {cluster}-{writer_id}``: opening a second writer with the same id
  fences the first (its next append raises ``WriterFenced``) and aborts its open transaction;
- one append is one transaction (or, without a writer id, one record batch): all or nothing;
- key -> partition is Kafka's murmur2 partitioner, so Java clients and Spark agree with us;
- consumers are ``read_committed``: aborted and open transactions are never read; offsets
  of transaction markers are skipped, so offsets of a partition grow but are not contiguous;
- the writer learns a key's last seq and newest epoch by reading its partition once (then
  keeps it): seq stays gap-free across writer restarts, and a stale epoch is refused; a
  transactional writer reads it from its heads checkpoint's offset on (``kafka_heads``: saved
  every ``heads_checkpoint_every`` appends and on close), so its restart reads the tail only;
- an append that fails half-way (broker gone, timeout, a try unanswered for 30 s) is retried
  until ``append_timeout_s``; before each retry the writer re-reads the partition, so a batch
  that did commit is not written twice; a retry that cannot read the partition does not write
  (it waits and tries again), and an append that gives up leaves its partition in doubt: the
  next append there first reads what landed since, so a batch that committed late never has
  its seqs reused;
- record timestamps are the envelope's ``ts_ms``; reading from a timestamp uses Kafka's time
  index; checkpoints are committed offsets of the consumer group ``{cluster}-{name}-{checkpoint}``
  (the consumers, ranges and checkpoints are in ``kafka_read``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    InvalidProducerEpoch,
    InvalidTimestampError,
    KafkaError,
    ProducerFenced,
    TransactionalIdAuthorizationFailed,
)

from balancer.errors import InvalidInput, Unavailable, WriterFenced
from events.authority import leader_write
from events.catalog import Message
from events.codec import encode
from events.envelope import Envelope, Stamper
from events.log import kafka_client, kafka_read
from events.log._store import Heads, check_append
from events.log.heads_check import Mark, mark_of
from events.log.kafka_client import DENIED, KafkaSecurity
from events.log.kafka_heads import HeadsCheckpoints
from events.log.kafka_heads import logger as heads_logger
from events.log.kafka_topics import (
    SkipEarly,
    ensure_topic,
    kafka_partition,
    stream_config,
    topic_name,
)
from events.log.port import (
    DeadLetter,
    Item,
    Offsets,
    ReadResult,
    Record,
    causation_list,
    check_cluster,
)
from events.skim import Skim
from events.times import iso

_FENCED = (ProducerFenced, InvalidProducerEpoch, TransactionalIdAuthorizationFailed)


class KafkaEventLog:
    """One topic (``{cluster}-{name}``) of the event log on Kafka."""

    def __init__(
        self, bootstrap_servers: str, *, cluster: str = "lb", name: str = "events",
        partitions: int = 3, replication_factor: int | None = None, retention_ms: int | None = None,
        writer_id: str | None = None, stamper: Stamper | None = None,
        append_timeout_s: float = 60.0, read_timeout_s: float = 60.0,
        linger_ms: int = 5, max_batch_bytes: int = 1024 * 1024, create_topic: bool = True,
        security: KafkaSecurity | None = None, heads_checkpoint_every: int = 1_000,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.security = kafka_client.for_cluster(security, cluster)
        self.cluster, self.name = cluster, name
        self.topic = topic_name(cluster, name)
        self.partitions = partitions
        self.replication_factor, self.retention_ms = replication_factor, retention_ms
        self.writer_id = writer_id
        self.transactional_id = f"{cluster}-{writer_id}" if writer_id else None
        self._stamper = stamper or Stamper()
        self.append_timeout_s, self.read_timeout_s = append_timeout_s, read_timeout_s
        self._linger_ms, self._max_batch_bytes = linger_ms, max_batch_bytes
        self._try_s = min(append_timeout_s, 30.0)
        """The bound of one try of an append (a fresh producer, a transaction)."""
        self._producer: AIOKafkaProducer | None = None
        self._fenced: WriterFenced | None = None
        self._reader: AIOKafkaConsumer | None = None
        self._checkpointers = kafka_read.GroupCheckpoints(
            bootstrap_servers, self.security, topic=self.topic, group_prefix=f"{cluster}-{name}",
            partitions=partitions)
        self._heads = Heads()
        self.skim: Skim | None = None
        """What ``read`` and ``subscribe`` hand with its header only (``events.skim``): set by
        the one reader of this handle (a host, for its body); its own heads read in full."""
        self._heads_at: dict[int, int] = {}  # partition -> offset the heads are folded up to
        self._heads_from: dict[int, int] = {}  # partition -> where the checkpoint's heads stop
        self._marks: dict[int, Mark] = {}  # partition -> the last record read or written there
        self.heads_read = 0
        """Records read to learn heads (a restart with a checkpoint reads only the tail)."""
        self.heads_checkpoint_every = heads_checkpoint_every
        self._unsaved = 0
        self._checkpoints = HeadsCheckpoints(bootstrap_servers, cluster=cluster, security=self.security) \
            if self.transactional_id is not None and heads_checkpoint_every > 0 else None
        self._written: dict[int, int] = {}  # partition -> one past the last offset we wrote
        self._in_doubt: set[int] = set()  # partitions where an append gave up not knowing its fate
        self._write_lock = asyncio.Lock()
        self._read_lock = asyncio.Lock()
        self._started = False
        self._create_topic = create_topic

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def _tps(self) -> list[TopicPartition]:
        return [TopicPartition(self.topic, p) for p in range(self.partitions)]

    async def start(self) -> None:
        """Create the topic if missing; a writer also opens (and so fences) its producer."""
        if self._started:
            return
        self.partitions = await ensure_topic(
            self.bootstrap_servers, self.topic, partitions=self.partitions,
            replication_factor=self.replication_factor,
            config=stream_config(self.name, self.retention_ms), create=self._create_topic,
            security=self.security,
        )
        self._started = True
        await check_cluster(self, self._stamper.cluster_id, f"Kafka topic {self.topic}")
        if self.transactional_id is not None:
            await self._open_producer()
            await self._load_heads()

    async def close(self) -> None:
        if self._unsaved and self._started and not self.fenced:
            await self.save_heads(timeout_s=5.0)  # a shutdown while Kafka is away must not hang
        if self._checkpoints is not None:
            with contextlib.suppress(Exception):
                await self._checkpoints.close()
        await self._drop_producer()
        clients: list[Any] = [self._reader, *self._checkpointers.take_all()]
        self._reader = None
        for client in clients:
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.stop()
        self._started = False

    def partition_for(self, key: str) -> int:
        return kafka_partition(key, self.partitions)

    # -- writing ----------------------------------------------------------------------------

    async def _open_producer(self) -> AIOKafkaProducer:
        if self._fenced is not None:
            raise self._fenced
        if self._producer is None:
            producer = kafka_client.producer(
                self.bootstrap_servers, self.security, enable_idempotence=True,
                transactional_id=self.transactional_id, linger_ms=self._linger_ms,
                max_batch_size=self._max_batch_bytes, max_request_size=self._max_batch_bytes + 65536,
                request_timeout_ms=int(self._try_s * 1000),
            )
            self._producer = await kafka_client.started(
                producer, self.bootstrap_servers, self.security, f"write to {self.topic}")
        return self._producer

    async def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await kafka_client.stop_producer(producer)

    def _timestamps_refused(self, envelopes: Sequence[Envelope]) -> InvalidInput:
        """Kafka refused the records' timestamps: retrying cannot help, the topic's bound can."""
        first, last = envelopes[0].ts_ms, envelopes[-1].ts_ms
        return InvalidInput(
            f"Kafka refused records of {self.topic} stamped {iso(first)}..{iso(last)} (cluster "
            f"time): the topic bounds how far a timestamp may be from the broker's clock "
            f"(message.timestamp.after.max.ms and before.max.ms; Kafka 4 allows one hour ahead). "
            f"A cluster whose clock runs ahead or behind (speed > 1, a resumed virtual clock) "
            f"needs them unbounded, as on the topics this project creates: set them with "
            f"kafka-configs.sh --alter --entity-type topics --entity-name {self.topic}",
            topic=self.topic, ts_ms=first)

    @property
    def fenced(self) -> bool:
        """A newer incarnation with this transactional id fenced this writer: for good."""
        return self._fenced is not None

    async def append(
        self, key: str, messages: Sequence[Message], *, epoch: int,
        expected_seq: int | None = None, causation_id: str | None = None,
        correlation_id: str | None = None, causation_ids: Sequence[str | None] | None = None,
    ) -> list[Record]:
        causes = causation_list(messages, causation_id, causation_ids)
        await self.start()
        partition = self.partition_for(key)
        async with self._write_lock:
            heads = await self._fresh_heads(partition)
            if expected_seq is not None and partition in self._heads_at:
                # A compare-and-set (an election, a leader's expiry of a broker) is checked
                # against the partition as it is now: other writers' records since the last
                # read (a broker's reports) refuse it here, instead of landing as a repeated seq.
                await self._read_heads(partition, self._heads_at[partition])
            seq = check_append(heads, key, epoch, expected_seq,
                               leader_write=leader_write(key, messages))
            envelopes = [
                self._stamper.seal(m, key=key, seq=seq + i, epoch=epoch,
                                   causation_id=causes[i - 1], correlation_id=correlation_id)
                for i, m in enumerate(messages, start=1)
            ]
            if not envelopes:
                return []
            signed, raws = self._stamper.sign(envelopes, [encode(env) for env in envelopes])
            envelopes = list(signed)
            offsets = await self._deliver(partition, key, envelopes, raws)
            for env in envelopes:
                self._heads.observe(env)
            self._marks[partition] = (offsets[-1], key, envelopes[-1].seq, envelopes[-1].event_id)
            self._note_written(partition, offsets[-1])
            self._unsaved += 1
        if self.transactional_id is not None:
            await self._wait_visible(partition)
        if self._checkpoints is not None and self._unsaved >= self.heads_checkpoint_every:
            await self.save_heads()
        return [Record(partition, o, env) for o, env in zip(offsets, envelopes, strict=True)]

    async def _wait_visible(self, partition: int) -> None:
        """Return once this handle's appends to ``partition`` are readable by every
        read_committed consumer, so an append that returned is an append anyone can read.
        Best effort: the append has committed, so no error here may make it look failed."""
        with contextlib.suppress(Exception):
            async with self._read_lock:
                reader = await self._open_reader()
                await self._visible_ends(reader, [TopicPartition(self.topic, partition)])

    def _note_written(self, partition: int, last_offset: int) -> None:
        # read() waits until these are visible: a commit returns before Kafka writes the
        # transaction markers that make records readable under read_committed.
        self._written[partition] = max(self._written.get(partition, 0), last_offset + 1)

    async def _deliver(self, partition: int, key: str, envelopes: list[Envelope],
                       raws: Sequence[bytes]) -> list[int]:
        """Write the envelopes (``raws``: their wire bytes) once, retrying through outages;
        returns their offsets."""
        values = [(raw, env.ts_ms) for env, raw in zip(envelopes, raws, strict=True)]
        loop = asyncio.get_running_loop()
        deadline, backoff, retrying = loop.time() + self.append_timeout_s, 0.1, False
        self._in_doubt.add(partition)  # until this append's outcome is known
        while True:
            try:
                # aiokafka waits without end for a producer id and for a transaction's end (a
                # coordinator still aborting a killed writer's transaction answers "retry"):
                # each try is bounded, or one such wait would hold the writer (and its body) for good.
                async with asyncio.timeout_at(min(deadline, loop.time() + self._try_s)):
                    await self._open_producer()
                    # A new transactional producer has resolved any transaction of the previous
                    # try, so what the partition shows now is final: look for our batch first.
                    landed = await self._landed(partition, envelopes) if retrying else None
                    if landed is None:
                        landed = await self._produce(partition, key.encode(), values)
                self._in_doubt.discard(partition)
                return landed
            except _FENCED as exc:
                await self._drop_producer()
                self._fenced = WriterFenced(
                    f"writer {self.transactional_id!r} on {self.topic} was fenced by a newer one",
                    writer=self.transactional_id,
                )
                raise self._fenced from exc
            except DENIED as exc:
                await self._drop_producer()
                raise kafka_client.refused(exc, self.bootstrap_servers, self.security,
                                           f"write to {self.topic}") from None
            except InvalidTimestampError:
                await self._drop_producer()
                raise self._timestamps_refused(envelopes) from None
            except (KafkaError, OSError, TimeoutError, Unavailable) as exc:
                await self._drop_producer()
                if loop.time() >= deadline:
                    raise Unavailable(f"append to {self.topic}[{partition}] failed: {exc!r}") from exc
                await asyncio.sleep(backoff)
                backoff, retrying = min(backoff * 2, 2.0), True
            except BaseException:
                await self._drop_producer()  # never leave a transaction open in a kept producer
                raise

    async def _produce(self, partition: int, key: bytes, values: list[tuple[bytes, int]]) -> list[int]:
        producer = await self._open_producer()
        if self.transactional_id is None:
            return await self._answers(await self._send_batches(producer, partition, key, values))
        await producer.begin_transaction()
        try:
            # Every batch's answer before the commit: a batch Kafka refused must not let the
            # others commit (all or nothing), and a commit after a refusal never ends.
            offsets = await self._answers(await self._send_batches(producer, partition, key, values))
        except BaseException:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):  # Kafka's own timeout aborts it otherwise
                    await producer.abort_transaction()
            raise
        await producer.commit_transaction()
        return offsets

    @staticmethod
    async def _answers(futures: list[tuple[asyncio.Future[Any], int]]) -> list[int]:
        """The offsets of the batches sent, or the first batch's refusal (every answer is
        awaited, so no refusal goes unread)."""
        answers = await asyncio.gather(*(future for future, _ in futures), return_exceptions=True)
        offsets: list[int] = []
        # Offsets are consecutive within one record batch only: other producers' records may
        # sit between two batches of one append.
        for answer, (_, count) in zip(answers, futures, strict=True):
            if isinstance(answer, BaseException):
                raise answer
            offsets.extend(range(answer.offset, answer.offset + count))
        return offsets

    async def _send_batches(
        self, producer: AIOKafkaProducer, partition: int, key: bytes, values: list[tuple[bytes, int]],
    ) -> list[tuple[asyncio.Future[Any], int]]:
        futures = []
        batch = producer.create_batch()
        for value, ts_ms in values:
            if batch.append(key=key, value=value, timestamp=ts_ms) is None:
                batch.close()  # a closed batch goes out at once instead of lingering
                futures.append((await producer.send_batch(batch, self.topic, partition=partition),
                                batch.record_count()))
                batch = producer.create_batch()
                if batch.append(key=key, value=value, timestamp=ts_ms) is None:
                    raise InvalidInput(f"an event of {len(value)} bytes exceeds max_batch_bytes")
        if batch.record_count():
            batch.close()
            futures.append((await producer.send_batch(batch, self.topic, partition=partition),
                            batch.record_count()))
        return futures

    async def _landed(self, partition: int, envelopes: list[Envelope]) -> list[int] | None:
        """The offsets of ``envelopes`` if an earlier, failed-looking try did commit them.

        A read that fails raises (``Unavailable``): not knowing is no licence to write again."""
        ours = {env.event_id: i for i, env in enumerate(envelopes)}
        found: dict[int, int] = {}
        result = await self._read_range({partition: self._heads_at.get(partition, 0)}, None,
                                        partitions=[partition])
        for item in result.records:
            self._heads.observe(item.envelope)
            if item.envelope.event_id in ours:
                found[ours[item.envelope.event_id]] = item.offset
        self._heads_at[partition] = result.next.get(partition, 0)
        if len(found) == len(envelopes):
            return [found[i] for i in range(len(envelopes))]
        return None

    async def _fresh_heads(self, partition: int) -> Heads:
        if partition not in self._heads_at:
            await self._read_heads(partition, self._heads_from.get(partition, 0))
        elif partition in self._in_doubt:
            # A batch an earlier append gave up on may have landed since: a new transactional
            # producer settles its transaction first, then the tail shows it or never will.
            await self._open_producer()
            await self._read_heads(partition, self._heads_at[partition])
        self._in_doubt.discard(partition)
        return self._heads

    async def _read_heads(self, partition: int, start: int) -> None:
        result = await self._read_range({partition: start}, None, partitions=[partition])
        for record in result.records:
            self._heads.observe(record.envelope)
        self.heads_read += len(result.records)
        self._heads_at[partition] = result.next.get(partition, start)
        if result.records:
            self._marks[partition] = mark_of(result.records[-1])

    async def _load_heads(self) -> None:
        if self._checkpoints is not None and self.transactional_id is not None:
            found = await self._checkpoints.load(self.transactional_id, self.end_offsets, self._record_from)
            if found is not None:
                self._heads, self._heads_from, self._marks = found

    async def _record_from(self, partition: int, offset: int) -> Record | None:
        records = (await self._read_range({partition: offset}, 1, partitions=[partition])).records
        return records[0] if records else None

    async def save_heads(self, timeout_s: float = 30.0) -> None:
        """Make the heads exact up to the end of every partition this writer wrote, then save
        them (best effort, within ``timeout_s``: the log is still the truth)."""
        checkpoints, writer = self._checkpoints, self.transactional_id
        if checkpoints is None or writer is None:
            return
        try:
            async with asyncio.timeout(timeout_s):
                async with self._write_lock:
                    for partition, start in sorted(self._heads_at.items()):
                        await self._read_heads(partition, start)
                    heads, at, marks = self._heads, dict(self._heads_at), dict(self._marks)
                    self._unsaved = 0
                await checkpoints.save(writer, heads, at, marks)
        except Exception as exc:  # a checkpoint must never fail an append
            heads_logger.warning("heads checkpoint of %r not saved: %r", self.transactional_id, exc)

    def observe(self, envelope: Envelope) -> None:
        """Take a record read elsewhere into this writer's heads (last seq, newest epoch per key).

        Heads are read once per partition, then kept; when several processes write one key (a
        broker's key is also written by the leader that expires it), a host that tells its
        writer of every record it folds makes its next append continue after the other's."""
        self._heads.observe(envelope)

    async def append_raw(self, key: str, values: Sequence[bytes], *, ts_ms: int | None = None) -> None:
        await self.start()
        stamp = self._stamper.clock_ms() if ts_ms is None else ts_ms
        async with self._write_lock:
            try:
                partition = self.partition_for(key)
                offsets = await self._produce(partition, key.encode(), [(bytes(v), stamp) for v in values])
                if offsets:
                    self._note_written(partition, offsets[-1])
                    await self._wait_visible(partition)
            except DENIED as exc:
                await self._drop_producer()
                raise kafka_client.refused(exc, self.bootstrap_servers, self.security,
                                           f"write to {self.topic}") from None
            except BaseException:
                await self._drop_producer()
                raise

    async def head(self, key: str) -> tuple[int, int]:
        await self.start()
        async with self._write_lock:
            return (await self._fresh_heads(self.partition_for(key))).get(key)

    # -- reading (events.log.kafka_read) ----------------------------------------------------

    async def _open_reader(self) -> AIOKafkaConsumer:
        if self._reader is None:
            reader = await kafka_client.started(
                kafka_read.consumer(self.bootstrap_servers, self.security), self.bootstrap_servers,
                self.security, f"read {self.topic}")
            reader.assign(self._tps)
            self._reader = reader
        return self._reader

    async def _read_range(
        self, begin: Offsets, limit: int | None, *, partitions: Sequence[int] | None = None,
        from_ts_ms: int | None = None, skim: Skim | None = None,
    ) -> ReadResult:
        await self.start()
        tps = kafka_read.partitions_of(self.topic, partitions or range(self.partitions))
        async with self._read_lock:
            reader = await self._open_reader()
            try:
                ends = await self._visible_ends(reader, tps)
                return await kafka_read.fetch(reader, tps, ends, begin, limit, from_ts_ms=from_ts_ms,
                                              read_timeout_s=self.read_timeout_s, skim=skim)
            except DENIED as exc:
                raise kafka_client.refused(exc, self.bootstrap_servers, self.security,
                                           f"read {self.topic}") from None
            except (KafkaError, OSError) as exc:
                raise Unavailable(f"reading {self.topic} failed: {exc!r}") from exc

    async def _visible_ends(
        self, consumer: AIOKafkaConsumer, tps: list[TopicPartition],
    ) -> dict[TopicPartition, int]:
        """End offsets, once everything this handle appended is readable (bounded wait)."""
        deadline = asyncio.get_running_loop().time() + self.read_timeout_s
        while True:
            ends: dict[TopicPartition, int] = await consumer.end_offsets(tps)
            behind = [tp for tp in tps if ends[tp] < self._written.get(tp.partition, 0)]
            if not behind or asyncio.get_running_loop().time() > deadline:
                return ends
            await asyncio.sleep(0.005)

    async def read(
        self, start: Mapping[int, int] | None = None, *, from_ts_ms: int | None = None,
        limit: int | None = None,
    ) -> ReadResult:
        await self.start()
        if from_ts_ms is None:
            return await self._read_range(kafka_read.plain_begin(start, self.partitions), limit,
                                          skim=self.skim)
        async with self._read_lock:
            begin = await kafka_read.begin_at(await self._open_reader(), self._tps, None, from_ts_ms)
        return await self._read_range(begin, limit, from_ts_ms=from_ts_ms, skim=self.skim)

    async def subscribe(
        self, start: Mapping[int, int] | None = None, *, from_ts_ms: int | None = None,
        poll_ms: int = 500,
    ) -> AsyncIterator[Item]:
        await self.start()
        consumer = await kafka_client.started(
            kafka_read.consumer(self.bootstrap_servers, self.security), self.bootstrap_servers,
            self.security, f"read {self.topic}")
        try:
            consumer.assign(self._tps)
            begin = await kafka_read.begin_at(consumer, self._tps, start, from_ts_ms)
            for tp in self._tps:
                consumer.seek(tp, begin[tp.partition])
            skip = SkipEarly(from_ts_ms)
            while True:
                batch = await consumer.getmany(timeout_ms=poll_ms)
                for tp, messages in batch.items():
                    for message in skip.keep(tp.partition, messages):
                        yield kafka_read.item_of(message, self.skim)
        finally:
            await consumer.stop()

    async def end_offsets(self) -> Offsets:
        await self.start()
        async with self._read_lock:
            ends = await self._visible_ends(await self._open_reader(), self._tps)
        return {tp.partition: offset for tp, offset in ends.items()}

    async def start_offsets(self) -> Offsets:
        """Each partition's log-start offset: the first one retention has not deleted."""
        await self.start()
        async with self._read_lock:
            starts = await (await self._open_reader()).beginning_offsets(self._tps)
        return {tp.partition: int(offset) for tp, offset in starts.items()}

    async def dead_letters(self, start: Mapping[int, int] | None = None) -> list[DeadLetter]:
        position, found = kafka_read.plain_begin(start, self.partitions), []
        while True:
            result = await self._read_range(position, 10_000)
            found.extend(result.dead_letters)
            if not result.items:
                return found
            position = result.next

    # -- checkpoints (consumer-group commits) ------------------------------------------------

    async def save_checkpoint(self, name: str, offsets: Mapping[int, int]) -> None:
        await self.start()
        await self._checkpointers.save(name, offsets)

    async def load_checkpoint(self, name: str) -> Offsets | None:
        await self.start()
        return await self._checkpointers.load(name)
