"""A Kafka writer's heads checkpoint: its restart reads the tail of its partitions, not all of them.

A transactional writer needs every key's last seq and newest epoch (``Heads``) of the partitions
it writes before its first append; without a checkpoint it reads each such partition from
offset 0, so its start grows with the history.

Invariants:
- a checkpoint is ``at`` (partition -> offset) and heads that are exact for every record of
  those partitions below ``at`` (they may also hold later records: heads only grow, and folding a
  record twice changes nothing), so heads + the records from ``at`` on = a read from offset 0;
- the writer makes them exact before saving by reading its partitions up to their ends;
- it is sealed (``heads_check``): a digest, and per partition a mark (the last record the
  writer read or wrote there); loading reads each marked record back and refuses a checkpoint
  whose mark is not what the partition holds, or whose heads stand below it;
- checkpoints are records of the compacted ``{cluster}-writer-heads`` topic keyed by the
  transactional id: the newest one wins, and one record is written whole or not at all;
- a checkpoint that cannot be read, that stands past a partition's end (a recreated topic) or
  that fails its checks (a stray record in the topic, one written before checkpoints were
  sealed) is named (a warning) and ignored: the writer then reads from offset 0; saving is
  best effort (a failure is logged; the log stays the truth).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from events.log._store import Heads
from events.log.heads_check import Mark, check_mark, seal, unseal
from events.log.kafka_client import KafkaSecurity
from events.log.kafka_topics import HEADS_STREAM, OwnershipSnapshots
from events.log.port import Record

logger = logging.getLogger(__name__)
RecordFrom = Callable[[int, int], Awaitable[Record | None]]
"""(partition, offset) -> the first record at or after that offset, if any."""


class HeadsCheckpoints:
    """Save and load writers' heads in the compacted ``{cluster}-writer-heads`` topic."""

    def __init__(self, bootstrap_servers: str, *, cluster: str, security: KafkaSecurity | None) -> None:
        self.topic = OwnershipSnapshots(bootstrap_servers, cluster=cluster, security=security,
                                        stream=HEADS_STREAM)

    async def save(self, writer: str, heads: Heads, at: Mapping[int, int],
                   marks: Mapping[int, Mark]) -> None:
        await self.topic.put({writer: seal(heads, at, marks)})

    async def load(self, writer: str, ends: Callable[[], Awaitable[Mapping[int, int]]],
                   record_from: RecordFrom) -> tuple[Heads, dict[int, int], dict[int, Mark]] | None:
        """The writer's checkpoint, checked against the partitions' ``ends()`` and the records
        it marks; None if it has none or it cannot be used (named)."""
        try:
            await self.topic.start()  # creates the topic if missing: a read of a missing one waits
            found = (await self.topic.load()).get(writer)
            return None if found is None else await _checked(found, await ends(), record_from)
        except Exception as exc:  # unreadable, unchecked, or Kafka refused: read from offset 0
            logger.warning("heads checkpoint of writer %r in %s ignored (reading from offset 0): %r",
                           writer, self.topic.topic, exc)
            return None

    async def close(self) -> None:
        await self.topic.close()


async def _checked(found: Mapping[str, Any], ends: Mapping[int, int], record_from: RecordFrom,
                   ) -> tuple[Heads, dict[int, int], dict[int, Mark]]:
    heads, at, marks = unseal(found)
    for partition, offset in at.items():
        if partition not in ends or not 0 <= offset <= ends[partition]:
            raise ValueError(f"it stands at offset {offset} of partition {partition}, whose end "
                             f"is {ends.get(partition)}")
    for partition, offset in at.items():
        mark = marks.get(partition)
        if offset == 0:
            continue
        held = await record_from(partition, 0 if mark is None else mark[0])
        if mark is None:
            first = held.offset if held is not None and held.offset < offset else None
            check_mark(heads, partition, offset, None, None, first)
        else:
            check_mark(heads, partition, offset, mark,
                       held if held is not None and held.offset == mark[0] else None, None)
    return heads, at, marks
