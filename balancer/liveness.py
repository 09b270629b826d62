"""Broker liveness measured in time the log was available (behaviour §6.3).

A broker proves it lives by appending a load report; the leader expires one it has not heard
from for a session timeout. While the log (Pulsar: the metadata store) refuses appends, no
broker can prove anything, so that time must not count against it. Pulsar's leader never
cleans up while its own metadata session is lost; ZooKeeper renews every session when a
quorum comes back. Here the leader keeps the outages it observed itself and measures each
broker's silence in the remaining, healthy time: an outage extends every deadline by its
length, and while the log is down no deadline passes.

Invariants:
- pure: times are the ``now_ms`` arguments (the observer's own clock), never read here;
- ``observe`` may be called any number of times with the same state: only changes count, and
  an outage spans from the last healthy observation before it (it may have begun right after
  that one) to the first healthy one after it, so no outage is undercounted and no broker's
  silence overcounted: a leader that looks once a tick never expires a broker early;
- ``available_ms(since, now)`` is ``now - since`` minus the observed outage time within
  [since, now]; it never exceeds ``now - since`` and is 0 while the log is down;
- only outages that can still overlap a broker's silence are kept (``horizon_ms``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


def available_within(outages: Iterable[tuple[int, int]], since_ms: int, now_ms: int) -> int:
    """How long of [since_ms, now_ms] lies outside every (start, end) outage window."""
    lost = sum(max(0, min(end, now_ms) - max(start, since_ms)) for start, end in outages)
    return max(0, now_ms - since_ms - lost)


@dataclass(slots=True)
class LogOutages:
    """The windows during which the observer found the log unavailable."""

    horizon_ms: int = 600_000
    """Outages ended longer ago than this are forgotten (far beyond any session timeout)."""
    down_since: int | None = None
    windows: list[tuple[int, int]] = field(default_factory=list)
    last_healthy: int | None = None
    """The time of the newest healthy observation (an outage may have begun right after it)."""

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def observe(self, healthy: bool, now_ms: int) -> None:
        """One observation: an append or read of the log succeeded (``healthy``) or failed."""
        if not healthy:
            if self.down_since is None:
                self.down_since = now_ms if self.last_healthy is None else self.last_healthy
            return
        if self.down_since is not None:
            if now_ms > self.down_since:
                self.windows.append((self.down_since, now_ms))
            self.down_since = None
        self.last_healthy = now_ms
        self.windows = [w for w in self.windows if w[1] >= now_ms - self.horizon_ms]

    def available_ms(self, since_ms: int, now_ms: int) -> int:
        """How long of [since_ms, now_ms] the log was available (0 while it is down)."""
        if self.down_since is not None or now_ms <= since_ms:
            return 0
        return available_within(self.windows, since_ms, now_ms)
