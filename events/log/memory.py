"""``MemoryEventLog``: the event log in a Python list, for tests and simulation.

Invariants:
- it keeps the *encoded* bytes, not the objects: what a reader gets back went through the same
  codec (and the same dead-letter path) as with the file and Kafka adapters, and no reader can
  mutate what another reads;
- a ``MemoryStore`` outlives the logs opened on it: "restarting" a log is opening a new
  ``MemoryEventLog`` on the same store, which keeps entries and checkpoints;
- it is safe to share between threads (one lock) and between event loops (waiters are woken
  through their own loop).
"""

from __future__ import annotations

import asyncio
import bisect
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress

from events.envelope import Stamper
from events.log._store import Entry, Heads, Store, StoreLog
from events.log.port import Offsets


class MemoryStore(Store):
    """Entries, per-partition timestamps, heads and checkpoints, all in memory."""

    def __init__(self, partitions: int = 1) -> None:
        if partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {partitions}")
        self.partitions = partitions
        self._entries: list[list[Entry]] = [[] for _ in range(partitions)]
        # Running maximum of timestamps per partition: bisect finds the first ts >= t even
        # when an injected clock goes backwards (the same answer Kafka's time index gives).
        self._max_ts: list[list[int]] = [[] for _ in range(partitions)]
        self._heads = Heads()
        self._checkpoints: dict[str, Offsets] = {}
        self._lock = threading.RLock()
        self._waiters: list[asyncio.Future[None]] = []

    @contextmanager
    def locked(self) -> Iterator[Heads]:
        with self._lock:
            yield self._heads

    def write(self, partition: int, entries: Sequence[Entry]) -> int:
        with self._lock:
            log, stamps = self._entries[partition], self._max_ts[partition]
            base = len(log)
            top = stamps[-1] if stamps else -(2**63)
            for entry in entries:
                top = max(top, entry.ts_ms)
                stamps.append(top)
            log.extend(entries)
            waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                with suppress(RuntimeError):  # the waiter's loop has closed meanwhile
                    fut.get_loop().call_soon_threadsafe(_wake, fut)
        return base

    def end(self, partition: int) -> int:
        return len(self._entries[partition])

    def fetch(self, partition: int, start: int, stop: int) -> list[Entry]:
        with self._lock:
            return self._entries[partition][start:stop]

    def offset_for_time(self, partition: int, ts_ms: int) -> int:
        with self._lock:
            return bisect.bisect_left(self._max_ts[partition], ts_ms)

    def save_checkpoint(self, name: str, offsets: Offsets) -> None:
        with self._lock:
            self._checkpoints[name] = dict(offsets)

    def load_checkpoint(self, name: str) -> Offsets | None:
        with self._lock:
            found = self._checkpoints.get(name)
            return None if found is None else dict(found)

    async def wait_for_change(self, seen: Offsets, timeout_s: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            if any(self.end(p) > seen.get(p, 0) for p in range(self.partitions)):
                return
            self._waiters.append(fut)
        with suppress(TimeoutError):
            await asyncio.wait_for(fut, timeout_s * 20)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class MemoryEventLog(StoreLog):
    """An ``EventLog`` kept in memory; pass the same ``store`` to reopen it."""

    def __init__(
        self, name: str = "events", *, partitions: int = 1, store: MemoryStore | None = None,
        stamper: Stamper | None = None,
    ) -> None:
        self.store = store if store is not None else MemoryStore(partitions)
        super().__init__(name, self.store, stamper)

    async def close(self) -> None:
        # The store is the durable part; closing a handle keeps it for the next one.
        return None
