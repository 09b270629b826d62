"""Drives a projection over any ``EventLog``: catch up, follow, snapshot, restore, time travel.

Invariants:
- a snapshot holds the projection's state *and* the log position it reflects, written in one
  atomic step (a file replaced with ``os.replace``, or one record of a compacted Kafka topic),
  so a restore is always "state as of position P" + the tail from P: never a state ahead of or
  behind its position;
- the projection's own per-key seq tracking makes re-reading any part of the tail harmless, so a
  crash between applying and snapshotting loses nothing and applies nothing twice;
- dead letters are counted as anomalies of the projection, at their offsets; the runner never
  stops on one.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import msgpack

from events.envelope import Envelope
from events.log.kafka_topics import OwnershipSnapshots
from events.log.port import DeadLetter, EventLog, Offsets, Record
from projections.tracking import Anomaly


class Projection(Protocol):
    name: str

    def apply(self, offset: int, envelope: Envelope) -> bool: ...

    @property
    def anomalies(self) -> list[Anomaly]: ...

    def snapshot(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Snapshot:
    position: Offsets
    state: dict[str, Any]

    def encode(self) -> bytes:
        packed: bytes = msgpack.packb(
            {"position": {str(p): o for p, o in self.position.items()}, "state": self.state},
            use_bin_type=True,
        )
        return packed

    @classmethod
    def decode(cls, raw: bytes) -> Snapshot:
        data = msgpack.unpackb(raw, raw=False, strict_map_key=False)
        return cls({int(p): int(o) for p, o in data["position"].items()}, data["state"])


class SnapshotStore(Protocol):
    async def save(self, name: str, snapshot: Snapshot) -> None: ...

    async def load(self, name: str) -> Snapshot | None: ...


class FileSnapshotStore:
    """Snapshots as files in a directory; each save replaces the file atomically."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, name: str) -> Path:
        return self.directory / f"{name.replace('/', '_')}.snapshot"

    async def save(self, name: str, snapshot: Snapshot) -> None:
        data = snapshot.encode()
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".snapshot-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self._path(name))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    async def load(self, name: str) -> Snapshot | None:
        path = self._path(name)
        if not path.exists():
            return None
        return Snapshot.decode(path.read_bytes())


class MemorySnapshotStore:
    def __init__(self) -> None:
        self.saved: dict[str, bytes] = {}

    async def save(self, name: str, snapshot: Snapshot) -> None:
        self.saved[name] = snapshot.encode()

    async def load(self, name: str) -> Snapshot | None:
        raw = self.saved.get(name)
        return None if raw is None else Snapshot.decode(raw)


class KafkaSnapshotStore:
    """Snapshots as records of the compacted ``{cluster}-ownership`` topic, keyed by projection:
    compaction keeps the latest snapshot of each, and one record is written atomically."""

    def __init__(self, snapshots: OwnershipSnapshots) -> None:
        self.snapshots = snapshots

    @staticmethod
    def _key(name: str) -> str:
        return f"_projection/{name}"

    async def save(self, name: str, snapshot: Snapshot) -> None:
        await self.snapshots.put({self._key(name): {"snapshot": snapshot.encode()}})

    async def load(self, name: str) -> Snapshot | None:
        found = (await self.snapshots.load()).get(self._key(name))
        return None if found is None else Snapshot.decode(found["snapshot"])


class ProjectionRunner:
    """Keeps one projection up to date with one log."""

    def __init__(
        self,
        log: EventLog,
        projection: Projection,
        *,
        store: SnapshotStore | None = None,
        restore: Callable[[Mapping[str, Any]], Projection] | None = None,
        snapshot_every: int = 50_000,
        batch: int = 5_000,
    ) -> None:
        self.log = log
        self.projection = _ordered(projection, log)
        self.store = store
        self._restore = restore
        self.snapshot_every = snapshot_every
        self.batch = batch
        self.position: Offsets = {}
        self._since_snapshot = 0

    async def restore(self) -> bool:
        """Load the last snapshot, if any; True when one was found."""
        if self.store is None or self._restore is None:
            return False
        found = await self.store.load(self.projection.name)
        if found is None:
            return False
        self.projection = _ordered(self._restore(found.state), self.log)
        self.position = dict(found.position)
        return True

    async def catch_up(self) -> int:
        """Apply everything up to the log's end as of now; returns the number of items read."""
        seen = 0
        while True:
            result = await self.log.read(self.position, limit=self.batch)
            if not result.items:
                return seen
            for item in result.items:
                self._apply(item)
            seen += len(result.items)
            self.position.update(result.next)
            await self._maybe_snapshot(len(result.items))

    async def follow(self, stop: asyncio.Event, on_change: Callable[[], Awaitable[None]] | None = None) -> None:
        """Apply new entries as they arrive until ``stop`` is set."""
        stream = self.log.subscribe(self.position)
        try:
            while not stop.is_set():
                waiter = asyncio.ensure_future(anext(stream))
                stopper = asyncio.ensure_future(stop.wait())
                done, _ = await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
                stopper.cancel()
                if waiter not in done:
                    waiter.cancel()
                    break
                item = waiter.result()
                self._apply(item)
                self.position[item.partition] = item.offset + 1
                await self._maybe_snapshot(1)
                if on_change is not None:
                    await on_change()
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    async def snapshot(self) -> None:
        if self.store is not None:
            await self.store.save(
                self.projection.name, Snapshot(dict(self.position), self.projection.snapshot())
            )
        self._since_snapshot = 0

    def _apply(self, item: Record | DeadLetter) -> None:
        if isinstance(item, DeadLetter):
            apply_dead_letter(self.projection, item)
            return
        self.projection.apply(item.offset, item.envelope)

    async def _maybe_snapshot(self, applied: int) -> None:
        self._since_snapshot += applied
        if self.store is not None and self._since_snapshot >= self.snapshot_every:
            await self.snapshot()


async def view_as_of(
    log: EventLog,
    projection: Projection,
    *,
    offsets: Mapping[int, int] | None = None,
    ts_ms: int | None = None,
    batch: int = 5_000,
) -> Projection:
    """Time travel: fold the log from the start up to ``offsets`` (exclusive, per partition) or
    up to the last event with ``ts_ms`` at or before the given time."""
    projection = _ordered(projection, log)
    position: Offsets = {}
    while True:
        result = await log.read(position, limit=batch)
        if not result.items:
            return projection
        for item in result.items:
            if _past(item, offsets, ts_ms):
                continue
            if isinstance(item, Record):
                projection.apply(item.offset, item.envelope)
            else:
                apply_dead_letter(projection, item)
        position.update(result.next)


def _ordered(projection: Projection, log: EventLog) -> Projection:
    """Tell a projection that cares whether the log is one ordered stream (one partition)."""
    if hasattr(projection, "ordered"):
        projection.ordered = log.partitions == 1
    return projection


def apply_dead_letter(projection: Projection, letter: DeadLetter) -> None:
    """Tell the projection about a record it cannot read (it names it; some mark a view degraded)."""
    why = f"{letter.reason}: {letter.error}"
    take = getattr(projection, "apply_dead_letter", None)
    if take is not None:
        take(letter.offset, letter.key, why)
    else:
        projection.anomalies.append(Anomaly("dead_letter", letter.offset, letter.key or "", None, "?", why))


def _past(item: Record | DeadLetter, offsets: Mapping[int, int] | None, ts_ms: int | None) -> bool:
    if offsets is not None and item.offset >= offsets.get(item.partition, 0):
        return True
    if ts_ms is not None:
        stamp = item.envelope.ts_ms if isinstance(item, Record) else item.ts_ms
        return stamp > ts_ms
    return False
