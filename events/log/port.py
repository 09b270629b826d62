"""The ``EventLog`` port: what every log adapter (memory, local, Kafka) offers, and its records.

Invariants every adapter keeps (``tests/contracts/`` checks them on all three):
- a log is one topic split into ``partitions``; a key always maps to the same partition, so
  one key has one order; offsets within a partition only grow (Kafka may skip offsets for
  transaction markers, so never assume ``offset + 1`` is the next record);
- ``append(key, messages, epoch=...)`` is all-or-nothing and stamps each message with the next
  gap-free ``seq`` of that key (from 1); an ``epoch`` older than the newest epoch already
  written under the key raises ``WriterFenced``, a wrong ``expected_seq`` raises
  ``StateConflict``; a fenced or rejected append writes nothing;
- reads never raise on bad stored bytes: each undecodable record comes back, in its place,
  as a ``DeadLetter`` (offset, raw bytes, reason, error), so a reader goes on and a
  checkpoint can move past it; nothing is dropped silently;
- a handle whose one reader set its ``skim`` (``events.skim``) hands the records it covers with
  their header only, in their place (``expand`` reads one in full); any other read is full;
- ``Offsets`` map partition -> the next offset to read; a partition left out means "from the
  beginning"; checkpoints store ``Offsets`` under a name and survive a restart;
- a log may have dropped a prefix of a partition (the embedded log's retention, Kafka's
  ``logStartOffset``): a read asked to start below the first offset still held starts there and
  says so in ``ReadResult.dropped``, never a silent jump;
- time comes from the adapter's injected clock (``Stamper``), never read here;
- one log, one cluster: an adapter whose stamper names a cluster refuses, when it starts, a log
  whose first records were stamped by another (``ForeignCluster``, naming both), before it
  appends anything (``check_cluster``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, runtime_checkable

from balancer.errors import DecodeError, ForeignCluster
from events.catalog import Message
from events.codec import decode, reason_of
from events.envelope import Envelope
from events.skim import Skim, Skimmed, skimmed

Offsets = dict[int, int]


class Record(NamedTuple):
    """One decoded entry of the log."""

    partition: int
    offset: int
    envelope: Envelope

    @property
    def key(self) -> str:
        return self.envelope.key

    @property
    def seq(self) -> int:
        return self.envelope.seq

    @property
    def message(self) -> Message:
        return self.envelope.message()


class DeadLetter(NamedTuple):
    """An entry that is not an event this code can read: kept with its bytes and the reason."""

    partition: int
    offset: int
    key: str | None
    raw: bytes
    reason: str
    error: str
    ts_ms: int

    def to_dict(self) -> dict[str, object]:
        return {
            "partition": self.partition, "offset": self.offset, "key": self.key,
            "reason": self.reason, "error": self.error, "ts_ms": self.ts_ms,
            "size": len(self.raw), "raw": self.raw,
        }


Item = Record | DeadLetter


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Items in log order per partition, and where to go on reading from."""

    items: list[Item]
    next: Offsets = field(default_factory=dict)
    dropped: Offsets = field(default_factory=dict)
    """Partition -> its first offset still held, for each partition this read was asked to
    start below it: the records before it were dropped by retention (``dropped_note``)."""

    @property
    def records(self) -> list[Record]:
        return [item for item in self.items if isinstance(item, Record)]

    @property
    def dead_letters(self) -> list[DeadLetter]:
        return [item for item in self.items if isinstance(item, DeadLetter)]


def dropped_note(dropped: Mapping[int, int]) -> str:
    """What a reader says of a read from a retained log: which records are gone."""
    parts = [f"partition {p}: records before offset {o}" for p, o in sorted(dropped.items())]
    return f"{'; '.join(parts)} were dropped by retention"


def to_item(partition: int, offset: int, raw: bytes, key: str | None, ts_ms: int,
            skim: Skim | None = None) -> Item:
    """Decode one stored value; undecodable bytes become a DeadLetter at the same place. A
    record ``skim`` covers comes back with its header only (``events.skim``)."""
    if skim is not None and (header := skimmed(raw, key, skim)) is not None:
        return Record(partition, offset, header)
    try:
        return Record(partition, offset, decode(raw))
    except DecodeError as exc:
        return DeadLetter(partition, offset, key, bytes(raw), reason_of(exc), exc.message, ts_ms)


def expand(record: Record) -> Item:
    """A skimmed record read in full (as the log would have handed it without a skim); any
    other record as it is."""
    envelope = record.envelope
    if not isinstance(envelope, Skimmed):
        return record
    return to_item(record.partition, record.offset, envelope.raw, envelope.key, envelope.ts_ms)


FOUNDING_RECORDS = 16
"""How many of a log's first records ``check_cluster`` reads (a few per partition)."""


async def check_cluster(log: EventLog, cluster_id: str | None, where: str) -> None:
    """Refuse ``log`` if its first records belong to a cluster other than ``cluster_id``."""
    if cluster_id is not None:
        refuse_foreign((await log.read(limit=FOUNDING_RECORDS)).records, cluster_id, where)


def founding_cluster(records: Sequence[Record]) -> str | None:
    """The cluster id the first stamped one of ``records`` carries (None: none is stamped)."""
    return next((r.envelope.cluster_id for r in records if r.envelope.cluster_id is not None), None)


async def cluster_of(log: EventLog) -> str | None:
    """The cluster id of ``log``'s founding records (None for an empty or unstamped log)."""
    return founding_cluster((await log.read(limit=FOUNDING_RECORDS)).records)


def refuse_foreign(records: Sequence[Record], cluster_id: str, where: str) -> None:
    """``ForeignCluster`` if any of ``records`` was stamped by another cluster."""
    for record in records:
        theirs = record.envelope.cluster_id
        if theirs is not None and theirs != cluster_id:
            raise ForeignCluster(
                f"{where} belongs to cluster {theirs!r} (its record at partition {record.partition} "
                f"offset {record.offset}), not to cluster {cluster_id!r}: refusing to use it",
                value=theirs)


def advance(offsets: Mapping[int, int], item: Item) -> Offsets:
    """The offsets after consuming ``item`` (for checkpoints)."""
    out = dict(offsets)
    out[item.partition] = max(out.get(item.partition, 0), item.offset + 1)
    return out


def causation_list(messages: Sequence[Message], causation_id: str | None,
                   causation_ids: Sequence[str | None] | None) -> list[str | None]:
    """The causation id of each message of one append: ``causation_ids`` if given (exactly one
    per message), else ``causation_id`` for all."""
    if causation_ids is None:
        return [causation_id] * len(messages)
    if len(causation_ids) != len(messages):
        raise ValueError(f"{len(causation_ids)} causation ids for {len(messages)} messages")
    return list(causation_ids)


@runtime_checkable
class EventLog(Protocol):
    """One topic of the event log (``events``, ``load`` or ``commands``)."""

    name: str
    partitions: int

    async def start(self) -> None:
        """Connect/open; idempotent. Adapters are also async context managers."""

    async def close(self) -> None:
        """Release files, connections and producers; idempotent."""

    def partition_for(self, key: str) -> int:
        """The partition of a key (stable for the life of the log)."""

    async def append(
        self,
        key: str,
        messages: Sequence[Message],
        *,
        epoch: int,
        expected_seq: int | None = None,
        causation_id: str | None = None,
        correlation_id: str | None = None,
        causation_ids: Sequence[str | None] | None = None,
    ) -> list[Record]:
        """Append atomically under ``key``; returns the stored records (seq and offsets set).

        ``causation_ids``, one per message, stamps each its own (a host's group commit: many
        commands' events in one append); without it every message gets ``causation_id``."""

    async def append_raw(self, key: str, values: Sequence[bytes], *, ts_ms: int | None = None) -> None:
        """Store bytes as they are (imports, mirroring, tests); no seq, no fencing, no checks."""

    async def head(self, key: str) -> tuple[int, int]:
        """(last seq, newest epoch) written under ``key``; (0, 0) for a key never written."""

    async def read(
        self, start: Mapping[int, int] | None = None, *, from_ts_ms: int | None = None,
        limit: int | None = None,
    ) -> ReadResult:
        """Entries from ``start`` (or the first with ts >= ``from_ts_ms``) up to the end as of
        the call, at most ``limit``."""

    def subscribe(
        self, start: Mapping[int, int] | None = None, *, from_ts_ms: int | None = None,
    ) -> AsyncIterator[Item]:
        """Like ``read`` but never ends: follows new appends (break out, or ``aclose()``)."""

    async def end_offsets(self) -> Offsets:
        """Partition -> offset one past the last readable entry."""

    async def save_checkpoint(self, name: str, offsets: Mapping[int, int]) -> None:
        """Store a reader's position durably under ``name``."""

    async def load_checkpoint(self, name: str) -> Offsets | None:
        """The position stored under ``name``, or None."""

    async def dead_letters(self, start: Mapping[int, int] | None = None) -> list[DeadLetter]:
        """Every dead letter from ``start`` to the end."""
