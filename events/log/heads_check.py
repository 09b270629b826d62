"""A writer's heads saved beside the log (the embedded log's ``heads.json``, a Kafka writer's
checkpoint) are checked against the log before they are trusted.

A saved checkpoint is plain data: ``heads`` (key -> [last seq, newest epoch]), ``elected``,
``at`` (partition -> the offset the heads are exact below), ``marks`` (partition -> one record
below ``at`` the writer read or wrote: [offset, key, seq, event id]) and ``digest`` (sha256 of
the rest as canonical JSON).

Invariants:
- ``unseal`` refuses a checkpoint without a digest or whose digest does not match what it
  holds (a file edited by hand, torn, or written before checkpoints were sealed);
- ``check_mark`` refuses one whose mark is not the record the log holds at that offset (a
  checkpoint of another log, or of another incarnation of it) or whose heads stand below that
  record (a reset); a partition with records below ``at`` needs a mark;
- a refused checkpoint is named and never used: the writer derives its heads from the records.
A checkpoint forged with knowledge of the log (a mark copied from it, a digest computed) passes
these checks: they keep a stray or stale file from resetting heads, they authenticate nobody.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from events.log._store import Heads
from events.log.port import Record

Mark = tuple[int, str, int, str]
"""offset, key, seq, event id of one record."""


def mark_of(record: Record) -> Mark:
    env = record.envelope
    return record.offset, env.key, env.seq, env.event_id


def _digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def seal(heads: Heads, at: Mapping[int, int], marks: Mapping[int, Mark]) -> dict[str, Any]:
    """The checkpoint of ``heads``, exact below ``at``, with the marks of the partitions in ``at``."""
    body: dict[str, Any] = {**heads.to_plain(), "at": {str(p): int(o) for p, o in at.items()},
                            "marks": {str(p): list(m) for p, m in marks.items() if p in at}}
    return {**body, "digest": _digest(body)}


def unseal(found: Mapping[str, Any]) -> tuple[Heads, dict[int, int], dict[int, Mark]]:
    """Heads, ``at`` and marks of a checkpoint whose digest holds; ``ValueError`` says why not."""
    if not isinstance(found, Mapping) or "digest" not in found:
        raise ValueError("it carries no digest (written by hand, or before checkpoints were sealed)")
    body = {k: v for k, v in found.items() if k != "digest"}
    if _digest(body) != found["digest"]:
        raise ValueError("its digest does not match what it holds")
    at = {int(p): int(o) for p, o in body["at"].items()}
    marks: dict[int, Mark] = {}
    for p, m in body.get("marks", {}).items():
        offset, key, seq, event_id = m
        marks[int(p)] = (int(offset), str(key), int(seq), str(event_id))
    return Heads.from_plain(body), at, marks


def check_mark(heads: Heads, partition: int, at: int, mark: Mark | None, held: Record | None,
               first: int | None) -> None:
    """``ValueError`` unless ``mark`` is ``held`` (the record the log holds at its offset) and the
    heads stand at or above it; ``first``: the offset of the partition's first record below
    ``at``, when the checkpoint has no mark for it."""
    if mark is None:
        if first is not None:
            raise ValueError(f"partition {partition} holds records below offset {at} (one at "
                             f"{first}) but the checkpoint marks none")
        return
    offset, key, seq, _ = mark
    if not offset < at:
        raise ValueError(f"its mark at offset {offset} is not below its offset {at}")
    if held is None or mark_of(held) != mark:
        found = "no record" if held is None else f"{held.envelope.key!r} seq {held.envelope.seq}"
        raise ValueError(f"partition {partition} offset {offset} holds {found}, not the marked "
                         f"{key!r} seq {seq}")
    got = heads.get(key)[0]
    if got < seq:
        raise ValueError(f"its heads put {key!r} at seq {got}, below the record at offset "
                         f"{offset} (seq {seq})")
