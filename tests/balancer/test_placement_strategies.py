"""Placement strategies compared (the extensible manager versus the modular one) and the
modular manager's state: preallocations, explicit destinations, round-robin, AvgShedder's plan
and the explanation a placement carries."""

from __future__ import annotations

import json
import random

import pytest

from balancer.config import LoadBalancerConfig
from balancer.errors import BrokerFilterError
from balancer.load import BrokerReport, BundleStats, ResourceUsage
from balancer.placement.avg import AvgShedderPlacement
from balancer.placement.extensible import ExtensiblePlacement
from balancer.placement.filters import extensible_candidates
from balancer.placement.least_resource_usage import LeastResourceUsageWithWeight
from balancer.placement.modular import ModularPlacement
from balancer.shedding.avg import AvgShedder
from balancer.shedding.base import ClusterView
from tests.support.placement_documents import (
    EXTENSIBLE,
    FULL,
    HALVES,
    broker,
    group,
    place,
    view_of,
)

# -- strategies: E versus M -------------------------------------------------------------------


def test_modular_lruww_keeps_history_between_calls() -> None:
    config = LoadBalancerConfig.from_mapping({"loadBalancerHistoryResourcePercentage": 0.5})
    strategy = LeastResourceUsageWithWeight(config)
    placement = ModularPlacement(config, strategy)
    busy = {"a": (10.0, 100.0), "b": (30.0, 100.0)}

    def view(cpu_a: float) -> ClusterView:
        reports = {
            b: BrokerReport(b, cpu=ResourceUsage(cpu, 100), msg_rate_in=rate, bundles=1)
            for b, (cpu, rate) in busy.items()
        }
        reports["a"] = BrokerReport("a", cpu=ResourceUsage(cpu_a, 100), msg_rate_in=1, bundles=1)
        return view_of(reports, {})

    rng = random.Random(0)
    placement.place(view(10), f"t/n1/{FULL}", rng)
    second = placement.place(view(50), f"t/n2/{FULL}", rng)
    # a's EMA is (0.10 + 0.50) / 2 = 0.30, b's stays 0.30: nobody is clearly below the average.
    assert second.scores == pytest.approx({"a": 0.30, "b": 0.30})
    assert second.best == ("a", "b")


def test_extensible_usage_includes_memory_modular_does_not() -> None:
    config = {
        "loadBalancerMemoryResourceWeight": 1.0,
        "loadBalancerAverageResourceUsageDifferenceThresholdPercentage": 5,
    }
    brokers = {"a": broker(cpu=10, memory=90, rate=1), "b": broker(cpu=40, rate=1)}
    modular = place(
        brokers, [f"t/n/{FULL}"], strategy="LeastResourceUsageWithWeight", config=config
    )
    extensible = place(brokers, [f"t/n/{FULL}"], config={**config, **EXTENSIBLE})
    assert modular[f"t/n/{FULL}"]["broker"] == "a"
    assert extensible[f"t/n/{FULL}"]["broker"] == "b"


def test_extensible_has_no_even_spread_and_counts_placements_as_owned() -> None:
    brokers = {"a": broker(cpu=10), "b": broker(cpu=50)}
    assign = [f"t/n/{h}" for h in HALVES]
    got = place(brokers, assign, config={**EXTENSIBLE, "failureDomainsEnabled": True})
    assert [got[b]["broker"] for b in assign] == ["a", "a"]
    aa = place(
        brokers, [f"t/x/{FULL}", f"t/y/{FULL}"], config=EXTENSIBLE, namespaces=group("t/x", "t/y")
    )
    assert aa[f"t/y/{FULL}"] == {"broker": "b", "candidates": ["b"]}


def test_extensible_ignores_filter_errors_when_placing_but_reports_them_to_shedding() -> None:
    config = LoadBalancerConfig.from_mapping({**EXTENSIBLE, "preferLaterVersions": True})
    reports = {"a": BrokerReport("a", version="3.0.0"), "b": BrokerReport("b")}
    view = view_of(reports, {}, config=config)
    with pytest.raises(BrokerFilterError, match="no version string"):
        extensible_candidates(view, f"t/n/{FULL}")
    placed = ExtensiblePlacement(config).place(view, f"t/n/{FULL}", random.Random(1))
    assert placed.candidates == ("a", "b")
    assert "error ignored" in next(s.note for s in placed.steps if s.name == "Version")


def test_lltmr_random_among_ties_is_fixed_by_the_seed() -> None:
    brokers = {name: broker(rate=5) for name in ("a", "b", "c", "d")}
    picks = {place(brokers, [f"t/n/{FULL}"], seed=s)[f"t/n/{FULL}"]["broker"] for s in range(40)}
    assert picks == {"a", "b", "c", "d"}
    again = [place(brokers, [f"t/n/{FULL}"], seed=7) for _ in range(3)]
    assert again[0] == again[1] == again[2]


def test_all_overloaded_brokers_are_all_candidates() -> None:
    brokers = {"a": broker(cpu=95, rate=1), "b": broker(cpu=99, rate=2)}
    config = LoadBalancerConfig()
    view = view_of(
        {b: BrokerReport(b, cpu=ResourceUsage(c, 100)) for b, c in (("a", 95), ("b", 99))}, {}
    )
    placed = ModularPlacement(config).place(view, f"t/n/{FULL}", random.Random(3))
    assert placed.best == ("a", "b")
    assert placed.to_dict()["scores"] == {"a": "inf", "b": "inf"}
    json.dumps(placed.to_dict())
    assert place(brokers, [f"t/n/{FULL}"])[f"t/n/{FULL}"]["candidates"] == ["a", "b"]


# -- modular state: preallocation, destination, round-robin, AvgShedder ----------------------


def test_preallocation_lasts_until_the_broker_reports_the_bundle() -> None:
    placement = ModularPlacement(LoadBalancerConfig(), rate_from_report=True)
    reports = {"a": BrokerReport("a"), "b": BrokerReport("b", msg_rate_in=500)}
    rng = random.Random(0)
    first = placement.place(view_of(reports, {}), f"t/n/{FULL}", rng)
    assert (first.broker, first.source) == ("a", "strategy")
    again = placement.place(view_of(reports, {}), f"t/n/{FULL}", rng)
    assert (again.broker, again.source) == ("a", "preallocated")
    reported = view_of(reports, {f"t/n/{FULL}": ("a", BundleStats(f"t/n/{FULL}"))})
    placement.release_reported(reported)
    assert placement.preallocated == {}


def test_preallocations_on_a_departed_broker_are_dropped() -> None:
    placement = ModularPlacement(LoadBalancerConfig(), rate_from_report=True)
    reports = {"a": BrokerReport("a"), "b": BrokerReport("b", msg_rate_in=500)}
    placement.place(view_of(reports, {}), f"t/n/{FULL}", random.Random(0))
    after = placement.place(view_of({"b": reports["b"]}, {}), f"t/n/{FULL}", random.Random(0))
    assert after.broker == "b"


def test_an_explicit_destination_wins() -> None:
    placement = ModularPlacement(LoadBalancerConfig())
    view = view_of({"a": BrokerReport("a"), "b": BrokerReport("b", msg_rate_in=9)}, {})
    placed = placement.place(view, f"t/n/{FULL}", random.Random(0), destination="b")
    assert (placed.broker, placed.source, placed.candidates) == ("b", "destination", ("b",))
    assert placement.preallocated == {}


def test_shedding_excluded_namespaces_use_round_robin() -> None:
    brokers = {"a": broker(rate=1), "b": broker(rate=100), "c": broker(rate=100)}
    assign = [f"t/pinned/{r}" for r in ("0x00000000_0x40000000", "0x40000000_0x80000000")]
    config = {
        "loadBalancerSheddingExcludedNamespaces": "t/pinned",
        "loadBalancerDistributeBundlesEvenlyEnabled": False,
    }
    got = place(brokers, assign, config=config)
    assert [got[b]["broker"] for b in assign] == ["a", "b"]


def test_avg_shedder_placement_follows_the_plan_else_records_a_random_pick() -> None:
    config = LoadBalancerConfig.from_mapping(
        {
            "loadBalancerLoadPlacementStrategy": "AvgShedder",
            "loadBalancerLoadSheddingStrategy": "AvgShedder",
            "loadBalancerDistributeBundlesEvenlyEnabled": False,
        }
    )
    shedder = AvgShedder(config)
    shedder.planned = {f"t/n/{HALVES[0]}": "c"}
    placement = ModularPlacement(config, avg_plan=shedder)
    assert isinstance(placement.strategy, AvgShedderPlacement)
    view = view_of({b: BrokerReport(b) for b in ("a", "b", "c")}, {})
    planned = placement.place(view, f"t/n/{HALVES[0]}", random.Random(0))
    assert planned.broker == "c"
    unplanned = placement.place(view, f"t/n/{HALVES[1]}", random.Random(0))
    assert shedder.planned[f"t/n/{HALVES[1]}"] == unplanned.broker


def test_live_lltmr_reads_long_term_bundle_averages() -> None:
    reports = {"a": BrokerReport("a", msg_rate_in=1), "b": BrokerReport("b", msg_rate_in=1000)}
    bundles = {f"t/x/{FULL}": ("a", BundleStats(f"t/x/{FULL}", msg_rate_in=200))}
    placed = ModularPlacement(LoadBalancerConfig()).place(
        view_of(reports, bundles), f"t/y/{FULL}", random.Random(0)
    )
    # The live system sums its bundles' long-term rates; the report totals are not read.
    assert placed.scores == {"a": 200.0, "b": 0.0}
    assert placed.broker == "b"


def test_a_placement_explains_itself() -> None:
    got = ModularPlacement(LoadBalancerConfig(), rate_from_report=True).place(
        view_of({"a": BrokerReport("a", msg_rate_in=3), "b": BrokerReport("b", msg_rate_in=1)}, {}),
        f"t/n/{FULL}",
        random.Random(0),
    )
    explained = got.to_dict()
    assert explained["broker"] == "b"
    assert explained["scores"] == {"a": 3.0, "b": 1.0}
    assert [s["name"] for s in explained["steps"]] == [
        "isolation",
        "topic-cap",
        "anti-affinity",
        "even-spread",
        "filters",
    ]


