"""The operator's drains in a simulated run: ``drain``, ``undrain`` and a planned restart of the
drained broker, and their check.

Invariants:
- drawn from their own stream (``Random(f"{seed}:drain")``), so the plans of seeds run before
  drains existed keep every other fault;
- about half the seeds drain one broker at a random step at 30 to 600 moves a minute; half of
  those restart it (a graceful shutdown some steps later, started again after that) before
  the undrain; every undrain and restart is kept in the quiet phase, so a run never ends with a
  broker drained or stopped by a drain;
- ``drain_violation`` is the audit's rule (``projections.drain``) over the run's whole log: a
  drained broker received no bundle (no assignment, no transfer to it) while drained; the
  hostile faults' forgeries, which the fold refuses, are no writer's and are left out.
"""

from __future__ import annotations

import contextlib
from random import Random

from actors.broker import BrokerBody
from actors.runtime.sim.host import Fault, SimHost
from actors.runtime.sim.hostile import HostileLog
from actors.settings import broker_body_name
from events.catalog import DrainBroker, UndrainBroker
from projections.drain import DrainFold, drain_history

KEPT = ("undrain", "drain_stop", "drain_start")
"""Drain faults kept in the quiet phase: the run ends with every broker back in service."""


def drain_plan(rng: Random, steps: int, brokers: list[str]) -> list[Fault]:
    if rng.random() >= 0.5 or len(brokers) < 2 or steps < 40:
        return []
    step = rng.randint(1, max(2, int(steps * 0.6)))
    broker = rng.choice(brokers)
    out = [Fault(step, "drain", broker, rng.randint(30, 600))]
    later = step + rng.randint(10, 120)
    if rng.random() < 0.5:
        stop = step + rng.randint(5, 60)
        out += [Fault(stop, "drain_stop", broker), Fault(stop + rng.randint(2, 20), "drain_start", broker)]
        later = stop + rng.randint(25, 60)
    return [*out, Fault(later, "undrain", broker)]


def fire_drain(host: SimHost, fault: Fault) -> bool:
    name = broker_body_name(fault.target)
    if fault.kind == "drain":
        host.submit(DrainBroker(command_id=host.command_id("admin"), epoch=host.epoch, broker=fault.target,
                                rate_per_minute=int(fault.value), by="sim"))
    elif fault.kind == "undrain":
        host.submit(UndrainBroker(command_id=host.command_id("admin"), epoch=host.epoch, broker=fault.target,
                                  by="sim"))
    elif fault.kind == "drain_stop":
        body = host.bodies.get(name)
        if not isinstance(body, BrokerBody) or body.stopped or body.draining_since is not None:
            return False
        host.shutdown_broker(fault.target)
    else:
        body = host.bodies.get(name)
        if not isinstance(body, BrokerBody) or not body.stopped:
            return False
        host.restart(name)
    return True


class DrainWatch:
    """Which brokers the log says are drained, folded as the log grows (the checker's view)."""

    def __init__(self, host: SimHost) -> None:
        self.host, self.fold, self.seen = host, DrainFold(), 0

    def drained(self) -> set[str]:
        records = self.host.records
        for record in records[self.seen:]:
            if record.envelope.type in ("BrokerDrainRequested", "BrokerUndrained"):
                with contextlib.suppress(Exception):  # a hostile record: the replay check names it
                    self.fold.fold(record.envelope.typed)
        self.seen = len(records)
        return set(self.fold.drains)


def drain_violation(host: SimHost) -> str | None:
    """The first bundle a drained broker received while drained; None: none. The hostile
    faults' records (forgeries the fold refuses) are no writer's decision: left out."""
    hostile = getattr(host, "hostile", None) or HostileLog()
    found = drain_history(r for r in host.records if r.offset not in hostile.offsets).violations()
    return found[0] if found else None
