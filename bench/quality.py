"""Benchmark B: balancing quality, every scenario x every strategy, through the simulator.

Each scenario of ``bench.scenarios`` is run once per strategy (the five Pulsar strategies, then
any project strategy registered in ``balancer.shedding.base.STRATEGY_MODULES``) with Pulsar's
defaults, except: TransferShedder runs under ExtensibleLoadManagerImpl (it exists only there),
and AvgShedder with PIP-364's recommended pairing (AvgShedder placement, maxUnloadPercentage
0.5). Placement is the configured load manager's (``pulsar_placer``).

Metrics (docs/spec/bench.md, section B), per row:

- ``max/mean``, ``std``: median over the settled window (the scenario's last hour; day 2 for
  diurnal) of the per-cycle max/mean and population std of broker usage (0..1);
  ``min/mean`` (extra column): the same for the least loaded broker (shows idle brokers).
- max/mean floor, per cycle: max(1, largest bundle load / mean broker load); its window median
  is printed beside the figure.
- ``moved``: load that changed owner from the disturbance on, each move as a fraction of the
  cluster's load at its cycle; crash re-placement counts (the crashed brokers' load in the cycle
  before). "x min" is it over "the minimum any strategy must move to reach the same balance"
  (docs/spec/bench.md): where nothing must move whatever the balance (steady-zipf, diurnal,
  scale-out, idle-broker: ``Scenario.by_balance``), the start layout's ``scenarios.shortfall``
  at the row's own settled max/mean and min/mean - what brokers above that max must give up
  (each may keep its largest bundle) or those below that min must receive, whichever is more;
  so a strategy that stops short of balance is measured against the little its balance needs,
  and no row can score below 1. (The diurnal sine scales every rate alike, so the ratios are
  the start's: the day itself needs nothing.) Elsewhere the minimum is the scenario's floor,
  what must move whatever the balance: scale-in (m-m')/m (what the crashed brokers held);
  rolling-restart 1 + 2/20 (the first leaver's 1/20; each later leaver leaves while the broker
  before it is back but still empty, so its share is 1/19 - filling the rejoined broker first
  would cost more than it saves - 19 x 1/19; and 1/20 shed onto the last rejoin;
  ``scenarios._restart_floor``); hot-bundle the onset's excess plus refilling the hot bundle's
  owner when it cools (its settled window comes after the hot hour, so its own balance says
  nothing about the hour). "x floor" (extra column) is moved over the floor for a full balance
  in every scenario: scale-out (m'-m)/m', idle-broker 1/11, steady-zipf and diurnal the random
  start's excess, sum over brokers of max(0, load - max(mean, its largest bundle)); below 1
  there, the strategy did not reach the balance the floor pays for.
- ``cycles``: from the disturbance (rolling-restart: the last rejoin) to the first cycle from
  which max/mean <= 1.25 x its floor holds for 10 cycles (or to the end); "never" otherwise.
  (1.25 x floor equals README's 1.25 whenever the floor is 1.)
- ``flaps``: ``SimResult.flaps(grace)``: moves of a bundle within the grace period (30 cycles) of
  its previous move, plus moves sending it back to the broker it last left; over the whole run.
- ``unloads/h``: moves in the settled window, per 60 cycles.

Invariants:
- deterministic: equal (size, seed) give equal rows except the ``run_s`` timings;
- every figure is computed from the simulator's record (cycles, moves) and the scenario's trace;
- rows are JSON-ready dicts; ``render`` prints one table per scenario with the floors beside.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import statistics
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.shedding.base import STRATEGY_MODULES
from balancer.simulator import CYCLE_MS, SimResult, Simulation
from bench.scenarios import BUILDERS, FULL, QUICK, Scenario, Size

PULSAR_STRATEGIES = (
    "ThresholdShedder",
    "OverloadShedder",
    "UniformLoadShedder",
    "TransferShedder",
    "AvgShedder",
)
OVERRIDES: dict[str, dict[str, Any]] = {
    "TransferShedder": {"loadManagerClassName": "ExtensibleLoadManagerImpl"},
    "AvgShedder": {"loadBalancerLoadPlacementStrategy": "AvgShedder", "maxUnloadPercentage": 0.5},
}
SETTLED_RATIO = 1.25
SETTLED_HOLD = 10
MOVED_FLOOR_NOTE = {
    "steady-zipf": "the random start's excess over the mean",
    "hot-bundle": "shed down to the hot bundle at onset, refill its owner when it cools",
    "scale-out": "(m'-m)/m' = 10/20",
    "scale-in": "(m-m')/m = 5/20, the crashed brokers' share",
    "rolling-restart": "1/20 + 19 x 1/19 (leavers while the last rejoin is empty) + 1/20 refill",
    "diurnal": "the random start's excess; the sine itself needs no move",
    "idle-broker": "(m'-m)/m' = 1/11",
}


# -- strategies -----------------------------------------------------------------------------
def strategies() -> list[str]:
    """The five Pulsar strategies, then every other registered strategy (sorted)."""
    extra = sorted(s for s in STRATEGY_MODULES if s not in PULSAR_STRATEGIES)
    return [*PULSAR_STRATEGIES, *extra]


def strategy_config(name: str) -> dict[str, Any]:
    """Pulsar keys for a strategy's run; project strategies get the manager they declare."""
    overrides = dict(OVERRIDES.get(name, {}))
    if name not in OVERRIDES and _is_extensible(name):
        overrides["loadManagerClassName"] = "ExtensibleLoadManagerImpl"
    return {"loadBalancerLoadSheddingStrategy": name, **overrides}


def _is_extensible(name: str) -> bool:
    module = importlib.import_module(STRATEGY_MODULES[name])
    return bool(getattr(module.STRATEGY, "extensible", False))


def simulate(
    scenario: Scenario, strategy: str, seed: int, extra: Mapping[str, Any] | None = None
) -> tuple[SimResult, LoadBalancerConfig]:
    """One run; ``extra`` Pulsar keys override the strategy's configuration."""
    config = LoadBalancerConfig.from_mapping({**strategy_config(strategy), **(extra or {})})
    simulation = Simulation(config, rng=random.Random(seed))
    result = simulation.run(scenario.owners, scenario.brokers, scenario.trace(), scenario.membership)
    return result, config


# -- per-scenario load profile (independent of the strategy) ---------------------------------
class Profile:
    """Per cycle: the cluster's total load and its largest bundle (bytes/s in+out)."""

    def __init__(self, scenario: Scenario) -> None:
        self.total: list[float] = []
        self.largest: list[float] = []
        for cycle in range(scenario.cycles):
            loads = scenario.throughput(cycle)
            self.total.append(sum(loads.values()))
            self.largest.append(max(loads.values()))

    def floor(self, cycle: int, brokers: int) -> float:
        """max(1, largest bundle / mean broker load) at a cycle."""
        total = self.total[cycle]
        if brokers <= 0 or total <= 0:
            return 1.0
        return max(1.0, self.largest[cycle] * brokers / total)


# -- metrics --------------------------------------------------------------------------------
def metrics(scenario: Scenario, result: SimResult, profile: Profile, grace_cycles: int) -> dict[str, Any]:
    """One row's figures (see the module docstring for the definitions)."""
    cycles = result.cycles
    window = range(max(0, len(cycles) - scenario.window), len(cycles))
    floors = [profile.floor(c.cycle, c.brokers) for c in cycles]
    moves = [m for m in result.moves if m.cycle >= scenario.disturbance]
    moved = sum(m.load / profile.total[m.cycle] for m in moves if profile.total[m.cycle] > 0)
    moved += forced_share(scenario, result, profile)
    max_mean = statistics.median(cycles[c].max_over_mean for c in window)
    min_mean = statistics.median(_min_over_mean(cycles[c].usages) for c in window)
    floor, least = scenario.moved_floor, scenario.moved_minimum(max_mean, min_mean)
    return {
        "max_mean": max_mean,
        "max_mean_floor": statistics.median(floors[c] for c in window),
        "min_mean": min_mean,
        "std": statistics.median(cycles[c].std for c in window),
        "moved_pct": 100.0 * moved,
        "moved_min_pct": 100.0 * least,
        "moved_x": _ratio(moved, least),
        "moved_floor_pct": 100.0 * floor,
        "moved_x_floor": _ratio(moved, floor),
        "by_balance": scenario.by_balance,
        "cycles": settle_cycles([c.max_over_mean for c in cycles], floors, scenario.settle_from),
        "flaps": result.flaps(grace_cycles),
        "unloads_h": sum(1 for m in moves if m.cycle in window) * 60.0 / len(window),
        "moves": len(moves),
    }


def _ratio(moved: float, least: float) -> float | None:
    return moved / least if least > 1e-12 else None


def _min_over_mean(usages: Mapping[str, float]) -> float:
    values = list(usages.values())
    mean = sum(values) / len(values) if values else 0.0
    return min(values) / mean if mean > 0 else 1.0


def forced_share(scenario: Scenario, result: SimResult, profile: Profile) -> float:
    """Load re-placed because its broker crashed: each leaver's share in the cycle before."""
    share = 0.0
    for change in scenario.membership:
        before = change.cycle - 1
        if before < 0 or change.cycle < scenario.disturbance or profile.total[before] <= 0:
            continue
        usages = result.cycles[before].usages
        for broker in change.leave:
            model = scenario.brokers[broker]
            if broker in usages and model.per_byte > 0:
                load = (usages[broker] - model.base) / model.per_byte
                share += load / profile.total[before]
    return share


def settle_cycles(ratios: Sequence[float], floors: Sequence[float], start: int) -> int | None:
    """Cycles from ``start`` to the first cycle from which max/mean <= 1.25 x floor holds for
    ``SETTLED_HOLD`` cycles (or to the end of the run); None if there is none."""
    ok = [r <= SETTLED_RATIO * f + 1e-9 for r, f in zip(ratios, floors, strict=True)]
    for cycle in range(start, len(ok)):
        if all(ok[cycle : cycle + SETTLED_HOLD]):
            return cycle - start
    return None


# -- the table ------------------------------------------------------------------------------
def rows(
    quick: bool = False,
    seed: int = 1,
    scenarios: Iterable[str] | None = None,
    names: Iterable[str] | None = None,
) -> list[dict[str, Any]]:
    """Every scenario x strategy (or the ones named), JSON-ready, in table order."""
    size = QUICK if quick else FULL
    chosen = list(names) if names is not None else strategies()
    out: list[dict[str, Any]] = []
    for scenario_name in scenarios if scenarios is not None else BUILDERS:
        scenario = BUILDERS[scenario_name](size, seed)
        profile = Profile(scenario)
        out.extend(row(scenario, profile, strategy, size, seed) for strategy in chosen)
    return out


def row(scenario: Scenario, profile: Profile, strategy: str, size: Size, seed: int) -> dict[str, Any]:
    started = time.perf_counter()
    result, config = simulate(scenario, strategy, seed)
    grace = config.grace_period_ms // (config.load_balancer_shedding_interval_minutes * CYCLE_MS)
    figures = metrics(scenario, result, profile, grace)
    return {
        "id": "B",
        "scenario": scenario.name,
        "strategy": strategy,
        "size": size.name,
        "seed": seed,
        "description": scenario.description,
        "run_cycles": scenario.cycles,
        "window": scenario.window,
        "config": strategy_config(strategy),
        **figures,
        "run_s": time.perf_counter() - started,
    }


HEADER = (
    f"{'strategy':<22} {'max/mean':>8} {'floor':>5} {'min/mean':>8} {'std':>6} | "
    f"{'moved %':>7} {'min %':>5} {'x min':>6} {'x floor':>7} | {'cycles':>6} {'flaps':>5} "
    f"{'unloads/h':>9}"
)


def render(table: Sequence[dict[str, Any]]) -> str:
    """One table per scenario, floors beside the figures."""
    lines = ["B  balancing quality (simulated; 1 cycle = 1 shedding interval = 1 min; see "
             "bench/quality.py for the definitions)"]
    for scenario in dict.fromkeys(r["scenario"] for r in table):
        block = [r for r in table if r["scenario"] == scenario]
        first = block[0]
        lines += [
            "",
            f"B  {scenario}: {first['description']}",
            f"   {first['run_cycles']} cycles, settled = the last {first['window']}, seed "
            f"{first['seed']} ({first['size']}); moved floor ({first['moved_floor_pct']:.1f} %): "
            f"{MOVED_FLOOR_NOTE.get(scenario, '-')}; min: {_minimum_note(first)}",
            HEADER,
        ]
        lines.extend(_render_row(r) for r in block)
    return "\n".join(lines)


def _minimum_note(r: dict[str, Any]) -> str:
    """How a row's "min %" is found (the same for every row of a scenario)."""
    if r.get("by_balance"):
        return "the least any strategy must move from the start to reach that row's balance"
    return "the floor (what must move whatever the balance)"


def _render_row(r: dict[str, Any]) -> str:
    least, floor, cycles = _times(r["moved_x"]), _times(r["moved_x_floor"]), _cycles(r)
    return (
        f"{r['strategy']:<22} {r['max_mean']:>8.3f} {r['max_mean_floor']:>5.2f} "
        f"{r['min_mean']:>8.3f} {r['std']:>6.3f} | {r['moved_pct']:>7.1f} "
        f"{r['moved_min_pct']:>5.1f} {least:>6} {floor:>7} | {cycles:>6} {r['flaps']:>5} "
        f"{r['unloads_h']:>9.1f}"
    )


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _cycles(r: dict[str, Any]) -> str:
    return "never" if r["cycles"] is None else str(r["cycles"])


# -- markdown (the README's tables) ---------------------------------------------------------
SLACK = 1.05  # no worse than the best Pulsar strategy by more than 5 %
COMPARED = {"max_mean": "max/mean", "std": "std", "moved_x": "x min", "cycles": "cycles",
            "flaps": "flaps"}  # row key -> the table's name


def markdown(table: Sequence[dict[str, Any]]) -> str:
    """Every row as one markdown table (the README's B table)."""
    lines = ["| scenario | strategy | max/mean (floor) | std | moved % | x min (min %) | x floor | "
             "cycles | flaps | unloads/h |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(
            f"| {r['scenario']} | {r['strategy']} | {r['max_mean']:.3f} ({r['max_mean_floor']:.2f}) "
            f"| {r['std']:.4f} | {r['moved_pct']:.1f} | {_times(r['moved_x'])} "
            f"({r['moved_min_pct']:.1f} %) | {_times(r['moved_x_floor'])} | {_cycles(r)} | "
            f"{r['flaps']} | {r['unloads_h']:.1f} |")
    return "\n".join(lines)


def best_pulsar(table: Sequence[dict[str, Any]], scenario: str) -> dict[str, Any]:
    """The Pulsar strategy that balances best in a scenario: lowest max/mean, then lowest std."""
    mine = [r for r in table if r["scenario"] == scenario and r["strategy"] in PULSAR_STRATEGIES]
    return min(mine, key=lambda r: (round(r["max_mean"], 3), r["std"]))


def worse_by_more_than_slack(ours: dict[str, Any], best: dict[str, Any]) -> list[str]:
    """The compared figures (the table's names) where ``ours`` is worse than ``best`` by more
    than 5 %."""
    misses = []
    for key, name in COMPARED.items():
        mine, theirs = ours[key], best[key]
        if mine is None and theirs is None:
            continue
        if mine is None or (theirs is not None and mine > SLACK * theirs + 1e-9):
            misses.append(name)
    return misses


def versus_best(table: Sequence[dict[str, Any]], strategy: str) -> str:
    """``strategy`` beside the best Pulsar strategy of each scenario, misses named."""
    lines = [f"| scenario | {strategy}: max/mean, std, x min, cycles, flaps | best Pulsar: the same | "
             "worse by > 5 % |", "|---|---|---|---|"]
    for scenario in dict.fromkeys(r["scenario"] for r in table):
        ours = next(r for r in table if r["scenario"] == scenario and r["strategy"] == strategy)
        best = best_pulsar(table, scenario)
        misses = ", ".join(worse_by_more_than_slack(ours, best)) or "none"
        lines.append(f"| {scenario} | {_brief(ours)} | {best['strategy']}: {_brief(best)} | {misses} |")
    return "\n".join(lines)


def _markdown_all(table: Sequence[dict[str, Any]]) -> str:
    own = [s for s in dict.fromkeys(r["strategy"] for r in table) if s not in PULSAR_STRATEGIES]
    pulsar = any(r["strategy"] in PULSAR_STRATEGIES for r in table)
    return "\n\n".join([markdown(table), *(versus_best(table, s) for s in own if pulsar)])


def _brief(r: dict[str, Any]) -> str:
    return f"{r['max_mean']:.3f}, {r['std']:.4f}, {_times(r['moved_x'])}, {_cycles(r)}, {r['flaps']}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="shorter scenarios, 5k topics")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scenario", action="append", choices=list(BUILDERS))
    parser.add_argument("--strategy", action="append", help="default: every strategy")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--markdown", action="store_true",
                        help="markdown tables (the README's): every row, then the project's "
                             "strategy beside the best Pulsar strategy of each scenario")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    table = rows(args.quick, args.seed, args.scenario, args.strategy)
    seconds = time.perf_counter() - started
    print(_markdown_all(table) if args.markdown else render(table))
    print(f"\n{len(table)} runs in {seconds:.1f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"id": "B", "seconds": seconds, "rows": table}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
