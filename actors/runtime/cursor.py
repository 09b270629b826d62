"""Following a log: ``LogCursor`` (the next offset to take per partition, each item once),
``read_new`` (every record past a cursor up to the log's end as of now) and ``subscribe``.

Invariants: a reader that takes items through one cursor takes each once, in partition order,
whether they came by a read or by the subscription; a dead letter is handed to ``on_dead``
(named), never dropped in silence; a read behind retention says what it lacks (a warning).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping

from actors.runtime.abilities import TopicLog
from events.log.local import LocalEventLog
from events.log.port import DeadLetter, EventLog, Item, Offsets, Record, dropped_note

logger = logging.getLogger(__name__)


class LogCursor:
    """The next offset to take per partition: every item is taken once, in partition order.

    ``position`` may stand past offsets that hold no record (Kafka's transaction markers, which
    a subscription never delivers); ``seen`` stands just past the last item taken, so a reader
    that has taken the same items has ``reached`` it, whichever way it read them."""

    def __init__(self, on_dead: Callable[[DeadLetter], None] | None = None) -> None:
        self.position: Offsets = {}
        self.seen: Offsets = {}
        self.dead_letters = 0
        self.on_dead = on_dead

    def take(self, item: Item) -> Record | None:
        """The record if it is new (dead letters are counted and skipped), else None."""
        if item.offset < self.position.get(item.partition, 0):
            return None
        self.position[item.partition] = self.seen[item.partition] = item.offset + 1
        if isinstance(item, DeadLetter):
            self.dead_letters += 1
            logger.warning("dead letter at %s:%s skipped: %s", item.partition, item.offset, item.error)
            if self.on_dead is not None:
                self.on_dead(item)
            return None
        return item

    def advance(self, offsets: Mapping[int, int]) -> None:
        """Move past offsets that hold no record (Kafka transaction markers)."""
        for partition, offset in offsets.items():
            self.position[partition] = max(self.position.get(partition, 0), offset)

    def reached(self, target: Mapping[int, int]) -> bool:
        return all(self.position.get(p, 0) >= o for p, o in target.items())


async def read_new(log: EventLog, cursor: LogCursor) -> list[Record]:
    """Every record of ``log`` past ``cursor`` up to the end as of now, taking them."""
    result = await log.read(cursor.position)
    if result.dropped:  # a reader behind retention: what it folds lacks these (named, not hidden)
        where = f"Kafka topic {log.topic}" if isinstance(log, TopicLog) else "the log"
        logger.warning("reading %s: %s", where, dropped_note(result.dropped))
    records = [r for item in result.items if (r := cursor.take(item)) is not None]
    cursor.advance(result.next)
    return records


def subscribe(log: EventLog, start: Offsets, poll_s: float) -> AsyncIterator[Item]:
    """Follow ``log`` from ``start``; the embedded log polls every ``poll_s`` seconds."""
    if isinstance(log, LocalEventLog):
        return log.subscribe(start, poll_interval_s=poll_s)
    return log.subscribe(start)
