"""One segment of the embedded log: a CRC-framed data file (the truth) and an index (a cache).

Layout::

    NNNNNNNNNNNNNNNNNNNN.log   frames: crc32 (u32) | word (u32) | body
                               word = body length, top bit MORE set on every frame of an
                               append but its last; crc32 covers word and body (frames written
                               before MORE existed carry crc32 of the body alone, MORE clear)
                               body = ts_ms (i64) | key length (u16) | key | value
    NNNNNNNNNNNNNNNNNNNN.idx   one 24-byte entry per record: position (u64), frame bytes (u32),
                               ts_ms (i64), crc32 of the first 20 bytes (u32)

Invariants:
- an append is committed once all its frames are in the data file (its last frame has MORE
  clear); the index only speeds up reading and is trusted entry by entry only while each entry's
  crc holds and it starts where the one before ended; past that the data is scanned;
- a stretch of bytes that is no frame, followed by valid frames, was committed (a writer never
  writes after a torn tail): it is read back as one damaged entry, in its place, never skipped;
- bytes after the last complete append are not committed: ``Segment`` never cuts them itself;
  ``repair`` (the writer, under the lock) moves them to a quarantine file, then truncates;
- reading (``refresh``, ``fetch``) never writes a file.
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from events.log._store import Entry

FRAME = struct.Struct(">II")  # crc32, word (body length | MORE)
BODY = struct.Struct(">qH")  # ts_ms, key length
INDEX = struct.Struct(">QIqI")  # position, frame bytes, ts_ms, crc32 of the first 20 bytes
_INDEX_HEAD = struct.Struct(">QIq")
MORE = 1 << 31
SIZE_MASK = MORE - 1
MIN_FRAME = FRAME.size + BODY.size


def frame(entry: Entry, more: bool = False) -> bytes:
    key = (entry.key or "").encode()
    body = BODY.pack(entry.ts_ms, len(key)) + key + entry.raw
    word = struct.pack(">I", len(body) | (MORE if more else 0))
    return struct.pack(">I", zlib.crc32(body, zlib.crc32(word))) + word + body


def frames(entries: Sequence[Entry]) -> list[bytes]:
    """The frames of one append: MORE on all but the last."""
    last = len(entries) - 1
    return [frame(e, i < last) for i, e in enumerate(entries)]


def check_frame(buf: bytes | memoryview, at: int) -> tuple[int, int, bool] | None:
    """(frame bytes, ts_ms, more) of a valid frame at ``at`` of ``buf``, else None."""
    if at + MIN_FRAME > len(buf):
        return None
    crc, word = FRAME.unpack_from(buf, at)
    size = word & SIZE_MASK
    stop = at + FRAME.size + size
    if size < BODY.size or stop > len(buf):
        return None
    body = buf[at + FRAME.size: stop]
    if zlib.crc32(body, zlib.crc32(buf[at + 4: at + 8])) != crc and (word & MORE or zlib.crc32(body) != crc):
        return None
    ts_ms, key_len = BODY.unpack_from(body, 0)
    if BODY.size + key_len > size:
        return None
    return FRAME.size + size, ts_ms, bool(word & MORE)


def read_frame(buf: bytes | memoryview, at: int, stop: int) -> Entry:
    """The entry stored in ``buf[at:stop]``; ``damaged`` unless it is exactly one valid frame."""
    buf = memoryview(buf)
    got = check_frame(buf[:stop], at)
    if got is None or at + got[0] != stop:
        return Entry(bytes(buf[at:stop]), None, 0, True)
    ts_ms, key_len = BODY.unpack_from(buf, at + FRAME.size)
    key_at = at + MIN_FRAME
    key = bytes(buf[key_at: key_at + key_len]).decode(errors="replace") or None
    return Entry(bytes(buf[key_at + key_len: stop]), key, ts_ms)


def _resync(buf: memoryview, at: int) -> int | None:
    """The first position >= ``at`` where a valid frame starts, if any."""
    for q in range(at, len(buf) - MIN_FRAME + 1):
        if check_frame(buf, q) is not None:
            return q
    return None


@dataclass
class Scan:
    """Committed entries found in a stretch of data: (start, ts_ms) each, and where they end."""

    slots: list[tuple[int, int]] = field(default_factory=list)
    end: int = 0
    damaged: list[int] = field(default_factory=list)  # starts of stretches that are no frame


def scan(data: bytes) -> Scan:
    """The complete appends at the start of ``data`` (positions relative to it)."""
    buf = memoryview(data)
    out, at, ts = Scan(), 0, -(2**63)
    batch: list[tuple[int, int]] = []
    while at < len(buf):
        got = check_frame(buf, at)
        if got is None:
            nxt = _resync(buf, at + 1)
            if nxt is None:
                break
            out.slots += [*batch, (at, ts)]  # valid frames follow: this was committed
            out.damaged.append(at)
            batch, at, out.end = [], nxt, nxt
            continue
        size, ts, more = got
        batch.append((at, ts))
        at += size
        if not more:
            out.slots += batch
            batch, out.end = [], at
    return out


def index_entry(position: int, size: int, ts_ms: int) -> bytes:
    head = _INDEX_HEAD.pack(position, size, ts_ms)
    return head + struct.pack(">I", zlib.crc32(head))


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _open(path: Path, create: bool) -> int:
    try:
        return os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
    except FileNotFoundError:
        return -1


class Segment:
    """One data file and its index, as far as committed; ``notes`` says what was not trusted."""

    def __init__(self, directory: Path, base: int, *, create: bool = False) -> None:
        self.base = base
        self.directory = directory
        self.data_path = directory / f"{base:020d}.log"
        self.index_path = directory / f"{base:020d}.idx"
        self.data_fd = _open(self.data_path, create)
        self.index_fd = _open(self.index_path, create)
        self.positions: list[int] = []
        self.max_ts: list[int] = []
        self.data_end = 0  # end of the last committed append
        self.indexed = 0  # entries the index vouches for (the rest came from a scan)
        self.index_broken: str | None = None  # why the index stopped being trusted
        self.tail = 0  # bytes after data_end (an append under way, or a torn one)
        self.notes: list[str] = []

    @property
    def count(self) -> int:
        return len(self.positions)

    def refresh(self) -> None:
        """Take in what was committed since the last refresh (by any process); writes nothing."""
        size = os.fstat(self.data_fd).st_size if self.data_fd >= 0 else 0
        if self.index_broken is None:
            self._read_index(size)
        self._scan_data(size)

    def _add(self, position: int, ts_ms: int) -> None:
        self.positions.append(position)
        self.max_ts.append(max(ts_ms, self.max_ts[-1]) if self.max_ts else ts_ms)

    def _read_index(self, data_size: int) -> None:
        if self.index_fd < 0:
            return
        have = self.indexed * INDEX.size
        raw = os.pread(self.index_fd, max(0, os.fstat(self.index_fd).st_size - have), have)
        for i in range(len(raw) // INDEX.size):
            position, size, ts_ms, crc = INDEX.unpack_from(raw, i * INDEX.size)
            ok = zlib.crc32(raw[i * INDEX.size: i * INDEX.size + 20]) == crc
            j = self.indexed
            expected = self.positions[j] if j < self.count else self.data_end
            if not ok or position != expected or size < MIN_FRAME or position + size > data_size:
                at = have + i * INDEX.size
                why = "fails its checksum" if not ok else "disagrees with the data file"
                self._broken(f"{self.index_path}: byte {at} (offset {self.base + j}): index "
                             f"entry {why}; reading the data file instead")
                return
            if j == self.count:
                self._add(position, ts_ms)
                self.data_end = position + size
            self.indexed += 1

    def _broken(self, note: str) -> None:
        self.index_broken = note
        self.notes.append(note)

    def _scan_data(self, size: int) -> None:
        self.tail = size - self.data_end
        if self.tail <= 0:
            return
        buf = os.pread(self.data_fd, self.tail, self.data_end)
        found = scan(buf)
        for at in found.damaged:
            self.notes.append(f"{self.data_path}: byte {self.data_end + at}: bytes that are no frame "
                              "before valid frames; read back as a dead letter")
        for at, ts_ms in found.slots:
            self._add(self.data_end + at, ts_ms)
        self.data_end += found.end
        self.tail = size - self.data_end

    def append(self, groups: Sequence[Sequence[Entry]], fsync: bool) -> list[int]:
        """Write appends (one write, one fsync when asked: the index never needs one); the
        local index of the first entry of each."""
        blobs = [blob for entries in groups for blob in frames(entries)]
        write_all(self.data_fd, b"".join(blobs), self.data_end)
        if fsync:
            os.fdatasync(self.data_fd)
        index, at = bytearray(), self.data_end
        entries = [entry for group in groups for entry in group]
        firsts, i = [], self.count
        for group in groups:
            firsts.append(i)
            i += len(group)
        for entry, blob in zip(entries, blobs, strict=True):
            index += index_entry(at, len(blob), entry.ts_ms)
            self._add(at, entry.ts_ms)
            at += len(blob)
        self.data_end = at
        write_all(self.index_fd, bytes(index), self.indexed * INDEX.size)
        self.indexed = self.count
        return firsts

    def fetch(self, start: int, stop: int) -> list[Entry]:
        """Entries at local indexes [start, stop)."""
        first = self.positions[start]
        last = self.positions[stop] if stop < self.count else self.data_end
        buf = os.pread(self.data_fd, last - first, first)
        ends = [*self.positions[start + 1: stop], last]
        return [read_frame(buf, self.positions[i] - first, ends[i - start] - first)
                for i in range(start, stop)]

    def repair(self) -> list[str]:
        """Make the files agree with the data (the caller holds the writer lock)."""
        notes: list[str] = []
        if self.index_fd < 0:
            self.index_fd = _open(self.index_path, True)
        index_size = os.fstat(self.index_fd).st_size
        if self.indexed < self.count or index_size != self.count * INDEX.size:
            keep = self.indexed * INDEX.size
            if index_size > keep:  # entries that failed their checks, kept as evidence
                moved = self._quarantine(self.index_fd, self.index_path, keep, index_size)
                notes.append(f"{self.index_path}: byte {keep}: {index_size - keep} index bytes the data "
                             f"does not vouch for moved to {moved}; index rebuilt from the data")
            else:
                notes.append(f"{self.index_path}: offsets {self.base + self.indexed} to "
                             f"{self.base + self.count - 1} missing; index rebuilt from the data")
            os.ftruncate(self.index_fd, keep)
            index = b"".join(index_entry(p, e - p, self.max_ts[i])
                             for i, (p, e) in enumerate(self._spans(self.indexed), start=self.indexed))
            write_all(self.index_fd, index, keep)
            self.indexed, self.index_broken = self.count, None
        if self.tail > 0:
            size = self.data_end + self.tail
            moved = self._quarantine(self.data_fd, self.data_path, self.data_end, size)
            notes.append(f"{self.data_path}: byte {self.data_end} (offset {self.base + self.count}): "
                         f"{self.tail} bytes after the last complete append moved to {moved}")
            os.ftruncate(self.data_fd, self.data_end)
            os.fsync(self.data_fd)
            self.tail = 0
        return notes

    def _spans(self, start: int) -> list[tuple[int, int]]:
        if start >= self.count:
            return []
        ends = [*self.positions[start + 1:], self.data_end]
        return list(zip(self.positions[start:], ends, strict=True))

    def _quarantine(self, fd: int, path: Path, start: int, stop: int) -> Path:
        folder = self.directory / "quarantine"
        folder.mkdir(exist_ok=True)
        target = folder / f"{path.name}@{start}.{time.time_ns()}"
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            write_all(out, os.pread(fd, stop - start, start), 0)
            os.fsync(out)
        finally:
            os.close(out)
        fsync_dir(folder)
        fsync_dir(self.directory)
        return target

    def close(self) -> None:
        for fd in (self.data_fd, self.index_fd):
            if fd >= 0:
                os.close(fd)
        self.data_fd = self.index_fd = -1
