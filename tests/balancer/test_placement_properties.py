"""Properties both placement pipelines keep, over generated clusters and several placements.

- a placement never picks a broker a filter excluded: the pick is one of the reported
  candidates, which lie inside the isolation set (modular) or are exactly the survivors of the
  filter pipeline (extensible);
- candidates are never empty while some broker qualifies, and a broker is always picked then;
- anti-affinity and topic-cap filters only ever narrow a non-empty set, never empty it;
- the same inputs and the same seed give the same placements, explanations included.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.config import LoadBalancerConfig
from balancer.load import BrokerReport, BundleStats, LoadModel, ResourceUsage
from balancer.placement.anti_affinity import filter_by_counts, modular_counts
from balancer.placement.base import Placement
from balancer.placement.extensible import ExtensiblePlacement
from balancer.placement.filters import extensible_filter, filter_topic_cap_modular
from balancer.placement.isolation import isolation_candidates
from balancer.placement.modular import ModularPlacement
from balancer.shedding.base import ClusterView, IsolationPolicy, NamespacePolicy

BROKERS = ("b1", "b2", "b3", "b4", "b5")
NAMESPACES = ("t/a", "t/b", "t/c", "t/d")
RANGES = ("0x00000000_0x40000000", "0x40000000_0x80000000", "0x80000000_0xffffffff")
STRATEGIES = (
    "LeastLongTermMessageRate",
    "LeastResourceUsageWithWeight",
    "AvgShedder",
    "RoundRobin",
)


@dataclass(frozen=True)
class Scenario:
    config: dict[str, Any]
    reports: dict[str, BrokerReport]
    bundles: dict[str, tuple[str | None, BundleStats]]
    namespaces: dict[str, NamespacePolicy]
    domains: dict[str, str]
    assign: tuple[str, ...]
    seed: int

    def view(self, extensible: bool = False) -> ClusterView:
        overrides = dict(self.config)
        if extensible:
            overrides["loadManagerClassName"] = "ExtensibleLoadManagerImpl"
        if overrides.get("loadBalancerLoadPlacementStrategy") == "AvgShedder":
            overrides["loadBalancerLoadSheddingStrategy"] = "AvgShedder"  # Pulsar requires the pair
        config = LoadBalancerConfig.from_mapping(overrides)
        model = LoadModel(config)
        model.apply_round(0, self.reports, self.bundles)
        return ClusterView(
            0, config, dict(model.brokers), dict(model.bundles), self.namespaces, self.domains
        )


@st.composite
def reports(draw: st.DrawFn) -> dict[str, BrokerReport]:
    present = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=5, unique=True))
    out: dict[str, BrokerReport] = {}
    for name in sorted(present):
        out[name] = BrokerReport(
            name,
            cpu=ResourceUsage(draw(st.floats(0, 120)), 100),
            memory=ResourceUsage(draw(st.floats(0, 100)), 100),
            msg_rate_in=draw(st.sampled_from([0.0, 10.0, 500.0, 5000.0])),
            topics=draw(st.sampled_from([0, 10, 60])),
            bundles=draw(st.integers(0, 3)),
            version=draw(st.sampled_from([None, "3.0.0", "3.1.0", "3.1.0-rc.1"])),
        )
    return out


@st.composite
def policies(draw: st.DrawFn) -> dict[str, NamespacePolicy]:
    out: dict[str, NamespacePolicy] = {}
    for namespace in NAMESPACES:
        group = draw(st.sampled_from([None, "g", "G", "h"]))
        isolation = None
        if draw(st.integers(0, 3)) == 0:
            isolation = IsolationPolicy(
                primary=(draw(st.sampled_from(["b[12]", "b3", "x.*"])),),
                secondary=(draw(st.sampled_from(["b[45]", "b.*"])),),
                min_limit=draw(st.integers(0, 3)),
            )
        out[namespace] = NamespacePolicy(namespace, group, isolation)
    return out


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    brokers = draw(reports())
    bundles: dict[str, tuple[str | None, BundleStats]] = {}
    for namespace in NAMESPACES:
        for hash_range in RANGES:
            owner = draw(st.sampled_from([None, None, *sorted(brokers), "gone"]))
            bundle = f"{namespace}/{hash_range}"
            rate = draw(st.sampled_from([0.0, 20.0, 300.0]))
            bundles[bundle] = (
                owner,
                BundleStats(bundle, msg_rate_in=rate, topics=draw(st.integers(0, 30))),
            )
    unowned = sorted(b for b, (owner, _) in bundles.items() if owner is None)
    extra = [f"t/fresh{i}/0x00000000_0xffffffff" for i in range(3)]
    assign = draw(st.lists(st.sampled_from(unowned + extra), max_size=6, unique=True))
    config = {
        "loadBalancerLoadPlacementStrategy": draw(st.sampled_from(STRATEGIES)),
        "loadBalancerBrokerMaxTopics": draw(st.sampled_from([25, 50000])),
        "loadBalancerDistributeBundlesEvenlyEnabled": draw(st.booleans()),
        "failureDomainsEnabled": draw(st.booleans()),
        "preferLaterVersions": draw(st.booleans()),
        "loadBalancerSheddingExcludedNamespaces": draw(st.sampled_from(["", "t/b"])),
    }
    domains = {b: draw(st.sampled_from(["d1", "d2"])) for b in brokers if draw(st.booleans())}
    return Scenario(
        config,
        brokers,
        bundles,
        draw(policies()),
        domains,
        tuple(assign),
        draw(st.integers(0, 2**16)),
    )


def _run_modular(scenario: Scenario) -> list[tuple[Placement, list[str]]]:
    view = scenario.view()
    placement = ModularPlacement(view.config)
    rng = random.Random(scenario.seed)
    out = []
    for bundle in scenario.assign:
        isolation = isolation_candidates(view, bundle.rsplit("/", 1)[0])
        out.append((placement.place(view, bundle, rng), isolation))
    return out


def _run_extensible(scenario: Scenario) -> list[tuple[Placement, list[str]]]:
    view = scenario.view(extensible=True)
    placement = ExtensiblePlacement(view.config)
    rng = random.Random(scenario.seed)
    out = []
    for bundle in scenario.assign:
        survivors, _ = extensible_filter(view, bundle, strict=False)
        out.append((placement.place(view, bundle, rng), survivors))
    return out


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_modular_picks_stay_inside_the_filters(scenario: Scenario) -> None:
    for placed, isolation in _run_modular(scenario):
        assert list(placed.candidates) == sorted(placed.candidates)
        if placed.source == "preallocated":
            continue
        assert set(placed.candidates) <= set(isolation)
        if isolation:
            assert placed.candidates, placed.to_dict()
            assert placed.broker in placed.candidates
        else:
            assert placed.broker is None
        assert placed.broker is None or placed.broker in placed.best


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_extensible_picks_stay_inside_the_filters(scenario: Scenario) -> None:
    for placed, survivors in _run_extensible(scenario):
        assert list(placed.candidates) == survivors
        if survivors:
            assert placed.broker in survivors
        else:
            assert placed.broker is None


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_narrowing_filters_never_empty_a_set(scenario: Scenario) -> None:
    view = scenario.view()
    for namespace in NAMESPACES:
        isolation = isolation_candidates(view, namespace)
        capped = filter_topic_cap_modular(view, isolation, {})
        assert set(capped) <= set(isolation) and (bool(capped) == bool(isolation))
        kept = filter_by_counts(view, capped, modular_counts(view, namespace))
        assert set(kept) <= set(capped) and (bool(kept) == bool(capped))


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_same_seed_same_placements(scenario: Scenario) -> None:
    first = [p.to_dict() for p, _ in _run_modular(scenario)]
    assert first == [p.to_dict() for p, _ in _run_modular(scenario)]
    first_e = [p.to_dict() for p, _ in _run_extensible(scenario)]
    assert first_e == [p.to_dict() for p, _ in _run_extensible(scenario)]
