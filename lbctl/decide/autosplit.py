"""``lbctl decide autosplit``: which bundles auto-split selects, cycle by cycle (behaviour §2).

Invariants: ``config.loadManagerClassName`` selects the modular rule (every candidate, no hit
count; rates are the leader's long-term values) or the extensible one (hit counts carried from
cycle to cycle, at most ``loadBalancerMaxNumberOfBundlesToSplitPerCycle``, exactly one boundary of
the default algorithm); ``bundleCounts`` gives each namespace's bundle count (default: the bundles
listed for it in the cycle). Input::

    {"config": {...}, "bundleCounts": {"t/ns": 4},
     "cycles": [{"bundles": {"t/ns/0x00000000_0x40000000": {"topics": 3 or [topic, ...],
                 "producers": 1, "consumers": 1, "msgRate": 1.0, "throughput": 2.0}},
                 "splitting": ["t/ns/..."]}]}

Output: ``{"cycles": [{"splits": [{"bundle", "reason", "algorithm", "boundaries"}]}]}`` where a
topic is written as in ``decide split``; ``boundaries`` is empty for the modular manager (its
owner computes them when it splits).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from balancer.bundles import BundleId
from balancer.config import LoadBalancerConfig
from balancer.errors import MalformedInput
from balancer.split import (
    BundleSplitStats,
    SplitDecision,
    SplitHitCounts,
    extensible_split_candidates,
    modular_split_candidates,
)
from lbctl.decide.inputs import amount, config_from, count, known_keys, mapping
from lbctl.decide.split import topic_load

TOP_KEYS = ("config", "bundleCounts", "cycles")
BUNDLE_KEYS = ("topics", "producers", "consumers", "msgRate", "throughput")


def run(document: dict[str, Any]) -> dict[str, Any]:
    known_keys(document, TOP_KEYS, "")
    config = config_from(document)
    counts = {str(ns): count(n, f"bundleCounts.{ns}")
              for ns, n in mapping(document.get("bundleCounts") or {}, "bundleCounts").items()}
    cycles = document.get("cycles")
    if not isinstance(cycles, list) or not cycles:
        raise MalformedInput("cycles: expected a non-empty list of split cycles", value="cycles")
    hits = SplitHitCounts()
    out = []
    for index, raw in enumerate(cycles):
        decisions, hits = _one_cycle(raw, f"cycles[{index}]", counts, hits, config)
        out.append({"splits": [_output(d) for d in decisions]})
    return {"cycles": out}


def _one_cycle(raw: Any, where: str, counts: Mapping[str, int], hits: SplitHitCounts,
               config: LoadBalancerConfig) -> tuple[tuple[SplitDecision, ...], SplitHitCounts]:
    cycle = mapping(raw, where, ("bundles", "splitting"))
    stats = [_stats(b, r, f"{where}.bundles.{b}") for b, r in mapping(cycle.get("bundles") or {},
                                                                        f"{where}.bundles").items()]
    known = dict(counts)
    for item in stats:
        namespace = BundleId.parse(item.bundle).namespace
        if namespace not in counts:
            known[namespace] = known.get(namespace, 0) + 1
    if not config.extensible:
        return modular_split_candidates(stats, known, config), hits
    splitting = [str(b) for b in cycle.get("splitting") or []]
    result = extensible_split_candidates(stats, known, hits, config, splitting)
    return result.decisions, result.hit_counts


def _stats(bundle: str, raw: Any, where: str) -> BundleSplitStats:
    BundleId.parse(bundle)
    record = mapping(raw, where, BUNDLE_KEYS)
    topics = record.get("topics", 0)
    loads = tuple(topic_load(t, f"{where}.topics[{i}]") for i, t in enumerate(topics)) \
        if isinstance(topics, list) else ()
    return BundleSplitStats(
        bundle,
        topics=len(loads) if isinstance(topics, list) else count(topics, f"{where}.topics"),
        sessions=count(record.get("producers", 0), f"{where}.producers")
        + count(record.get("consumers", 0), f"{where}.consumers"),
        msg_rate=amount(record.get("msgRate", 0), f"{where}.msgRate"),
        throughput=amount(record.get("throughput", 0), f"{where}.throughput"),
        topic_loads=loads,
    )


def _output(decision: SplitDecision) -> dict[str, Any]:
    return {"bundle": decision.bundle, "reason": str(decision.reason), "algorithm": decision.algorithm,
            "boundaries": list(decision.boundaries)}
