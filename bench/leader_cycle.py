"""Benchmark A9: one leader cycle of the extensible manager at 10..1000 brokers x 1k..100k bundles.

A cycle is what the leader does every ``loadBalancerSheddingIntervalMinutes``: one
TransferShedder run over the current load data, plus the assignment (§5.2) of every bundle it
unloads without a destination. In transfer mode (the default) there are none; the table also
shows the cycle with ``loadBalancerTransferEnabled=false``, where each unloaded bundle is
assigned as its next lookup would assign it. What a leader does per report
round - apply the reports to the load model, build the cluster view, compute each broker's
top-bundles report - is measured separately as ``report``: it is paid when reports arrive, not
per shedding run.

The reference is the same cycle at the smallest size (10 brokers x 1k bundles), measured in the
same process. Growth exponents, log(t2/t1) / log(n2/n1) (1.0 = linear; n log n over these sizes
is about 1.1): ``exp`` against the reference with n = brokers + bundles (diagonal rows scale
both by 10), ``exp/bundles`` against the same broker count at 1k bundles, ``exp/brokers``
against 10 brokers at the same bundle count.

Synthetic cluster (seeded): namespaces of 16 bundles owned by random brokers, log-normal bundle
throughputs, every other broker's CPU hot (70-98 %), the rest cool (2-30 %): std ~ 0.35 > the 0.25
target at every size, so every run does the full work: statistics, three (max, min) pairs, their
top bundles and swaps.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import platform
import random
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.decisions import Decision, ShedResult
from balancer.load import BrokerReport, BundleStats, LoadModel, ResourceUsage
from balancer.placement.extensible import ExtensiblePlacement
from balancer.shedding.base import ClusterView
from balancer.shedding.run import SheddingRun
from balancer.shedding.transfer import TransferShedder
from balancer.shedding.transfer_stats import TopBundles, report_top_bundles

BUNDLES_PER_NAMESPACE = 16
FULL_GRID = tuple((b, n) for b in (10, 100, 1000) for n in (1_000, 10_000, 100_000))
QUICK_GRID = ((10, 1_000), (100, 10_000), (1000, 100_000))

Round = tuple[dict[str, BrokerReport], dict[str, tuple[str | None, BundleStats]]]


def bench_config() -> LoadBalancerConfig:
    # Hit threshold 0: every measured run acts, so the numbers are those of a shedding run.
    return LoadBalancerConfig.from_mapping(
        {
            "loadManagerClassName": "ExtensibleLoadManagerImpl",
            "loadBalancerLoadSheddingStrategy": "TransferShedder",
            "loadBalancerSheddingConditionHitCountThreshold": 0,
        }
    )


def synthetic_round(brokers: int, bundles: int, seed: int = 7) -> Round:
    """One report from every broker and the stats of every bundle (deterministic in seed)."""
    rng = random.Random(seed)
    names = [f"broker-{i:04d}" for i in range(brokers)]
    step = 0x100000000 // BUNDLES_PER_NAMESPACE
    owned: dict[str, tuple[str | None, BundleStats]] = {}
    totals = dict.fromkeys(names, 0.0)
    for i in range(bundles):
        ns, j = divmod(i, BUNDLES_PER_NAMESPACE)
        upper = 0xFFFFFFFF if j == BUNDLES_PER_NAMESPACE - 1 else (j + 1) * step
        bundle = f"bench/ns{ns:05d}/0x{j * step:08x}_0x{upper:08x}"
        owner = names[rng.randrange(brokers)]
        tput_in, tput_out = rng.lognormvariate(11, 1.5), rng.lognormvariate(12, 1.5)
        owned[bundle] = (owner, _bundle_stats(bundle, rng, tput_in, tput_out))
        totals[owner] += tput_in + tput_out
    reports = {name: _broker_report(i, name, rng, totals[name]) for i, name in enumerate(names)}
    return reports, owned


def _bundle_stats(bundle: str, rng: random.Random, tput_in: float, tput_out: float) -> BundleStats:
    return BundleStats(
        bundle,
        msg_rate_in=tput_in / 1024,
        msg_rate_out=tput_out / 1024,
        msg_throughput_in=tput_in,
        msg_throughput_out=tput_out,
        topics=rng.randint(1, 50),
        producers=rng.randint(0, 20),
        consumers=rng.randint(0, 40),
    )


def _broker_report(index: int, name: str, rng: random.Random, throughput: float) -> BrokerReport:
    # Every other broker hot: std ~ 0.35 > target at every size, so every run does full work.
    cpu = rng.uniform(2, 30) if index % 2 else rng.uniform(70, 98)
    return BrokerReport(
        name,
        cpu=ResourceUsage(cpu * 8, 800),
        memory=ResourceUsage(rng.uniform(1, 4), 8),
        bandwidth_in=ResourceUsage(rng.uniform(1, 40), 100),
        bandwidth_out=ResourceUsage(rng.uniform(1, 60), 100),
        msg_throughput_in=throughput * 0.4,
        msg_throughput_out=throughput * 0.6,
    )


@dataclass
class Measured:
    """One grid point, in seconds (best of the repeats).

    ``shed_s``: the cycle in transfer mode (Pulsar's default; decisions carry destinations, so
    nothing is placed). ``unload_shed_s`` + ``place_s``: the cycle with
    ``loadBalancerTransferEnabled=false``, where each unloaded bundle is then assigned (§5.2).
    """

    brokers: int
    bundles: int
    model_s: float
    view_s: float
    top_s: float
    shed_s: float
    unload_shed_s: float
    place_s: float
    decisions: int
    skip: str | None
    peak_rss_mib: float

    @property
    def report_s(self) -> float:
        return self.model_s + self.view_s + self.top_s

    @property
    def cycle_s(self) -> float:
        return self.shed_s

    @property
    def unload_cycle_s(self) -> float:
        return self.unload_shed_s + self.place_s


def _timed(action: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = action()
    return time.perf_counter() - start, value


def _report_phase(
    config: LoadBalancerConfig, rounds: Sequence[Round]
) -> tuple[float, float, ClusterView]:
    """Apply rounds to a model (the last one timed, as a steady-state round); build the view."""
    model = LoadModel(config)
    for reports, bundles in rounds[:-1]:
        model.apply_round(0, reports, bundles)
    reports, bundles = rounds[-1]
    model_s, _ = _timed(lambda: model.apply_round(60_000, reports, bundles))
    view_s, view = _timed(
        lambda: ClusterView(
            now_ms=60_000, config=config, brokers=dict(model.brokers), bundles=dict(model.bundles)
        )
    )
    return model_s, view_s, view


def _shed_once(config: LoadBalancerConfig, view: ClusterView, top: TopBundles) -> ShedResult:
    # A run records its moves in the view's memory maps; each repeat starts from a clean slate.
    view.recently_unloaded = {}
    view.recently_unloaded_brokers = {}
    strategy = TransferShedder(config)
    strategy.prepare(view, top)
    result: ShedResult = SheddingRun(config, strategy).run(view)
    return result


def _place_unloaded(view: ClusterView, decisions: Sequence[Decision], seed: int = 1) -> None:
    """Assign each unloaded bundle as the next lookup would, with it released (owner None)."""
    placement = ExtensiblePlacement(view.config)
    rng = random.Random(seed)
    for decision in decisions:
        data = view.bundles[decision.bundle]
        owner, data.owner = data.owner, None
        try:
            placement.place(view, decision.bundle, rng)
        finally:
            data.owner = owner  # the view is reused by the next repeat


def _best(repeats: int, action: Callable[[], Any]) -> tuple[float, Any]:
    timings = [_timed(action) for _ in range(repeats)]
    return min(t for t, _ in timings), timings[0][1]


def measure(brokers: int, bundles: int, repeats: int = 3) -> Measured:
    config = bench_config()
    unload = config.with_overrides({"loadBalancerTransferEnabled": False})
    rounds = [synthetic_round(brokers, bundles, seed) for seed in (7, 8)]
    gc.collect()
    model_s, view_s, view = _report_phase(config, rounds)
    top_s, top = _timed(lambda: report_top_bundles(view))
    shed_s, result = _best(repeats, lambda: _shed_once(config, view, top))
    unload_s, unloaded = _best(repeats, lambda: _shed_once(unload, view, top))
    place_s, _ = _best(repeats, lambda: _place_unloaded(view, unloaded.decisions))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    skip = None if result.skip is None else str(result.skip)
    return Measured(
        brokers, bundles, model_s, view_s, top_s, shed_s, unload_s, place_s,
        len(result.decisions), skip, peak,
    )  # fmt: skip


def exponent(t: float, t_ref: float, n: int, n_ref: int) -> float:
    if n == n_ref or t <= 0 or t_ref <= 0:
        return math.nan
    return math.log(t / t_ref) / math.log(n / n_ref)


def rows(quick: bool = False, repeats: int | None = None) -> list[dict[str, Any]]:
    """The A9 rows (dicts, JSON-ready); the first row is the reference size."""
    grid = QUICK_GRID if quick else FULL_GRID
    repeats = repeats or (3 if quick else 5)
    measured = {(b, n): measure(b, n, repeats) for b, n in grid}
    ref = measured[grid[0]]
    return [_row(m, ref, measured) for m in measured.values()]


def _row(m: Measured, ref: Measured, grid: dict[tuple[int, int], Measured]) -> dict[str, Any]:
    by_bundles = grid.get((m.brokers, ref.bundles))
    by_brokers = grid.get((ref.brokers, m.bundles))
    row: dict[str, Any] = {
        "id": "A9",
        "brokers": m.brokers,
        "bundles": m.bundles,
        "cycle_ms": m.cycle_s * 1000,
        "unload_cycle_ms": m.unload_cycle_s * 1000,
        "unload_shed_ms": m.unload_shed_s * 1000,
        "place_ms": m.place_s * 1000,
        "cycle_ratio": m.cycle_s / ref.cycle_s,
        "report_ms": m.report_s * 1000,
        "report_model_ms": m.model_s * 1000,
        "report_view_ms": m.view_s * 1000,
        "report_top_bundles_ms": m.top_s * 1000,
        "decisions": m.decisions,
        "skip": m.skip,
        "peak_rss_mib": m.peak_rss_mib,
    }
    for phase in ("cycle", "report"):
        row[f"{phase}_exponent"] = _growth(m, ref, phase, lambda x: x.brokers + x.bundles)
        row[f"{phase}_exponent_bundles"] = _growth(m, by_bundles, phase, lambda x: x.bundles)
        row[f"{phase}_exponent_brokers"] = _growth(m, by_brokers, phase, lambda x: x.brokers)
    return row


def _growth(
    m: Measured, base: Measured | None, phase: str, size: Callable[[Measured], int]
) -> float:
    if base is None:
        return math.nan
    return exponent(_seconds(m, phase), _seconds(base, phase), size(m), size(base))


def _seconds(m: Measured, phase: str) -> float:
    return m.cycle_s if phase == "cycle" else m.report_s


def machine() -> str:
    import os

    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return (
        f"{os.cpu_count()} cores, {pages / 2**30:.1f} GiB, Python {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}"
    )


def render(table: Sequence[dict[str, Any]]) -> str:
    ref = table[0]
    lines = [
        "A9  one leader cycle: TransferShedder run (transfer mode: decisions carry destinations);"
        " 'unload+place': the same with loadBalancerTransferEnabled=false plus assigning each"
        " unloaded bundle (§5.2)",
        f"    machine: {machine()}",
        f"    reference: the same cycle at {ref['brokers']} brokers x {ref['bundles']:,} bundles "
        f"in this run: {ref['cycle_ms']:.3f} ms; report round {ref['report_ms']:.1f} ms",
        "    exp: vs reference, n = brokers + bundles; exp/bu: vs 1k bundles (same brokers); "
        "exp/br: vs 10 brokers (same bundles); peak RSS is the process's so far",
        f"{'brokers':>7} {'bundles':>8} | {'cycle ms':>8} {'x ref':>6} {'exp':>5} {'exp/bu':>6} "
        f"{'exp/br':>6} {'moves':>8} | {'unload+place':>12} | {'report ms':>9} {'model':>7} "
        f"{'view':>5} {'top-k':>6} {'exp':>5} {'exp/bu':>6} | {'peak RSS':>8}",
    ]
    lines.extend(_render_row(r) for r in table)
    return "\n".join(lines)


def _render_row(r: dict[str, Any]) -> str:
    return (
        f"{r['brokers']:>7} {r['bundles']:>8,} | {r['cycle_ms']:>8.3f} {r['cycle_ratio']:>6.1f} "
        f"{_fmt(r['cycle_exponent'])} {_fmt(r['cycle_exponent_bundles'], 6)} "
        f"{_fmt(r['cycle_exponent_brokers'], 6)} {r['skip'] or r['decisions']:>8} | "
        f"{r['unload_cycle_ms']:>12.2f} | "
        f"{r['report_ms']:>9.1f} {r['report_model_ms']:>7.1f} {r['report_view_ms']:>5.1f} "
        f"{r['report_top_bundles_ms']:>6.1f} {_fmt(r['report_exponent'])} "
        f"{_fmt(r['report_exponent_bundles'], 6)} | {r['peak_rss_mib']:>4.0f} MiB"
    )


def _fmt(value: float, width: int = 5) -> str:
    return f"{'-':>{width}}" if math.isnan(value) else f"{value:>{width}.2f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="the diagonal of the grid only")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    table = rows(quick=args.quick, repeats=args.repeats)
    print(render(table))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"machine": machine(), "rows": table}, out, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
