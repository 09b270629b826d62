"""The B (balancing quality) scenarios: seeded, deterministic load traces for the simulator.

Every scenario is built from one topic population: ``topics`` topics with Zipf(1.1) message
rates (rank r carries a share proportional to r^-1.1; ranks shuffled over the topic names by the
seed), each in one of 20 namespaces of 16 bundles (320 bundles), hashed into its bundle with
Pulsar's CRC-32 rule (``NamespaceBundles.bundle_of``). A topic whose share exceeds the mean
bundle share (1/320 of the load) is partitioned into ceil(share x 320) partitions
(``<topic>-partition-<i>``, each hashed on its own), as Pulsar users partition hot topics:
unpartitioned, the hottest topic alone carries 14.6 % of the load - 2.9x a broker's share at 20
brokers - so no strategy could balance anything and idle-broker's "10 brokers at 80 %" could not
exist (``partition_share=None`` gives the literal unpartitioned population).

Load: every message is 1 KiB and has one subscription (out = in). Brokers are homogeneous,
``BrokerModel(base=0, per_byte=1/400 MiB)``: usage = (in+out bytes/s) / 400 MiB/s, so usage is
proportional to load and the floors of ``bench.quality`` are exact. Rates are scaled so the
mean broker usage is the scenario's level.

Scenarios (full size; ``QUICK`` shortens every phase and uses 5k topics, same 320 bundles):

- steady-zipf: 20 brokers at 50 %, random start (each bundle on a seeded random broker).
- hot-bundle: balanced start (LPT), warm-up, then the bundle closest to 1.5x the mean bundle load
  runs at x10 for ``hot`` cycles (an hour): its owner goes from 50 % to ~92 %, overloaded but not
  saturated (a saturated broker reports 100 % CPU; the stats keep the model's usage above it).
- scale-out: 10 brokers at 60 %, balanced, then 10 more join at once (-> 30 %).
- scale-in: 20 brokers at 45 %, balanced, then 5 crash at once (-> 60 %).
- rolling-restart: 20 brokers at 50 %, balanced; broker i leaves at warm-up + i x gap and rejoins
  (empty) ``down`` cycles later; one at a time.
- diurnal: steady-zipf (random start, 50 % mean) with every rate x (1 - 0.6 cos(2 pi t / day)):
  20 % at the trough, 80 % at the peak, starting at the trough; two days are run, day 2 is the
  settled window. Full size runs the real day (1440 cycles); ``QUICK`` compresses it 12x into
  120 cycles of the same shape (one cycle then stands for 12 minutes of the day, while the
  shedding interval, grace period and EMAs stay in real 1-minute cycles).
- idle-broker: 10 brokers at 80 % (balanced) and one empty broker from the start.

Invariants:
- deterministic: equal (size, seed) give equal scenarios and traces (only ``random.Random(seed)``);
- one cycle = one shedding interval (1 minute); the trace yields every bundle's stats per cycle,
  reusing the same mapping while the load does not change (no per-topic work per cycle);
- ``throughput(cycle)`` is exactly what the trace reports (bytes/s in+out per bundle), so metrics
  computed from it agree with the simulator.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache

from balancer.bundles import NamespaceBundles
from balancer.load import BundleStats
from balancer.simulator import BrokerModel, Membership

ZIPF_EXPONENT = 1.1
NAMESPACES = 20
BUNDLES_PER_NAMESPACE = 16
MESSAGE_BYTES = 1024
BROKER_CAPACITY = 400 * 1024 * 1024  # bytes/s in+out at 100 % usage
DIURNAL_AMPLITUDE = 0.6
HOT_FACTOR = 10.0
HOT_SIZE = 1.5  # the hot bundle: the one closest to 1.5x the mean bundle load
TENANT = "bench"


@dataclass(frozen=True)
class Size:
    """Scenario lengths in cycles (1 cycle = 1 minute)."""

    name: str
    topics: int
    warmup: int  # cycles before the disturbance, for scenarios that start balanced
    observe: int  # cycles after the disturbance (or its end)
    window: int  # the settled window: the last ``window`` cycles ("the last hour")
    hot: int  # hot-bundle: how long the bundle runs hot
    restart_gap: int  # rolling-restart: cycles between two leaves
    restart_down: int  # rolling-restart: cycles a broker is away (< restart_gap)
    day: int  # diurnal: cycles per compressed day


FULL = Size("full", 20_000, warmup=10, observe=150, window=60, hot=60, restart_gap=4,
            restart_down=2, day=1440)
QUICK = Size("quick", 5_000, warmup=5, observe=60, window=30, hot=30, restart_gap=3,
             restart_down=1, day=120)


@dataclass(frozen=True)
class Population:
    """Bundle -> msg/s in at unit scale (rates sum to 1.0), and partitions per bundle."""

    rates: Mapping[str, float]
    partitions: Mapping[str, int]
    total_partitions: int


@dataclass(frozen=True)
class Scenario:
    """One seeded trace: starting layout, brokers, per-bundle load over time, membership.

    ``disturbance`` is the first cycle whose moves count (moved is measured from it);
    ``settle_from`` is where "cycles to settle" starts (the last rejoin for rolling-restart).
    """

    name: str
    description: str
    owners: Mapping[str, str]
    brokers: Mapping[str, BrokerModel]
    base: Mapping[str, float]  # bundle -> bytes/s in+out at factor 1
    partitions: Mapping[str, int]
    cycles: int
    disturbance: int
    settle_from: int
    window: int
    membership: tuple[Membership, ...] = ()
    hot_bundle: str | None = None
    hot_cycles: tuple[int, int] = (0, 0)  # [start, end)
    day: int = 0  # 0: no diurnal sine
    moved_floor: float = 0.0  # minimum load any strategy must move, as a fraction of the load
    # True where the minimum depends on the balance reached: the disturbance is the start layout
    # itself (``owners`` over every broker of ``brokers``), nothing has to move regardless.
    by_balance: bool = False

    def moved_minimum(self, max_mean: float, min_mean: float) -> float:
        """The least load (a fraction) any strategy must move to reach this balance: the start
        layout's ``shortfall`` where ``by_balance``, else the scenario's ``moved_floor`` (what must
        move whatever the balance: crashed brokers' load, the hot hour's onset and refill)."""
        if not self.by_balance:
            return self.moved_floor
        return shortfall(self.owners, self.base, list(self.brokers), max_mean,
                         min_mean) / sum(self.base.values())

    def factor(self, cycle: int) -> float:
        """The global rate factor at a cycle (the diurnal sine, 1.0 otherwise)."""
        if not self.day:
            return 1.0
        return 1.0 - DIURNAL_AMPLITUDE * math.cos(2.0 * math.pi * cycle / self.day)

    def is_hot(self, cycle: int) -> bool:
        return self.hot_bundle is not None and self.hot_cycles[0] <= cycle < self.hot_cycles[1]

    def throughput(self, cycle: int) -> dict[str, float]:
        """Bundle -> bytes/s in+out at a cycle (what the trace reports)."""
        scale = self.factor(cycle)
        loads = {b: v * scale for b, v in self.base.items()}
        if self.hot_bundle is not None and self.is_hot(cycle):
            loads[self.hot_bundle] *= HOT_FACTOR
        return loads

    def trace(self, cycles: int | None = None) -> Iterator[Mapping[str, BundleStats]]:
        """Every bundle's stats, cycle by cycle (the first ``cycles`` only, if given)."""
        steady: dict[bool, dict[str, BundleStats]] = {}
        for cycle in range(self.cycles if cycles is None else min(cycles, self.cycles)):
            hot = self.is_hot(cycle)
            if self.day:
                yield self._stats(self.throughput(cycle))
                continue
            if hot not in steady:
                steady[hot] = self._stats(self.throughput(cycle))
            yield steady[hot]

    def _stats(self, loads: Mapping[str, float]) -> dict[str, BundleStats]:
        return {b: bundle_stats(b, loads[b], self.partitions[b]) for b in sorted(loads)}


def bundle_stats(bundle: str, throughput: float, topics: int) -> BundleStats:
    """Stats of a bundle carrying ``throughput`` bytes/s in+out (1 KiB messages, out = in)."""
    half = throughput / 2.0
    rate = half / MESSAGE_BYTES
    return BundleStats(bundle, msg_rate_in=rate, msg_rate_out=rate, msg_throughput_in=half,
                       msg_throughput_out=half, topics=topics, producers=topics, consumers=topics)


# -- the topic population -------------------------------------------------------------------
@lru_cache(maxsize=8)
def population(topics: int, seed: int, partition_share: float | None = 1.0 / 320) -> Population:
    """Zipf(1.1) topic rates hashed into 20 x 16 bundles (unit total), hot topics partitioned."""
    rng = random.Random(seed)
    weights = [rank ** -ZIPF_EXPONENT for rank in range(1, topics + 1)]
    total = sum(weights)
    rng.shuffle(weights)
    layouts = [NamespaceBundles.initial(f"{TENANT}/ns{k:02d}", BUNDLES_PER_NAMESPACE)
               for k in range(NAMESPACES)]
    rates = {b: 0.0 for layout in layouts for b in layout.bundle_ids()}
    partitions = dict.fromkeys(rates, 0)
    count = 0
    for index, weight in enumerate(weights):
        layout = layouts[rng.randrange(NAMESPACES)]
        topic = f"persistent://{layout.namespace}/topic-{index}"
        share = weight / total
        parts = 1 if partition_share is None else max(1, math.ceil(share / partition_share))
        names = [topic] if parts == 1 else [f"{topic}-partition-{i}" for i in range(parts)]
        for name in names:
            bundle = layout.bundle_of(name)
            rates[bundle] += share / parts
            partitions[bundle] += 1
        count += parts
    return Population(rates, partitions, count)


# -- layouts --------------------------------------------------------------------------------
def broker_ids(count: int, start: int = 0) -> list[str]:
    return [f"broker-{i:02d}" for i in range(start, start + count)]


def random_layout(bundles: Mapping[str, float], brokers: list[str], rng: random.Random) -> dict[str, str]:
    """Each bundle on a uniformly random broker (a cluster that grew without balancing)."""
    return {b: brokers[rng.randrange(len(brokers))] for b in sorted(bundles)}


def balanced_layout(bundles: Mapping[str, float], brokers: list[str]) -> dict[str, str]:
    """Longest-processing-time greedy: heaviest bundle first onto the least loaded broker."""
    totals = dict.fromkeys(brokers, 0.0)
    owners: dict[str, str] = {}
    for bundle in sorted(bundles, key=lambda b: (-bundles[b], b)):
        target = min(brokers, key=lambda x: (totals[x], x))
        owners[bundle] = target
        totals[target] += bundles[bundle]
    return owners


def _give_and_take(owners: Mapping[str, str], loads: Mapping[str, float], brokers: list[str],
                   max_mean: float, min_mean: float) -> tuple[float, float]:
    """What the brokers above ``max_mean`` x mean must give up (each may keep its largest
    bundle), and what those below ``min_mean`` x mean must receive."""
    totals = dict.fromkeys(brokers, 0.0)
    largest = dict.fromkeys(brokers, 0.0)
    for bundle, owner in owners.items():
        totals[owner] += loads[bundle]
        largest[owner] = max(largest[owner], loads[bundle])
    mean = sum(totals.values()) / len(brokers)
    give = sum(max(0.0, totals[b] - max(max_mean * mean, largest[b])) for b in brokers)
    take = sum(max(0.0, min_mean * mean - totals[b]) for b in brokers)
    return give, take


def excess(owners: Mapping[str, str], loads: Mapping[str, float], brokers: list[str]) -> float:
    """Load brokers must give up to reach the mean: sum of max(0, load - max(mean, largest))."""
    return _give_and_take(owners, loads, brokers, 1.0, 1.0)[0]


def shortfall(owners: Mapping[str, str], loads: Mapping[str, float], brokers: list[str],
              max_mean: float, min_mean: float) -> float:
    """The least load any strategy must move from this layout to reach max/mean <= ``max_mean``
    and min/mean >= ``min_mean``: the give or the take (``_give_and_take``), whichever is more.
    Moving a bundle of load L lowers each by at most L, so neither is done for less."""
    return max(_give_and_take(owners, loads, brokers, max_mean, min_mean))


# -- the seven scenarios --------------------------------------------------------------------
def _models(brokers: list[str]) -> dict[str, BrokerModel]:
    return {b: BrokerModel(0.0, 1.0 / BROKER_CAPACITY) for b in brokers}


def _base(pop: Population, level: float, brokers: int) -> dict[str, float]:
    """Bundle -> bytes/s in+out so the mean usage over ``brokers`` brokers is ``level``."""
    total = level * brokers * BROKER_CAPACITY
    return {b: share * total for b, share in sorted(pop.rates.items())}


def _scaled(size: Size, seed: int, level: float, brokers: int,
            description: str) -> tuple[Population, dict[str, float], list[str], str]:
    pop = population(size.topics, seed)
    text = (f"{description}; {BUNDLES_PER_NAMESPACE * NAMESPACES} bundles, "
            f"{size.topics:,} topics ({pop.total_partitions:,} with partitions), Zipf(1.1)")
    return pop, _base(pop, level, brokers), broker_ids(brokers), text


def steady_zipf(size: Size, seed: int) -> Scenario:
    pop, base, brokers, text = _scaled(size, seed, 0.5, 20,
                                       "20 brokers at 50 %, random start")
    owners = random_layout(base, brokers, random.Random(seed))
    return Scenario("steady-zipf", text, owners, _models(brokers), base, pop.partitions,
                    cycles=size.observe, disturbance=0, settle_from=0,
                    window=size.window, moved_floor=excess(owners, base, brokers) / sum(base.values()),
                    by_balance=True)


def hot_bundle(size: Size, seed: int) -> Scenario:
    pop, base, brokers, text = _scaled(size, seed, 0.5, 20, "")
    mean_bundle = sum(base.values()) / len(base)
    hot = min(base, key=lambda b: (abs(base[b] - HOT_SIZE * mean_bundle), b))
    start, end = size.warmup, size.warmup + size.hot
    return Scenario(
        "hot-bundle", f"20 brokers at 50 %, balanced; {hot} x{HOT_FACTOR:g} for cycles "
        f"{start}-{end - 1}{text}", balanced_layout(base, brokers), _models(brokers), base,
        pop.partitions, cycles=end + size.observe, disturbance=start, settle_from=start,
        window=size.window, hot_bundle=hot, hot_cycles=(start, end),
        moved_floor=_hot_floor(base[hot], sum(base.values()), len(brokers)))


def _hot_floor(hot: float, total: float, brokers: int) -> float:
    """Minimum moved (fraction of the load) from a balanced layout when one bundle runs x10.

    Onset: the owner keeps the hot bundle and sheds down to max(new mean, hot load); end: the
    owner, left with the (now cool) bundle and little else, must be refilled to the mean.
    """
    extra = (HOT_FACTOR - 1) * hot
    mean, hot_mean = total / brokers, (total + extra) / brokers
    keep = max(hot_mean, HOT_FACTOR * hot)
    onset = max(0.0, mean + extra - keep)
    refill = max(0.0, mean - (keep - extra))
    return onset / (total + extra) + refill / total


def scale_out(size: Size, seed: int) -> Scenario:
    pop, base, first, text = _scaled(size, seed, 0.6, 10,
                                     "10 brokers at 60 %, balanced, then 10 join (30 %)")
    joiners = broker_ids(10, start=10)
    # Joiners are given from the start (so they get this model) and leave at cycle 0, empty.
    membership = (Membership(0, leave=tuple(joiners)), Membership(size.warmup, join=tuple(joiners)))
    return Scenario("scale-out", text, balanced_layout(base, first), _models(first + joiners),
                    base, pop.partitions, cycles=size.warmup + size.observe,
                    disturbance=size.warmup, settle_from=size.warmup, window=size.window,
                    membership=membership, moved_floor=10 / 20, by_balance=True)


def scale_in(size: Size, seed: int) -> Scenario:
    pop, base, brokers, text = _scaled(size, seed, 0.45, 20,
                                       "20 brokers at 45 %, balanced, then 5 crash (60 %)")
    gone = tuple(brokers[-5:])
    return Scenario("scale-in", text, balanced_layout(base, brokers), _models(brokers), base,
                    pop.partitions, cycles=size.warmup + size.observe, disturbance=size.warmup,
                    settle_from=size.warmup, window=size.window,
                    membership=(Membership(size.warmup, leave=gone),), moved_floor=5 / 20)


def rolling_restart(size: Size, seed: int) -> Scenario:
    pop, base, brokers, text = _scaled(size, seed, 0.5, 20,
        f"20 brokers at 50 %, balanced; each leaves and rejoins empty {size.restart_down} "
        f"cycle(s) later, one every {size.restart_gap} cycles")
    changes: list[Membership] = []
    for i, broker in enumerate(brokers):
        leave = size.warmup + i * size.restart_gap
        changes += [Membership(leave, leave=(broker,)),
                    Membership(leave + size.restart_down, join=(broker,))]
    last_rejoin = changes[-1].cycle
    return Scenario("rolling-restart", text, balanced_layout(base, brokers), _models(brokers),
                    base, pop.partitions, cycles=last_rejoin + size.observe,
                    disturbance=size.warmup, settle_from=last_rejoin, window=size.window,
                    membership=tuple(changes), moved_floor=_restart_floor(len(brokers)))


def _restart_floor(brokers: int) -> float:
    """Minimum moved (fraction of the load) by a rolling restart of ``brokers`` balanced brokers.

    The first leaver holds 1/m. Each later leaver leaves while the broker before it has rejoined
    empty, so the other m - 1 hold the load, 1/(m-1) each, and its 1/(m-1) is re-placed: filling
    the rejoined broker first (x of the load) would cost x and save only x/(m-1) of the next
    leaver's share, so waiting is cheapest. The last rejoin is refilled by shedding: 1/m.
    Total 1/m + (m-1)/(m-1) + 1/m = 1 + 2/m (1.10 at 20 brokers).
    """
    return 1.0 + 2.0 / brokers


def diurnal(size: Size, seed: int) -> Scenario:
    pop, base, brokers, text = _scaled(size, seed, 0.5, 20,
        f"steady-zipf x (1 - {DIURNAL_AMPLITUDE} cos): 20 % to 80 %, a 24 h day in "
        f"{size.day} cycles, two days, settled = day 2")
    owners = random_layout(base, brokers, random.Random(seed))
    return Scenario("diurnal", text, owners, _models(brokers), base, pop.partitions,
                    cycles=2 * size.day, disturbance=0, settle_from=0, window=size.day,
                    day=size.day, moved_floor=excess(owners, base, brokers) / sum(base.values()),
                    by_balance=True)


def idle_broker(size: Size, seed: int) -> Scenario:
    pop, base, brokers, text = _scaled(size, seed, 0.8, 10,
                                       "10 brokers at 80 %, balanced, one empty broker")
    idle = broker_ids(1, start=10)
    return Scenario("idle-broker", text, balanced_layout(base, brokers), _models(brokers + idle),
                    base, pop.partitions, cycles=size.observe, disturbance=0, settle_from=0,
                    window=size.window, moved_floor=1 / 11, by_balance=True)


BUILDERS = {
    "steady-zipf": steady_zipf,
    "hot-bundle": hot_bundle,
    "scale-out": scale_out,
    "scale-in": scale_in,
    "rolling-restart": rolling_restart,
    "diurnal": diurnal,
    "idle-broker": idle_broker,
}
"""Scenario name -> builder(size, seed), in the table's order."""


def build(name: str, size: Size = FULL, seed: int = 1) -> Scenario:
    return BUILDERS[name](size, seed)


def build_all(size: Size = FULL, seed: int = 1) -> list[Scenario]:
    return [builder(size, seed) for builder in BUILDERS.values()]
