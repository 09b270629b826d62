"""One segment of the embedded log: a CRC-framed data file (the truth) and an index (a cache).

Layout::

    NNNNNNNNNNNNNNNNNNNN.log   frames: crc32 (u32) | word (u32) | body
                               word = body length | PLACED (bit 30) | MORE (bit 31): MORE is set
                               on every frame of an append but its last; crc32 covers word and
                               body (frames written before MORE existed carry crc32 of the body
                               alone, MORE and PLACED clear)
                               body = offset (u64, when PLACED) | ts_ms (i64) | key length (u16)
                                      | key | value
    NNNNNNNNNNNNNNNNNNNN.idx   one 24-byte entry per record: position (u64), frame bytes (u32),
                               ts_ms (i64), crc32 of the first 20 bytes (u32); zero frame
                               bytes: a record lost in the damaged stretch before that position

Invariants:
- an append is committed once all its frames are in the data file (its last frame has MORE
  clear); the index only speeds up reading and is trusted entry by entry only while each entry's
  crc holds and it starts where the one before ended; past that the data is scanned;
- every frame this code writes names its record's offset (PLACED): a record never stands below
  the offset its frame names, so damage never moves a later record to a lower offset; frames
  written before (no offset) are read by their place;
- a stretch of bytes that is no frame, followed by valid frames, was committed (a writer never
  writes after a torn tail): it is read back as damaged entries in its place, as many as the
  next frame's offset says were lost (at least one), never skipped;
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

FRAME = struct.Struct(">II")  # crc32, word (body length | PLACED | MORE)
BODY = struct.Struct(">qH")  # ts_ms, key length (frames that name no offset)
PLACED_BODY = struct.Struct(">QqH")  # offset, ts_ms, key length
INDEX = struct.Struct(">QIqI")  # position, frame bytes, ts_ms, crc32 of the first 20 bytes
_INDEX_HEAD = struct.Struct(">QIq")
_KEY_LEN = struct.Struct(">H")
MORE = 1 << 31
PLACED = 1 << 30
SIZE_MASK = PLACED - 1
MIN_FRAME = FRAME.size + BODY.size


def frame(entry: Entry, more: bool = False, offset: int | None = None) -> bytes:
    """One frame; with ``offset`` (what the log writes) it names the record's offset."""
    key = (entry.key or "").encode()
    if offset is None:
        body, flags = BODY.pack(entry.ts_ms, len(key)) + key + entry.raw, 0
    else:
        body, flags = PLACED_BODY.pack(offset, entry.ts_ms, len(key)) + key + entry.raw, PLACED
    word = struct.pack(">I", len(body) | flags | (MORE if more else 0))
    return struct.pack(">I", zlib.crc32(body, zlib.crc32(word))) + word + body


def frames(entries: Sequence[Entry], first: int | None = None) -> list[bytes]:
    """The frames of one append: MORE on all but the last; with ``first`` they name their
    offsets from it."""
    last = len(entries) - 1
    return [frame(e, i < last, None if first is None else first + i) for i, e in enumerate(entries)]


def check_frame(buf: bytes | memoryview, at: int) -> tuple[int, int, bool, int | None, int] | None:
    """(frame bytes, ts_ms, more, the offset it names or None, where its key starts) of a valid
    frame at ``at`` of ``buf``, else None."""
    if at + MIN_FRAME > len(buf):
        return None
    crc, word = FRAME.unpack_from(buf, at)
    size = word & SIZE_MASK
    head = PLACED_BODY if word & PLACED else BODY
    stop = at + FRAME.size + size
    if size < head.size or stop > len(buf):
        return None
    body = buf[at + FRAME.size: stop]
    if zlib.crc32(body, zlib.crc32(buf[at + 4: at + 8])) != crc and (
            word & (MORE | PLACED) or zlib.crc32(body) != crc):
        return None
    if word & PLACED:
        offset, ts_ms, key_len = PLACED_BODY.unpack_from(body, 0)
    else:
        offset, (ts_ms, key_len) = None, BODY.unpack_from(body, 0)
    if head.size + key_len > size:
        return None
    return FRAME.size + size, ts_ms, bool(word & MORE), offset, at + FRAME.size + head.size


def read_frame(buf: bytes | memoryview, at: int, stop: int) -> Entry:
    """The entry stored in ``buf[at:stop]``; ``damaged`` unless it is exactly one valid frame
    (an empty stretch: a record lost in a damaged stretch before it)."""
    buf = memoryview(buf)
    got = check_frame(buf[:stop], at)
    if got is None or at + got[0] != stop:
        return Entry(bytes(buf[at:stop]), None, 0, True)
    key_at = got[4]
    (key_len,) = _KEY_LEN.unpack_from(buf, key_at - _KEY_LEN.size)  # both heads end with it
    key = bytes(buf[key_at: key_at + key_len]).decode(errors="replace") or None
    return Entry(bytes(buf[key_at + key_len: stop]), key, got[1])


def _resync(buf: memoryview, at: int) -> int | None:
    """The first position >= ``at`` where a valid frame starts, if any."""
    for q in range(at, len(buf) - MIN_FRAME + 1):
        if check_frame(buf, q) is not None:
            return q
    return None


@dataclass
class Scan:
    """Committed entries found in a stretch of data: (start, ts_ms) each, and where they end.

    An entry lost in a damaged stretch after its first has the start of the next frame (an
    empty stretch): it keeps its offset, with no bytes to show."""

    slots: list[tuple[int, int]] = field(default_factory=list)
    end: int = 0
    damaged: list[int] = field(default_factory=list)  # starts of stretches that are no frame
    lost: list[tuple[int, int, int]] = field(default_factory=list)
    """(first offset, offsets lost, byte of the frame after them): records a damaged stretch
    held beyond its first, or frames missing between two valid ones, named by the next frame."""
    behind: list[tuple[int, int, int]] = field(default_factory=list)
    """(byte, offset the frame names, offset it stands at): a frame read above its own offset."""


def scan(data: bytes, first: int = 0) -> Scan:
    """The complete appends at the start of ``data`` (positions relative to it), their first
    record at offset ``first``."""
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
        size, ts_frame, more, named = got[:4]
        place = first + len(out.slots) + len(batch)
        if named is not None and named != place:
            if named > place:  # records before this frame are gone: they keep their offsets
                (batch if batch else out.slots).extend([(at, ts)] * (named - place))
                out.lost.append((place, named - place, at))
            else:
                out.behind.append((at, named, place))
        ts = ts_frame
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
        self._claimed: int | None = None
        self._looked = False

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
            if not ok or position != expected or 0 < size < MIN_FRAME or position + size > data_size:
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
        found = scan(buf, self.base + self.count)
        for at in found.damaged:
            self.notes.append(f"{self.data_path}: byte {self.data_end + at}: bytes that are no frame "
                              "before valid frames; read back as a dead letter")
        for first, lost, at in found.lost:
            self.notes.append(f"{self.data_path}: byte {self.data_end + at}: the frame there names "
                              f"offset {first + lost}: offsets {first} to {first + lost - 1} are dead "
                              "letters, each in its place")
        for at, named, place in found.behind:
            self.notes.append(f"{self.data_path}: byte {self.data_end + at}: the frame there names "
                              f"offset {named} but stands at offset {place}; read at {place}")
        for at, ts_ms in found.slots:
            self._add(self.data_end + at, ts_ms)
        self.data_end += found.end
        self.tail = size - self.data_end

    def append(self, groups: Sequence[Sequence[Entry]], fsync: bool) -> list[int]:
        """Write appends (one write, one fsync when asked: the index never needs one); the
        local index of the first entry of each."""
        firsts, i = [], self.count
        for group in groups:
            firsts.append(i)
            i += len(group)
        blobs = [blob for entries, first in zip(groups, firsts, strict=True)
                 for blob in frames(entries, self.base + first)]
        write_all(self.data_fd, b"".join(blobs), self.data_end)
        if fsync:
            os.fdatasync(self.data_fd)
        index, at = bytearray(), self.data_end
        entries = [entry for group in groups for entry in group]
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

    def damage(self, i: int) -> str:
        """What is wrong with the damaged entry at local index ``i``, naming where it is."""
        position, offset = self.positions[i], self.base + i
        end = self.positions[i + 1] if i + 1 < self.count else self.data_end
        if end == position:
            return (f"{self.data_path}: byte {position} (offset {offset}): record lost in the "
                    "stretch that is no frame before this byte; its offset is kept")
        return f"{self.data_path}: byte {position} (offset {offset}): stored frame fails its crc check"

    def claimed_base(self) -> int | None:
        """The base offset the segment's own frames name (its first readable frame's offset less
        its place), None when they name none (an empty segment, frames written before offsets).
        Committed frames never change: looked up once the segment has records."""
        if not self.count:
            return None
        if self._looked:
            return self._claimed
        self._looked = True
        for i in range(min(self.count, 8)):
            end = self.positions[i + 1] if i + 1 < self.count else self.data_end
            buf = os.pread(self.data_fd, end - self.positions[i], self.positions[i])
            got = check_frame(buf, 0)
            if got is not None and got[0] == len(buf):
                self._claimed = None if got[3] is None else got[3] - i
                break
        return self._claimed

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
