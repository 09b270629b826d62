"""Placement as a user sees it: where bundles land, which brokers were considered, and why.

Most cases go through `lbctl decide place` documents (behaviour §5.7); the rest use the pipeline
objects directly for what a document cannot show (preallocations released by a report, explicit
destinations, AvgShedder's plan, the explanation trail).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import pytest

from balancer.config import LoadBalancerConfig
from balancer.errors import BrokerFilterError
from balancer.load import BrokerReport, BundleStats, LoadModel, ResourceUsage
from balancer.placement.anti_affinity import may_leave_broker
from balancer.placement.avg import AvgShedderPlacement
from balancer.placement.extensible import ExtensiblePlacement
from balancer.placement.filters import extensible_candidates, version_key
from balancer.placement.isolation import host_of, isolation_candidates
from balancer.placement.least_resource_usage import LeastResourceUsageWithWeight
from balancer.placement.modular import ModularPlacement
from balancer.shedding.avg import AvgShedder
from balancer.shedding.base import ClusterView, IsolationPolicy, NamespacePolicy
from lbctl.decide import decide

FULL = "0x00000000_0xffffffff"
HALVES = ("0x00000000_0x80000000", "0x80000000_0xffffffff")
EXTENSIBLE = {"loadManagerClassName": "ExtensibleLoadManagerImpl"}


def broker(cpu: float = 0.0, rate: float = 0.0, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "cpu": {"usage": cpu, "limit": 100.0},
        "memory": {"usage": extra.pop("memory", 0.0), "limit": 100.0},
        "directMemory": {"usage": 0.0, "limit": 100.0},
        "bandwidthIn": {"usage": 0.0, "limit": 100.0},
        "bandwidthOut": {"usage": 0.0, "limit": 100.0},
        "msgRateIn": rate,
        "msgRateOut": 0,
        "msgThroughputIn": 0,
        "msgThroughputOut": 0,
    }
    record.update(extra)
    return record


def owned(owner: str | None, topics: int = 1, rate: float = 0.0) -> dict[str, Any]:
    return {
        "owner": owner,
        "msgRateIn": rate,
        "msgRateOut": 0,
        "msgThroughputIn": 0,
        "msgThroughputOut": 0,
        "topics": topics,
        "producers": 0,
        "consumers": 0,
    }


def place(
    brokers: dict[str, Any],
    assign: list[str],
    *,
    strategy: str = "LeastLongTermMessageRate",
    config: dict[str, Any] | None = None,
    bundles: dict[str, Any] | None = None,
    namespaces: dict[str, Any] | None = None,
    domains: dict[str, list[str]] | None = None,
    seed: int = 1,
) -> dict[str, dict[str, Any]]:
    document = {
        "strategy": strategy,
        "config": config or {},
        "seed": seed,
        "brokers": brokers,
        "bundles": bundles or {},
        "namespaces": namespaces or {},
        "failureDomains": domains or {},
        "assign": assign,
    }
    result: dict[str, dict[str, Any]] = decide("place", document)["assignments"]
    return result


def group(*namespaces: str, name: str = "g") -> dict[str, Any]:
    return {ns: {"antiAffinityGroup": name} for ns in namespaces}


# -- anti-affinity and failure domains -------------------------------------------------------

DOCS_BROKERS = {f"B{i}": broker(rate=10.0 * i) for i in range(1, 5)}
DOCS_DOMAINS = {"D1": ["B1", "B2"], "D2": ["B3", "B4"]}
DOCS_ASSIGN = [f"t/ns{i}/{FULL}" for i in range(1, 5)]


def test_docs_example_spreads_a_group_over_domains_then_brokers() -> None:
    got = place(
        DOCS_BROKERS,
        DOCS_ASSIGN,
        config={"failureDomainsEnabled": True},
        namespaces=group("t/ns1", "t/ns2", "t/ns3", "t/ns4"),
        domains=DOCS_DOMAINS,
    )
    table = [(got[b]["broker"], got[b]["candidates"]) for b in DOCS_ASSIGN]
    assert table == [
        ("B1", ["B1", "B2", "B3", "B4"]),
        ("B3", ["B3", "B4"]),
        ("B2", ["B2", "B4"]),
        ("B4", ["B4"]),
    ]


def test_domains_are_ignored_unless_enabled() -> None:
    got = place(
        DOCS_BROKERS,
        DOCS_ASSIGN[:2],
        namespaces=group("t/ns1", "t/ns2"),
        domains=DOCS_DOMAINS,
    )
    # Without failureDomainsEnabled only brokers count: ns2 may share B1's domain.
    assert got[DOCS_ASSIGN[1]] == {"broker": "B2", "candidates": ["B2", "B3", "B4"]}


def test_unmapped_brokers_form_the_default_domain() -> None:
    brokers = {"a": broker(rate=1), "b": broker(rate=2), "c": broker(rate=3)}
    got = place(
        brokers,
        [f"t/x/{FULL}", f"t/y/{FULL}"],
        config={"failureDomainsEnabled": True},
        namespaces=group("t/x", "t/y"),
        domains={"d1": ["a", "b"]},
    )
    # x lands on a (domain d1), so y must go to the other domain: c, alone in "default".
    assert got[f"t/y/{FULL}"] == {"broker": "c", "candidates": ["c"]}


def test_groups_compare_case_insensitively() -> None:
    got = place(
        {"a": broker(rate=1), "b": broker(rate=2)},
        [f"t/x/{FULL}", f"t/y/{FULL}"],
        namespaces={
            "t/x": {"antiAffinityGroup": "Payments"},
            "t/y": {"antiAffinityGroup": "PAYMENTS"},
        },
    )
    assert got[f"t/y/{FULL}"]["candidates"] == ["b"]


def test_modular_counts_namespaces_extensible_counts_bundles() -> None:
    brokers = {"a": broker(cpu=10, rate=1), "b": broker(cpu=10, rate=2)}
    bundles = {
        f"t/x/{HALVES[0]}": owned("a"),
        f"t/x/{HALVES[1]}": owned("a"),
        f"t/y/{FULL}": owned("b"),
    }
    kwargs: dict[str, Any] = {"bundles": bundles, "namespaces": group("t/x", "t/y", "t/z")}
    modular = place(brokers, [f"t/z/{FULL}"], **kwargs)
    extensible = place(brokers, [f"t/z/{FULL}"], config=EXTENSIBLE, **kwargs)
    # One namespace of the group on each broker (M) versus two bundles on a, one on b (E).
    assert modular[f"t/z/{FULL}"]["candidates"] == ["a", "b"]
    assert extensible[f"t/z/{FULL}"] == {"broker": "b", "candidates": ["b"]}


def _view(
    reports: dict[str, BrokerReport],
    bundles: Mapping[str, tuple[str | None, BundleStats]],
    *,
    namespaces: dict[str, NamespacePolicy] | None = None,
    config: LoadBalancerConfig | None = None,
    domains: dict[str, str] | None = None,
) -> ClusterView:
    conf = config or LoadBalancerConfig()
    model = LoadModel(conf)
    model.apply_round(0, reports, bundles)
    return ClusterView(
        0, conf, dict(model.brokers), dict(model.bundles), namespaces or {}, domains or {}
    )


def _group_view(owners: dict[str, str]) -> ClusterView:
    reports = {b: BrokerReport(b) for b in ("b0", "b1", "b2")}
    bundles = {
        f"t/{ns}/{FULL}": (owner, BundleStats(f"t/{ns}/{FULL}")) for ns, owner in owners.items()
    }
    policies = {f"t/{ns}": NamespacePolicy(f"t/{ns}", anti_affinity_group="g") for ns in owners}
    return _view(reports, bundles, namespaces=policies)


def test_shed_time_check_keeps_a_group_spread_one_per_broker() -> None:
    even = _group_view({"n0": "b0", "n1": "b1", "n2": "b2"})
    assert not may_leave_broker(even, f"t/n0/{FULL}", "b0")
    crowded = _group_view({"n0": "b0", "n1": "b1", "n2": "b1"})
    assert may_leave_broker(crowded, f"t/n1/{FULL}", "b1")
    assert may_leave_broker(crowded, f"t/n0/{FULL}", "b0")  # b2 hosts none of the group


def test_shed_time_check_lets_ungrouped_bundles_go() -> None:
    view = _view({"a": BrokerReport("a"), "b": BrokerReport("b")}, {})
    assert may_leave_broker(view, f"t/free/{FULL}", "a")


# -- isolation ----------------------------------------------------------------------------

ISOLATED_BROKERS = {
    "broker-1:8080": broker(rate=1),
    "broker-2:8080": broker(rate=2),
    "broker-3:8080": broker(rate=3),
    "shared-1:8080": broker(rate=4),
}


def _isolated(primary: list[str], secondary: list[str], min_limit: int) -> dict[str, Any]:
    policy = {"primary": primary, "secondary": secondary, "minLimit": min_limit}
    return {"t/iso": {"isolation": policy}, "t/open": {}}


@pytest.mark.parametrize(
    ("min_limit", "expected"),
    [
        (1, ["broker-1:8080", "broker-2:8080"]),
        (2, ["broker-1:8080", "broker-2:8080"]),
        (3, ["broker-1:8080", "broker-2:8080", "broker-3:8080"]),
    ],
)
def test_isolated_namespace_uses_primaries_then_secondaries_below_min_limit(
    min_limit: int, expected: list[str]
) -> None:
    got = place(
        ISOLATED_BROKERS,
        [f"t/iso/{FULL}"],
        namespaces=_isolated(["broker-[12]"], ["broker-3"], min_limit),
        config={"loadBalancerDistributeBundlesEvenlyEnabled": False},
    )
    assert got[f"t/iso/{FULL}"]["candidates"] == expected


def test_other_namespaces_keep_off_primaries_but_share_secondaries() -> None:
    got = place(
        ISOLATED_BROKERS,
        [f"t/open/{FULL}"],
        namespaces=_isolated(["broker-[12]"], ["broker-3"], 1),
    )
    assert got[f"t/open/{FULL}"] == {
        "broker": "broker-3:8080",
        "candidates": ["broker-3:8080", "shared-1:8080"],
    }


def test_isolation_matches_whole_host_without_port() -> None:
    assert host_of("broker-1:8080") == "broker-1"
    assert host_of("[::1]:8080") == "[::1]"
    policy = NamespacePolicy("t/iso", isolation=IsolationPolicy(primary=("broker",), min_limit=1))
    view = _view(
        {b: BrokerReport(b) for b in ("broker:1", "broker-2:1")}, {}, namespaces={"t/iso": policy}
    )
    assert isolation_candidates(view, "t/iso") == ["broker:1"]


def test_no_broker_when_isolation_leaves_none() -> None:
    got = place(
        {"a": broker()},
        [f"t/iso/{FULL}"],
        namespaces={"t/iso": {"isolation": {"primary": ["nowhere"], "minLimit": 1}}},
    )
    assert got[f"t/iso/{FULL}"] == {"broker": None, "candidates": []}


# -- topic cap, even spread, version filter, overload re-check -----------------------------


def test_topic_cap_drops_full_brokers_and_is_undone_when_all_are_full() -> None:
    brokers = {"a": broker(rate=1), "b": broker(rate=500)}
    bundles = {f"t/old/{FULL}": owned("a", topics=30)}
    config = {"loadBalancerBrokerMaxTopics": 20}
    got = place(brokers, [f"t/new/{FULL}"], bundles=bundles, config=config)
    assert got[f"t/new/{FULL}"] == {"broker": "b", "candidates": ["b"]}
    bundles[f"t/other/{FULL}"] = owned("b", topics=30)
    got = place(brokers, [f"t/new/{FULL}"], bundles=bundles, config=config)
    assert got[f"t/new/{FULL}"] == {"broker": "a", "candidates": ["a", "b"]}


def test_preallocated_topics_count_towards_the_cap() -> None:
    brokers = {"a": broker(rate=1), "b": broker(rate=1000)}
    bundles = {f"t/n{i}/{FULL}": owned(None, topics=25) for i in (1, 2)}
    got = place(brokers, list(bundles), bundles=bundles, config={"loadBalancerBrokerMaxTopics": 20})
    assert [got[b]["broker"] for b in bundles] == ["a", "b"]


def test_extensible_topic_cap_has_no_undo() -> None:
    brokers = {"a": broker(), "b": broker()}
    bundles = {f"t/old/{HALVES[0]}": owned("a", 20), f"t/old/{HALVES[1]}": owned("b", 20)}
    config = {**EXTENSIBLE, "loadBalancerBrokerMaxTopics": 20}
    got = place(brokers, [f"t/new/{FULL}"], bundles=bundles, config=config)
    assert got[f"t/new/{FULL}"] == {"broker": None, "candidates": []}


def test_even_spread_can_be_switched_off() -> None:
    brokers = {"A": broker(rate=0), "B": broker(rate=1000)}
    assign = [f"public/default/{h}" for h in HALVES]
    on = place(brokers, assign)
    off = place(brokers, assign, config={"loadBalancerDistributeBundlesEvenlyEnabled": False})
    assert [on[b]["broker"] for b in assign] == ["A", "B"]
    assert [off[b]["broker"] for b in assign] == ["A", "A"]


VERSIONED = {
    "old": broker(rate=1, version="2.10.4"),
    "new": broker(rate=50, version="3.0.1"),
    "new2": broker(rate=60, version="3.0.1"),
    "rc": broker(rate=2, version="3.0.1-rc.1"),
}


def test_prefer_later_versions_keeps_only_the_newest_release() -> None:
    got = place(VERSIONED, [f"t/n/{FULL}"], config={"preferLaterVersions": True})
    assert got[f"t/n/{FULL}"] == {"broker": "new", "candidates": ["new", "new2"]}
    got = place(VERSIONED, [f"t/n/{FULL}"])
    assert got[f"t/n/{FULL}"]["broker"] == "old"


def test_a_broker_without_a_version_disables_the_version_filter() -> None:
    brokers = {**VERSIONED, "unknown": broker(rate=100)}
    got = place(brokers, [f"t/n/{FULL}"], config={"preferLaterVersions": True})
    assert got[f"t/n/{FULL}"]["candidates"] == sorted(brokers)


def test_semantic_version_order() -> None:
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0",
        "2.10.0",
        "10.0.0",
    ]
    assert sorted(ordered, key=version_key) == ordered
    assert version_key("3.0.0+build.7") == version_key("3.0.0")
    with pytest.raises(ValueError):
        version_key("3.0")


def test_overloaded_pick_is_replaced_from_the_isolation_set() -> None:
    brokers = {"hot": broker(cpu=90, rate=0), "cool": broker(cpu=10, rate=0)}
    bundles = {f"t/x/{FULL}": owned("cool")}
    got = place(brokers, [f"t/y/{FULL}"], bundles=bundles, namespaces=group("t/x", "t/y"))
    # Anti-affinity leaves only "hot", which is above 85 %, so the pick is made again over both.
    assert got[f"t/y/{FULL}"] == {"broker": "cool", "candidates": ["cool", "hot"]}


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
        return _view(reports, {})

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
    view = _view(reports, {}, config=config)
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
    view = _view(
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
    first = placement.place(_view(reports, {}), f"t/n/{FULL}", rng)
    assert (first.broker, first.source) == ("a", "strategy")
    again = placement.place(_view(reports, {}), f"t/n/{FULL}", rng)
    assert (again.broker, again.source) == ("a", "preallocated")
    reported = _view(reports, {f"t/n/{FULL}": ("a", BundleStats(f"t/n/{FULL}"))})
    placement.release_reported(reported)
    assert placement.preallocated == {}


def test_preallocations_on_a_departed_broker_are_dropped() -> None:
    placement = ModularPlacement(LoadBalancerConfig(), rate_from_report=True)
    reports = {"a": BrokerReport("a"), "b": BrokerReport("b", msg_rate_in=500)}
    placement.place(_view(reports, {}), f"t/n/{FULL}", random.Random(0))
    after = placement.place(_view({"b": reports["b"]}, {}), f"t/n/{FULL}", random.Random(0))
    assert after.broker == "b"


def test_an_explicit_destination_wins() -> None:
    placement = ModularPlacement(LoadBalancerConfig())
    view = _view({"a": BrokerReport("a"), "b": BrokerReport("b", msg_rate_in=9)}, {})
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
    view = _view({b: BrokerReport(b) for b in ("a", "b", "c")}, {})
    planned = placement.place(view, f"t/n/{HALVES[0]}", random.Random(0))
    assert planned.broker == "c"
    unplanned = placement.place(view, f"t/n/{HALVES[1]}", random.Random(0))
    assert shedder.planned[f"t/n/{HALVES[1]}"] == unplanned.broker


def test_live_lltmr_reads_long_term_bundle_averages() -> None:
    reports = {"a": BrokerReport("a", msg_rate_in=1), "b": BrokerReport("b", msg_rate_in=1000)}
    bundles = {f"t/x/{FULL}": ("a", BundleStats(f"t/x/{FULL}", msg_rate_in=200))}
    placed = ModularPlacement(LoadBalancerConfig()).place(
        _view(reports, bundles), f"t/y/{FULL}", random.Random(0)
    )
    # The live system sums its bundles' long-term rates; the report totals are not read.
    assert placed.scores == {"a": 200.0, "b": 0.0}
    assert placed.broker == "b"


def test_a_placement_explains_itself() -> None:
    got = ModularPlacement(LoadBalancerConfig(), rate_from_report=True).place(
        _view({"a": BrokerReport("a", msg_rate_in=3), "b": BrokerReport("b", msg_rate_in=1)}, {}),
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


# -- the command line ------------------------------------------------------------------------


def _rejected(document: dict[str, Any]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "lbctl.main", "decide", "place", "-"],
        input=json.dumps(document),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    return done.stderr.strip()


BASE = {"strategy": "LeastLongTermMessageRate", "seed": 1, "brokers": {"a": broker()}}


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"assign": [f"t/n/{FULL}", f"t/n/{FULL}"]}, "listed twice"),
        ({"assign": ["t/n/zz"]}, "t/n/zz"),
        ({"assign": [f"t/n/{FULL}"], "bundles": {f"t/n/{FULL}": owned("a")}}, "already owned"),
        ({"assign": [], "bundles": {f"t/n/{FULL}": owned("ghost")}}, "ghost"),
        ({"assign": [], "strategy": "Nearest"}, "LeastLongTermMessageRate"),
    ],
)
def test_bad_place_input_is_one_line_exit_2(extra: dict[str, Any], needle: str) -> None:
    message = _rejected({**BASE, **extra})
    assert len(message.splitlines()) == 1
    assert needle in message
