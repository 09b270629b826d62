"""``LocalEventLog``: the embedded default, append-only segment files with an index.

Layout of a log directory::

    LOCK                        writers take an exclusive flock on it
    00000000000000000000.log    frames: crc32 (u32) | body length (u32) | body
                                body = ts_ms (i64) | key length (u16) | key | value
    00000000000000000000.idx    one 16-byte entry per record: position (u63) with the top bit
                                set on the last record of an append, ts_ms (i64)
    checkpoints/NAME.json       {"partition": next offset}, replaced atomically

Invariants:
- one partition; the offset of a record is its place in the log; a segment is named by the
  offset of its first record and sealed once a later segment exists;
- an append writes all its frames, then all its index entries in one ``write``: the index is
  the commit record. Entries after the last end-of-append flag, and data past the last
  committed frame, belong to an append that did not finish (a writer killed mid-append) and
  are cut by the next writer to take the lock, and on open; readers never see them;
- every append runs under the flock after catching up with what other processes wrote, so
  seq and fencing hold across the processes of one machine; readers take no lock and poll;
- a committed frame whose crc does not match is returned as a dead letter, never dropped;
- with ``fsync=True`` (default) data and index reach the disk before ``append`` returns.
"""

from __future__ import annotations

import asyncio
import bisect
import fcntl
import os
import re
import struct
import threading
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import orjson

from balancer.errors import InvalidInput
from events.envelope import Stamper
from events.log._store import Entry, Heads, Store, StoreLog
from events.log.port import Offsets, Record, to_item

FRAME = struct.Struct(">II")  # crc32 of body, body length
BODY = struct.Struct(">qH")  # ts_ms, key length
INDEX = struct.Struct(">Qq")  # position | END_FLAG, ts_ms
END_FLAG = 1 << 63
POSITION_MASK = END_FLAG - 1
_CHECKPOINT_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


def frame(entry: Entry) -> bytes:
    key = (entry.key or "").encode()
    body = BODY.pack(entry.ts_ms, len(key)) + key + entry.raw
    return FRAME.pack(zlib.crc32(body), len(body)) + body


def unframe(buf: bytes | memoryview, at: int) -> tuple[Entry, int, bool]:
    """The entry framed at ``at``, the position after it, and whether its crc matched."""
    view = memoryview(buf)
    crc, size = FRAME.unpack_from(view, at)
    start, stop = at + FRAME.size, at + FRAME.size + size
    body = view[start:stop]
    ok = len(body) == size and zlib.crc32(body) == crc and size >= BODY.size
    ts_ms, key_len = BODY.unpack_from(body, 0) if ok else (0, 0)
    key_end = start + BODY.size + key_len
    key = bytes(view[start + BODY.size: key_end]).decode(errors="replace") or None
    return Entry(bytes(view[key_end:stop]), key, ts_ms), stop, ok


class Segment:
    """One data file and its index, as far as committed."""

    def __init__(self, directory: Path, base: int) -> None:
        self.base = base
        self.data_path = directory / f"{base:020d}.log"
        self.index_path = directory / f"{base:020d}.idx"
        flags = os.O_RDWR | os.O_CREAT
        self.data_fd = os.open(self.data_path, flags, 0o644)
        self.index_fd = os.open(self.index_path, flags, 0o644)
        self.positions: list[int] = []
        self.max_ts: list[int] = []
        self.data_end = 0  # end of the last committed frame
        self.index_bytes = 0  # bytes of the index read so far, committed or not

    @property
    def count(self) -> int:
        return len(self.positions)

    def refresh(self) -> None:
        """Take in index entries committed since the last refresh (by any process)."""
        size = os.fstat(self.index_fd).st_size
        size -= size % INDEX.size
        committed = len(self.positions) * INDEX.size
        if size <= committed:
            return
        raw = os.pread(self.index_fd, size - committed, committed)
        fresh = list(INDEX.iter_unpack(raw))
        last_end = max((i for i, (p, _) in enumerate(fresh) if p & END_FLAG), default=-1)
        if last_end < 0:
            return
        top = self.max_ts[-1] if self.max_ts else -(2**63)
        for position, ts_ms in fresh[: last_end + 1]:
            top = max(top, ts_ms)
            self.positions.append(position & POSITION_MASK)
            self.max_ts.append(top)
        self.data_end = self._frame_end(self.positions[-1])

    def _frame_end(self, position: int) -> int:
        header = os.pread(self.data_fd, FRAME.size, position)
        if len(header) < FRAME.size:
            return position  # data lost under a committed entry: read back as a dead letter
        size: int = FRAME.unpack(header)[1]
        return position + FRAME.size + size

    def cut_uncommitted(self) -> None:
        """Drop what an unfinished append left behind (the caller holds the writer lock)."""
        if os.fstat(self.index_fd).st_size != self.count * INDEX.size:
            os.ftruncate(self.index_fd, self.count * INDEX.size)
        if os.fstat(self.data_fd).st_size != self.data_end:
            os.ftruncate(self.data_fd, self.data_end)

    def append(self, entries: Sequence[Entry], fsync: bool) -> None:
        frames = [frame(e) for e in entries]
        index = bytearray()
        at = self.data_end
        for i, (entry, data) in enumerate(zip(entries, frames, strict=True)):
            flag = END_FLAG if i == len(entries) - 1 else 0
            index += INDEX.pack(at | flag, entry.ts_ms)
            at += len(data)
        _write_all(self.data_fd, b"".join(frames), self.data_end)
        if fsync:
            os.fsync(self.data_fd)
        _write_all(self.index_fd, bytes(index), self.count * INDEX.size)
        if fsync:
            os.fsync(self.index_fd)
        self.refresh()

    def fetch(self, start: int, stop: int) -> list[Entry]:
        """Entries at local indexes [start, stop)."""
        first = self.positions[start]
        last = self.positions[stop] if stop < self.count else self.data_end
        buf = os.pread(self.data_fd, last - first, first)
        out: list[Entry] = []
        for i in range(start, stop):
            at = self.positions[i] - first
            try:
                entry, _, ok = unframe(buf, at)
            except struct.error:
                entry, ok = Entry(bytes(buf[at:]), None, 0, True), False
            out.append(entry if ok else entry._replace(damaged=True))
        return out

    def close(self) -> None:
        os.close(self.data_fd)
        os.close(self.index_fd)


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


class LocalStore(Store):
    """The segment files of one log directory, shared by the processes of one machine."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True,
                 segment_bytes: int = 64 * 1024 * 1024) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "checkpoints").mkdir(exist_ok=True)
        self.partitions = 1
        self.fsync = fsync
        self.segment_bytes = segment_bytes
        self._lock_fd = os.open(self.directory / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        self._mutex = threading.RLock()
        self._segments: list[Segment] = []
        self._heads = Heads()
        self._heads_upto = 0  # offsets below this are folded into _heads
        with self.locked():
            pass  # opening cuts a torn tail left by a writer that died mid-append

    def _refresh(self) -> None:
        fresh = 0
        for path in sorted(self.directory.glob("*.log")):
            base = int(path.stem)
            if not self._segments or base > self._segments[-1].base:
                self._segments.append(Segment(self.directory, base))
                fresh += 1
        if not self._segments:
            self._segments.append(Segment(self.directory, 0))
            fresh = 1
        # Sealed segments never change: only new ones and the one that was active need a look.
        for segment in self._segments[-(fresh + 1):]:
            segment.refresh()

    @contextmanager
    def locked(self) -> Iterator[Heads]:
        with self._mutex:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            try:
                self._refresh()
                self._segments[-1].cut_uncommitted()
                self._catch_up_heads()
                yield self._heads
            finally:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _catch_up_heads(self) -> None:
        end = self.end(0)
        if self._heads_upto >= end:
            return
        for i, entry in enumerate(self.fetch(0, self._heads_upto, end), start=self._heads_upto):
            item = to_item(0, i, entry.raw, entry.key, entry.ts_ms)
            if isinstance(item, Record) and not entry.damaged:
                self._heads.observe(item.envelope)
        self._heads_upto = end

    def write(self, partition: int, entries: Sequence[Entry]) -> int:
        base = self.end(0)
        if not entries:
            return base
        active = self._segments[-1]
        if active.data_end >= self.segment_bytes and active.count:
            active = Segment(self.directory, base)
            self._segments.append(active)
        active.append(entries, self.fsync)
        self._heads_upto = self.end(0)  # the caller folds its own envelopes into the heads
        return base

    def end(self, partition: int) -> int:
        with self._mutex:
            if not self._segments:
                self._refresh()
            last = self._segments[-1]
            return last.base + last.count

    def poll(self) -> None:
        with self._mutex:
            self._refresh()

    def fetch(self, partition: int, start: int, stop: int) -> list[Entry]:
        out: list[Entry] = []
        with self._mutex:
            bases = [s.base for s in self._segments]
            at = start
            while at < stop:
                segment = self._segments[bisect.bisect_right(bases, at) - 1]
                upto = min(stop, segment.base + segment.count)
                out.extend(segment.fetch(at - segment.base, upto - segment.base))
                at = upto
        return out

    def offset_for_time(self, partition: int, ts_ms: int) -> int:
        self.poll()
        with self._mutex:
            for segment in self._segments:
                if segment.max_ts and segment.max_ts[-1] >= ts_ms:
                    return segment.base + bisect.bisect_left(segment.max_ts, ts_ms)
            return self.end(0)

    def _checkpoint_path(self, name: str) -> Path:
        if not _CHECKPOINT_NAME.match(name):
            raise InvalidInput(f"checkpoint name {name!r}: use letters, digits, '.', '_' or '-'")
        return self.directory / "checkpoints" / f"{name}.json"

    def save_checkpoint(self, name: str, offsets: Offsets) -> None:
        path = self._checkpoint_path(name)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        data = orjson.dumps({str(p): o for p, o in offsets.items()}, option=orjson.OPT_SORT_KEYS)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data, 0)
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def load_checkpoint(self, name: str) -> Offsets | None:
        path = self._checkpoint_path(name)
        try:
            stored = orjson.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        return {int(p): int(o) for p, o in stored.items()}

    def checkpoints(self) -> list[str]:
        return sorted(p.stem for p in (self.directory / "checkpoints").glob("*.json"))

    async def wait_for_change(self, seen: Offsets, timeout_s: float) -> None:
        # Other processes append without telling us: poll the index.
        self.poll()
        if self.end(0) <= seen.get(0, 0):
            await asyncio.sleep(timeout_s)
            self.poll()

    def close(self) -> None:
        with self._mutex:
            for segment in self._segments:
                segment.close()
            self._segments = []
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
                self._lock_fd = -1


class LocalEventLog(StoreLog):
    """An ``EventLog`` in a directory; any process of the machine may open the same one."""

    def __init__(
        self, directory: str | os.PathLike[str], *, name: str = "events", fsync: bool = True,
        segment_bytes: int = 64 * 1024 * 1024, stamper: Stamper | None = None,
    ) -> None:
        self.store = LocalStore(directory, fsync=fsync, segment_bytes=segment_bytes)
        super().__init__(name, self.store, stamper)

