"""Run one seed of a scenario on a ``SimHost``, check every step, and explain a failure.

Invariants:
- ``simulate(seed, scenario, steps, keep)`` is deterministic: the same arguments give the same
  trail (``SimResult.digest``) and the same verdict, in any process;
- a step fires the faults planned for it, lets the clients look up, advances ``STEP_MS`` of
  virtual time and checks every invariant (``checks``); after the last step the faults stop,
  crashed bodies restart and the run settles for ``SETTLE_MS``, still checked every step; then
  every lookup must have been answered and a full replay must equal the live fold;
- a ``Reproduction`` is enough to replay the failure: the seed, the scenario, the planned faults
  that fired (``keep`` indices after ``minimize``), the trail's tail and the broken invariant.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from random import Random

from actors.conf import settings_from_mapping
from actors.namespace import NamespaceBody
from actors.runtime.sim.approvals import fire_verdict, review_config
from actors.runtime.sim.checks import Checker, Lookup, Violation
from actors.runtime.sim.drains import fire_drain
from actors.runtime.sim.host import Fault, SimHost
from actors.runtime.sim.hostile import fire_corrupt, fire_forge, fire_impostor, fire_zombie
from actors.runtime.sim.pauses import fire_pause
from actors.runtime.sim.scenarios import SCENARIOS, Scenario
from actors.settings import broker_body_name
from actors.snapshots import SnapshotPolicy
from actors.workload import ClientsBody, Workload
from balancer.bundles import namespace_of
from events.catalog import CreateNamespace, LookupBundle, SplitBundle, UnloadBundle

STEP_MS = 1_000
SIM_SNAPSHOTS = SnapshotPolicy(min_records=40, per_state=0.5)
SETTLE_MS = 150_000
TRAIL_TAIL = 60


@dataclass(frozen=True, slots=True)
class SimResult:
    seed: int
    scenario: str
    steps: int
    violation: Violation | None
    records: int
    faults: int
    """Planned faults that fired."""
    delivery_faults: int
    digest: str
    """SHA-256 of the whole trail: equal for equal runs."""
    plan: tuple[Fault, ...] = ()
    trail_tail: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.violation is None


@dataclass(slots=True)
class _Run:
    """The mutable state of one run (the host, its checker, the plan's bookkeeping)."""

    scenario: Scenario
    host: SimHost
    checker: Checker
    workload: Workload
    rng: Random
    retired: set[str] = field(default_factory=set)
    fired: int = 0


def build(scenario: Scenario, seed: int) -> tuple[SimHost, Workload]:
    """The scenario's cluster on a SimHost, namespaces created, before any fault."""
    loaded = settings_from_mapping(dict(scenario.config))  # the scenario's keys, as broker.conf names them
    config, settings = loaded.balancer, loaded.actors
    workload = Workload.zipf(Random(f"{seed}:workload"), list(scenario.namespaces),
                             topics_per_namespace=scenario.topics_per_namespace,
                             total_msg_rate=scenario.rate)
    # Small snapshots often: every restart of a run restores one (the sim checks the restored
    # bodies like the rest; a fold from 0 would hide a snapshot that is not a fold).
    host = SimHost(config, seed=seed, settings=settings, faults=scenario.delivery, command_latency_ms=5,
                   snapshot_policy=SIM_SNAPSHOTS)
    host.add(lambda: NamespaceBody(config))
    for name in scenario.leader_names():
        host.add(lambda n=name: scenario.leader_cls(config, rng=host.rng_for(n), settings=settings,  # type: ignore[misc]
                                           leader_id=n, name=n))
    for broker in scenario.broker_ids():
        add_broker(host, broker, workload, scenario)
    host.add(lambda: ClientsBody(config, workload, settings))
    host.run_until(lambda: host.leader() is not None and len(host.client.brokers) >= scenario.brokers, 60_000)
    for namespace in scenario.namespaces:
        host.call(CreateNamespace(command_id=host.command_id("setup"), epoch=host.epoch,
                                  namespace=namespace, bundles=scenario.bundles))
    return host, workload


def add_broker(host: SimHost, broker: str, workload: Workload, scenario: Scenario) -> None:
    host.add(lambda: scenario.broker_cls(broker, host.config, workload, settings=host.settings))


def simulate(seed: int, scenario: str | Scenario, steps: int = 500, keep: frozenset[int] | None = None) -> SimResult:
    """Run one seed; ``keep`` limits the plan to those fault indices (``minimize``)."""
    return simulate_on_host(seed, scenario, steps, keep)[0]


def simulate_on_host(seed: int, scenario: str | Scenario, steps: int = 500,
                     keep: frozenset[int] | None = None) -> tuple[SimResult, SimHost]:
    """``simulate``, and the host it ran on (its log, bodies and snapshots, for inspection)."""
    chosen = SCENARIOS[scenario] if isinstance(scenario, str) else scenario
    chosen = dataclasses.replace(chosen, config=review_config(seed, chosen.config))  # some seeds review
    plan = chosen.plan(seed, steps)
    if keep is not None:
        plan = [f for i, f in enumerate(plan) if i in keep]
    host, workload = build(chosen, seed)
    run = _Run(chosen, host, Checker(host, full_every=chosen.full_check_every), workload, Random(f"{seed}:driver"))
    run.checker.disturbed()
    host.faulty = True
    by_step: dict[int, list[Fault]] = {}
    for fault in plan:
        by_step.setdefault(fault.step, []).append(fault)
    violation = None
    for step in range(steps):
        for fault in by_step.get(step, ()):
            _fire(run, fault)
        violation = _step(run, step)
        if violation is not None:
            break
    if violation is None:
        violation = _settle(run, steps)
    return _result(run, seed, steps, violation, plan), host


def _step(run: _Run, step: int) -> Violation | None:
    _retry_lookups(run)
    run.host.advance(STEP_MS)
    if run.host.log_down_until > run.host.now_ms - STEP_MS:
        run.checker.disturbed()  # the outage ended within this step: calm starts now
    return run.checker.check(step)


def _settle(run: _Run, steps: int) -> Violation | None:
    host = run.host
    host.faulty, host.faults = False, host.faults.quiet()
    host.note("settle: faults off, crashed bodies restart")
    for name in sorted(host.crashed - run.retired):
        host.restart(name)
    run.checker.disturbed()
    for step in range(steps, steps + SETTLE_MS // STEP_MS):
        violation = _step(run, step)
        if violation is not None:
            return violation
    if run.checker.lookups:
        pending = run.checker.lookups[0]
        return Violation("lookup", steps, host.now_ms,
                         f"lookup of {pending.topic} (since t={pending.issued_ms}) never answered")
    return run.checker.final(steps + SETTLE_MS // STEP_MS)


def _retry_lookups(run: _Run) -> None:
    host = run.host
    for pending in run.checker.lookups:
        if host.now_ms < pending.retry_ms:
            continue
        pending.retry_ms = host.now_ms + host.settings.lookup_retry_ms
        bundle = host.view.bundle_of_topic(pending.topic)
        host.submit(LookupBundle(command_id=host.command_id("lookup"), epoch=host.epoch, bundle=bundle))


def _fire(run: _Run, fault: Fault) -> None:
    host = run.host
    handler = _FIRE.get(fault.kind)
    if handler is None:
        raise ValueError(f"unknown fault kind {fault.kind!r}")
    if handler(run, fault):
        run.fired += 1
        host.note(f"fault {fault}")


def _crash(run: _Run, fault: Fault) -> bool:
    if fault.target not in run.host.bodies or fault.target in run.retired:
        return False
    run.host.crash(fault.target)
    if fault.target.startswith(("ns:", "leader")):
        run.checker.disturbed()
    return True


def _restart(run: _Run, fault: Fault) -> bool:
    if fault.target not in run.host.crashed or fault.target in run.retired:
        return False
    run.host.restart(fault.target)
    run.checker.disturbed()
    return True


def _log_down(run: _Run, fault: Fault) -> bool:
    run.host.log_down(int(fault.value))
    run.checker.disturbed()
    return True


def _skew(run: _Run, fault: Fault) -> bool:
    run.host.skew_ms[fault.target] = int(fault.value)
    return True


def _bundles(run: _Run) -> list[str]:
    return [row.bundle for row in run.host.view.bundles()]


def _topic(run: _Run, pick: int) -> str:
    topics = run.workload.topics()
    return topics[pick % len(topics)].name


def _unload(run: _Run, fault: Fault) -> bool:
    host, bundles = run.host, _bundles(run)
    bundle = bundles[int(fault.value) % len(bundles)]
    brokers = sorted(host.client.brokers)
    dst = brokers[(int(fault.value) >> 8) % len(brokers)] if brokers and fault.value % 2 else None
    host.submit(UnloadBundle(command_id=host.command_id("admin"), epoch=host.epoch, bundle=bundle,
                             dst=dst, reason="admin"))
    return True


def _split(run: _Run, fault: Fault) -> bool:
    host, bundles = run.host, _bundles(run)
    pick, algorithm, unload = fault.value
    bundle = bundles[int(pick) % len(bundles)]
    host.submit(SplitBundle(command_id=host.command_id("admin"), epoch=host.epoch,
                            namespace=namespace_of(bundle), bundle=bundle,
                            algorithm=str(algorithm), unload=bool(unload)))
    return True


def _lookup(run: _Run, fault: Fault) -> bool:
    topic = _topic(run, int(fault.value))
    checker = run.checker
    if run.host.view.lookup(topic) is not None or any(q.topic == topic for q in checker.lookups):
        return False
    checker.lookups.append(Lookup(topic, run.host.now_ms))
    return True


def _spike(run: _Run, fault: Fault) -> bool:
    pick, factor = fault.value
    run.workload.multipliers[_topic(run, int(pick))] = float(factor)
    return True


def _unspike(run: _Run, fault: Fault) -> bool:
    run.workload.multipliers.pop(_topic(run, int(fault.value)), None)
    return True


def _add_broker(run: _Run, fault: Fault) -> bool:
    if broker_body_name(fault.target) in run.host.bodies:
        return False
    add_broker(run.host, fault.target, run.workload, run.scenario)
    return True


def _shutdown(run: _Run, fault: Fault) -> bool:
    name = broker_body_name(fault.target)
    if name not in run.host.bodies:
        return False
    run.retired.add(name)
    run.host.shutdown_broker(fault.target)
    return True


def _retire(run: _Run, fault: Fault) -> bool:
    name = broker_body_name(fault.target)
    if name not in run.host.bodies:
        return False
    run.host.crash(name)
    run.retired.add(name)
    return True


def _hostile(fire: Callable[[SimHost, Fault], bool]) -> Callable[[_Run, Fault], bool]:
    return lambda run, fault: fire(run.host, fault)


_FIRE = {"corrupt": _hostile(fire_corrupt), "forge": _hostile(fire_forge), "zombie": _hostile(fire_zombie),
         "impostor": _hostile(fire_impostor),
         "crash": _crash, "restart": _restart, "log_down": _log_down, "skew": _skew,
         "unload": _unload, "split": _split, "lookup": _lookup, "spike": _spike,
         "unspike": _unspike, "add_broker": _add_broker, "shutdown": _shutdown, "retire": _retire,
         "pause": _hostile(fire_pause), "resume": _hostile(fire_pause),
         "drain": _hostile(fire_drain), "undrain": _hostile(fire_drain), "drain_stop": _hostile(fire_drain),
         "drain_start": _hostile(fire_drain),
         "approve": _hostile(fire_verdict), "reject": _hostile(fire_verdict), "cancel": _hostile(fire_verdict)}


def _result(run: _Run, seed: int, steps: int, violation: Violation | None, plan: list[Fault]) -> SimResult:
    trail = run.host.trail
    for hook in _TRAIL_HOOK:
        hook(trail)
    digest = hashlib.sha256("\n".join(trail).encode()).hexdigest()
    failing = violation is not None
    fired_plan = tuple(f for f in plan if f.step <= violation.step) if failing and violation else ()
    delivery = sum(1 for line in trail if " drop " in line or " delay " in line or " duplicate " in line)
    return SimResult(seed, run.scenario.name, steps, violation, len(run.host.records), run.fired, delivery,
                     digest, plan=fired_plan if failing else tuple(plan),
                     trail_tail=tuple(trail[-TRAIL_TAIL:]) if failing else ())


def trail_of(seed: int, scenario: str, steps: int = 500, keep: frozenset[int] | None = None) -> list[str]:
    """The whole trail of a run (what ``lbctl sim --seed N --trail`` prints)."""
    captured: list[list[str]] = []
    _TRAIL_HOOK.append(captured.append)
    try:
        simulate(seed, scenario, steps, keep)
    finally:
        _TRAIL_HOOK.pop()
    return captured[0] if captured else []


_TRAIL_HOOK: list[Callable[[list[str]], None]] = []


def minimize(seed: int, scenario: str, steps: int, failing: SimResult) -> tuple[frozenset[int], SimResult]:
    """Drop planned faults one at a time (last first) while the same invariant still breaks."""
    assert failing.violation is not None
    plan = SCENARIOS[scenario].plan(seed, steps)
    keep = {i for i, f in enumerate(plan) if f.step <= failing.violation.step}
    best = failing
    for index in sorted(keep, reverse=True):
        trial = frozenset(keep - {index})
        result = simulate(seed, scenario, steps, trial)
        if result.violation is not None and result.violation.invariant == failing.violation.invariant:
            keep, best = set(trial), result
    return frozenset(keep), best
