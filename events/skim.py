"""Skimming: a reader that never uses some records' payloads reads their headers only.

A broker folds every record of the log, yet of the load reports it uses only its own: the
others' bundle lists (about 177 bytes a bundle, a thousand bundles a report) cost it more to
decode and check than everything else it folds. A reader names what it skims (``Skim``: one
event type, under every key but one); a log that reads for it hands each such record as a
``Skimmed`` envelope: the header fields, checked as ``decode`` checks them, and the raw bytes,
the payload not decoded.

Invariants:
- skimming is advisory: a log may hand any record in full, and a reader folds a skimmed record
  exactly as it folds the full one wherever it reads the header only (the seq, epoch, cluster,
  key and signature checks of ``projections.ownership``); a record it would read more of (one
  it does not skim) it reads in full first (``events.log.port.expand``);
- a ``Skimmed`` envelope never passes for a full one: its payload is None and its ``typed``
  raises; ``expand`` decodes its raw bytes as the log would have, into a ``Record`` or, for
  bytes ``decode`` refuses, a ``DeadLetter`` at the same place; an old version and a header
  ``decode`` would refuse are never skimmed;
- a skimmed record's signed bytes (``events.signing.unsigned_bytes``) are cut from its stored
  bytes, not encoded again from a decoded payload: the same bytes for every record this
  project's writers store (msgpack's encoding is canonical), so its signature and digest check
  as the full record's do;
- what a skimming reader does not decode it does not name: a skimmed record whose payload is
  unreadable is named by the readers of that payload (the leader, the shards, every client
  view), not by the reader that skimmed it;
- the test costs a few byte compares on a record of another type: the type is looked for where
  every writer of this project puts it (after a 36-character event id), and a record laid out
  otherwise is decoded in full.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgpack

from events._fields import MAX_ITEMS, MAX_TEXT
from events.catalog import SCHEMAS
from events.codec import check_header
from events.envelope import FIELDS, Envelope
from events.signing import UNSIGNED

_PAYLOAD = FIELDS.index("payload")
_SIG = FIELDS.index("sig")
_ID_STR8 = b"\xd9\x24"  # msgpack str8 of 36 bytes: every writer's event id (a UUID string)
_TYPE_AT = 1 + len(_ID_STR8) + 36  # after the array's one-byte header and the event id


@dataclass(frozen=True)
class Skim:
    """Records a reader folds by their header only: of ``type``, under any key but ``keep``."""

    type: str
    keep: str | None = None
    marker: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "marker", msgpack.packb(self.type))

    def applies(self, envelope: Envelope) -> bool:
        return envelope.type == self.type and envelope.key != self.keep


class _Unread:
    """``typed`` of a skimmed record: its payload was not read, so it has no typed event."""

    def __get__(self, envelope: Skimmed | None, owner: type) -> Any:
        if envelope is None:
            return self
        raise TypeError(f"{envelope.type} at seq {envelope.seq} of {envelope.key!r} was skimmed: "
                        "its payload was not read (events.log.port.expand reads it)")


class Skimmed(Envelope):
    """A record's header fields, its payload not decoded (None); ``raw`` is the record."""

    raw: bytes

    if not TYPE_CHECKING:
        typed = _Unread()


def skimmed(raw: bytes, key: str | None, skim: Skim) -> Skimmed | None:
    """The header of ``raw`` if ``skim`` covers it (and its header decodes), else None: then the
    reader decodes it in full (which names whatever is wrong with it)."""
    if (key is not None and key == skim.keep) or raw[1:3] != _ID_STR8 or not raw.startswith(skim.marker, _TYPE_AT):
        return None
    try:
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(raw),
                                    max_str_len=MAX_TEXT, max_bin_len=MAX_TEXT,
                                    max_array_len=MAX_ITEMS, max_map_len=MAX_ITEMS)
        unpacker.feed(raw)
        count = unpacker.read_array_header()
        if not _PAYLOAD < count <= len(FIELDS):
            return None
        fields: list[Any] = [unpacker.unpack() for _ in range(_PAYLOAD)]
        unpacker.skip()
        fields.append(None)
        ends = [unpacker.tell()]  # where the payload, then each later field, ends
        for _ in range(_PAYLOAD + 1, count):
            fields.append(unpacker.unpack())
            ends.append(unpacker.tell())
        if unpacker.tell() != len(raw):  # trailing bytes: decode refuses the record
            return None
    except Exception:  # msgpack raises several unrelated types for bad bytes; decode names them
        return None
    fields.extend(None for _ in range(len(FIELDS) - len(fields)))
    header = Skimmed(*fields)
    schema = SCHEMAS.get(header.type)
    if (header.type != skim.type or header.key == skim.keep or schema is None
            or header.version != schema.version or not check_header(header)):
        return None  # decoded in full: refused or upcast there
    header.raw = bytes(raw)
    # What its writer signed: the record without its signature, as ``encode`` writes it (the
    # cluster id left off too when there is none): the array shorter, its last fields cut.
    signed = _PAYLOAD + 1 if header.cluster_id is None else _SIG
    header.__dict__[UNSIGNED] = bytes((0x90 | signed,)) + raw[1:ends[signed - _PAYLOAD - 1]]
    return header
