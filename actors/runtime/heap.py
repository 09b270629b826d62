"""The cyclic collector's schedule for a host that runs bodies.

CPython's collector walks the whole old generation each time the objects promoted since its
last full walk reach a quarter of it. A body in a storm promotes hundreds of thousands of
objects a second (commands waiting their turn, their futures and answers, the state the storm
builds), so a namespace shard holding a 65,536-bundle view walked its whole heap again and
again: 25-28% of a shard's and the leader's CPU in a 10 x 65,536 lookup storm on Ray (S1r), 24%
of an in-process cold start (S1) and 40% of an in-process leader failover (S3).

``HeapSettler`` takes that schedule over while bodies run: the collector is paused, and every
``interval_s`` a *settle* collects the young generations and freezes what survives
(``gc.freeze``), so each object is walked about once, when it is young, never again with the
heap. Every ``full_every`` settles it thaws the heap and walks it whole (a full collection), so a
cycle that became garbage after it was frozen is reclaimed within that many intervals.

Invariants:
- while the settler runs bodies, the only collections are its settles: a Ray body's process
  pauses the collector for good (``start``); the in-process host pauses it for each step of its
  loop only (``paused``), so the code around an embedded cluster keeps CPython's schedule;
- a frozen object is still freed by reference counting; a reference cycle is reclaimed by the
  first settle after it became garbage if it was young then, else by the next full settle (the
  bodies' state, views, indexes and outcomes, holds no cycles; tasks and futures mostly die
  young);
- the simulator does not settle (its many short hosts share one process).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager

from actors.snapshots import collector_paused

SETTLE_EVERY_S = 2.0
"""At 100 x 65,536 an in-process cold start took 30.0 CPU s with CPython's schedule, 25.2
settling every 5 s (the collector running between settles), 23.8 every 2 s and 22.9 with no
collector at all."""
FULL_EVERY = 300
"""A full walk every 300 settles (10 minutes at 2 s): its pause is the heap's size (about 1 s
per 10 million objects here), once in a while instead of again and again."""


class HeapSettler:
    """Collect the young objects and freeze the survivors, every ``interval_s`` seconds."""

    def __init__(self, interval_s: float = SETTLE_EVERY_S, full_every: int = FULL_EVERY) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s={interval_s}: must be > 0")
        if full_every < 1:
            raise ValueError(f"full_every={full_every}: must be >= 1")
        self.interval_s, self.full_every = interval_s, full_every
        self.settles = 0
        self.seconds = 0.0
        self._task: asyncio.Task[None] | None = None
        self._next_s = -1.0

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The collector paused for the block (an in-process host's step), then a settle if one
        is due."""
        with collector_paused():
            yield
        self.maybe_settle()

    def maybe_settle(self) -> None:
        """Settle if ``interval_s`` passed since the last settle (the check is a clock read)."""
        now = time.monotonic()
        if now >= self._next_s:
            self._next_s = now + self.interval_s
            self.settle()

    def settle(self) -> int:
        """Collect the young generations (every ``full_every``-th time, the thawed heap), then
        freeze; the unreachable objects the collection found."""
        started = time.perf_counter()
        if self.settles % self.full_every == 0:
            gc.unfreeze()
            found = gc.collect()
        else:
            found = gc.collect(1)
        gc.freeze()
        self.settles += 1
        self.seconds += time.perf_counter() - started
        return found

    def start(self) -> None:
        """Take over the collector of this process for good (a Ray body's): pause it, settle
        now and then every ``interval_s`` on the running event loop."""
        gc.disable()
        self.settle()
        self._next_s = time.monotonic() + self.interval_s
        self._task = asyncio.get_running_loop().create_task(self._run(), name="heap-settler")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self.settle()

    def status(self) -> dict[str, float]:
        return {"settles": self.settles, "settle_s": round(self.seconds, 3),
                "frozen": gc.get_freeze_count()}
