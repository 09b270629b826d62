"""Body snapshots: a body's folded state at a log position, so a restart folds only the tail.

Invariants:
- a snapshot holds only what ``recover`` would rebuild (``Follower.snapshot_state``: folded
  state, never soft state such as timers, pending sends or a leader's role), together with the
  log position it is a fold of; restoring it and folding the records after that position gives
  the body a fold from offset 0 would give (a property test holds the two equal);
- a snapshot is trusted only by the code and the configuration that wrote it, for the log it
  was folded from: its header names the body, the store's scope (for a Kafka log: the topic and
  the cluster id, since its directory is on a node's disk, outside the log), a digest of the
  body's identity (class, config, settings) and a digest of this package's source; a payload is unpickled only once its length and SHA-256 check, and a
  snapshot written by other code or for another body is ignored, never adapted;
- a snapshot that cannot be used is named (``SnapshotUnusable``: which snapshot, why) and the
  next older one is tried, then offset 0: never trusted in silence, never fatal;
- a store keeps the newest ``keep`` snapshots per body (older ones are let go once a newer one
  is written whole: files are replaced atomically, with the directory fsynced);
- a reader that looks for its snapshot in a directory registers there (its folder), so that the
  log's retention (``actors.retention``) counts it, at offset 0 until it has a snapshot.

Pickle, not the projections' msgpack: a body's state is a graph of the projection classes
(records, indexes, load data) that pickles exactly and several times faster both ways; the bytes
never leave the cluster's own state directory and are checked before they are read.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import pickle
import tempfile
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from events.log._segment import fsync_dir

logger = logging.getLogger(__name__)

MAGIC = b"BBSNAP1\n"
FORMAT = 1
_PIECE = 1 << 16


class SnapshotUnusable(Exception):
    """A snapshot that must not be restored (damaged, of another body, code or config)."""


@dataclass(frozen=True, slots=True)
class BodySnapshot:
    """A body's folded state as of ``position`` (partition -> next offset to fold).

    ``records`` counts the records folded into it; ``ordinal`` orders a body's snapshots (the
    sum of the positions: it only grows)."""

    body: str
    identity: str
    position: Mapping[int, int]
    records: int
    state: Mapping[str, Any]

    @property
    def ordinal(self) -> int:
        return sum(self.position.values())


@cache
def code_digest() -> str:
    """A digest of the source of every package a body's state is made of."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for package in ("actors", "projections", "events", "balancer"):
        for path in sorted((root / package).rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def identity_digest(identity: str) -> str:
    return hashlib.sha256(identity.encode()).hexdigest()[:16]


class _Deflating:
    """A file the pickler writes its frames to, compressed as they come: a snapshot never holds
    its whole uncompressed pickle (tens of MiB at 65,536 bundles, which the allocator keeps)."""

    def __init__(self) -> None:
        self._compressor = zlib.compressobj(1)
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(self._compressor.compress(data))
        return len(data)

    def close(self) -> bytes:
        self.parts.append(self._compressor.flush())
        return b"".join(self.parts)


class _Inflating:
    """A file the unpickler reads from, decompressed a piece at a time (see ``_Deflating``)."""

    def __init__(self, payload: bytes) -> None:
        self._decompressor = zlib.decompressobj()
        self._source, self._at = memoryview(payload), 0
        self._buffer = bytearray()

    def _fill(self, size: int) -> None:
        while len(self._buffer) < size and (self._at < len(self._source) or self._decompressor.unconsumed_tail):
            pending = self._decompressor.unconsumed_tail
            if not pending:
                end = self._at + _PIECE
                pending, self._at = bytes(self._source[self._at:end]), end
            self._buffer += self._decompressor.decompress(pending, 16 * _PIECE)

    def read(self, size: int = -1) -> bytes:
        self._fill(size if size >= 0 else 1 << 62)
        size = len(self._buffer) if size < 0 else size
        out = bytes(self._buffer[:size])
        del self._buffer[:size]
        return out

    def readinto(self, target: Any) -> int:
        data = self.read(len(target))
        target[:len(data)] = data
        return len(data)

    def readline(self) -> bytes:
        while b"\n" not in self._buffer and (self._at < len(self._source) or self._decompressor.unconsumed_tail):
            self._fill(len(self._buffer) + 1)
        end = self._buffer.find(b"\n")
        return self.read(len(self._buffer) if end < 0 else end + 1)


def encode(snapshot: BodySnapshot, scope: str = "") -> bytes:
    sink = _Deflating()
    pickle.Pickler(sink, protocol=pickle.HIGHEST_PROTOCOL).dump(dict(snapshot.state))
    payload = sink.close()
    header = {"format": FORMAT, "scope": scope, "body": snapshot.body, "identity": identity_digest(snapshot.identity),
              "code": code_digest(), "position": {str(p): o for p, o in snapshot.position.items()},
              "records": snapshot.records, "payload_bytes": len(payload),
              "payload_sha256": hashlib.sha256(payload).hexdigest()}
    return MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload


def decode(raw: bytes, *, body: str, identity: str, where: str, scope: str = "") -> BodySnapshot:
    """The snapshot in ``raw``, checked for ``body`` with ``identity`` in ``scope``;
    ``SnapshotUnusable`` naming ``where`` and why otherwise."""
    if not raw.startswith(MAGIC):
        raise SnapshotUnusable(f"{where}: not a body snapshot (no {MAGIC!r} header)")
    line_end = raw.find(b"\n", len(MAGIC))
    try:
        header = json.loads(raw[len(MAGIC):line_end]) if line_end > 0 else None
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise SnapshotUnusable(f"{where}: unreadable header")
    payload = raw[line_end + 1:]
    expected = {"format": FORMAT, "scope": scope, "body": body, "identity": identity_digest(identity), "code": code_digest()}
    for field, value in expected.items():
        if header.get(field) != value:
            raise SnapshotUnusable(f"{where}: written for {field} {header.get(field)!r}, not {value!r}")
    if header.get("payload_bytes") != len(payload):
        raise SnapshotUnusable(f"{where}: payload is {len(payload)} bytes, the header says "
                               f"{header.get('payload_bytes')} (torn or cut)")
    if header.get("payload_sha256") != hashlib.sha256(payload).hexdigest():
        raise SnapshotUnusable(f"{where}: payload checksum mismatch (damaged)")
    try:
        state = pickle.Unpickler(_Inflating(payload)).load()
        position = {int(p): int(o) for p, o in header["position"].items()}
        records = int(header["records"])
    except Exception as exc:  # a checked payload that still fails: other code, named
        raise SnapshotUnusable(f"{where}: {type(exc).__name__}: {exc}") from None
    return BodySnapshot(body, identity, position, records, state)


class SnapshotStore(Protocol):
    """Where a host keeps its bodies' snapshots (its "disk": it outlives a body's crash)."""

    def save(self, snapshot: BodySnapshot) -> None: ...

    def newest(self, body: str, identity: str) -> BodySnapshot | None: ...


class _Named:
    """The newest usable snapshot of a list of (where, bytes) candidates, newest first."""

    def __init__(self, scope: str = "") -> None:
        self.scope = scope
        """What the snapshots must have been folded from (see ``decode``; "": any)."""
        self.notes: list[str] = []
        """One line per snapshot that could not be used (also a warning on this logger)."""

    def _first_usable(self, candidates: list[tuple[str, bytes | None]], body: str,
                      identity: str) -> BodySnapshot | None:
        for where, raw in candidates:
            try:
                if raw is None:
                    raise SnapshotUnusable(f"{where}: cannot be read")
                return decode(raw, body=body, identity=identity, where=where, scope=self.scope)
            except SnapshotUnusable as exc:
                self.notes.append(f"snapshot ignored: {exc}")
                logger.warning("snapshot ignored: %s", exc)
        return None


class MemorySnapshots(_Named):
    """Snapshots as bytes in the host's memory (the in-process host and the simulator)."""

    def __init__(self, keep: int = 1) -> None:
        super().__init__()
        self.keep = keep
        self.saved: dict[str, list[bytes]] = {}
        """Body -> its encoded snapshots, oldest first."""

    def save(self, snapshot: BodySnapshot) -> None:
        kept = self.saved.setdefault(snapshot.body, [])
        kept.append(encode(snapshot, self.scope))
        del kept[:-self.keep]

    def newest(self, body: str, identity: str) -> BodySnapshot | None:
        kept = self.saved.get(body, [])
        candidates: list[tuple[str, bytes | None]] = [
            (f"snapshot {len(kept) - i} of {body} (in memory)", raw) for i, raw in enumerate(reversed(kept))]
        return self._first_usable(candidates, body, identity)

    def bytes_kept(self) -> int:
        return sum(len(raw) for kept in self.saved.values() for raw in kept)


class DirectorySnapshots(_Named):
    """Snapshots as files ``<directory>/<body>/<ordinal>.snap``, each written atomically."""

    def __init__(self, directory: str | os.PathLike[str], keep: int = 2, scope: str = "") -> None:
        super().__init__(scope)
        self.directory, self.keep = Path(directory), keep

    def _dir(self, body: str) -> Path:
        return self.directory / body.replace("/", "_").replace(":", "_")

    def files(self, body: str) -> list[Path]:
        """The body's snapshot files, newest first."""
        folder = self._dir(body)
        found = sorted(folder.glob("*.snap")) if folder.is_dir() else []
        return list(reversed(found))

    def save(self, snapshot: BodySnapshot) -> None:
        folder = self._dir(snapshot.body)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{snapshot.ordinal:020d}.snap"
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".snap-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(encode(snapshot, self.scope))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        fsync_dir(folder)
        for old in self.files(snapshot.body)[self.keep:]:
            old.unlink(missing_ok=True)

    def newest(self, body: str, identity: str) -> BodySnapshot | None:
        """The newest usable snapshot of ``body``; registers ``body`` as a reader of the log
        (retention keeps everything it has not snapshot yet)."""
        try:
            self._dir(body).mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a read-only reader: not counted by retention, and named
            logger.warning("%s cannot register as a reader of the log (retention will not wait "
                           "for it): %s", body, exc)
        return self._first_usable([(str(path), _read(path)) for path in self.files(body)], body, identity)

    def holders(self) -> dict[str, Mapping[int, int] | None]:
        """Every registered reader (folder) -> the position of its oldest readable snapshot, or
        None when it has none (it would restart from offset 0)."""
        if not self.directory.is_dir():
            return {}
        oldest = self.oldest_positions()
        return {folder.name: oldest.get(folder.name)
                for folder in sorted(p for p in self.directory.iterdir() if p.is_dir())}

    def oldest_positions(self) -> dict[str, Mapping[int, int]]:
        """Body -> the position of its oldest kept snapshot (what retention may not cut past)."""
        out: dict[str, Mapping[int, int]] = {}
        if not self.directory.is_dir():
            return out
        for folder in sorted(p for p in self.directory.iterdir() if p.is_dir()):
            for path in sorted(folder.glob("*.snap")):
                position = _position(path)
                if position is not None:
                    out[folder.name] = position
                    break
        return out


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _position(path: Path) -> Mapping[int, int] | None:
    """The position in a snapshot file's header, without reading its payload (None: unreadable)."""
    try:
        with path.open("rb") as raw:
            head = raw.read(4096)
        header = json.loads(head[len(MAGIC):head.index(b"\n", len(MAGIC))])
        return {int(p): int(o) for p, o in header["position"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a body is rebuilt.

    A rebuild allocates a body's whole state at once and frees almost nothing: every few hundred
    allocations the collector would walk the young objects, and every tenth time the older ones
    too, which on a host holding a hundred bodies was 4/5 of a leader's recovery."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    """When a host writes a body's snapshot: once it has folded at least ``min_records`` records
    since the last one *and* ``per_state`` times the size of its state (bundles plus brokers it
    holds). A restart then folds at most about that many records (flat in history), and the
    cost of writing snapshots stays a fixed fraction of the cost of folding."""

    min_records: int = 10_000
    per_state: float = 2.0

    def due(self, folded_since: int, state_size: int) -> bool:
        return folded_since >= max(self.min_records, self.per_state * state_size)


DEFAULT_POLICY = SnapshotPolicy()
