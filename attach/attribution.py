"""Which of a mirrored cluster's moves its own shedder made, and which an operator did.

Pulsar's ownership channel shows an operator's unload and its shedder's alike. Its shedder
remembers only its own (the grace period of a bundle, the cool-down of a broker), so an advisor
that remembered every move would sit in a cool-down Pulsar is not in. The leader's unload
counters (``ShedderUnloadsCounted``: how many bundles the shedder unloaded between two reads)
tell them apart: in a read's window, that many moves were the shedder's, the others not.

Invariants:
- pure: records' times in, claimed moves out; no clock;
- until a count was ever read (counters not readable: no metrics access, the modular manager)
  every move is the shedder's, as before counts existed;
- a move is claimed at most once, by the first count whose window (widened by ``SLACK_MS`` on
  both sides: the channel stamps a move when Pulsar wrote it, the counter moves when the run
  ends) holds it; moves and counts may come in either order; what no count claims within
  ``SLACK_MS`` of a later read was an operator's, and is dropped.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Generic, TypeVar

SLACK_MS = 5_000
"""How far outside a read's window a move still belongs to it."""

M = TypeVar("M")


@dataclass
class _Credit:
    since_ms: int
    until_ms: int
    left: int


@dataclass
class Attribution(Generic[M]):
    """Moves in, the shedder's moves out (each with its time)."""

    counting: bool = False
    """A count was read: from now on only counted moves are the shedder's."""
    unclaimed: deque[tuple[int, M]] = field(default_factory=deque)
    credits: deque[_Credit] = field(default_factory=deque)

    def moved(self, ts_ms: int, move: M) -> list[tuple[int, M]]:
        """A move seen at ``ts_ms``: [it] when it is the shedder's (known now), else []."""
        if not self.counting:
            return [(ts_ms, move)]
        for credit in self.credits:
            if credit.left and credit.since_ms - SLACK_MS <= ts_ms <= credit.until_ms + SLACK_MS:
                credit.left -= 1
                return [(ts_ms, move)]
        self.unclaimed.append((ts_ms, move))
        return []

    def counted(self, since_ms: int, until_ms: int, unloaded: int) -> list[tuple[int, M]]:
        """A read of the counters: ``unloaded`` bundles in (since, until]; the moves it claims."""
        self.counting = True
        while self.unclaimed and self.unclaimed[0][0] < since_ms - SLACK_MS:
            self.unclaimed.popleft()  # older than this window: an operator's move
        while self.credits and self.credits[0].until_ms < since_ms - SLACK_MS:
            self.credits.popleft()
        claimed: list[tuple[int, M]] = []
        while unloaded and self.unclaimed and self.unclaimed[0][0] <= until_ms + SLACK_MS:
            claimed.append(self.unclaimed.popleft())
            unloaded -= 1
        if unloaded:
            self.credits.append(_Credit(since_ms, until_ms, unloaded))
        return claimed
