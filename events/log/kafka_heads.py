"""A Kafka writer's heads checkpoint: its restart reads the tail of its partitions, not all of them.

A transactional writer needs every key's last seq and newest epoch (``Heads``) of the partitions
it writes before its first append; without a checkpoint it reads each such partition from
offset 0, so its start grows with the history.

Invariants:
- a checkpoint is ``at`` (partition -> offset) and heads that are exact for every record of
  those partitions below ``at`` (they may also hold later records: heads only grow, and folding a
  record twice changes nothing), so heads + the records from ``at`` on = a read from offset 0;
- the writer makes them exact before saving by reading its partitions up to their ends;
- checkpoints are records of the compacted ``{cluster}-writer-heads`` topic keyed by the
  transactional id: the newest one wins, and one record is written whole or not at all;
- a checkpoint that cannot be read, or that stands past a partition's end (a recreated topic),
  is named (a warning) and ignored: the writer then reads from offset 0; saving is best effort
  (a failure is logged; the log stays the truth).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from events.log._store import Heads
from events.log.kafka_client import KafkaSecurity
from events.log.kafka_topics import HEADS_STREAM, OwnershipSnapshots

logger = logging.getLogger(__name__)


class HeadsCheckpoints:
    """Save and load writers' heads in the compacted ``{cluster}-writer-heads`` topic."""

    def __init__(self, bootstrap_servers: str, *, cluster: str, security: KafkaSecurity | None) -> None:
        self.topic = OwnershipSnapshots(bootstrap_servers, cluster=cluster, security=security,
                                        stream=HEADS_STREAM)

    async def save(self, writer: str, heads: Heads, at: Mapping[int, int]) -> None:
        record = {**heads.to_plain(), "at": {str(p): int(o) for p, o in at.items()}}
        await self.topic.put({writer: record})

    async def load(self, writer: str, ends: Callable[[], Awaitable[Mapping[int, int]]],
                   ) -> tuple[Heads, dict[int, int]] | None:
        """The writer's checkpoint, checked against the partitions' ``ends()``; None if it has
        none or it cannot be used (named)."""
        try:
            await self.topic.start()  # creates the topic if missing: a read of a missing one waits
            found = (await self.topic.load()).get(writer)
            return None if found is None else _checked(found, await ends())
        except Exception as exc:  # unreadable, or Kafka refused: the writer reads from offset 0
            logger.warning("heads checkpoint of writer %r in %s ignored (reading from offset 0): %r",
                           writer, self.topic.topic, exc)
            return None

    async def close(self) -> None:
        await self.topic.close()


def _checked(found: Mapping[str, Any], ends: Mapping[int, int]) -> tuple[Heads, dict[int, int]]:
    at = {int(p): int(o) for p, o in found["at"].items()}
    for partition, offset in at.items():
        if partition not in ends or not 0 <= offset <= ends[partition]:
            raise ValueError(f"it stands at offset {offset} of partition {partition}, whose end "
                             f"is {ends.get(partition)}")
    return Heads.from_plain(found), at
