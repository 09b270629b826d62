"""How our ``lbctl decide`` output is held against Pulsar's (docs/conformance.md, tests/vectors/README.md).

Invariants: only what Pulsar decides is compared; where Pulsar leaves the answer open, the
relaxation is the one of the vectors' README:
- shed: per cycle the set of (bundle, source, destination); Pulsar's strategies return a
  multimap in hash-map order and have no labels, reasons or skips;
- place: our broker must be one of Pulsar's best brokers (its pick among them is random);
- split, bundle, accept: exact; an error on both sides agrees.
"""

from __future__ import annotations

import itertools
from typing import Any

Output = dict[str, Any]


def _decisions(cycle: Output) -> set[tuple[str, str, str | None]]:
    return {(d["bundle"], d["source"], d.get("destination")) for d in cycle.get("decisions", [])}


def agree(command: str, ours: Output, pulsar: Output) -> bool:
    if "error" in ours or "error" in pulsar:
        return "error" in ours and "error" in pulsar
    if command == "shed":
        mine, theirs = ours["cycles"], pulsar["cycles"]
        return len(mine) == len(theirs) and all(
            _decisions(a) == _decisions(b) for a, b in zip(mine, theirs, strict=True))
    if command == "place":
        return all(ours["assignments"][bundle]["broker"] in answer["best"]
                   for bundle, answer in pulsar["assignments"].items())
    if command == "split":
        return sorted(ours["boundaries"]) == sorted(pulsar["boundaries"])
    return ours == pulsar


# -- ties Pulsar leaves open (behaviour §8: hash-map order, AvgShedder's int(a - b) comparator) ---------

_WEIGHTS = {"cpu": ("loadBalancerCPUResourceWeight", 1.0),
            "directMemory": ("loadBalancerDirectMemoryResourceWeight", 0.0),
            "bandwidthIn": ("loadBalancerBandwidthInResourceWeight", 1.0),
            "bandwidthOut": ("loadBalancerBandwidthOutResourceWeight", 1.0)}


def _score(report: dict[str, Any], config: dict[str, Any]) -> float:
    """The modular weighted max in percent (what AvgShedder sorts by)."""
    terms = []
    for resource, (key, default) in _WEIGHTS.items():
        usage = report.get(resource) or {}
        limit = float(usage.get("limit", 0))
        percent = float(usage.get("usage", 0)) / limit * 100 if limit > 0 else 0.0
        terms.append(percent * float(config.get(key, default)))
    return max(terms)


def _equal_pair(values: list[float], within: float) -> bool:
    ordered = sorted(values)
    return any(b - a <= within for a, b in itertools.pairwise(ordered))


def _first_differing_cycle(ours: Output, pulsar: Output) -> int:
    for index, (a, b) in enumerate(zip(ours["cycles"], pulsar["cycles"], strict=False)):
        if _decisions(a) != _decisions(b):
            return index
    return 0


def open_tie(command: str, document: dict[str, Any], ours: Output, pulsar: Output) -> bool:
    """Whether a shed disagreement starts at or after a cycle with a tie Pulsar leaves to hash-map order.

    Equal bundle loads of one owner, equal broker totals (UniformLoadShedder's first-wins
    extremes) or broker scores less than 1 apart for AvgShedder (its ``(int) (a - b)`` sort).
    """
    if command != "shed" or "cycles" not in ours or "cycles" not in pulsar:
        return False
    upto = _first_differing_cycle(ours, pulsar)
    return any(_tied(document, cycle) for cycle in document["cycles"][: upto + 1])


def _tied(document: dict[str, Any], cycle: dict[str, Any]) -> bool:
    """A tie in this cycle: state built on it (hit counts, recently unloaded) may differ later."""
    brokers = cycle.get("brokers", {})
    scores = [_score(r, document.get("config", {})) for r in brokers.values()]
    if document.get("strategy") == "AvgShedder" and _equal_pair(scores, 1.0):
        return True
    for key in ("msgRate", "msgThroughput"):
        totals = [float(r.get(key + "In", 0)) + float(r.get(key + "Out", 0)) for r in brokers.values()]
        if _equal_pair(totals, 0.0):
            return True
        by_owner: dict[str, list[float]] = {}
        for stats in cycle.get("bundles", {}).values():
            value = float(stats.get(key + "In", 0)) + float(stats.get(key + "Out", 0))
            by_owner.setdefault(str(stats.get("owner")), []).append(value)
        if any(_equal_pair(values, 0.0) for values in by_owner.values()):
            return True
    return False
