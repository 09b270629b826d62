"""Retention of the embedded log: who holds which offset, and dropping what no reader needs.

Invariants:
- the floor is the lowest offset, over every reader that counts, that the reader would read from
  on its next start: each body's and the client's oldest kept snapshot (``snapshots/<reader>/``:
  a reader registers by its folder, so one without any usable snapshot yet holds the floor at 0)
  and each named checkpoint (``checkpoints/NAME.json``); with no reader at all the floor is 0
  (nothing is known to be safe to drop);
- only the operator leaves a reader out (``ignore``: one gone for good), and the report names it;
- what is dropped is whole sealed segments entirely below the floor (``LocalStore.retain``): the
  active segment never, so the log keeps at least its newest segment;
- ``retain`` is a dry run unless ``apply``: the report is the same either way.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from actors.snapshots import BodySnapshot, DirectorySnapshots
from balancer.errors import InvalidInput
from events.log.local import DroppedSegment, LocalStore

logger = logging.getLogger(__name__)
SNAPSHOT_DIR = "snapshots"
"""Under an embedded log's directory: the readers' snapshots (``actors.snapshots``)."""


@dataclass(frozen=True, slots=True)
class Holder:
    """One reader of the log and the offset it would read from on its next start."""

    reader: str
    """``snapshot:<folder>`` or ``checkpoint:<name>``."""
    offset: int
    why: str


@dataclass(frozen=True, slots=True)
class RetainReport:
    """What a retain dropped (or, in a dry run, would drop), and why there."""

    floor: int
    holders: list[Holder]
    """Every reader that counts, lowest offset first (the first ones hold the floor)."""
    ignored: list[str]
    dropped: list[DroppedSegment]
    start: int
    """The log's first offset afterwards (in a dry run: what it would be)."""
    applied: bool

    @property
    def records(self) -> int:
        return sum(d.records for d in self.dropped)

    @property
    def bytes(self) -> int:
        return sum(d.bytes for d in self.dropped)

    def held_by(self) -> list[Holder]:
        return [h for h in self.holders if h.offset == self.floor]


def holders(log_dir: Path, store: LocalStore) -> list[Holder]:
    """Every reader of the log in ``log_dir`` and where it would restart, lowest first."""
    found: list[Holder] = []
    for folder, position in DirectorySnapshots(log_dir / SNAPSHOT_DIR).holders().items():
        if position is None:
            found.append(Holder(f"snapshot:{folder}", 0, "registered, no usable snapshot yet"))
        else:
            found.append(Holder(f"snapshot:{folder}", position.get(0, 0), "its oldest kept snapshot"))
    for name in store.checkpoints():
        position = store.load_checkpoint(name) or {}
        found.append(Holder(f"checkpoint:{name}", position.get(0, 0), "its checkpoint"))
    return sorted(found, key=lambda h: (h.offset, h.reader))


def retain(log_dir: str | os.PathLike[str], *, apply: bool = False, ignore: Iterable[str] = (),
           others: Iterable[Holder] = (), store: LocalStore | None = None) -> RetainReport:
    """Drop (``apply``) or list the segments of the log in ``log_dir`` below every counted
    reader's offset; ``ignore`` names readers (``snapshot:X``, ``checkpoint:Y``) not counted;
    ``others`` are readers the directory does not show (an in-process cluster's bodies)."""
    directory = Path(log_dir)
    own = store is None
    store = store or LocalStore(directory)
    try:
        found = sorted([*holders(directory, store), *others], key=lambda h: (h.offset, h.reader))
        left_out = set(ignore)
        unknown = sorted(left_out - {h.reader for h in found})
        if unknown:
            raise InvalidInput(f"--ignore {unknown[0]}: no such reader; readers: "
                               f"{', '.join(h.reader for h in found) or 'none'}", value=unknown[0])
        counted = [h for h in found if h.reader not in left_out]
        floor = min((h.offset for h in counted), default=0)
        dropped = store.retain(floor, dry_run=not apply)
        start = dropped[-1].first + dropped[-1].records if dropped else store.start(0)
        return RetainReport(floor, counted, sorted(left_out), dropped, start, apply)
    finally:
        if own:
            store.close()


class RetainingSnapshots(DirectorySnapshots):
    """Snapshot files of a log's readers that, after each snapshot written, drop what no reader
    needs any more (``loadBalancerEmbeddedLogRetentionEnabled``: a running cluster retains by
    itself; a failure is logged and retried at the next snapshot: the log stays the truth)."""

    def __init__(self, log_dir: str | os.PathLike[str], keep: int = 2) -> None:
        super().__init__(Path(log_dir) / SNAPSHOT_DIR, keep)
        self.log_dir = Path(log_dir)
        self._store: LocalStore | None = None
        self.reports: list[RetainReport] = []
        """What each retain that dropped something dropped (the newest few)."""

    def save(self, snapshot: BodySnapshot) -> None:
        super().save(snapshot)
        try:
            self._store = self._store or LocalStore(self.log_dir)
            report = retain(self.log_dir, apply=True, store=self._store)
        except Exception:
            logger.exception("retention of %s failed", self.log_dir)
            return
        if report.dropped:
            self.reports = [*self.reports[-9:], report]


def report_lines(report: RetainReport) -> list[str]:
    """The report as ``lbctl log retain`` prints it."""
    verb = "dropped" if report.applied else "would drop (dry run; --apply drops)"
    held = ", ".join(f"{h.reader} ({h.why})" for h in report.held_by()) or "no reader (nothing is known safe)"
    lines = [f"floor: offset {report.floor}, held by {held}"]
    lines += [f"{verb} {d.path}: offsets {d.first} to {d.first + d.records - 1}, {d.records} records, "
              f"{d.bytes} bytes" for d in report.dropped]
    lines.append(f"{verb} {len(report.dropped)} segment(s), {report.records} records, {report.bytes} "
                 f"bytes; the log starts at offset {report.start}")
    lines += [f"not counted (--ignore): {reader}" for reader in report.ignored]
    return lines
