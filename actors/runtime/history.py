"""Whether a log still holds what a body needs to start from a base (a snapshot, or offset 0).

A body is rebuilt from a base position and every record after it. Kafka can break that two ways,
and each is named, never folded over in silence:

- the base is past a partition's end: the snapshot was folded from another incarnation of the
  topic (deleted and re-created). ``past_end`` names it; the host drops the snapshot and folds
  the topic from its start;
- the base is below a partition's log start: retention deleted records the body never folded
  (with no snapshot at all, any log start above 0). ``require_history`` raises
  ``HistoryMissing`` naming the partition, the base, the log start and the records lost: a fold
  of what is left would be a different history (an ownership transfer missed, two owners).

A snapshot at or past the log start is a whole base however much retention deleted before it.
A log that keeps everything has no log start (``limits`` reports 0); an embedded log has one once
``lbctl log retain`` dropped segments, and the same rules hold there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from balancer.errors import HistoryMissing
from events.log.port import EventLog, Offsets


@dataclass(frozen=True, slots=True)
class LogLimits:
    """Per partition: the first offset still held (``starts``) and the end (``ends``)."""

    starts: Offsets
    ends: Offsets


async def limits(log: EventLog) -> LogLimits:
    """The log's limits now (a log without retention starts every partition at 0)."""
    ends = await log.end_offsets()
    start_offsets = getattr(log, "start_offsets", None)
    starts: Offsets = await start_offsets() if callable(start_offsets) else {}
    return LogLimits({p: int(starts.get(p, 0)) for p in ends}, dict(ends))


def past_end(position: Mapping[int, int], found: LogLimits, where: str) -> str | None:
    """Why a snapshot at ``position`` cannot be of this log (None: it can)."""
    beyond = {p: (o, found.ends.get(p, 0)) for p, o in sorted(position.items()) if o > found.ends.get(p, 0)}
    if not beyond:
        return None
    parts = ", ".join(f"partition {p} at {o} but the log ends at {end}" for p, (o, end) in beyond.items())
    return (f"snapshot refused: {parts} in {where} (the topic was deleted and re-created?); "
            "folding the log from its start")


def require_history(base: Mapping[int, int], found: LogLimits, where: str, *, snapshot: bool) -> None:
    """Raise ``HistoryMissing`` if records after ``base`` are gone from some partition."""
    lost = {p: (base.get(p, 0), start) for p, start in sorted(found.starts.items()) if start > base.get(p, 0)}
    if not lost:
        return
    what = "the snapshot's position" if snapshot else "no snapshot: offset"
    parts = "; ".join(f"partition {p}: {what} {b}, log start {s} (offsets {b}..{s - 1} deleted)"
                      for p, (b, s) in lost.items())
    raise HistoryMissing(f"{where} no longer holds the history needed to rebuild this body: {parts}. "
                         "Retention deleted records it never folded; restore them, give it a "
                         "snapshot taken at or after the log start, or start a new cluster",
                         value=sorted(lost))
