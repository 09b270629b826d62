"""The operator's pauses in a simulated run: ``pause`` and ``resume`` faults, and their check.

Invariants:
- drawn from their own stream (``Random(f"{seed}:pause")``), so the plans of seeds run before
  pauses existed keep every other fault;
- a pause lasts 20 s to 2 min of cluster time; a resume may come while none holds (it must
  then record nothing);
- ``pause_violation`` is the audit's rule (``projections.control``) over the run's whole log:
  no shedding move started while a pause held, the throttle's caps never exceeded.
"""

from __future__ import annotations

from random import Random

from actors.leader_control import caps_of
from actors.runtime.sim.host import Fault, SimHost
from events.catalog import PauseBalancer, ResumeBalancer
from projections.control import control_history


def pause_plan(rng: Random, steps: int) -> list[Fault]:
    out: list[Fault] = []
    for step in range(1, steps):
        if rng.random() < 0.01:
            out.append(Fault(step, "pause", "", rng.randint(20_000, 120_000)))
        if rng.random() < 0.004:
            out.append(Fault(step, "resume", ""))
    return out


def fire_pause(host: SimHost, fault: Fault) -> bool:
    if fault.kind == "pause":
        host.submit(PauseBalancer(command_id=host.command_id("admin"), epoch=host.epoch,
                                  duration_ms=int(fault.value), reason="simulated incident", by="sim"))
    else:
        host.submit(ResumeBalancer(command_id=host.command_id("admin"), epoch=host.epoch, by="sim"))
    return True


def pause_violation(host: SimHost) -> str | None:
    """The first shedding move started while paused, or start over a cap; None: none."""
    found = control_history(host.records).violations(caps_of(host.config))
    return found[0] if found else None
