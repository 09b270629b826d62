"""Admission instead of retries: a live actor takes work at the pace it can do it, and a sender
never adds a retry while its first try still waits.

A lookup storm used to be retries: a client's lookup waited in the leader's queue past the
sender's call timeout, the client's backoff sent it again, the leader decided every copy. Pulsar
deduplicates lookups in flight and answers a saturated broker with a "too many requests" that
the client honours; this is the same for the commands that carry a retry (``retry_key``).

Invariants:
- only commands that a body sends again on its own schedule have a ``retry_key`` (a lookup, an
  assignment, a confirmation); every other command is delivered as before, never refused busy
  and never coalesced;
- sender (``InFlight``): a keyed command is not sent to a target while one with the same key is
  on its way there (sent, neither answered nor failed): such a send is counted (``coalesced``)
  and dropped, the body's next retry goes out as usual once the key is free; nor before the
  ``retry_after_ms`` of a ``Busy`` answer for that key has passed: such a send is counted and
  kept (the newest per key, ``deferred``) and goes out when the hold ends (``due``), so a refused
  command comes back at its retry-after, not at its sender's next backoff, which grew meanwhile;
- receiver (``Gate``): a keyed command that arrives while the commands waiting for the body
  number ``max_queued`` or more is answered ``Busy`` at once (nothing decided, nothing appended)
  with a retry-after that places it in a virtual line behind the waiting commands and the ones
  refused just before it, at the pace the body answers at: the refused come back spread over
  the time the body needs for them, not all at once; a lookup of a bundle while another lookup
  of it waits is not queued again: it gets the waiting one's answer;
- all of it is soft state of one process: a restart forgets it, and the bodies' own retries
  (their backoff) are what makes progress certain.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Hashable

from actors.runtime.group_commit import Answer
from balancer.errors import Busy
from events.catalog import AssignBundle, Command, ConfirmOwnership, LookupBundle

MAX_QUEUED = 4_000
"""Keyed commands waiting for one body at most before the next is answered ``Busy``."""
RETRY_AFTER_MIN_MS, RETRY_AFTER_MAX_MS = 500, 60_000
"""A storm's line may be a minute long: a lookup told to come back later than that would be
refused again anyway, and every refusal costs the body a command to read and answer."""
PRIOR_RATE = 1_000.0
"""Commands a second a body is assumed to answer until its pace was measured while full: a
refused command that comes back too early is refused again at little cost, one told to come
back too late leaves the body idle."""


def retry_key(command: Command) -> Hashable | None:
    """What makes two sends of ``command`` the same try (None: not a retried command)."""
    if isinstance(command, LookupBundle):
        return ("lookup", command.bundle)
    if isinstance(command, AssignBundle):
        return ("assign", command.bundle, command.dst, command.reason, command.force)
    if isinstance(command, ConfirmOwnership):
        return ("confirm", command.bundle, command.owner, command.src)
    return None


class InFlight:
    """The sender's side: which keyed commands are on their way to which target."""

    def __init__(self) -> None:
        self._sent: set[tuple[str, Hashable]] = set()
        self._held: dict[tuple[str, Hashable], float] = {}
        self._deferred: dict[tuple[str, Hashable], tuple[float, Command, object]] = {}
        """Slot -> (when its hold ends, the newest send held back, what came with it)."""
        self._ends: list[tuple[float, int, tuple[str, Hashable]]] = []
        """A heap of (when a hold ends, a tie-breaker, slot) for the kept sends (stale ones are
        skipped as they come up)."""
        self._pushed = 0
        self._prune_at = 4 * MAX_QUEUED
        self.prunes = 0
        """Passes over the holds to drop expired ones (a few per storm, never one per answer)."""
        self.coalesced = 0
        """Sends dropped because the same try was on its way, or kept for a busy target."""
        self.busy = 0
        """``Busy`` answers received."""

    def admit(self, target: str, command: Command, now_s: float, extra: object = None) -> bool:
        """Note ``command`` as sent to ``target``; False if it must not go now (counted): on
        its way already (dropped), or held by a busy answer (kept, with ``extra``, for ``due``)."""
        key = retry_key(command)
        if key is None:
            return True
        slot = (target, key)
        until = self._held.get(slot)
        if slot in self._sent:
            self.coalesced += 1
            return False
        if until is not None and now_s < until:
            self.coalesced += 1
            if slot not in self._deferred:
                self._pushed += 1
                heapq.heappush(self._ends, (until, self._pushed, slot))
            self._deferred[slot] = (until, command, extra)
            return False
        if until is not None:
            del self._held[slot]
        self._deferred.pop(slot, None)
        self._sent.add(slot)
        return True

    def due(self, now_s: float) -> list[tuple[str, Command, object]]:
        """The sends kept back whose hold has ended (taken): the caller sends them again."""
        out = []
        ends = self._ends
        while ends and ends[0][0] <= now_s:
            until, _, slot = heapq.heappop(ends)
            kept = self._deferred.get(slot)
            if kept is not None and kept[0] == until:
                del self._deferred[slot]
                out.append((slot[0], kept[1], kept[2]))
        return out

    def next_due(self) -> float | None:
        """When the earliest kept send may go (None: none is kept)."""
        ends = self._ends
        while ends and self._deferred.get(ends[0][2], (None,))[0] != ends[0][0]:
            heapq.heappop(ends)  # sent or kept again since: not a due of its own
        return ends[0][0] if ends else None

    def answered(self, target: str, command: Command, error: object, now_s: float) -> None:
        """``command``'s try is over (answered, refused, failed or timed out)."""
        key = retry_key(command)
        if key is None:
            return
        slot = (target, key)
        self._sent.discard(slot)
        if isinstance(error, Busy):
            self.busy += 1
            self._held[slot] = now_s + error.retry_after_ms / 1000
            if len(self._held) > self._prune_at:  # expired holds are dropped now and then
                self._held = {s: t for s, t in self._held.items() if t > now_s}
                self.prunes += 1
                # Not again before the live holds double: a storm holds tens of thousands at
                # once, and pruning at every busy answer cost each of them a pass over all.
                self._prune_at = max(4 * MAX_QUEUED, 2 * len(self._held))


class Pace:
    """Commands answered per second, over the last few seconds (for a retry-after); ``full``:
    whether commands were refused in that window, so the rate is what the body can do, not
    what it was asked (a body idle before a storm measured only its demand)."""

    def __init__(self, window_s: float = 5.0) -> None:
        self.window_s = window_s
        self._start = 0.0
        self._count = 0
        self._refused_at = 0
        self.rate = 0.0
        self.full = False

    def answered(self, count: int, now_s: float, refused: int) -> None:
        if not self._start:
            self._start = now_s
        self._count += count
        if now_s - self._start >= self.window_s:
            self.rate = self._count / (now_s - self._start)
            self.full = refused > self._refused_at
            self._start, self._count, self._refused_at = now_s, 0, refused

    def capacity(self) -> float:
        """Commands a second the body can answer, as far as it is known."""
        return self.rate if self.full and self.rate > 0 else max(self.rate, PRIOR_RATE)


class Gate:
    """The receiver's side: admits keyed commands while the body keeps up."""

    def __init__(self, name: str, max_queued: int = MAX_QUEUED) -> None:
        self.name, self.max_queued = name, max_queued
        self.waiting = 0
        """Admitted commands not answered yet (queued, or folding up to their sender's view)."""
        self.pace = Pace()
        self.refused = 0
        self.shared = 0
        self._lookups: dict[str, asyncio.Future[Answer]] = {}
        self._busy: Busy | None = None
        self._busy_at = 0.0
        self._line = 0.0
        """Refused commands still ahead in the virtual line (it shortens at the body's pace)."""
        self._line_at = 0.0

    def refuse(self, command: Command, now_s: float) -> Busy | None:
        """A ``Busy`` for ``command`` if the body is too far behind to take it now; else None,
        and ``command`` counts as waiting until ``release``. A refusal joins the virtual line:
        its retry-after is when the body should have answered the waiting commands and those
        refused before it. Refusals within a tenth of a second and of a retry-after share one
        ``Busy``: a storm's refusals must cost next to nothing."""
        if self.waiting < self.max_queued or retry_key(command) is None:
            self.waiting += 1
            return None
        self.refused += 1
        rate = self.pace.capacity()
        self._line = max(0.0, self._line - rate * (now_s - self._line_at)) + 1
        self._line_at = now_s
        after = int(min(max(1000 * (self.waiting + self._line) / rate, RETRY_AFTER_MIN_MS), RETRY_AFTER_MAX_MS))
        busy = self._busy
        if busy is None or now_s - self._busy_at >= 0.1 or abs(after - busy.retry_after_ms) >= 100:
            busy = self._busy = Busy(f"{self.name} is busy ({self.waiting} commands waiting): retried "
                                     f"commands are not taken, retry after {after} ms", retry_after_ms=after)
            self._busy_at = now_s
        return busy

    def release(self, count: int, now_s: float) -> None:
        """``count`` admitted commands were answered."""
        self.waiting -= count
        self.pace.answered(count, now_s, self.refused)

    def waiting_lookup(self, command: Command) -> asyncio.Future[Answer] | None:
        """The answer of a lookup of the same bundle that waits already (None: none waits)."""
        if not isinstance(command, LookupBundle):
            return None
        found = self._lookups.get(command.bundle)
        if found is not None and not found.done():
            self.shared += 1
            return found
        return None

    def lookup_queued(self, command: Command, answer: asyncio.Future[Answer]) -> None:
        if isinstance(command, LookupBundle):
            bundle = command.bundle
            self._lookups[bundle] = answer
            answer.add_done_callback(lambda done: self._forget(bundle, done))

    def _forget(self, bundle: str, done: asyncio.Future[Answer]) -> None:
        if self._lookups.get(bundle) is done:
            del self._lookups[bundle]

    def status(self) -> dict[str, float]:
        return {"waiting": self.waiting, "refused_busy": self.refused, "shared_lookups": self.shared,
                "answered_per_s": round(self.pace.rate, 1)}
