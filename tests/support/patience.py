"""How long a test may wait on this machine now: a wall-clock bound scaled by the machine's load.

Invariants:
- ``slowdown()`` is the run queue per core (the one-minute load average over the cores this
  process may use), never below 1 and never above ``MAX_SLOWDOWN``: on a machine running other
  work, each process gets that much less of a core, so a wait for liveness (a broker
  registering, an actor restarting, a subprocess answering) takes that much longer;
- ``patient(s)`` is ``s`` seconds scaled so at the moment it is asked; a test uses it for every
  bound on how long something outside its own process may take, and the suite's hang guards
  (``pytest.mark.timeout``) are scaled the same way by ``tests/conftest.py``;
- a quiet machine waits exactly as long as the test says (factor 1), so a real hang still fails
  within the stated bound times ``MAX_SLOWDOWN`` at most.
"""

from __future__ import annotations

import os

MAX_SLOWDOWN = 6.0
"""The most a wait is stretched: beyond it a test fails as hung even on a crowded machine."""


def slowdown() -> float:
    """The machine's run queue per usable core now, clamped to [1, ``MAX_SLOWDOWN``]."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform: assume a quiet machine
        return 1.0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(MAX_SLOWDOWN, max(1.0, load / max(1, cores)))


def patient(seconds: float) -> float:
    """``seconds`` of a quiet machine, as long as they take on this one now."""
    return seconds * slowdown()
