"""The envelope around every stored event or command (contracts §1).

Invariants:
- fields, in wire order: event_id (uuid str), type, version, key, seq (per key, from 1,
  gap-free), epoch (leader term), ts_ms, causation_id, correlation_id, payload, cluster_id (the
  cluster whose writer stamped it: a log holds one cluster's records; None for records written
  before it existed, or raw, and then left off the wire and out of the JSON), sig (the writer's
  signature on the first record of a signed append, ``events.signing``; None on every other
  record, and then left off the wire and out of the JSON);
- an ``Envelope`` is immutable; it is a ``NamedTuple`` so that the codec packs it as a msgpack
  array without building an intermediate dict, and rebuilds it with one tuple allocation (A1);
- ``typed`` is the typed event of the payload (``catalog.view_of``: the payload itself as the
  event's attributes), built at most once per envelope and kept beside the tuple (never packed,
  pickled or compared): a record that a hundred bodies fold is typed once, and a fold reads
  attributes, not dict keys;
- a writer stamps only what every reader decodes: ``seal`` and ``Stamper.seal`` raise
  ``OutOfRange`` (``events.bounds``) for a seq, epoch or time outside the wire's range, so a
  log's writer refuses an append rather than write a record no one can read;
- time and ids come from injected functions (``clock_ms``, ``new_id``); the defaults are the
  only places in ``events/`` that read the wall clock or the OS random source, so a simulator
  passes a virtual clock and a seeded id factory and gets byte-identical logs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from events.bounds import check_writable
from events.catalog import Message, view_of

Clock = Callable[[], int]
IdFactory = Callable[[], str]

FIELDS: tuple[str, ...] = (
    "event_id", "type", "version", "key", "seq", "epoch", "ts_ms",
    "causation_id", "correlation_id", "payload", "cluster_id", "sig",
)


def wall_clock_ms() -> int:
    """Default clock: milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


_VERSION_4 = (0x4 << 76) | (0x2 << 62)  # RFC 4122: version nibble 4, variant bits 10
_CLEAR = ~((0xF << 76) | (0x3 << 62))


_ID_POOL: list[str] = []


def random_id() -> str:
    """Default id factory: a random UUID4 string from the OS's randomness (what
    ``str(uuid.uuid4())`` gives), made 256 at a time because one ``urandom`` call per id
    costs more than the formatting."""
    try:
        return _ID_POOL.pop()
    except IndexError:
        _ID_POOL.extend(_fresh_ids(256))
        return _ID_POOL.pop()


def new_cluster_id() -> str:
    """The id of a cluster founding a new log (a random UUID4 string)."""
    return random_id()


# A forked child must not hand out the ids its parent still holds.
os.register_at_fork(after_in_child=_ID_POOL.clear)


def _fresh_ids(count: int) -> list[str]:
    noise = os.urandom(16 * count)
    out = []
    for i in range(0, 16 * count, 16):
        h = f"{(int.from_bytes(noise[i:i + 16]) & _CLEAR) | _VERSION_4:032x}"
        out.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return out


class _Fields(NamedTuple):
    event_id: str
    type: str
    version: int
    key: str
    seq: int
    epoch: int
    ts_ms: int
    causation_id: str | None
    correlation_id: str | None
    payload: dict[str, Any]
    cluster_id: str | None = None
    sig: list[Any] | None = None


class _Typed:
    """``envelope.typed``: built on first read, then an attribute of the instance (a non-data
    descriptor: the instance dict wins), so every later read is a plain attribute load."""

    def __get__(self, envelope: Envelope | None, owner: type) -> Any:
        if envelope is None:
            return self
        typed = view_of(envelope.type, envelope.payload)
        envelope.__dict__["typed"] = typed
        return typed


class Envelope(_Fields):
    """The twelve wire fields (``FIELDS``) and, once asked for, the typed message of the payload.

    No ``__slots__``: the instance dict (made on first use only) holds the typed message."""

    if TYPE_CHECKING:
        typed: Message
        """The typed event or command; ``DecodeError`` if its type is unknown or its payload does
        not fit its class. Built once per envelope, shared by every body that folds it."""
    else:
        typed = _Typed()

    def message(self) -> Message:
        """The typed event or command (the payload must already be of the current version);
        ``DecodeError`` for an unknown type or a payload that does not fit its class."""
        return self.typed

    def __getstate__(self) -> None:
        # Pickled (Ray, copies) as its wire fields alone; the receiver types it again if it folds it.
        return None

    def to_dict(self) -> dict[str, Any]:
        fields = dict(zip(FIELDS, self, strict=True))
        if self.cluster_id is None:
            del fields["cluster_id"]
        if self.sig is None:
            del fields["sig"]
        return fields


def seal(
    message: Message,
    *,
    key: str,
    seq: int,
    epoch: int,
    clock_ms: Clock = wall_clock_ms,
    new_id: IdFactory = random_id,
    causation_id: str | None = None,
    correlation_id: str | None = None,
) -> Envelope:
    """Wrap ``message`` in an envelope stamped with ``seq``, ``epoch``, a time and a fresh id."""
    ts_ms = clock_ms()
    check_writable(key, seq, epoch, ts_ms)
    return Envelope(
        new_id(), message.TYPE, message.VERSION, key, seq, epoch, ts_ms,
        causation_id, correlation_id, message.to_payload(),
    )


class Signer(Protocol):
    """What signs an append (``events.signing.Identity``)."""

    name: str

    def sign_append(self, envelopes: Sequence[Envelope], raws: Sequence[bytes]) -> tuple[
            list[Envelope], list[bytes]]: ...


class Stamper:
    """Carries the injected clock and id factory so log adapters stamp envelopes the same way."""

    __slots__ = ("clock_ms", "cluster_id", "new_id", "signer")

    def __init__(self, clock_ms: Clock = wall_clock_ms, new_id: IdFactory = random_id,
                 cluster_id: str | None = None, signer: Signer | None = None) -> None:
        self.clock_ms = clock_ms
        self.new_id = new_id
        self.cluster_id = cluster_id
        """Stamped on every envelope sealed here; a log started with one refuses another's."""
        self.signer = signer
        """Signs every append made here (its first record); None: appends are not signed."""

    def sign(self, envelopes: Sequence[Envelope], raws: Sequence[bytes]) -> tuple[
            Sequence[Envelope], Sequence[bytes]]:
        """One append's envelopes and wire bytes, signed when this stamper has a signer."""
        if self.signer is None:
            return envelopes, raws
        return self.signer.sign_append(envelopes, raws)

    def seal(
        self, message: Message, *, key: str, seq: int, epoch: int,
        causation_id: str | None = None, correlation_id: str | None = None,
    ) -> Envelope:
        ts_ms = self.clock_ms()
        check_writable(key, seq, epoch, ts_ms)
        return Envelope(
            self.new_id(), message.TYPE, message.VERSION, key, seq, epoch, ts_ms,
            causation_id, correlation_id, message.to_payload(), self.cluster_id,
        )


def counting_ids(prefix: str = "00000000-0000-4000-8000-") -> IdFactory:
    """A deterministic id factory for simulations and tests: uuid-shaped, counting from 1."""
    counter = 0

    def next_id() -> str:
        nonlocal counter
        counter += 1
        return f"{prefix}{counter:012x}"

    return next_id
