"""Where a mirrored record came from: Pulsar message ids and the causation ids that carry them.

A record mirrored from a topic carries ``causation_id = "pulsar:<topic>@<ledger>:<entry>:<partition>:<batch>"``;
one from a REST answer ``"pulsar:GET <path>"``. The log is the only memory of how far the
mirror got: the newest message id of each topic is read back from these ids.

Invariants: a position is the tuple (ledger, entry, partition, batch), ordered as Pulsar orders
message ids of one topic; ``format_position`` and ``parse_position`` are inverse; a causation id
that is not a topic's (a REST one, another writer's) parses to None.
"""

from __future__ import annotations

from typing import NamedTuple

PREFIX = "pulsar:"


class Position(NamedTuple):
    """A Pulsar message id of one topic (a non-partitioned topic's partition is -1)."""

    ledger: int
    entry: int
    partition: int = -1
    batch: int = -1

    def __str__(self) -> str:
        return format_position(self)


def format_position(position: Position) -> str:
    return f"{position.ledger}:{position.entry}:{position.partition}:{position.batch}"


def parse_position(text: str) -> Position | None:
    """The position ``format_position`` wrote, or None for anything else."""
    parts = text.split(":")
    if len(parts) != 4:
        return None
    try:
        return Position(*(int(part) for part in parts))
    except ValueError:
        return None


def topic_causation(topic: str, position: Position) -> str:
    return f"{PREFIX}{topic}@{format_position(position)}"


def rest_causation(path: str) -> str:
    return f"{PREFIX}GET {path}"


def parse_causation(causation_id: str | None) -> tuple[str, Position] | None:
    """(topic, position) of a topic's causation id; None for a REST one or any other."""
    if not causation_id or not causation_id.startswith(PREFIX):
        return None
    topic, at, position = causation_id[len(PREFIX):].rpartition("@")
    if not at or not topic or topic.startswith("GET "):
        return None
    parsed = parse_position(position)
    return None if parsed is None else (topic, parsed)
