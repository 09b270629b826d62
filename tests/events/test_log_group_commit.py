"""Appends committed together (the memory and local adapters' group commit): each append is
all or nothing, and the writer's heads are those of what was written."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from events import catalog as c
from events.log._store import Entry, Heads
from events.log.memory import MemoryEventLog, MemoryStore
from events.log.port import Record


class RefusingStore(MemoryStore):
    """A store whose disk refuses every write to one partition."""

    def __init__(self, partitions: int, refused: int) -> None:
        super().__init__(partitions)
        self.refused = refused

    def write_group(self, partition: int, groups: Sequence[Sequence[Entry]]) -> list[int]:
        if partition == self.refused:
            raise OSError(28, "No space left on device")
        return super().write_group(partition, groups)


def _left(broker: str) -> list[c.Message]:
    return [c.BrokerLeft(broker_id=broker, reason="graceful"), c.BrokerLeft(broker_id=broker, reason="graceful")]


async def _heads_of(log: MemoryEventLog, keys: Sequence[str]) -> dict[str, tuple[int, int]]:
    return {key: await log.head(key) for key in keys}


def _folded(records: Sequence[Record]) -> Heads:
    heads = Heads()
    for record in records:
        heads.observe(record.envelope)
    return heads


@pytest.mark.asyncio
async def test_appends_committed_together_leave_the_heads_a_fold_of_the_log_gives() -> None:
    log = MemoryEventLog(partitions=3)
    keys = [f"broker-{i}" for i in range(12)]
    await asyncio.gather(*(log.append(key, _left(key), epoch=1) for key in keys))
    await asyncio.gather(*(log.append(key, _left(key)[:1], epoch=1) for key in keys[::2]))
    folded = _folded((await log.read()).records)
    assert await _heads_of(log, keys) == {key: folded.get(key) for key in keys}
    assert {key: (await log.head(key))[0] for key in keys} == {
        key: 3 if i % 2 == 0 else 2 for i, key in enumerate(keys)}


@pytest.mark.asyncio
async def test_a_partition_the_disk_refuses_fails_its_appends_alone_and_moves_no_head() -> None:
    store = RefusingStore(partitions=2, refused=1)
    log = MemoryEventLog(store=store)
    keys = [f"broker-{i}" for i in range(8)]
    refused = [key for key in keys if log.partition_for(key) == 1]
    kept = [key for key in keys if key not in refused]
    assert refused and kept
    results = await asyncio.gather(*(log.append(key, _left(key), epoch=1) for key in keys),
                                   return_exceptions=True)
    for key, result in zip(keys, results, strict=True):
        if key in refused:
            assert isinstance(result, OSError), (key, result)
        else:
            assert not isinstance(result, BaseException) and [r.seq for r in result] == [1, 2]
    assert await _heads_of(log, keys) == {key: (0, 0) if key in refused else (2, 1) for key in keys}
    store.refused = -1  # the disk has room again: a refused key starts at seq 1, the others go on
    again = await asyncio.gather(*(log.append(key, _left(key)[:1], epoch=1) for key in keys))
    assert {key: records[0].seq for key, records in zip(keys, again, strict=True)} == {
        key: 1 if key in refused else 3 for key in keys}
