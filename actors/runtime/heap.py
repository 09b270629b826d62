"""The cyclic collector's schedule for a long-lived body process (a Ray actor).

CPython's collector walks the whole old generation each time the objects promoted since its
last full walk reach a quarter of it. A body in a storm promotes hundreds of thousands of
short-lived objects a second (commands waiting their turn, their futures and answers), so a
namespace shard holding a 65,536-bundle view walked its whole heap again and again: 28% of its
CPU in a 10 x 65,536 lookup storm (issue 23, S1r), and 24% of an in-process cold start (S1).

``HeapSettler`` collects the young generations every ``interval_s`` and freezes what survives
(``gc.freeze``): a walk then costs the objects of one interval, never the heap. Every
``full_every`` settles it thaws the heap and walks it once (a full collection), so a cycle that
became garbage after it was frozen is reclaimed within that many intervals.

Invariants:
- each settle collects first, so cyclic garbage of the young generations is reclaimed at once;
- a frozen object is still freed by reference counting; a reference cycle that became garbage
  after it was frozen waits for the next full settle (the bodies' state, views, indexes and
  outcomes, holds no cycles; tasks and futures mostly die young);
- settling is the process's business, not a body's: only a host runs it, the Ray shell
  (``actors.runtime.ray``) on a timer and a long-lived in-process cluster from its loop
  (``InProcessHost(heap=...)``); the simulator does not (its many short hosts share one
  process).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

logger = logging.getLogger(__name__)

SETTLE_EVERY_S = 2.0
"""A walk of the young generations is cheap, and the shorter the interval the less CPython's
own full collections find to walk between two settles: at 100 x 65,536 an in-process cold start
took 30.0 CPU s with CPython's schedule, 25.2 settling every 5 s, 23.8 every 2 s and 22.9 with
no collector at all."""
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

    def maybe_settle(self) -> None:
        """Settle if ``interval_s`` passed since the last settle (a host's loop calls this as
        often as it likes: the check costs a clock read)."""
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
        self.settle()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="heap-settler")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self.settle()

    def status(self) -> dict[str, float]:
        return {"settles": self.settles, "settle_s": round(self.seconds, 3),
                "frozen": gc.get_freeze_count()}
