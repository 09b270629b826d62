"""Faults on a real Kafka broker: the log keeps every event exactly once, in order.

1. The broker is stopped and restarted (same data dir, same ports) while a writer appends and a
   reader follows: the reader ends up with every event once, in seq order per key.
2. A consumer process is killed with SIGKILL after applying a batch and before saving its
   checkpoint: the next consumer resumes from the checkpoint, re-reads that batch, recognises it
   by seq, and the applied state holds every event exactly once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from events.catalog import BundleAssigned
from events.log.kafka import KafkaEventLog
from events.log.port import Record
from tests.kafka_server import KafkaServer
from tests.support.patience import patient

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).resolve().parents[2]
KEYS = ("t/a", "t/b", "t/c")


@pytest.fixture(scope="module")
def restartable_kafka(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The session broker when it can restart in place; otherwise a private one from the jars."""
    shared = request.getfixturevalue("kafka")
    if getattr(shared, "restartable", False) and hasattr(shared, "restart_async"):
        yield shared
        return
    with KafkaServer() as private:
        yield private


def events_for(key: str, start: int, count: int) -> list[BundleAssigned]:
    return [BundleAssigned(bundle=f"{key}/0x{i:08x}_0x{i + 1:08x}", dst="b1") for i in range(start, start + count)]


@pytest.mark.parametrize("graceful", [True, False], ids=["stop", "kill-9"])
async def test_a_broker_restart_mid_stream_loses_and_repeats_nothing(
    restartable_kafka: Any, graceful: bool,
) -> None:
    cluster, size = f"f{uuid.uuid4().hex[:8]}", 20
    servers = restartable_kafka.bootstrap_servers
    writer = KafkaEventLog(servers, cluster=cluster, writer_id="shard-0", append_timeout_s=90)
    reader = KafkaEventLog(servers, cluster=cluster, read_timeout_s=90)
    await writer.start()
    seen: list[tuple[str, int]] = []
    restarted = asyncio.Event()
    written = 0

    async def follow() -> None:
        async for item in reader.subscribe():
            assert isinstance(item, Record)
            seen.append((item.key, item.seq))

    async def write() -> None:
        nonlocal written
        after_restart = 0
        while after_restart < 10:  # keep writing before, during and after the outage
            key = KEYS[written // size % len(KEYS)]
            await writer.append(key, events_for(key, written, size), epoch=1)
            written += size
            after_restart += restarted.is_set()
            await asyncio.sleep(0.02)

    following = asyncio.create_task(follow())
    writing = asyncio.create_task(write())
    while written < 15 * size:
        await asyncio.sleep(0.05)
    await restartable_kafka.restart_async(graceful=graceful)
    restarted.set()
    assert not writing.done(), "the writer finished before the broker went down"
    await asyncio.wait_for(writing, patient(120))
    async with asyncio.timeout(patient(120)):
        while len(seen) < written:
            await asyncio.sleep(0.05)
    following.cancel()
    per_key: dict[str, list[int]] = {}
    for key, seq in seen:
        per_key.setdefault(key, []).append(seq)
    assert len(seen) == written
    for key in KEYS:
        assert per_key[key] == list(range(1, len(per_key[key]) + 1)), key
    replay = (await reader.read()).records
    assert sorted((r.key, r.seq) for r in replay) == sorted(seen)
    await writer.close()
    await reader.close()


CONSUMER = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from events.log.kafka import KafkaEventLog

    async def main(servers, cluster, applied_path, die_after):
        log = KafkaEventLog(servers, cluster=cluster)
        applied = {}
        if os.path.exists(applied_path):
            for line in open(applied_path).read().splitlines():
                key, seq = line.split()
                applied[key] = int(seq)
        batches = repeated = 0
        while True:
            position = await log.load_checkpoint("projection") or {}
            result = await log.read(position, limit=100)
            if not result.items:
                break
            lines = []
            for record in result.records:
                last = applied.get(record.key, 0)
                if record.seq <= last:
                    repeated += 1          # applied before the last crash: skip, by seq
                    continue
                assert record.seq == last + 1, "gap"
                applied[record.key] = record.seq
                lines.append(f"{record.key} {record.seq}\\n")
            with open(applied_path, "a") as out:
                out.writelines(lines)
                out.flush()
                os.fsync(out.fileno())
            batches += 1
            if batches == die_after:
                os.kill(os.getpid(), signal.SIGKILL)   # applied, not yet checkpointed
            await log.save_checkpoint("projection", result.next)
        print(repeated)
        await log.close()

    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
    """
)


def _consume(servers: str, cluster: str, applied: Path, die_after: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", CONSUMER, servers, cluster, str(applied), str(die_after)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )


async def test_a_consumer_killed_between_read_and_checkpoint_resumes_exactly(
    restartable_kafka: Any, tmp_path: Path,
) -> None:
    cluster, servers = f"f{uuid.uuid4().hex[:8]}", restartable_kafka.bootstrap_servers
    async with KafkaEventLog(servers, cluster=cluster, writer_id="shard-0") as writer:
        for n in range(30):
            key = KEYS[n % len(KEYS)]
            await writer.append(key, events_for(key, n * 25, 25), epoch=1)
    applied = tmp_path / "applied.txt"
    killed = await asyncio.to_thread(_consume, servers, cluster, applied, 3)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = await asyncio.to_thread(_consume, servers, cluster, applied, 0)
    assert resumed.returncode == 0, resumed.stderr
    assert int(resumed.stdout.split()[-1]) > 0, "the killed consumer's last batch was not re-read"
    lines = [tuple(line.split()) for line in applied.read_text().splitlines()]
    assert len(lines) == len(set(lines)) == 750
    for key in KEYS:
        assert [int(seq) for k, seq in lines if k == key] == list(range(1, 251))
