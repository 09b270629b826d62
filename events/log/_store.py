"""Shared machinery of the memory and local adapters: a synchronous ``Store`` behind the async port.

Invariants:
- all of seq assignment, fencing and the all-or-nothing write happen inside ``Store.locked()``,
  which for the local adapter is an exclusive file lock taken after catching up with writes of
  other processes: two writers can never both take seq n for one key;
- ``Heads`` is a pure function of the decodable records of the log (max seq, max epoch per
  key, of the records within reach of their key, ``events.bounds``), so a store rebuilt from its
  files agrees with the one that wrote them;
- reads see only entries the store has fully committed (``end``), never a half-written batch;
- a store may have dropped a prefix of a partition (``start``): a read from below it starts at
  ``start`` and names it in ``ReadResult.dropped``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import zlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import NamedTuple, Self

from balancer.errors import ForeignCluster, LoadBalancerError, StateConflict, WriterFenced
from events.authority import genuine_election, leader_write, root_of
from events.bounds import beyond_reach
from events.catalog import LEADER_KEY, Message
from events.codec import encode
from events.envelope import Envelope, Stamper
from events.log.port import (
    FOUNDING_RECORDS,
    DeadLetter,
    Item,
    Offsets,
    ReadResult,
    Record,
    causation_list,
    dropped_note,
    refuse_foreign,
    to_item,
)
from events.skim import Skim

SUBSCRIBE_BATCH = 1000
logger = logging.getLogger(__name__)


class Entry(NamedTuple):
    raw: bytes
    key: str | None
    ts_ms: int
    damaged: bool = False  # the store's own framing check failed (crc)


class Heads:
    """key -> (last seq, newest epoch), folded from the records of the log; and the newest epoch
    a ``LeaderElected`` under ``_leader`` established (None while the log has no election).

    Epochs rise only through elections: once the log has one, a record at an epoch no election
    has established raises no key's epoch (so a forged epoch fences no one). In a signed log
    (``root``: the root key its first signed record names) only a genuine election raises it
    (``events.authority.genuine_election``): a forged one would fence every real writer."""

    __slots__ = ("_heads", "elected", "root")

    def __init__(self) -> None:
        self._heads: dict[str, tuple[int, int]] = {}
        self.elected: int | None = None
        self.root: bytes | None = None

    def get(self, key: str) -> tuple[int, int]:
        return self._heads.get(key, (0, 0))

    def observe(self, envelope: Envelope) -> None:
        key = envelope.key
        seq, epoch = self.get(key)
        if beyond_reach(seq, epoch, envelope.seq, envelope.epoch):
            return  # it moves no head: the key's next append follows its last record in reach
        if self.root is None and envelope[11] is not None:
            self.root = root_of(envelope)
        new_epoch = envelope.epoch
        if (key == LEADER_KEY and envelope.type == "LeaderElected"
                and genuine_election(envelope, self.root, self.elected)):
            self.elected = max(self.elected or 0, new_epoch)
        elif self.elected is not None and new_epoch > self.elected:
            new_epoch = epoch
        self._heads[key] = (max(seq, envelope.seq), max(epoch, new_epoch))

    def to_plain(self) -> dict[str, object]:
        """Plain data (a writer's checkpoint): ``heads`` key -> [seq, epoch], ``elected``, and
        ``root`` (hex) once the log is signed."""
        plain: dict[str, object] = {"heads": {key: [seq, epoch] for key, (seq, epoch) in self._heads.items()},
                                    "elected": self.elected}
        if self.root is not None:
            plain["root"] = self.root.hex()
        return plain

    @classmethod
    def from_plain(cls, data: Mapping[str, object]) -> Heads:
        heads, elected = data["heads"], data["elected"]
        if not isinstance(heads, Mapping) or not (elected is None or type(elected) is int):
            raise ValueError(f"not a writer's heads: {type(heads).__name__}, elected {elected!r}")
        out = cls()
        for key, (seq, epoch) in heads.items():
            if not (isinstance(key, str) and type(seq) is int and type(epoch) is int):
                raise ValueError(f"head {key!r}: [{seq!r}, {epoch!r}] is no [seq, epoch]")
            out._heads[key] = (seq, epoch)
        out.elected = elected
        root = data.get("root")
        out.root = bytes.fromhex(root) if isinstance(root, str) else None
        return out

    def observe_raw(self, raw: bytes) -> None:
        item = to_item(0, 0, raw, None, 0)
        if isinstance(item, Record):
            self.observe(item.envelope)


class _GroupHeads(Heads):
    """The heads as they will be once the appends ahead in a group commit are written."""

    __slots__ = ("_base",)

    def __init__(self, base: Heads) -> None:
        super().__init__()
        self._base = base
        self.elected, self.root = base.elected, base.root

    def get(self, key: str) -> tuple[int, int]:
        return self._heads.get(key) or self._base.get(key)

    def fold_into(self, base: Heads) -> None:
        """Make ``base`` (the one this was made on) what it becomes once every append observed
        here is written: the same as observing each of them on it, in order."""
        base._heads.update(self._heads)
        base.elected, base.root = self.elected, self.root


class _Pending(NamedTuple):
    key: str
    messages: Sequence[Message]
    epoch: int
    expected_seq: int | None
    causation_ids: Sequence[str | None]
    correlation_id: str | None
    future: asyncio.Future[list[Record]] | concurrent.futures.Future[list[Record]]


_Accepted = tuple[_Pending, list[Envelope], list[Entry]]


def check_append(heads: Heads, key: str, epoch: int, expected_seq: int | None, *,
                 leader_write: bool = False) -> int:
    """The last seq of ``key`` if an append with ``epoch``/``expected_seq`` may go ahead.

    ``leader_write`` (``events.authority.leader_write``): only a leader writes it, so an epoch
    below the newest election is a deposed leader's, whatever the key's own history says."""
    seq, newest = heads.get(key)
    if heads.elected is not None and epoch > heads.elected and key != LEADER_KEY:
        raise WriterFenced(
            f"writer for {key!r} has epoch {epoch}, which no election established (newest "
            f"election: {heads.elected})", key=key, epoch=epoch, newest=heads.elected,
        )
    if leader_write and heads.elected is not None and epoch < heads.elected:
        raise WriterFenced(
            f"leader's write to {key!r} at epoch {epoch}: epoch {heads.elected} was elected since",
            key=key, epoch=epoch, newest=heads.elected,
        )
    if epoch < newest:
        raise WriterFenced(
            f"writer for {key!r} has epoch {epoch}, but epoch {newest} already wrote there",
            key=key, epoch=epoch, newest=newest,
        )
    if expected_seq is not None and expected_seq != seq:
        raise StateConflict(
            f"append to {key!r} expected seq {expected_seq}, the log is at {seq}",
            key=key, expected_seq=expected_seq, seq=seq,
        )
    return seq


def crc_partition(key: str, partitions: int) -> int:
    return zlib.crc32(key.encode()) % partitions if partitions > 1 else 0


class Store(ABC):
    """Synchronous storage of one topic's partitions."""

    partitions: int = 1

    @abstractmethod
    def locked(self) -> AbstractContextManager[Heads]:
        """Exclusive writer access; yields the heads, current as of taking the lock."""

    @abstractmethod
    def write(self, partition: int, entries: Sequence[Entry]) -> int:
        """Append entries as one unit (call inside ``locked``); returns the first offset."""

    def write_group(self, partition: int, groups: Sequence[Sequence[Entry]]) -> list[int]:
        """Several appends, each one unit, stored together (one fsync where there is one)."""
        return [self.write(partition, entries) for entries in groups]

    @abstractmethod
    def end(self, partition: int) -> int: ...

    def start(self, partition: int) -> int:
        """The first offset still held (retention drops whole prefixes); 0 for most stores."""
        return 0

    @abstractmethod
    def fetch(self, partition: int, start: int, stop: int) -> list[Entry]: ...

    @abstractmethod
    def offset_for_time(self, partition: int, ts_ms: int) -> int:
        """The first offset whose timestamp is >= ``ts_ms`` (``end`` if none)."""

    @abstractmethod
    def save_checkpoint(self, name: str, offsets: Offsets) -> None: ...

    @abstractmethod
    def load_checkpoint(self, name: str) -> Offsets | None: ...

    @abstractmethod
    async def wait_for_change(self, seen: Offsets, timeout_s: float) -> None:
        """Return when some partition may have grown past ``seen`` (or after the timeout)."""

    def damage(self, partition: int, offset: int) -> str:
        """What is wrong with the damaged entry at ``offset``, naming where it is stored."""
        return f"partition {partition} offset {offset}: stored frame fails its crc check"

    def poll(self) -> None:  # noqa: B027 - most stores have no other writers to take in
        """Take in what other processes wrote."""

    def close(self) -> None:  # noqa: B027 - most stores hold nothing to release
        """Release resources."""


class StoreLog:
    """The async ``EventLog`` API over a ``Store``; memory and local adapters subclass it."""

    def __init__(self, name: str, store: Store, stamper: Stamper | None = None,
                 *, group_commit: bool = False) -> None:
        self.name = name
        self.group_commit = group_commit  # off where a caller drives append() without waiting
        self.partitions = store.partitions
        self._store = store
        self._stamper = stamper or Stamper()
        self._pending: list[_Pending] = []
        self._committing = False
        self._cluster_checked = stamper is None or stamper.cluster_id is None
        self.skim: Skim | None = None
        """What ``read`` and ``subscribe`` hand with its header only (``events.skim``): set by
        the one reader of this handle (a host, for its body)."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        self._check_cluster()

    def _check_cluster(self) -> None:
        """Once, before the first append: the log's first records are of this cluster."""
        if not self._cluster_checked:
            assert self._stamper.cluster_id is not None
            first = self._read_from(self._begin(None, None), FOUNDING_RECORDS).records
            refuse_foreign(first, self._stamper.cluster_id, self.where)
            self._cluster_checked = True

    @property
    def where(self) -> str:
        """What messages call this log."""
        return f"the log {self.name!r}"

    async def close(self) -> None:
        self._store.close()

    def partition_for(self, key: str) -> int:
        return crc_partition(key, self.partitions)

    async def append(
        self, key: str, messages: Sequence[Message], *, epoch: int,
        expected_seq: int | None = None, causation_id: str | None = None,
        correlation_id: str | None = None, causation_ids: Sequence[str | None] | None = None,
    ) -> list[Record]:
        """Appends that arrive while one is being committed wait and are committed together
        (group commit): each keeps its own all-or-nothing, seq and fencing."""
        causes = causation_list(messages, causation_id, causation_ids)
        try:
            future: asyncio.Future[list[Record]] = asyncio.get_running_loop().create_future()
            if not self.group_commit:
                raise RuntimeError("group commit is off")
        except RuntimeError:  # off, or driven without a loop (the in-process host): commit now
            now: concurrent.futures.Future[list[Record]] = concurrent.futures.Future()
            self._commit([_Pending(key, messages, epoch, expected_seq, causes, correlation_id, now)])
            return now.result()
        self._pending.append(_Pending(key, messages, epoch, expected_seq, causes,
                                      correlation_id, future))
        if not self._committing:
            self._committing = True
            try:
                await asyncio.sleep(0)  # appends already on their way join this group
            finally:
                while self._pending:
                    group, self._pending = self._pending, []
                    self._commit(group)
                self._committing = False
        return await future

    def _commit(self, group: list[_Pending]) -> None:
        try:
            self._check_cluster()
        except ForeignCluster as exc:
            for p in group:
                p.future.set_exception(exc)
            return
        with self._store.locked() as heads:
            ahead = _GroupHeads(heads)
            accepted: list[_Accepted] = []
            for p in group:
                try:
                    seq = check_append(ahead, p.key, p.epoch, p.expected_seq,
                                       leader_write=leader_write(p.key, p.messages))
                    envelopes = [self._stamper.seal(m, key=p.key, seq=seq + i, epoch=p.epoch,
                                                    causation_id=p.causation_ids[i - 1],
                                                    correlation_id=p.correlation_id)
                                 for i, m in enumerate(p.messages, start=1)]
                    signed, raws = self._stamper.sign(envelopes, [encode(env) for env in envelopes])
                    envelopes = list(signed)
                    entries = [Entry(raw, p.key, env.ts_ms) for env, raw in zip(envelopes, raws, strict=True)]
                except (LoadBalancerError, ValueError, TypeError, OverflowError) as exc:
                    p.future.set_exception(exc)
                    continue
                for env in envelopes:
                    ahead.observe(env)
                accepted.append((p, envelopes, entries))
            self._write_accepted(heads, ahead, accepted)

    def _write_accepted(self, heads: Heads, ahead: _GroupHeads, accepted: list[_Accepted]) -> None:
        by_partition: dict[int, list[_Accepted]] = {}
        written: list[tuple[_Accepted, int, int]] = []  # (append, partition, its first offset)
        for item in accepted:
            by_partition.setdefault(self.partition_for(item[0].key), []).append(item)
        for partition, items in by_partition.items():
            try:
                bases = self._store.write_group(partition, [entries for _, _, entries in items])
            except Exception as exc:  # the disk refused: nothing of this group was committed
                for p, _, _ in items:
                    p.future.set_exception(exc)
                continue
            written.extend((item, partition, base) for item, base in zip(items, bases, strict=True))
        # The heads first: an appender woken by its result finds them with its records in.
        if len(written) == len(accepted):
            ahead.fold_into(heads)  # all written: the heads ``ahead`` folded are the log's
        else:
            for (_, envelopes, _), _, _ in written:
                for env in envelopes:
                    heads.observe(env)
        for (p, envelopes, _), partition, base in written:
            p.future.set_result([Record(partition, base + i, env) for i, env in enumerate(envelopes)])

    async def append_raw(self, key: str, values: Sequence[bytes], *, ts_ms: int | None = None) -> None:
        stamp = self._stamper.clock_ms() if ts_ms is None else ts_ms
        with self._store.locked() as heads:
            self._store.write(self.partition_for(key), [Entry(bytes(v), key, stamp) for v in values])
            for value in values:
                heads.observe_raw(bytes(value))

    async def head(self, key: str) -> tuple[int, int]:
        with self._store.locked() as heads:
            return heads.get(key)

    def _begin(self, start: Mapping[int, int] | None, from_ts_ms: int | None) -> Offsets:
        if from_ts_ms is not None:
            return {p: self._store.offset_for_time(p, from_ts_ms) for p in range(self.partitions)}
        start = start or {}
        return {p: max(0, int(start.get(p, 0))) for p in range(self.partitions)}

    def _read_from(self, begin: Offsets, limit: int | None) -> ReadResult:
        self._store.poll()
        begin = dict(begin)
        items: list[Item] = []
        nxt = dict(begin)
        dropped: Offsets = {}
        for p in range(self.partitions):
            first = self._store.start(p)
            if begin[p] < first:  # retention dropped them: start at the first held, and say so
                dropped[p] = nxt[p] = begin[p] = first
            end = self._store.end(p)
            stop = end if limit is None else min(end, begin[p] + max(0, limit - len(items)))
            if stop <= begin[p]:
                continue
            for i, entry in enumerate(self._store.fetch(p, begin[p], stop), start=begin[p]):
                if entry.damaged:
                    items.append(DeadLetter(p, i, entry.key, entry.raw, "corrupt",
                                            self._store.damage(p, i), entry.ts_ms))
                else:
                    items.append(to_item(p, i, entry.raw, entry.key, entry.ts_ms, self.skim))
            nxt[p] = stop
        return ReadResult(items, nxt, dropped)

    async def read(
        self, start: Mapping[int, int] | None = None, *, from_ts_ms: int | None = None,
        limit: int | None = None,
    ) -> ReadResult:
        return self._read_from(self._begin(start, from_ts_ms), limit)

    async def subscribe(
        self, start: Mapping[int, int] | None = None, *, from_ts_ms: int | None = None,
        poll_interval_s: float = 0.05,
    ) -> AsyncIterator[Item]:
        position = self._begin(start, from_ts_ms)
        while True:
            result = self._read_from(position, SUBSCRIBE_BATCH)
            if result.dropped:
                logger.warning("%s: %s; following from the first held", self.where,
                               dropped_note(result.dropped))
            position = result.next
            for item in result.items:
                yield item
            if not result.items:
                await self._store.wait_for_change(position, poll_interval_s)

    async def start_offsets(self) -> Offsets:
        """Partition -> the first offset still held (above 0 once retention dropped records)."""
        self._store.poll()
        return {p: self._store.start(p) for p in range(self.partitions)}

    async def end_offsets(self) -> Offsets:
        self._store.poll()
        return {p: self._store.end(p) for p in range(self.partitions)}

    async def save_checkpoint(self, name: str, offsets: Mapping[int, int]) -> None:
        self._store.save_checkpoint(name, {int(p): int(o) for p, o in offsets.items()})

    async def load_checkpoint(self, name: str) -> Offsets | None:
        return self._store.load_checkpoint(name)

    async def dead_letters(self, start: Mapping[int, int] | None = None) -> list[DeadLetter]:
        return list(self._iter_dead(self._begin(start, None)))

    def _iter_dead(self, position: Offsets) -> Iterator[DeadLetter]:
        while True:
            result = self._read_from(position, 10_000)
            if not result.items:
                return
            yield from result.dead_letters
            position = result.next
