"""Seeded random inputs for ``lbctl decide``, one generator per conformance family.

Invariants: a family's case ``i`` under seed ``s`` is always the same input (``Random(f"{s}/{family}/{i}")``);
every input is valid for ``lbctl decide`` and for the Pulsar oracle; edges come often on purpose:
empty and single brokers, zero and huge rates, usages above 100 %, equal loads (ties), the last
bundle of the range, versions at the int64 wrap.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from typing import Any

from balancer.bundles import BundleId, namespace_of

FULL = 0xFFFFFFFF
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
MIB = 1024 * 1024
Case = dict[str, Any]


def _pick(rng: random.Random, *choices: Any) -> Any:
    return choices[rng.randrange(len(choices))]


def _amount(rng: random.Random, scale: float) -> float:
    """Zero, huge, tied (a round value) or an ordinary random amount."""
    roll = rng.random()
    if roll < 0.08:
        return 0.0
    if roll < 0.12:
        return scale * 1e6
    if roll < 0.30:
        return float(rng.choice((1, 2, 5, 10)) * scale)
    return round(rng.uniform(0, 10 * scale), rng.choice((0, 3)))


def _usage(rng: random.Random) -> dict[str, float]:
    roll = rng.random()
    if roll < 0.1:
        pct = 0.0
    elif roll < 0.2:
        pct = rng.uniform(100, 1000)  # above 100 %: counted as it is
    elif roll < 0.35:
        pct = float(rng.choice((10, 30, 50, 80, 85, 90)))
    else:
        pct = rng.uniform(0, 100)
    limit = float(rng.choice((100, 400, 1000, 10_000)))
    return {"usage": round(pct * limit / 100, 3), "limit": limit}


def _brokers(rng: random.Random) -> list[str]:
    count = _pick(rng, 0, 1, 2, 2, 3, 3, 4, 5, 6, 8)
    return [f"broker-{i}" for i in range(1, count + 1)]


def _layout(rng: random.Random, pieces: int) -> list[int]:
    seg = (FULL + 1) // pieces
    return [i * seg for i in range(pieces)] + [FULL]


def _bundle_ids(rng: random.Random, count: int) -> list[str]:
    ids = []
    for n in range(rng.randint(1, 3)):
        edges = _layout(rng, _pick(rng, 4, 8, 16, 32))
        ids += [f"tenant/ns{n}/0x{edges[i]:08x}_0x{edges[i + 1]:08x}" for i in range(len(edges) - 1)]
    rng.shuffle(ids)
    return ids[:count]


def _report(rng: random.Random, tied: dict[str, Any] | None) -> dict[str, Any]:
    report: dict[str, Any] = {r: _usage(rng) for r in ("cpu", "memory", "directMemory", "bandwidthIn",
                                                         "bandwidthOut")}
    for key, scale in (("msgRateIn", 1000.0), ("msgRateOut", 1000.0),
                       ("msgThroughputIn", 10.0 * MIB), ("msgThroughputOut", 10.0 * MIB)):
        report[key] = _amount(rng, scale)
    if tied is not None:
        report.update(tied)
    return report


def _bundle_stats(rng: random.Random, owner: str | None) -> dict[str, Any]:
    return {"owner": owner, "msgRateIn": _amount(rng, 100.0), "msgRateOut": _amount(rng, 100.0),
            "msgThroughputIn": _amount(rng, MIB), "msgThroughputOut": _amount(rng, MIB),
            "topics": rng.randint(0, 20), "producers": rng.randint(0, 5), "consumers": rng.randint(0, 5)}


def _cycle(rng: random.Random, brokers: list[str], bundles: list[str], now_ms: int) -> dict[str, Any]:
    tied = None if rng.random() < 0.8 else {k: _usage(rng) for k in ("cpu", "bandwidthIn")}
    reports = {b: _report(rng, tied) for b in brokers}
    for report in reports.values():
        if rng.random() < 0.15:
            report["bundles"] = rng.randint(0, 4)  # owned bundles without load data pad the count
    owned = {b: (rng.choice(brokers) if brokers else None) for b in bundles}
    stats = {b: _bundle_stats(rng, o) for b, o in owned.items() if o is not None}
    cycle: dict[str, Any] = {"now_ms": now_ms, "brokers": reports, "bundles": stats}
    if stats and rng.random() < 0.3:
        some = rng.sample(sorted(stats), k=min(len(stats), rng.randint(1, 3)))
        cycle["recentlyUnloaded"] = {b: now_ms - rng.choice((1, 60_000, 29 * 60_000, 31 * 60_000)) for b in some}
    return cycle


SHED_CONFIG: dict[str, Callable[[random.Random], Any]] = {
    "loadBalancerBrokerThresholdShedderPercentage": lambda r: _pick(r, 5, 10, 20, 400),
    "loadBalancerHistoryResourcePercentage": lambda r: _pick(r, 0.0, 0.5, 0.9),
    "loadBalancerBundleUnloadMinThroughputThreshold": lambda r: _pick(r, 0, 1, 10),
    "lowerBoundarySheddingEnabled": lambda r: r.random() < 0.5,
    "loadBalancerBrokerOverloadedThresholdPercentage": lambda r: _pick(r, 50, 85, 95, 400),
    "loadBalancerCPUResourceWeight": lambda r: _pick(r, 0.5, 1.0, 2.0),
    "loadBalancerDirectMemoryResourceWeight": lambda r: _pick(r, 0.0, 1.0),
    "loadBalancerMsgRateDifferenceShedderThreshold": lambda r: _pick(r, 0, 10, 50),
    "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": lambda r: _pick(r, 0, 2, 4),
    "maxUnloadPercentage": lambda r: _pick(r, 0.2, 0.5, 1.0),
    "minUnloadMessage": lambda r: _pick(r, 0, 100, 1000),
    "minUnloadMessageThroughput": lambda r: _pick(r, 0, 1048576),
    "maxUnloadBundleNumPerShedding": lambda r: _pick(r, -1, 1, 3),
    "loadBalancerAvgShedderLowThreshold": lambda r: _pick(r, 5, 15),
    "loadBalancerAvgShedderHighThreshold": lambda r: _pick(r, 20, 40),
    "loadBalancerAvgShedderHitCountLowThreshold": lambda r: _pick(r, 1, 2, 8),
    "loadBalancerAvgShedderHitCountHighThreshold": lambda r: _pick(r, 1, 2),
}


def _config(rng: random.Random, keys: dict[str, Callable[[random.Random], Any]]) -> dict[str, Any]:
    return {k: make(rng) for k, make in keys.items() if rng.random() < 0.4}


def shed(strategy: str) -> Callable[[random.Random], Case]:
    def generate(rng: random.Random) -> Case:
        brokers = _brokers(rng)
        bundles = _bundle_ids(rng, rng.randint(0, 24))
        cycles = []
        now = 1_700_000_000_000
        for _ in range(rng.randint(1, 4)):
            cycles.append(_cycle(rng, brokers, bundles, now))
            now += 60_000
        return {"strategy": strategy, "config": _config(rng, SHED_CONFIG), "cycles": cycles}

    return generate


TRANSFER_CONFIG: dict[str, Callable[[random.Random], Any]] = {
    "loadBalancerSheddingConditionHitCountThreshold": lambda r: _pick(r, 0, 0, 1, 3),
    "loadBalancerBrokerLoadTargetStd": lambda r: _pick(r, 0.0, 0.1, 0.25, 0.5, 2.0),
    "loadBalancerTransferEnabled": lambda r: r.random() < 0.7,
    "loadBalancerDebugModeEnabled": lambda r: r.random() < 0.5,
    "loadBalancerMaxNumberOfBrokerSheddingPerCycle": lambda r: _pick(r, 1, 3, 10),
    "loadBalancerMaxNumberOfBundlesInBundleLoadReport": lambda r: _pick(r, 1, 2, 10),
    "loadBalancerBrokerOverloadedThresholdPercentage": lambda r: _pick(r, 50, 85, 400),
    "loadBalanceSheddingDelayInSeconds": lambda r: _pick(r, 0, 60, 180),
    "loadBalancerSheddingGracePeriodMinutes": lambda r: _pick(r, 1, 30),
    "loadBalancerBrokerLoadDataTTLInSeconds": lambda r: _pick(r, 60, 1800),
    "loadBalancerHistoryResourcePercentage": lambda r: _pick(r, 0.0, 0.5, 0.9),
    "loadBalancerCPUResourceWeight": lambda r: _pick(r, 0.5, 1.0, 2.0),
    "loadBalancerMemoryResourceWeight": lambda r: _pick(r, 0.0, 1.0),
    "loadBalancerDirectMemoryResourceWeight": lambda r: _pick(r, 0.0, 1.0),
}
TTL_S = 1800
"""Pulsar's default loadBalancerBrokerLoadDataTTLInSeconds."""


def transfer(rng: random.Random) -> Case:
    """TransferShedder cycles: report ages around the TTL, cool-downs around the delay, no policies.

    Ages are whole minutes (never within a second of the TTL: the oracle's clock runs on).
    """
    config = _config(rng, TRANSFER_CONFIG)
    ttl_ms = int(config.get("loadBalancerBrokerLoadDataTTLInSeconds", TTL_S)) * 1000
    brokers = _brokers(rng)
    bundles = _bundle_ids(rng, rng.randint(0, 24))
    if rng.random() < 0.1:
        bundles.append("pulsar/system/0x00000000_0xffffffff")  # never in a top-bundles report
    cycles = []
    now = 1_700_000_000_000
    for _ in range(rng.randint(1, 4)):
        cycle = _cycle(rng, brokers, bundles, now)
        for name, stats in cycle["bundles"].items():
            if rng.random() < 0.15:  # equal bundles: the top-bundles order is open
                stats.update(msgThroughputIn=MIB, msgThroughputOut=MIB, msgRateIn=10.0, msgRateOut=10.0)
            if rng.random() < 0.1:
                stats["cacheSize"] = rng.randint(0, 10**6)
            cycle["bundles"][name] = stats
        for report in cycle["brokers"].values():
            if rng.random() < 0.1:
                report["reportAgeMs"] = _pick(rng, 60_000, ttl_ms - 60_000, ttl_ms + 60_000)
        cycles.append(cycle)
        now += _pick(rng, 60_000, 60_000, 120_000, 181_000, 179_000)
    return {"strategy": "TransferShedder", "config": config, "cycles": cycles}


STATES = ("Init", "Free", "Owned", "Assigning", "Releasing", "Splitting", "Deleted")


def _record(rng: random.Random, version: int) -> dict[str, Any]:
    state = rng.choice(STATES)
    dst, src = _pick(rng, None, "a", "b"), _pick(rng, None, "a", "b")
    if (dst is None and src is None and state != "Free") or state == "Owned":
        dst = dst or "a"  # an Owned record always names its owner (Pulsar's resolver assumes it)
    return {"state": state, "dst": dst, "src": src, "version": version, "force": rng.random() < 0.2}


def accept(rng: random.Random) -> Case:
    held = _pick(rng, 1, 2, 7, INT64_MAX, INT64_MAX - 1, INT64_MIN)
    offered = held + _pick(rng, 1, 1, 1, 0, 2, -1)
    if held == INT64_MAX and rng.random() < 0.6:
        offered = INT64_MIN  # the wrap
    offered = max(INT64_MIN, min(INT64_MAX, offered))
    current = None if rng.random() < 0.25 else _record(rng, held)
    if current is None:
        offered = _pick(rng, 1, 1, 2, 0)
    incoming = None if rng.random() < 0.05 else _record(rng, offered)
    return {"cases": [{"mode": _pick(rng, "compacted", "strict"), "current": current, "incoming": incoming}]}


def _topic_in(rng: random.Random, namespace: str, lower: int, upper: int) -> str:
    domain = _pick(rng, "persistent", "persistent", "non-persistent")
    for attempt in range(10_000):
        name = f"{domain}://{namespace}/t-{rng.randrange(10**9)}-{attempt}"
        if _pick(rng, 0, 0, 1):
            name += f"-partition-{rng.randrange(16)}"
        value = zlib.crc32(name.encode()) & FULL
        if lower <= value < upper or (upper == FULL and value == FULL):
            return name
    raise RuntimeError(f"no topic found in [{lower:#x}, {upper:#x})")


def _split_bundle(rng: random.Random) -> tuple[str, int, int]:
    namespace = _pick(rng, "tenant/ns", "prop/cluster/ns")
    pieces = _pick(rng, 1, 2, 4, 16, 64)
    edges = _layout(rng, pieces)
    i = _pick(rng, 0, len(edges) - 2, rng.randrange(len(edges) - 1))  # first, last or any bundle
    return namespace, edges[i], edges[i + 1]


def split(algorithm: str) -> Callable[[random.Random], Case]:
    def generate(rng: random.Random) -> Case:
        namespace, lower, upper = _split_bundle(rng)
        count = _pick(rng, 0, 1, 2, 3, rng.randint(2, 40))
        topics = []
        for _ in range(count):
            topic: dict[str, Any] = {"name": _topic_in(rng, namespace, lower, upper)}
            if algorithm == "flow_or_qps_equally_divide":
                topic["msgRate"] = _amount(rng, 3000.0)
                topic["throughput"] = _amount(rng, 10.0 * MIB)
            topics.append(topic)
        case: Case = {"algorithm": algorithm, "bundle": f"{namespace}/0x{lower:08x}_0x{upper:08x}",
                      "topics": topics}
        if algorithm == "specified_positions_divide":
            case["positions"] = sorted({_pick(rng, lower, upper, lower + 1, upper - 1,
                                              rng.randint(lower, upper)) for _ in range(rng.randint(1, 6))})
        if algorithm == "flow_or_qps_equally_divide":
            case["config"] = {"loadBalancerNamespaceBundleMaxMsgRate": _pick(rng, 1000, 30000),
                              "loadBalancerNamespaceBundleMaxBandwidthMbytes": _pick(rng, 10, 100),
                              "flowOrQpsDifferenceThresholdPercentage": _pick(rng, 0, 10, 50)}
        return case

    return generate


def bundle(rng: random.Random) -> Case:
    namespace = _pick(rng, "public/default", "tenant/ns", "prop/cluster/ns")
    case: Case = {"namespace": namespace}
    if rng.random() < 0.5:
        case["bundles"] = _pick(rng, 1, 2, 3, 4, 7, 16, 100, 1000)
    else:
        inner = sorted(rng.sample(range(1, FULL), k=rng.randint(0, 8)))
        case["boundaries"] = [0, *inner, FULL]
    case["topics"] = [_topic_in(rng, namespace, 0, FULL) for _ in range(rng.randint(1, 8))]
    return case


def place(strategy: str) -> Callable[[random.Random], Case]:
    def generate(rng: random.Random) -> Case:
        brokers = _brokers(rng)[:6] or ["broker-1"]
        tied = None if rng.random() < 0.7 else {"msgRateIn": 100.0, "msgRateOut": 100.0,
                                                   "cpu": {"usage": 10.0, "limit": 100.0}}
        reports = {b: _report(rng, tied) for b in brokers}
        assign = [f"fresh{n}/ns/0x00000000_0xffffffff" for n in range(rng.randint(1, 4))]
        config = _config(rng, {k: SHED_CONFIG[k] for k in (
            "loadBalancerBrokerOverloadedThresholdPercentage", "loadBalancerHistoryResourcePercentage",
            "loadBalancerCPUResourceWeight", "loadBalancerDirectMemoryResourceWeight")})
        config["loadBalancerAverageResourceUsageDifferenceThresholdPercentage"] = _pick(rng, 0, 5, 10)
        return {"strategy": strategy, "config": config, "seed": rng.randrange(1000),
                "brokers": reports, "bundles": {}, "assign": assign}

    return generate


EXTENSIBLE = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
MODULAR = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"


def place_extensible(rng: random.Random) -> Case:
    """One assignment by the extensible manager: reported versions (later, equal, missing, invalid) and
    load-manager classes, topic counts around the cap, no namespace policies."""
    brokers = _brokers(rng)[:6]
    tied = None if rng.random() < 0.7 else {"cpu": {"usage": 10.0, "limit": 100.0},
                                               "bandwidthIn": {"usage": 10.0, "limit": 100.0}}
    reports = {b: _report(rng, tied) for b in brokers}
    for report in reports.values():
        roll = rng.random()
        if roll < 0.85:
            report["version"] = _pick(rng, "4.0.0", "4.0.0", "4.0.1", "3.3.2", "4.0.0-SNAPSHOT", "4.1.0+build.7")
        elif roll < 0.9:
            report["version"] = "not-a-version"
        if rng.random() < 0.15:
            report["loadManagerClassName"] = _pick(rng, EXTENSIBLE, MODULAR)
    owned = {}
    for bundle in _bundle_ids(rng, rng.randint(0, 12)):
        if brokers:
            owned[bundle] = _bundle_stats(rng, rng.choice(brokers)) | {"topics": _pick(rng, 0, 5, 20, 300)}
    config = _config(rng, {k: SHED_CONFIG[k] for k in (
        "loadBalancerBrokerOverloadedThresholdPercentage", "loadBalancerHistoryResourcePercentage",
        "loadBalancerCPUResourceWeight", "loadBalancerDirectMemoryResourceWeight")})
    config |= {"loadManagerClassName": EXTENSIBLE,
               "loadBalancerAverageResourceUsageDifferenceThresholdPercentage": _pick(rng, 0, 5, 10),
               "preferLaterVersions": rng.random() < 0.5,
               "loadBalancerBrokerMaxTopics": _pick(rng, 10, 50, 300, 50000)}
    return {"config": config, "seed": rng.randrange(1000), "brokers": reports, "bundles": owned,
            "assign": ["fresh/ns/0x00000000_0xffffffff"]}


def autosplit(rng: random.Random) -> Case:
    """One modular auto-split pass; every namespace's bundle count is given, some at the cap."""
    config = {"loadBalancerNamespaceBundleMaxTopics": _pick(rng, 5, 1000),
              "loadBalancerNamespaceBundleMaxSessions": _pick(rng, -1, 0, 5, 1000),
              "loadBalancerNamespaceBundleMaxMsgRate": _pick(rng, 100, 30000),
              "loadBalancerNamespaceBundleMaxBandwidthMbytes": _pick(rng, 1, 100),
              "loadBalancerNamespaceMaximumBundles": _pick(rng, 8, 128, 128, 128, 128)}
    ids = _bundle_ids(rng, rng.randint(0, 16))
    cap = config["loadBalancerNamespaceMaximumBundles"]
    edge = rng.random() < 0.1  # at or next to the cap, where the order of candidates matters
    counts = {namespace_of(b): _pick(rng, cap - 1, cap, cap + 1) if edge else rng.randint(0, cap // 2)
              for b in ids}
    bundles = {b: {"topics": _pick(rng, 0, 1, 2, 5, 6, rng.randint(0, 2000)),
                   "producers": rng.randint(0, 6), "consumers": rng.randint(0, 6),
                   "msgRate": _amount(rng, 3000.0), "throughput": _amount(rng, 10.0 * MIB)} for b in ids}
    return {"config": config, "bundleCounts": counts, "cycles": [{"bundles": bundles}]}


def autosplit_extensible(rng: random.Random) -> Case:
    """Extensible auto-split over 1 to 5 cycles of one broker's bundles: hit counts carried across
    cycles, bundles in Splitting state (parents, neighbours, other namespaces with a common prefix),
    the per-cycle cap and the namespace cap, unsplittable one-hash bundles."""
    config = {"loadManagerClassName": "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
              "loadBalancerNamespaceBundleMaxTopics": _pick(rng, 5, 1000),
              "loadBalancerNamespaceBundleMaxSessions": _pick(rng, -1, 0, 5, 1000),
              "loadBalancerNamespaceBundleMaxMsgRate": _pick(rng, 100, 30000),
              "loadBalancerNamespaceBundleMaxBandwidthMbytes": _pick(rng, 1, 100),
              "loadBalancerNamespaceMaximumBundles": _pick(rng, 8, 128, 128, 128),
              "loadBalancerNamespaceBundleSplitConditionHitCountThreshold": _pick(rng, 0, 1, 3, 3),
              "loadBalancerMaxNumberOfBundlesToSplitPerCycle": _pick(rng, 1, 3, 10, 10, 10, 10, 10, 10)}
    if rng.random() < 0.1:
        config["loadBalancerAutoBundleSplitEnabled"] = False
    ids = _bundle_ids(rng, rng.randint(0, 12))
    if rng.random() < 0.1:
        ids.append("tenant/ns0/0x7fffffff_0x80000000")  # one hash wide: cannot split
    cap = config["loadBalancerNamespaceMaximumBundles"]
    edge = rng.random() < 0.15
    counts = {namespace_of(b): _pick(rng, cap - 1, cap, cap + 1) if edge else rng.randint(0, cap // 2)
              for b in ids if rng.random() < 0.9}
    hot = {b: rng.random() < 0.4 for b in ids}
    cycles = []
    for _ in range(rng.randint(1, 5)):
        bundles = {}
        for b in ids:
            if rng.random() < 0.1:
                continue  # not reported this cycle: its hit count is dropped
            busy = hot[b] and rng.random() < 0.85
            bundles[b] = {"topics": _pick(rng, 0, 1, 2, 6, rng.randint(0, 2000)) if not busy
                          else _pick(rng, 2, 1001, rng.randint(2, 2000)),
                          "producers": rng.randint(0, 6), "consumers": rng.randint(0, 6),
                          "msgRate": _amount(rng, 3000.0), "throughput": _amount(rng, 10.0 * MIB)}
        cycle: dict[str, Any] = {"bundles": bundles}
        if ids and rng.random() < 0.3:
            base = rng.choice(ids)
            parsed = BundleId.parse(base)
            namespace, lower, upper = parsed.namespace, parsed.range.lower, parsed.range.upper
            width = upper - lower
            wider = (f"{namespace}/0x{lower:08x}_0x{upper + width:08x}" if upper + width <= FULL
                     else f"{namespace}/0x{lower - width:08x}_0x{upper:08x}")  # a parent
            parent = _pick(rng, wider, base, f"{namespace}1/0x{lower:08x}_0x{upper:08x}",  # a prefix namespace
                           f"{namespace}/0x{upper:08x}_0x{min(FULL, upper + width):08x}" if upper < FULL
                           else wider)  # the neighbour above
            cycle["splitting"] = [parent]
        cycles.append(cycle)
    return {"config": config, "bundleCounts": counts, "cycles": cycles}


FAMILIES: dict[str, tuple[str, Callable[[random.Random], Case]]] = {
    "shed-threshold": ("shed", shed("ThresholdShedder")),
    "shed-overload": ("shed", shed("OverloadShedder")),
    "shed-uniform": ("shed", shed("UniformLoadShedder")),
    "shed-avg": ("shed", shed("AvgShedder")),
    "place-lltmr": ("place", place("LeastLongTermMessageRate")),
    "place-lruww": ("place", place("LeastResourceUsageWithWeight")),
    "split-range": ("split", split("range_equally_divide")),
    "split-topic-count": ("split", split("topic_count_equally_divide")),
    "split-specified": ("split", split("specified_positions_divide")),
    "split-flow": ("split", split("flow_or_qps_equally_divide")),
    "bundle": ("bundle", bundle),
    "accept": ("accept", accept),
    "autosplit-modular": ("autosplit", autosplit),
    "shed-transfer": ("shed", transfer),
    "autosplit-extensible": ("autosplit", autosplit_extensible),
    "place-extensible": ("place", place_extensible),
}
"""family -> (the ``lbctl decide`` command, its generator)."""


def case(family: str, seed: int, index: int) -> tuple[str, Case]:
    command, generate = FAMILIES[family]
    return command, generate(random.Random(f"{seed}/{family}/{index}"))
