"""The simulator's scenarios: a cluster shape, its configuration and a seeded fault plan.

Invariants:
- a plan is a pure function of (scenario, seed, steps): ``plan`` draws from ``Random(f"{seed}:plan")``
  only, so the same seed gives the same faults, and ``lbctl sim --seed N`` replays it;
- faults name their target at plan time where it is known (a body name) and otherwise carry a
  number that picks the target when the fault fires (a bundle of the layout of that moment);
- every scenario keeps at least two brokers that are never retired, so an orphan can always be
  placed (the invariants need somewhere to go);
- the last ``QUIET`` share of the steps has no planned fault: the run ends in calm, where
  "eventually" must have happened.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from random import Random
from typing import Any

from actors.broker import BrokerBody
from actors.leader import LeaderBody
from actors.runtime.sim.approvals import approval_plan
from actors.runtime.sim.drains import KEPT as DRAIN_KEPT
from actors.runtime.sim.drains import drain_plan
from actors.runtime.sim.host import DeliveryFaults, Fault
from actors.runtime.sim.hostile import hostile_plan, impostor_plan
from actors.runtime.sim.pauses import pause_plan
from actors.settings import LEADER, broker_body_name

QUIET = 0.15
NOISY = DeliveryFaults(drop=0.15, duplicate=0.1, delay=0.1, max_delay_ms=8_000, jitter_ms=40,
                       lag=0.3, max_lag_ms=5_000)

Planner = Callable[["Scenario", Random, int], list[Fault]]


@dataclass(frozen=True, slots=True)
class Scenario:
    """A cluster and how it is disturbed."""

    name: str
    planner: Planner
    brokers: int = 3
    namespaces: tuple[str, ...] = ("public/a", "public/b")
    bundles: int = 8
    topics_per_namespace: int = 40
    rate: float = 20_000.0
    config: Mapping[str, Any] = field(default_factory=dict)
    delivery: DeliveryFaults = NOISY
    crash_rate: float = 0.05
    log_outage_rate: float = 0.03
    skew_ms: int = 2_000
    leaders: int = 1
    broker_cls: type[BrokerBody] = BrokerBody
    leader_cls: type[LeaderBody] = LeaderBody
    """The bodies hosted (tests swap in deliberately broken ones)."""
    rotation: bool = True
    """Taken in turn by seeds run without a scenario (``large`` is asked for by name)."""
    full_check_every: int = 1
    """Every how many steps the checker compares each live view whole with the fold of the log
    (``checks.Checker.full_every``)."""

    def broker_ids(self) -> list[str]:
        return [f"broker-{i}" for i in range(1, self.brokers + 1)]

    def leader_names(self) -> list[str]:
        return [LEADER] + [f"{LEADER}-{i}" for i in range(2, self.leaders + 1)]

    def bodies(self) -> list[str]:
        return (["ns:0", "clients", *self.leader_names()]
                + [broker_body_name(b) for b in self.broker_ids()])

    def plan(self, seed: int, steps: int) -> list[Fault]:
        rng = Random(f"{seed}:plan")
        faults = self.planner(self, rng, steps) + background(self, rng, steps)
        # Their own stream, the same for every scenario: the plans of seeds run before these faults existed are unchanged.
        faults += hostile_plan(Random(f"{seed}:hostile"), steps)
        faults += pause_plan(Random(f"{seed}:pause"), steps)
        faults += impostor_plan(Random(f"{seed}:impostor"), steps)
        faults += drain_plan(Random(f"{seed}:drain"), steps, self.broker_ids())
        faults += approval_plan(seed, steps)
        loud = int(steps * (1 - QUIET))
        kept = [f for f in faults if f.step < loud or f.kind == "restart" or f.kind in DRAIN_KEPT]
        return sorted(kept, key=lambda f: (f.step, f.kind, f.target))


def _crash(rng: Random, step: int, name: str, low_ms: int, high_ms: int, step_ms: int) -> list[Fault]:
    down = rng.randint(low_ms, high_ms)
    return [Fault(step, "crash", name), Fault(step + max(1, down // step_ms), "restart", name)]


def background(s: Scenario, rng: Random, steps: int, step_ms: int = 1_000) -> list[Fault]:
    """Random crashes, log outages, clock skews, admin unloads and lookups, in every scenario."""
    out = [Fault(0, "skew", broker_body_name(b), rng.randint(-s.skew_ms, s.skew_ms)) for b in s.broker_ids()]
    bodies = s.bodies()
    for step in range(1, steps):
        if rng.random() < s.crash_rate:
            out += _crash(rng, step, rng.choice(bodies), 500, 45_000, step_ms)
        if rng.random() < s.log_outage_rate:
            out.append(Fault(step, "log_down", "", rng.randint(500, 5_000)))
        if rng.random() < 0.01:
            out.append(Fault(step, "skew", broker_body_name(rng.choice(s.broker_ids())),
                             rng.randint(-s.skew_ms, s.skew_ms)))
        if rng.random() < 0.03:
            out.append(Fault(step, "unload", "", rng.randrange(1 << 30)))
        if rng.random() < 0.05:
            out.append(Fault(step, "lookup", "", rng.randrange(1 << 30)))
    return out


def _steady(s: Scenario, rng: Random, steps: int) -> list[Fault]:
    return []


def _hot_bundle(s: Scenario, rng: Random, steps: int) -> list[Fault]:
    out: list[Fault] = []
    for start in range(20, steps, 150):
        topic = rng.randrange(1 << 30)
        out.append(Fault(start, "spike", "", (topic, rng.choice((20.0, 50.0, 100.0)))))
        out.append(Fault(start + rng.randint(40, 120), "unspike", "", topic))
    return out


def _between(rng: Random, steps: int, low: float, high: float) -> int:
    """A step in [low, high] of the run (fractions), whatever its length."""
    return rng.randint(int(steps * low), max(int(steps * low), int(steps * high)))


def _scale_out(s: Scenario, rng: Random, steps: int) -> list[Fault]:
    return [Fault(_between(rng, steps, 0.06, 0.25), "add_broker", "broker-3"),
            Fault(_between(rng, steps, 0.25, 0.5), "add_broker", "broker-4"),
            Fault(_between(rng, steps, 0.5, 0.7), "add_broker", "broker-5")]


def _scale_in(s: Scenario, rng: Random, steps: int) -> list[Fault]:
    return [Fault(_between(rng, steps, 0.06, 0.25), "shutdown", "broker-5"),
            Fault(_between(rng, steps, 0.25, 0.5), "shutdown", "broker-4"),
            Fault(_between(rng, steps, 0.5, 0.7), "retire", "broker-3")]


def _rolling_restart(s: Scenario, rng: Random, steps: int) -> list[Fault]:
    out: list[Fault] = []
    order = [broker_body_name(b) for b in s.broker_ids()] + ["ns:0", LEADER]
    step = 20
    while step < steps:
        for name in order:
            out += _crash(rng, step, name, 1_000, 40_000, 1_000)
            step += rng.randint(30, 60)
    return out


def _leader_churn(s: Scenario, rng: Random, steps: int) -> list[Fault]:
    out: list[Fault] = []
    step = rng.randint(5, 20)
    while step < steps:
        out += _crash(rng, step, rng.choice(s.leader_names()), 200, 8_000, 1_000)
        step += rng.randint(8, 40)
    return out


def _split_storm(s: Scenario, rng: Random, steps: int) -> list[Fault]:
    algorithms = ("range_equally_divide", "topic_count_equally_divide", "flow_or_qps_equally_divide")
    return [Fault(step, "split", "", (rng.randrange(1 << 30), rng.choice(algorithms), rng.random() < 0.5))
            for step in range(5, steps) if rng.random() < 0.06]


_SPLITTY = {"loadBalancerNamespaceBundleMaxTopics": 6, "loadBalancerNamespaceMaximumBundles": 32}

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("steady", _steady),
    Scenario("hot_bundle", _hot_bundle, rate=40_000.0),
    Scenario("scale_out", _scale_out, brokers=2),
    Scenario("scale_in", _scale_in, brokers=5),
    Scenario("rolling_restart", _rolling_restart, crash_rate=0.01),
    Scenario("leader_churn", _leader_churn, leaders=2),
    Scenario("split_storm", _split_storm, bundles=2, config=_SPLITTY),
    # Pulsar-sized: 50 brokers, 8,192 bundles, the background faults of every
    # scenario (crashes of any body, log outages, skews, unloads, lookups) and a rolling restart.
    Scenario("large", _rolling_restart, brokers=50, namespaces=("public/large",), bundles=8192,
             topics_per_namespace=3 * 8192, rate=200_000.0, crash_rate=0.01, rotation=False,
             config={"loadBalancerNamespaceMaximumBundles": 8192}, full_check_every=10),
)}


def scenario_for(seed: int) -> Scenario:
    """The scenario a seed runs when none is named: they take turns."""
    names = [name for name, scenario in SCENARIOS.items() if scenario.rotation]
    return SCENARIOS[names[seed % len(names)]]
