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

from balancer.bundles import namespace_of
from balancer.load import BundleStats, LoadModel, compare_bundle_stats

Output = dict[str, Any]


def _split_sets(output: Output, detail: bool = False) -> list[set[Any]]:
    """Per cycle the bundles split; with ``detail`` also each one's reason and boundaries (the
    extensible oracle gives them, the modular manager's owner computes boundaries later)."""
    if detail:
        return [{(s["bundle"], s["reason"], tuple(s["boundaries"])) for s in cycle["splits"]}
                for cycle in output["cycles"]]
    return [{s["bundle"] for s in cycle["splits"]} for cycle in output["cycles"]]


def _detailed(pulsar: Output) -> bool:
    return any("reason" in s for cycle in pulsar.get("cycles", []) for s in cycle.get("splits", []))


def _namespace_counts(bundles: set[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for bundle in bundles:
        namespace = namespace_of(bundle)
        counts[namespace] = counts.get(namespace, 0) + 1
    return counts


def _decisions(cycle: Output, skip: bool = False) -> set[tuple[Any, ...]]:
    """The cycle's (bundle, source, destination) set, with its skip reason if ``skip``."""
    found: set[tuple[Any, ...]] = {(d["bundle"], d["source"], d.get("destination"))
                                   for d in cycle.get("decisions", [])}
    if skip:
        found.add(("skip", cycle.get("skip")))
    return found


def _same_cycle(ours: Output, pulsar: Output) -> bool:
    """Same decisions; the same skip reason too where Pulsar gives one (TransferShedder's
    UnloadCounter; the modular strategies have none)."""
    skip = "skip" in pulsar
    return _decisions(ours, skip) == _decisions(pulsar, skip)


def _same_place(mine: Output, answer: Output) -> bool:
    """Our broker is one of Pulsar's best (its pick among them is random); the extensible oracle
    also gives the filtered candidates, which must be the same, and no pick when it has none."""
    if "candidates" not in answer:
        return mine["broker"] in answer["best"]
    if sorted(mine["candidates"]) != answer["candidates"]:
        return False
    if answer["broker"] is None:
        return mine["broker"] is None
    return mine["broker"] in (answer["best"] or answer["candidates"])


def agree(command: str, ours: Output, pulsar: Output) -> bool:
    if "error" in ours or "error" in pulsar:
        return "error" in ours and "error" in pulsar
    if command == "shed":
        mine, theirs = ours["cycles"], pulsar["cycles"]
        return len(mine) == len(theirs) and all(
            _same_cycle(a, b) for a, b in zip(mine, theirs, strict=True))
    if command == "place":
        return all(_same_place(ours["assignments"][bundle], answer)
                   for bundle, answer in pulsar["assignments"].items())
    if command == "split":
        return sorted(ours["boundaries"]) == sorted(pulsar["boundaries"])
    if command == "autosplit":
        return _split_sets(ours, _detailed(pulsar)) == _split_sets(pulsar, _detailed(pulsar))
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
        if not _same_cycle(a, b):
            return index
    return 0


def open_tie(command: str, document: dict[str, Any], ours: Output, pulsar: Output) -> bool:
    """Whether a shed disagreement starts at or after a cycle with a tie Pulsar leaves to hash-map order.

    Equal bundle loads of one owner, equal broker totals (UniformLoadShedder's first-wins
    extremes), equal broker usages, or usages less than 1 point apart for AvgShedder (its
    ``(int) (a - b)`` sort).
    """
    if command == "autosplit" and "cycles" in ours and "cycles" in pulsar:
        return _autosplit_tie(document, ours, pulsar)
    if command != "shed" or "cycles" not in ours or "cycles" not in pulsar:
        return False
    upto = _first_differing_cycle(ours, pulsar)
    if document.get("strategy") == "TransferShedder":
        return _transfer_ties(document, upto)
    return any(_tied(document, cycle) for cycle in document["cycles"][: upto + 1])


def _transfer_ties(document: dict[str, Any], upto: int) -> bool:
    """TransferShedder's open ties up to cycle ``upto``: brokers of equal ``weightedMaxEMA`` (Pulsar
    sorts its store's hash-map order stably, here ids ascending) or two bundles of one owner that
    ``NamespaceBundleStats.compareTo`` finds equal (its thresholds; ``TopKBundles.partitionSort`` takes
    them in hash-map order, here ids ascending)."""
    from lbctl.decide.inputs import broker_report, bundle_record, config_from

    model = LoadModel(config_from(document))
    for cycle in document["cycles"][: upto + 1]:
        reports = {b: broker_report(b, r) for b, r in cycle.get("brokers", {}).items()}
        bundles = {b: bundle_record(b, r) for b, r in cycle.get("bundles", {}).items()}
        model.apply_round(int(cycle["now_ms"]), reports, bundles)
        if _equal_pair([d.weighted_max_ema for d in model.brokers.values()], 0.0):
            return True
        owned: dict[str, list[BundleStats]] = {}
        for owner, stats in bundles.values():
            if owner is not None:
                owned.setdefault(owner, []).append(stats)
        if any(compare_bundle_stats(a, b) == 0
               for group in owned.values() for a, b in itertools.combinations(group, 2)):
            return True
    return False


def documented(command: str, document: dict[str, Any], ours: Output, pulsar: Output) -> str | None:
    """The deliberate difference (docs/conformance.md) a disagreement starts at, if any.

    TransferShedder: Pulsar 4.0.0 reports and moves bundles of zero throughput; PR #23626 (4.0.1)
    stops both, and this project follows it. Counted here when a bundle of zero in+out throughput
    is owned by a broker in the first differing cycle or one before it.
    """
    if command != "shed" or document.get("strategy") != "TransferShedder":
        return None
    if "cycles" not in ours or "cycles" not in pulsar:
        return None
    upto = _first_differing_cycle(ours, pulsar)
    for cycle in document["cycles"][: upto + 1]:
        for stats in cycle.get("bundles", {}).values():
            total = float(stats.get("msgThroughputIn", 0)) + float(stats.get("msgThroughputOut", 0))
            if stats.get("owner") is not None and total == 0:
                return "PR #23626"
    return None


def _autosplit_tie(document: dict[str, Any], ours: Output, pulsar: Output) -> bool:
    """The namespace cap and (extensible) the per-cycle cap take candidates in hash-map order
    (Pulsar) or id order (here): at the first cycle that differs, the same number of splits per
    namespace, or there or before it both at ``loadBalancerMaxNumberOfBundlesToSplitPerCycle``
    (the cycle stops there; the hit counts of the bundles it did not reach differ)."""
    mine, theirs = _split_sets(ours), _split_sets(pulsar)
    if not _detailed(pulsar):  # modular: one cycle, the namespace cap only
        return [_namespace_counts(s) for s in mine] == [_namespace_counts(s) for s in theirs]
    first = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b), None)
    if first is None:
        return False
    cap = int(document.get("config", {}).get("loadBalancerMaxNumberOfBundlesToSplitPerCycle", 10))
    a, b = mine[first], theirs[first]
    if _namespace_counts(a) == _namespace_counts(b):
        return True
    # a cycle that stopped at the cap left the rest unvisited: their hit counts depend on the order
    return any(len(x) == len(y) == cap for x, y in zip(mine[: first + 1], theirs[: first + 1], strict=True))


def _tied(document: dict[str, Any], cycle: dict[str, Any]) -> bool:
    """A tie in this cycle: state built on it (hit counts, recently unloaded) may differ later."""
    brokers = cycle.get("brokers", {})
    scores = [_score(r, document.get("config", {})) for r in brokers.values()]
    if _equal_pair(scores, 1.0 if document.get("strategy") == "AvgShedder" else 0.0):
        return True  # equal usages: ThresholdShedder's lower boundary takes the first in map order
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
