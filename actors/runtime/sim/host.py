"""SimHost: the actor bodies under a seeded fault scheduler (ARCHITECTURE §4).

The same bodies as ``InProcessHost`` on the same virtual clock and ``MemoryEventLog``, plus faults:
every command delivery may be dropped, delayed or duplicated, and concurrent deliveries are
reordered by a seeded jitter; the log may refuse appends for a window; a body may crash and
restart (memory lost, rebuilt from the log); brokers' clocks may be skewed; topics may spike.

Invariants:
- deterministic for (seed, fault plan): every random choice comes from ``Random`` objects seeded
  from the seed and a purpose ("net", ...), never the global RNG or a clock, and the host's
  queue breaks ties by insertion; so a seed replays step for step, trail line for trail line;
- faults never bypass the log: a crashed body's memory is gone (``InProcessHost.crash``), a
  refused append changes nothing (bodies fold only what the log holds and retry on timers);
- the ``trail`` records, in order, every log record (as one short line), every planned fault as
  it fires and every delivery fault, so a failing run can be read back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from random import Random
from typing import Any

from actors.effects import Effects
from actors.runtime.inproc import InProcessHost
from actors.runtime.tickets import Ticket
from actors.settings import ActorSettings
from balancer.config import LoadBalancerConfig
from balancer.errors import LoadBalancerError, Unavailable
from balancer.liveness import available_within
from events.catalog import Event
from events.log.port import Record

_BRIEF_FIELDS = ("bundle", "parent", "dst", "src", "owner", "broker_id", "epoch", "reason", "children")


@dataclass(frozen=True, slots=True)
class DeliveryFaults:
    """Probabilities and bounds of what happens to each command delivery."""

    drop: float = 0.0
    duplicate: float = 0.0
    delay: float = 0.0
    max_delay_ms: int = 3_000
    jitter_ms: int = 40
    """Every delivery takes latency + uniform(0, jitter): concurrent deliveries are reordered."""
    lag: float = 0.0
    """Chance that a body folds new records late (by up to ``max_lag_ms``): views diverge."""
    max_lag_ms: int = 2_000

    def quiet(self) -> DeliveryFaults:
        """No faults, only reordering (the settle phase at the end of a run)."""
        return replace(self, drop=0.0, duplicate=0.0, delay=0.0, lag=0.0)


@dataclass(frozen=True, slots=True)
class Fault:
    """One planned fault: at ``step``, do ``kind`` to ``target`` (with ``value``)."""

    step: int
    kind: str
    target: str = ""
    value: Any = None

    def __str__(self) -> str:
        shown = f" {self.value}" if self.value is not None else ""
        return f"step {self.step}: {self.kind} {self.target}{shown}".rstrip()


def brief(record: Record) -> str:
    """One trail line for a log record: offset, time, key, type and the fields that matter."""
    envelope = record.envelope
    payload: Mapping[str, Any] = envelope.payload
    parts = [f"{k}={payload[k]}" for k in _BRIEF_FIELDS if payload.get(k) not in (None, "", [])]
    return (f"#{record.offset} t={envelope.ts_ms} {envelope.key} s{envelope.seq} e{envelope.epoch} "
            f"{envelope.type} {' '.join(parts)}").rstrip()


class SimHost(InProcessHost):
    """``InProcessHost`` with seeded delivery faults, log outages and a trail."""

    def __init__(self, config: LoadBalancerConfig | None = None, *, seed: int = 0,
                 settings: ActorSettings | None = None, faults: DeliveryFaults | None = None,
                 **options: Any) -> None:
        self.trail: list[str] = []
        self.faults = faults or DeliveryFaults()
        self.faulty = False
        """Delivery faults apply only once set (setup runs without them)."""
        self.log_down_until = -1
        self.outages: list[tuple[int, int]] = []
        """(from, until) of every log outage, merged."""
        self.lost: dict[str, int] = {}
        """Bundle -> when a command about it was last dropped: the liveness checks count from
        there, since no retry schedule survives every run of losses a random network deals."""
        self._log_was_available = True
        self._net = Random(f"{seed}:net")
        super().__init__(config, seed=seed, settings=settings, **options)

    # -- faults ------------------------------------------------------------------------------
    def note(self, line: str) -> None:
        self.trail.append(f"t={self.now_ms} {line}")

    def log_available(self) -> bool:
        return self.now_ms >= self.log_down_until

    def log_down(self, ms: int) -> None:
        """The log refuses appends for the next ``ms`` (an outage under way is extended)."""
        until = self.now_ms + ms
        if self.outages and self.outages[-1][1] >= self.now_ms:
            self.outages[-1] = (self.outages[-1][0], max(self.outages[-1][1], until))
        else:
            self.outages.append((self.now_ms, until))
        self.log_down_until = max(self.log_down_until, until)

    def log_up_ms(self, since_ms: int, now_ms: int) -> int:
        """How long of [since_ms, now_ms] the log was available (the truth, not an observation)."""
        return available_within(self.outages, since_ms, now_ms)

    def schedule_command(self, ticket: Ticket) -> None:
        faults, net = self.faults, self._net
        due = self.now_ms + self.command_latency_ms + net.randint(0, max(0, faults.jitter_ms))
        if not self.faulty:
            self.schedule(due, lambda: self.deliver(ticket))
            return
        roll = net.random()
        what = f"{ticket.command.TYPE} {ticket.command.command_id} -> {ticket.target}"
        if roll < faults.drop:
            self.note(f"drop {what}")
            bundle = getattr(ticket.command, "bundle", None)
            if isinstance(bundle, str):
                self.lost[bundle] = self.now_ms
            return
        if roll < faults.drop + faults.delay:
            due += net.randint(1, max(1, faults.max_delay_ms))
            self.note(f"delay {what} until t={due}")
        elif roll < faults.drop + faults.delay + faults.duplicate:
            again = due + net.randint(1, max(1, faults.max_delay_ms))
            self.note(f"duplicate {what} at t={due} and t={again}")
            self.schedule(again, lambda: self.deliver(ticket))
        self.schedule(due, lambda: self.deliver(ticket))

    async def append(self, writer: str, key: str, events: Sequence[Event], expected_seq: int | None,
                     effects: Effects) -> LoadBalancerError | None:
        if self.log_available():
            return await super().append(writer, key, events, expected_seq, effects)
        failure = Unavailable(f"the log is unavailable until t={self.log_down_until}")
        self.failed_appends.append((writer, key, failure))
        self.note(f"append refused {writer} {key} ({len(effects.append)} events)")
        return failure

    def _tick(self) -> None:
        """Every body's subscription polls the log each tick: during an outage it fails too."""
        healthy = self.log_available()
        if healthy != self._log_was_available:
            self._log_was_available = healthy
            for name in sorted(self.bodies):
                self.log_health(name, healthy)
        super()._tick()

    def _pump(self) -> None:
        """Feed every body the new records, some of them late (a lagging subscription)."""
        if not self.faulty or self.faults.lag <= 0:
            super()._pump()
            return
        self._pump_due = False
        for name in sorted(self.bodies):
            if self._net.random() < self.faults.lag:
                late = self.now_ms + self._net.randint(1, max(1, self.faults.max_lag_ms))
                self.schedule(late, lambda n=name: self._catch_up(n))  # type: ignore[misc]
            else:
                self._catch_up(name)

    def _ingest(self) -> None:
        start = len(self.records)
        super()._ingest()
        self.trail.extend(brief(r) for r in self.records[start:])
