"""Benchmarks A1, A3, A4 (docs/spec/bench.md): the event log against its raw reference.

Every figure is measured beside its reference in the same run on the same machine, and the
ratio (figure / reference, events per second; higher is better) is what counts:
- A1  encode + decode of one envelope   vs msgpack.packb/unpackb of the same plain dict;
- A3  append + read via KafkaEventLog   vs a raw aiokafka producer/consumer, same broker and bytes;
- A4  append + read via LocalEventLog   vs os.write of the same bytes with the same fsync policy;
- A4g the same with fsync on, small batches appended by many writers at once (group commit)
      vs os.write + fsync of each of the same batches.
Targets: A1 within 1.5x of raw msgpack (ratio >= 0.667); A3 ratio >= 0.7; A4g >= 0.5; A4 is
reported.

``python -m bench.eventlog [--quick] [--bootstrap HOST:PORT]`` prints the table and writes
``bench/results/eventlog.json``. Without ``--bootstrap`` (or KAFKA_BOOTSTRAP_SERVERS) a broker is
started from the test jars when they are there; otherwise A3 is reported as not run.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import msgpack
import orjson
from aiokafka import TopicPartition

from events.catalog import BundleAssigned, Message
from events.codec import decode, encode
from events.envelope import Envelope, seal
from events.log import kafka_client
from events.log._store import Entry
from events.log.kafka import KafkaEventLog
from events.log.kafka_topics import ensure_topic, kafka_partition
from events.log.local import LocalEventLog, frame

KEYS = tuple(f"public/ns{i}" for i in range(8))


@dataclass(frozen=True)
class Row:
    id: str
    what: str
    figure: float  # events/s through the project's code
    reference: float  # events/s through the raw reference
    target: float | None  # minimum ratio, when the benchmark has one

    @property
    def ratio(self) -> float:
        return self.figure / self.reference if self.reference else 0.0

    @property
    def ok(self) -> bool | None:
        return None if self.target is None else self.ratio >= self.target

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ratio": round(self.ratio, 3), "ok": self.ok}


def sample_envelope(i: int = 0, key: str = KEYS[0]) -> Envelope:
    event = BundleAssigned(bundle=f"{key}/0x{i:08x}_0x{i + 1:08x}", dst="broker-2", src="broker-1",
                           reason="transfer")
    return seal(event, key=key, seq=i + 1, epoch=3, clock_ms=lambda: 1_700_000_000_000 + i)


def _rate(n: int, run: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - began)
    return n / best


def a1_codec(n: int = 100_000) -> Row:
    envelope = sample_envelope()
    plain = envelope.to_dict()
    pack, unpack = msgpack.packb, msgpack.unpackb

    def reference() -> None:
        for _ in range(n):
            unpack(pack(plain))

    def ours() -> None:
        for _ in range(n):
            decode(encode(envelope))

    return Row("A1", "encode + decode one envelope (msgpack)", _rate(n, ours), _rate(n, reference), 1 / 1.5)


def _batches(n: int, batch: int) -> list[tuple[str, list[Message]]]:
    out: list[tuple[str, list[Message]]] = []
    for b in range(n // batch):
        key = KEYS[b % len(KEYS)]
        out.append((key, [BundleAssigned(bundle=f"{key}/0x{i:08x}_0x{i + 1:08x}", dst="broker-2")
                          for i in range(b * batch, (b + 1) * batch)]))
    return out


async def _timed(coro_factory: Callable[[], object]) -> float:
    began = time.perf_counter()
    await coro_factory()  # type: ignore[misc]
    return time.perf_counter() - began


async def _ours_kafka(servers: str, work: list[tuple[str, list[Message]]], writer_id: str | None) -> float:
    log = KafkaEventLog(servers, cluster=f"bench{uuid.uuid4().hex[:8]}", partitions=3, writer_id=writer_id)
    await log.start()
    total = sum(len(m) for _, m in work)
    try:
        began = time.perf_counter()
        for key, messages in work:
            await log.append(key, messages, epoch=1)
        read = await log.read()
        elapsed = time.perf_counter() - began
        assert len(read.records) == total, f"read {len(read.records)} of {total}"
        return elapsed
    finally:
        await log.close()


async def _raw_kafka(servers: str, work: list[tuple[str, list[Message]]]) -> float:
    topic = f"benchraw{uuid.uuid4().hex[:8]}-events"
    partitions = await ensure_topic(servers, topic, partitions=3)
    payloads = [(key, [encode(sample_envelope(i, key)) for i, _ in enumerate(msgs)]) for key, msgs in work]
    producer = kafka_client.producer(servers, None, enable_idempotence=True, linger_ms=5,
                                max_batch_size=1024 * 1024, max_request_size=1024 * 1024 + 65536)
    consumer = kafka_client.consumer(servers, None, enable_auto_commit=False,
                                fetch_max_bytes=8 << 20, max_partition_fetch_bytes=8 << 20)
    await producer.start()
    await consumer.start()
    try:
        began = time.perf_counter()
        for key, values in payloads:
            kb, p = key.encode(), kafka_partition(key, partitions)
            futures = [await producer.send(topic, v, key=kb, partition=p) for v in values]
            await asyncio.gather(*futures)
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends, got = await consumer.end_offsets(tps), 0
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            got += sum(len(ms) for ms in (await consumer.getmany(timeout_ms=200)).values())
        elapsed = time.perf_counter() - began
        assert got == sum(len(v) for _, v in payloads)
        return elapsed
    finally:
        await producer.stop()
        await consumer.stop()


async def a3_kafka(servers: str, n: int = 50_000, batch: int = 500) -> list[Row]:
    work = _batches(n, batch)
    raw = min([await _raw_kafka(servers, work) for _ in range(2)])
    plain = min([await _ours_kafka(servers, work, None) for _ in range(2)])
    txn = min([await _ours_kafka(servers, work, "bench-writer") for _ in range(2)])
    return [
        Row("A3", f"KafkaEventLog append+read, idempotent, batches of {batch}", n / plain, n / raw, 0.7),
        Row("A3t", f"same, transactional writer (fencing), batches of {batch}", n / txn, n / raw, None),
    ]


def _raw_file(directory: Path, work: list[tuple[str, list[Message]]], fsync: bool) -> float:
    offsets = itertools.count()  # frames name their offsets, as the log's do
    blobs = [b"".join(frame(Entry(encode(sample_envelope(i, key)), key, 0), offset=next(offsets))
                      for i, _ in enumerate(msgs))
             for key, msgs in work]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "raw.bin"
    began = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for blob in blobs:
            os.write(fd, blob)
            if fsync:
                os.fsync(fd)
    finally:
        os.close(fd)
    data = path.read_bytes()
    elapsed = time.perf_counter() - began
    assert len(data) == sum(len(b) for b in blobs)
    return elapsed


async def _ours_local(directory: Path, work: list[tuple[str, list[Message]]], fsync: bool) -> float:
    log = LocalEventLog(directory, fsync=fsync)
    try:
        began = time.perf_counter()
        for key, messages in work:
            await log.append(key, messages, epoch=1)
        read = await log.read()
        elapsed = time.perf_counter() - began
        assert len(read.records) == sum(len(m) for _, m in work)
        return elapsed
    finally:
        await log.close()


async def a4_local(n: int = 100_000, batch: int = 500) -> list[Row]:
    work = _batches(n, batch)
    rows = []
    for fsync in (True, False):
        with tempfile.TemporaryDirectory(prefix="bench-a4-") as tmp:
            raw = _raw_file(Path(tmp), work, fsync)
            ours = await _ours_local(Path(tmp) / "log", work, fsync)
        policy = "fsync per append" if fsync else "no fsync"
        rows.append(Row("A4" if fsync else "A4n", f"LocalEventLog append+read, {policy}, batches of {batch}",
                        n / ours, n / raw, None))
    return rows


async def _ours_group(directory: Path, work: list[tuple[str, list[Message]]], writers: int) -> float:
    log = LocalEventLog(directory, fsync=True)
    queue = list(reversed(work))

    async def writer() -> None:
        while queue:
            key, messages = queue.pop()
            await log.append(key, messages, epoch=1)

    try:
        began = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(writers)))
        read = await log.read()
        elapsed = time.perf_counter() - began
        assert len(read.records) == sum(len(m) for _, m in work)
        return elapsed
    finally:
        await log.close()


async def a4_group(n: int = 4_000, batch: int = 4, writers: int = 64) -> Row:
    work = _batches(n, batch)
    with tempfile.TemporaryDirectory(prefix="bench-a4g-") as tmp:
        raw = min(_raw_file(Path(tmp) / f"raw{i}", work, True) for i in range(2))
        ours = min([await _ours_group(Path(tmp) / f"log{i}", work, writers) for i in range(2)])
    return Row("A4g", f"same, fsync on, {writers} writers, batches of {batch} (group commit)",
               n / ours, n / raw, 0.5)


def machine() -> dict[str, object]:
    import aiokafka

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cores": os.cpu_count(), "memory_gib": round(memory, 1), "python": platform.python_version(),
            "msgpack": ".".join(map(str, msgpack.version)), "orjson": orjson.__version__,
            "aiokafka": aiokafka.__version__}


def publish(name: str, info: dict[str, object], table_text: str, rows: Sequence[Any],
            note: str | None = None) -> Path:
    """Print the machine line and the table; write ``bench/results/<name>.json``."""
    print(", ".join(f"{k}={v}" for k, v in info.items()))
    print(table_text)
    if note:
        print(note)
    out = Path(__file__).parent / "results" / f"{name}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_bytes(orjson.dumps({"machine": info, "rows": [r.to_dict() for r in rows]},
                                 option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    return out


@contextmanager
def kafka_servers(explicit: str | None) -> Iterator[str | None]:
    """The broker for A3: given, from the environment, or started from the test jars."""
    servers = explicit or os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if servers:
        yield servers
        return
    try:
        from tests.kafka_server import KafkaServer, KafkaStartError
    except ImportError:
        yield None
        return
    try:
        server = KafkaServer()
    except KafkaStartError:
        yield None
        return
    with server:
        yield server.bootstrap_servers


def run(quick: bool = False, bootstrap: str | None = None) -> list[Row]:
    """All rows; ``quick`` uses smaller sizes (same shape)."""
    scale = 5 if quick else 1
    rows = [a1_codec(100_000 // scale)]
    with kafka_servers(bootstrap) as servers:
        if servers is not None:
            rows += asyncio.run(a3_kafka(servers, 50_000 // scale))
    rows += asyncio.run(a4_local(100_000 // scale))
    rows.append(asyncio.run(a4_group(4_000 // scale)))
    return rows


def table(rows: list[Row]) -> str:
    head = f"{'id':<4} {'what':<58} {'events/s':>11} {'reference/s':>12} {'ratio':>6} {'target':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        target = "-" if r.target is None else f">={r.target:.2f}"
        flag = "" if r.ok is None else (" ok" if r.ok else " MISSED")
        lines.append(f"{r.id:<4} {r.what:<58} {r.figure:>11,.0f} {r.reference:>12,.0f} "
                     f"{r.ratio:>6.2f} {target:>7}{flag}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.eventlog", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--bootstrap", default=None, help="Kafka for A3 (else env or test jars)")
    args = parser.parse_args(argv)
    rows = run(args.quick, args.bootstrap)
    note = None if any(r.id == "A3" for r in rows) else \
        "A3: not run (no Kafka: pass --bootstrap or provide the test jars)"
    publish("eventlog", machine(), table(rows), rows, note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
