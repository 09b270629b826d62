"""Placement as a user sees it: where bundles land, which brokers were considered, and why.

Most cases go through `lbctl decide place` documents (behaviour §5.7); the rest use the pipeline
objects directly for what a document cannot show (preallocations released by a report, explicit
destinations, AvgShedder's plan, the explanation trail).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from balancer.load import BrokerReport, BundleStats
from balancer.placement.anti_affinity import may_leave_broker
from balancer.placement.filters import version_key
from balancer.placement.isolation import host_of, isolation_candidates
from balancer.shedding.base import ClusterView, IsolationPolicy, NamespacePolicy
from tests.support.placement_documents import (
    EXTENSIBLE,
    FULL,
    HALVES,
    broker,
    group,
    owned,
    place,
    view_of,
)

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



def _group_view(owners: dict[str, str]) -> ClusterView:
    reports = {b: BrokerReport(b) for b in ("b0", "b1", "b2")}
    bundles = {
        f"t/{ns}/{FULL}": (owner, BundleStats(f"t/{ns}/{FULL}")) for ns, owner in owners.items()
    }
    policies = {f"t/{ns}": NamespacePolicy(f"t/{ns}", anti_affinity_group="g") for ns in owners}
    return view_of(reports, bundles, namespaces=policies)


def test_shed_time_check_keeps_a_group_spread_one_per_broker() -> None:
    even = _group_view({"n0": "b0", "n1": "b1", "n2": "b2"})
    assert not may_leave_broker(even, f"t/n0/{FULL}", "b0")
    crowded = _group_view({"n0": "b0", "n1": "b1", "n2": "b1"})
    assert may_leave_broker(crowded, f"t/n1/{FULL}", "b1")
    assert may_leave_broker(crowded, f"t/n0/{FULL}", "b0")  # b2 hosts none of the group


def test_shed_time_check_lets_ungrouped_bundles_go() -> None:
    view = view_of({"a": BrokerReport("a"), "b": BrokerReport("b")}, {})
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
    view = view_of(
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
