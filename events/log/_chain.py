"""Which segment files of an embedded log are its history: one chain, each segment starting at
the offset where the one before it ends.

A segment's base offset is in its file name and, since frames name their offsets, in its
frames too. Of the segments found in a log directory:

- the non-empty segments whose frames agree with their names form the chain; records missing
  between two of them (a data file removed) or two of them holding the same offsets leave no
  single history: nothing in the data says which file is true, so ``LogDamaged`` names the
  files and the offsets, and readers and writers refuse the log until an operator moves one;
- a segment whose frames name other offsets than its name is a copy: when its bytes are those
  of the segment its frames name, it holds nothing the chain lacks (a stray); otherwise it is
  another history for those offsets (``LogDamaged``);
- an empty segment starting at the chain's end is the active one (a writer created it and has
  not appended yet); any other empty one holds nothing (a stray);
- an index with entries whose data file is gone, at or after the chain's start, vouches for
  records nobody can read any more: ``LogDamaged``; before the start it is what a retention
  cut short left behind (only when ``heads.json`` says retention ran); an empty one is a stray.

Strays are named; readers skip them, a writer moves them to ``quarantine/``. Nothing here
writes a file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from balancer.errors import LogDamaged
from events.log._segment import INDEX, Segment

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Stray:
    """Files that hold no record the chain lacks."""

    paths: tuple[Path, ...]
    why: str


@dataclass
class Chain:
    segments: list[Segment] = field(default_factory=list)
    strays: list[Stray] = field(default_factory=list)


def end_of(segment: Segment) -> int:
    return segment.base + segment.count


def verify(found: Sequence[Segment], orphans: Mapping[int, Path], retained: bool) -> Chain:
    """The chain of ``found`` (refreshed segments) and the strays beside it; ``orphans`` are
    index files without a data file by base; ``retained``: a ``heads.json`` is there."""
    out = Chain()
    live: list[Segment] = []
    empty: list[Segment] = []
    for segment in sorted(found, key=lambda s: s.base):
        if segment.count == 0:
            empty.append(segment)
            continue
        claimed = segment.claimed_base()
        if claimed is None or claimed == segment.base:
            live.append(segment)
            continue
        out.strays.append(_copy(segment, claimed, found))
    for segment in live:
        if out.segments:
            _follows(out.segments[-1], segment)
        out.segments.append(segment)
    _place_empty(out, empty)
    _check_orphans(out, orphans, retained)
    return out


def _paths(segment: Segment) -> tuple[Path, ...]:
    return (segment.data_path, segment.index_path) if segment.index_path.exists() else (segment.data_path,)


def _follows(before: Segment, segment: Segment) -> None:
    end = end_of(before)
    if segment.base > end:
        raise LogDamaged(
            f"{before.directory}: offsets {end} to {segment.base - 1} are missing: no data file "
            f"holds them between {before.data_path.name} and {segment.data_path.name} (a segment "
            "removed?); the log is refused until it is restored", base=segment.base, end=end)
    if segment.base < end:
        raise LogDamaged(
            f"{before.data_path} and {segment.data_path} both hold offsets {segment.base} to "
            f"{min(end, end_of(segment)) - 1} with other records: nothing says which is true; "
            "the log is refused until the one that does not belong is moved out of "
            f"{before.directory}", base=segment.base, end=end)


def _copy(segment: Segment, claimed: int, found: Sequence[Segment]) -> Stray:
    """A segment whose frames name other offsets than its name: a stray if it is a copy."""
    last = claimed + segment.count - 1
    twin = next((s for s in found if s.base == claimed and s is not segment), None)
    if twin is None or not _same_start(segment, twin):
        raise LogDamaged(
            f"{segment.data_path}: its records name offsets {claimed} to {last}, not "
            f"{segment.base} on, and they are no copy of a segment of the log: the log is "
            "refused until it is moved out", base=segment.base, claimed=claimed)
    return Stray(_paths(segment), f"a copy of {twin.data_path.name} (its records name offsets "
                                  f"{claimed} to {last}, which the log holds as they are)")


def _same_start(copy: Segment, twin: Segment) -> bool:
    """``copy``'s committed bytes are the first bytes of ``twin``'s."""
    if copy.data_end > twin.data_end:
        return False
    for at in range(0, copy.data_end, _CHUNK):
        size = min(_CHUNK, copy.data_end - at)
        if os.pread(copy.data_fd, size, at) != os.pread(twin.data_fd, size, at):
            return False
    return True


def _place_empty(out: Chain, empty: list[Segment]) -> None:
    """An empty segment at the chain's end is the active one; with no records at all, the last
    (a writer never goes back to a lower offset); any other holds nothing."""
    end = end_of(out.segments[-1]) if out.segments else None
    active = next((s for s in empty if s.base == end), None)
    if end is None and empty:
        active = empty[-1]
    for segment in empty:
        if segment is active:
            out.segments.append(segment)
        else:
            where = "after the log's end" if end is not None and segment.base > end else "inside the log"
            out.strays.append(Stray(_paths(segment), f"an empty segment {where}"))


def _check_orphans(out: Chain, orphans: Mapping[int, Path], retained: bool) -> None:
    start = out.segments[0].base if out.segments else None
    for base, index in sorted(orphans.items()):
        try:
            entries = index.stat().st_size // INDEX.size
        except FileNotFoundError:
            continue
        if entries == 0:
            out.strays.append(Stray((index,), "an empty index without a data file"))
        elif start is None or base >= start or not retained:
            raise LogDamaged(
                f"{index.parent / f'{base:020d}.log'} is missing: its index {index.name} names "
                f"{entries} records from offset {base}; the log is refused until the data file is "
                "restored (or the index moved aside, accepting the loss)", base=base)
