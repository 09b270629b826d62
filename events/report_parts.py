"""Load reports in parts: a broker's report never outgrows a log message.

A ``LoadReported`` costs about 177 bytes per bundle; Kafka refuses a message above 1 MiB, so a
broker owning more than about 5,900 bundles could not report at all, and was then expired. A
report of more than ``BUNDLES_PER_PART`` bundles is appended as several ``LoadReported`` events
of the broker's key, in one append: the first carries the broker's load and the first bundles,
each continuation carries ``broker_load = {"continued": True, "part": i}`` and the next bundles.

Why parts and not top-k or deltas: the modular placement (LeastLongTermMessageRate) and every
shedder read every bundle's long-term averages, which take one sample per report; Pulsar's
extensible top-k report would starve those averages, and a delta would have to name the
unchanged bundles anyway. Parts keep every figure the one-event report gave, bit for bit:
the broker-level load is folded once (the first part), each bundle one sample per report.

A report may also be a delta (``broker_load["delta"]``, in one part): it lists only the
bundles whose stats changed since the broker's previous report, and says that the broker's
other bundles are those of its previous report with the same stats. A reader that keeps each
broker's last reported stats (``projections.load``) then folds exactly what the full report
would have given: every bundle one sample per report, unchanged ones with the stats they had.
A broker sends a full report whenever its set of bundles changed, after a report that may not
have landed, after registering, and every ``FULL_EVERY`` reports.

Invariants:
- a report of at most ``BUNDLES_PER_PART`` bundles is one event, exactly as before;
- a delta is one event (its changed bundles fit one part) and never a continuation;
- parts keep the bundles' order; every part is a liveness signal;
- a reader folds broker-level load only from a part that is not a continuation
  (``is_continuation``); bundles from every part.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

BUNDLES_PER_PART = 4_000
"""4,000 x ~177 B is ~700 KB: below Kafka's 1 MiB message limit with room for long names."""
CONTINUED = "continued"
DELTA = "delta"
FULL_EVERY = 12
"""A broker's every 12th report is full (at the 10 s heartbeat: one every two minutes)."""


def is_delta(broker_load: Mapping[str, Any]) -> bool:
    """A report that lists only the bundles whose stats changed since the previous one."""
    return bool(broker_load.get(DELTA))


def is_continuation(broker_load: Mapping[str, Any]) -> bool:
    """A later part of a report: its ``broker_load`` is a marker, not the broker's load."""
    return bool(broker_load.get(CONTINUED))


def fold_listed(held: dict[str, T], broker_load: Mapping[str, Any], listed: Iterable[tuple[str, T]]) -> None:
    """A broker's bundles (``held``: bundle -> what was reported of it) after one more event of
    its reports: the first part of a full report replaces them, a later part or a delta updates
    the ones it lists and keeps the others."""
    if not is_continuation(broker_load) and not is_delta(broker_load):
        held.clear()
    held.update(listed)


def split_bundles(bundles: list[dict[str, Any]], per_part: int = BUNDLES_PER_PART
                  ) -> list[list[dict[str, Any]]]:
    """The bundle lists of each part (one list when they fit in one)."""
    if len(bundles) <= per_part:
        return [bundles]
    return [bundles[start:start + per_part] for start in range(0, len(bundles), per_part)]


def continuation(part: int) -> dict[str, Any]:
    return {CONTINUED: True, "part": part}
