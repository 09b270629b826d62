"""``LocalEventLog``: the embedded default, append-only segment files (``_segment``).

Layout of a log directory::

    LOCK                        writers take an exclusive flock on it; readers never do
    NNNNNNNNNNNNNNNNNNNN.log    CRC-framed data, the truth (see ``events/log/_segment.py``)
    NNNNNNNNNNNNNNNNNNNN.idx    a checksummed index of it, rebuilt from the data when they differ
    quarantine/                 bytes a writer moved aside (never deleted), named in its message
    checkpoints/NAME.json       {"partition": next offset}, replaced atomically
    heads.json                  the writers' heads (seq, epoch per key) exact below its ``at``,
                                written by ``retain`` before it drops anything

Invariants:
- one partition; the offset of a record is its place in the log, named in its frame too; a
  segment is named by the offset of its first record and sealed once a later segment exists;
  other files are ignored;
- the segments are the log only as one chain (``_chain.verify``, on every refresh): a segment
  file that holds nothing the chain lacks (empty, or a copy) is named and skipped, and the next
  writer moves it to ``quarantine/``; records missing between segments, a data file gone (also
  one that vanishes under an open store, unless retention took a prefix) or two histories for
  the same offsets raise ``LogDamaged`` in every reader and writer;
- an append is committed once all its frames are in the data file; with ``fsync=True``
  (default) the data reaches the disk before ``append`` returns, and appends waiting together
  share one write and one fsync (group commit);
- the first writer to take the lock repairs every segment: an index that disagrees with the
  data is rebuilt, bytes after the last complete append are moved to ``quarantine/``; each
  repair is one line in ``notes`` naming the file and byte; nothing committed is ever cut;
- readers take no lock, write nothing and read every committed record (a damaged one as a
  dead letter in its place) whatever state the index is in;
- the directory is fsynced after every file it gains and every rename;
- retention (``retain``) drops whole sealed segments, oldest first, never the active one: the
  log then starts at its first segment's base (``start``); before it drops anything it writes
  ``heads.json`` (sealed: ``heads_check``), so a store opened on a retained log knows every
  key's seq and epoch; it is used only there and only when it checks against the log; a crash
  at any step leaves a log that opens and reads (a shorter prefix dropped, an index without its
  data file, which nothing reads and the next ``retain`` removes).
"""

from __future__ import annotations

import asyncio
import bisect
import fcntl
import logging
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson

from balancer.errors import InvalidInput, LogDamaged
from events.envelope import Stamper
from events.log._chain import Stray, verify
from events.log._segment import INDEX, Segment, frame, fsync_dir, write_all
from events.log._store import Entry, Heads, Store, StoreLog
from events.log.heads_check import check_mark, mark_of, seal, unseal
from events.log.port import Offsets, Record, to_item

__all__ = ["HEADS_FILE", "INDEX", "DroppedSegment", "LocalEventLog", "LocalStore", "chain_of", "frame"]

_CHECKPOINT_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
_INDEX_NAME = re.compile(r"^(\d{20})\.idx$")
HEADS_FILE = "heads.json"
_MARK_SEARCH = 64  # records looked at, from the last one down, for a readable one to mark
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DroppedSegment:
    """A sealed segment retention drops (or, in a dry run, would drop)."""

    path: str
    first: int
    """Offset of its first record (its records are ``first .. first + records - 1``)."""
    records: int
    bytes: int
    """Of its data file and its index."""


class LocalStore(Store):
    """The segment files of one log directory, shared by the processes of one machine."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True,
                 segment_bytes: int = 64 * 1024 * 1024) -> None:
        self.directory = Path(directory)
        self.partitions = 1
        self.fsync = fsync
        self.segment_bytes = segment_bytes
        self.notes: list[str] = []  # what was not trusted or was repaired, one line each
        self._lock_fd = -1
        self._repaired = False
        self._mutex = threading.RLock()
        self._segments: list[Segment] = []  # the chain (``_chain.verify``)
        self._opened: dict[int, Segment] = {}  # every data file open, by base (chain and strays)
        self._strays: list[Stray] = []
        self._lost: LogDamaged | None = None
        self._ignored: set[str] = set()
        self._heads = Heads()
        self._heads_upto = 0  # offsets below this are folded into _heads
        self._heads_loaded = False  # heads.json taken (or found unusable) by this store

    def _note(self, line: str) -> None:
        if line not in self.notes:
            self.notes.append(line)
            _log.warning("%s", line)

    def _listing(self) -> tuple[dict[int, Path], set[int]]:
        """Data files and index files of the directory by base; other ``.log`` files named once."""
        data: dict[int, Path] = {}
        indexes: set[int] = set()
        if not self.directory.is_dir():
            return data, indexes
        for entry in os.scandir(self.directory):
            name = entry.name
            match = _SEGMENT_NAME.match(name)
            if match is not None:
                data[int(match.group(1))] = Path(entry.path)
            elif (found := _INDEX_NAME.match(name)) is not None:
                indexes.add(int(found.group(1)))
            elif name.endswith(".log") and name not in self._ignored:
                self._ignored.add(name)
                self._note(f"{entry.path}: not a segment (NNNNNNNNNNNNNNNNNNNN.log); ignored")
        return data, indexes

    def _refresh(self) -> None:
        """Take in what every process committed and check that the segments form one chain
        (``_chain.verify``: ``LogDamaged`` when they do not)."""
        if self._lost is not None:  # records this store saw are gone: never read on without them
            raise self._lost
        data, indexes = self._listing()
        for base in [b for b in self._opened if b not in data]:  # retention dropped it (a prefix)
            self._vanished(self._opened.pop(base), data)
        fresh = []
        for base in sorted(data):
            if base not in self._opened:
                segment = Segment(self.directory, base)
                if segment.data_fd < 0:  # dropped by retention between the listing and the open
                    segment.close()
                    continue
                self._opened[base] = segment
                fresh.append(segment)
        active = self._segments[-1] if self._segments and self._segments[-1].base in self._opened else None
        # Sealed segments never change: only new ones and the one that was active need a look.
        for segment in [*fresh, *([active] if active is not None and active not in fresh else [])]:
            segment.refresh()
            for line in segment.notes:
                self._note(line)
            segment.notes.clear()
        orphans = {b: self.directory / f"{b:020d}.idx" for b in indexes if b not in self._opened}
        retained = bool(orphans) and (self.directory / HEADS_FILE).exists()
        chain = verify(list(self._opened.values()), orphans, retained)
        self._segments, self._strays = chain.segments, chain.strays
        for stray in chain.strays:
            self._note(f"{stray.paths[0]}: {stray.why}: not part of the log; ignored")

    def _vanished(self, segment: Segment, data: dict[int, Path]) -> None:
        """A data file this store had open is gone: retention drops whole prefixes (never the
        active segment); any other loss of records is named and refused."""
        segment.close()
        if segment in self._segments and segment.count and (not data or min(data) < segment.base):
            self._lost = LogDamaged(
                f"{segment.data_path} vanished while the log was open: offsets {segment.base} to "
                f"{segment.base + segment.count - 1} are gone; the log is refused until it is "
                "restored", base=segment.base)
            raise self._lost

    def _quarantine_strays(self) -> None:
        """Move the files the chain does not need to ``quarantine/`` (the writer, under the lock),
        so no later segment is created over them."""
        if not self._strays:
            return
        folder = self.directory / "quarantine"
        folder.mkdir(exist_ok=True)
        for stray in self._strays:
            base = int(stray.paths[0].name[:20])
            if base in self._opened and self._opened[base] not in self._segments:
                self._opened.pop(base).close()
            for path in stray.paths:
                target = folder / f"{path.name}@0.{time.time_ns()}"
                os.rename(path, target)
                self._note(f"{path}: {stray.why}: moved to {target}")
        fsync_dir(folder)
        fsync_dir(self.directory)
        self._strays = []

    @contextmanager
    def locked(self) -> Iterator[Heads]:
        with self._mutex:
            if self._lock_fd < 0:
                self.directory.mkdir(parents=True, exist_ok=True)
                self._lock_fd = os.open(self.directory / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            try:
                self._refresh()
                self._quarantine_strays()
                if not self._segments:
                    self._segments.append(self._create(0))
                for segment in self._segments if not self._repaired else self._segments[-1:]:
                    for line in segment.repair():
                        self._note(line)
                self._repaired = True
                if not self._heads_loaded or self._heads_upto < self.start(0):
                    self._load_heads()  # at open, or retention dropped records these heads lack
                self._catch_up_heads()
                yield self._heads
            finally:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _create(self, base: int) -> Segment:
        segment = Segment(self.directory, base, create=True)
        fsync_dir(self.directory)
        self._opened[base] = segment
        return segment

    def _catch_up_heads(self) -> None:
        end = self.end(0)
        if self._heads_upto >= end:
            return
        for i, entry in enumerate(self.fetch(0, self._heads_upto, end), start=self._heads_upto):
            item = to_item(0, i, entry.raw, entry.key, entry.ts_ms)
            if isinstance(item, Record) and not entry.damaged:
                self._heads.observe(item.envelope)
        self._heads_upto = end

    def _load_heads(self) -> None:
        """Take ``heads.json`` when retention dropped records and it checks against the log
        (``heads_check``: its digest, its mark, heads not below the marked record); else fold
        the heads from the first record held, naming a file not used and what is not known."""
        self._heads_loaded = True
        path, start = self.directory / HEADS_FILE, self.start(0)
        try:
            heads, at = self._checked_heads(path, start)
            if start > 0:
                self._heads, self._heads_upto = heads, at
                return
            why = ""  # the log holds every record from offset 0: the file is not needed
        except FileNotFoundError:
            why = "missing"
        except (ValueError, KeyError, TypeError) as exc:  # orjson's errors are ValueErrors
            why = f"not used ({exc})"
        self._heads, self._heads_upto = Heads(), start
        if start > 0:
            self._note(f"{path}: {why}, and records before offset {start} were dropped by retention: "
                       "keys last written before it start again at seq 1 and epoch 0")
        elif why and why != "missing":
            self._note(f"{path}: {why}; heads folded from offset 0")

    def _checked_heads(self, path: Path, start: int) -> tuple[Heads, int]:
        heads, ats, marks = unseal(orjson.loads(path.read_bytes()))
        at, end = ats[0], self.end(0)
        if not start <= at <= end:
            raise ValueError(f"it stands at offset {at}, outside the log's offsets {start} to {end}")
        mark = marks.get(0)
        held = self._record_at(mark[0]) if mark is not None and start <= mark[0] < end else None
        check_mark(heads, 0, at, mark, held, start if at > start else None)
        return heads, at

    def _record_at(self, offset: int) -> Record | None:
        (entry,) = self.fetch(0, offset, offset + 1)
        item = None if entry.damaged else to_item(0, offset, entry.raw, entry.key, entry.ts_ms)
        return item if isinstance(item, Record) else None

    def _save_heads(self) -> None:
        """Write the heads, exact below ``_heads_upto``, sealed with a mark of the last readable
        record below it (call under the lock, caught up)."""
        at, start = self._heads_upto, self.start(0)
        marks = {}
        for offset in range(at - 1, max(start, at - _MARK_SEARCH) - 1, -1):
            record = self._record_at(offset)
            if record is not None:
                marks[0] = mark_of(record)
                break
        data = orjson.dumps(seal(self._heads, {0: at}, marks), option=orjson.OPT_SORT_KEYS)
        self._replace(self.directory / HEADS_FILE, data, durable=True)

    def retain(self, floor: int, *, dry_run: bool = False) -> list[DroppedSegment]:
        """Drop every sealed segment whose records all lie below ``floor``, oldest first (the
        active one never); with ``dry_run`` only say which. The heads are saved first, so a
        store opened later needs none of the dropped records."""
        self.poll()
        if dry_run or not self._doomed(floor):  # a look without the writers' lock
            with self._mutex:
                return [_dropped(s) for s in self._doomed(floor)]
        with self.locked():
            doomed = self._doomed(floor)
            dropped = [_dropped(s) for s in doomed]
            if doomed:
                self._save_heads()
            for segment in doomed:  # one at a time, the truth first: a crash leaves a suffix
                segment.data_path.unlink(missing_ok=True)
                segment.index_path.unlink(missing_ok=True)
                fsync_dir(self.directory)
                segment.close()
                self._segments.remove(segment)
                self._opened.pop(segment.base, None)
            self._sweep_indexes()
            return dropped

    def _doomed(self, floor: int) -> list[Segment]:
        """The sealed segments whose every record lies below ``floor``."""
        sealed = zip(self._segments, self._segments[1:], strict=False)
        return [segment for segment, after in sealed if after.base <= floor]

    def _sweep_indexes(self) -> None:
        """Remove indexes of dropped segments that a crash in ``retain`` left behind."""
        start = self.start(0)
        for path in self.directory.glob("*.idx"):
            match = _INDEX_NAME.match(path.name)
            if match is not None and int(match.group(1)) < start:
                path.unlink(missing_ok=True)

    def start(self, partition: int) -> int:
        with self._mutex:
            if not self._segments:
                self._refresh()
            return self._segments[0].base if self._segments else 0

    def write(self, partition: int, entries: Sequence[Entry]) -> int:
        return self.write_group(partition, [entries])[0]

    def write_group(self, partition: int, groups: Sequence[Sequence[Entry]]) -> list[int]:
        if not any(groups):
            return [self.end(0)] * len(groups)
        active = self._segments[-1]
        if active.data_end >= self.segment_bytes and active.count:
            active = self._create(self.end(0))
            self._segments.append(active)
        firsts = active.append(groups, self.fsync)
        self._heads_upto = self.end(0)  # the caller folds its own envelopes into the heads
        return [active.base + first for first in firsts]

    def end(self, partition: int) -> int:
        with self._mutex:
            if not self._segments:
                self._refresh()
            if not self._segments:
                return 0
            last = self._segments[-1]
            return last.base + last.count

    def poll(self) -> None:
        with self._mutex:
            self._refresh()

    def fetch(self, partition: int, start: int, stop: int) -> list[Entry]:
        out: list[Entry] = []
        with self._mutex:
            bases = [s.base for s in self._segments]
            if start < stop and (not bases or start < bases[0]):
                raise ValueError(f"{self.directory}: offset {start} was dropped by retention "
                                 f"(the log starts at {bases[0] if bases else 0})")
            at = start
            while at < stop:
                segment = self._segments[bisect.bisect_right(bases, at) - 1]
                upto = min(stop, segment.base + segment.count)
                out.extend(segment.fetch(at - segment.base, upto - segment.base))
                at = upto
        return out

    def damage(self, partition: int, offset: int) -> str:
        with self._mutex:
            bases = [s.base for s in self._segments]
            segment = self._segments[bisect.bisect_right(bases, offset) - 1]
            return segment.damage(offset - segment.base)

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
        path.parent.mkdir(parents=True, exist_ok=True)
        self._replace(path, orjson.dumps({str(p): o for p, o in offsets.items()},
                                         option=orjson.OPT_SORT_KEYS))

    def _replace(self, path: Path, data: bytes, *, durable: bool = False) -> None:
        """Write ``path`` whole or not at all (a temporary file renamed over it); synced to the
        disk when the store fsyncs, or ``durable`` (what retention drops depends on it)."""
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, data, 0)
            if self.fsync or durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(path.parent)

    def load_checkpoint(self, name: str) -> Offsets | None:
        path = self._checkpoint_path(name)
        try:
            stored = orjson.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        return {int(p): int(o) for p, o in stored.items()}

    def checkpoints(self) -> list[str]:
        folder = self.directory / "checkpoints"
        return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []

    async def wait_for_change(self, seen: Offsets, timeout_s: float) -> None:
        # Other processes append without telling us: poll the index.
        self.poll()
        if self.end(0) <= seen.get(0, 0):
            await asyncio.sleep(timeout_s)
            self.poll()

    def close(self) -> None:
        with self._mutex:
            for segment in self._opened.values():
                segment.close()
            self._segments, self._opened, self._strays = [], {}, []
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
                self._lock_fd = -1


def chain_of(directory: str | os.PathLike[str]) -> list[tuple[int, Path, Path]]:
    """(base, data file, index file) of the segments that are the log in ``directory``, the way
    ``LocalStore`` reads them (strays named and skipped; ``LogDamaged`` when the files are no
    single history), for readers that read the segments themselves (Spark)."""
    store = LocalStore(directory)
    try:
        store.poll()
        return [(s.base, s.data_path, s.index_path) for s in store._segments]
    finally:
        store.close()


def _dropped(segment: Segment) -> DroppedSegment:
    size = sum(os.fstat(fd).st_size for fd in (segment.data_fd, segment.index_fd) if fd >= 0)
    return DroppedSegment(str(segment.data_path), segment.base, segment.count, size)


class LocalEventLog(StoreLog):
    """An ``EventLog`` in a directory; any process of the machine may open the same one."""

    def __init__(
        self, directory: str | os.PathLike[str], *, name: str = "events", fsync: bool = True,
        segment_bytes: int = 64 * 1024 * 1024, stamper: Stamper | None = None,
        group_commit: bool = True,
    ) -> None:
        self.store = LocalStore(directory, fsync=fsync, segment_bytes=segment_bytes)
        self.directory = Path(directory)
        super().__init__(name, self.store, stamper, group_commit=group_commit)

    @property
    def where(self) -> str:
        return f"the log in {self.directory}"

