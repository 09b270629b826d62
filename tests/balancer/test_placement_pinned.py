"""Placement that no strategy decides (behaviour §5; Pulsar's NamespaceService and filters).

Heartbeat and SLA-monitor namespaces belong to the broker their name carries; the extensible
manager's internal topics to the leader; a broker reporting another load manager is filtered out.
"""

from __future__ import annotations

from typing import Any

import pytest

from balancer.placement.pinned import internal_topic_owner, pinned_owner
from lbctl.decide import decide


def _broker(cpu: float, **extra: Any) -> dict[str, Any]:
    return {"cpu": {"usage": cpu, "limit": 100}, "msgRateIn": cpu, **extra}


def _place(assign: list[str], manager: str = "ModularLoadManagerImpl", **brokers: Any) -> dict[str, Any]:
    document = {"config": {"loadManagerClassName": manager}, "brokers": brokers or {
        "10.0.0.1:8080": _broker(90), "10.0.0.2:8080": _broker(5)}, "bundles": {}, "assign": assign}
    result: dict[str, Any] = decide("place", document)["assignments"]
    return result


@pytest.mark.parametrize("manager", ["ModularLoadManagerImpl", "ExtensibleLoadManagerImpl"])
@pytest.mark.parametrize("namespace", ["pulsar/c1/10.0.0.1:8080", "pulsar/10.0.0.1:8080",
                                       "sla-monitor/c1/10.0.0.1:8080"])
def test_heartbeat_and_sla_namespaces_stay_on_their_broker(namespace: str, manager: str) -> None:
    # 10.0.0.1 is the busier broker: a strategy would never pick it.
    bundle = f"{namespace}/0x00000000_0xffffffff"
    assert _place([bundle], manager)[bundle] == {"broker": "10.0.0.1:8080", "candidates": ["10.0.0.1:8080"]}


def test_an_sla_namespace_of_a_gone_broker_is_placed_normally() -> None:
    bundle = "sla-monitor/c1/10.0.0.9:8080/0x00000000_0xffffffff"
    assert _place([bundle])[bundle]["broker"] == "10.0.0.2:8080"


def test_a_heartbeat_namespace_of_a_gone_broker_gets_no_owner() -> None:
    assert pinned_owner("pulsar/c1/10.0.0.9:8080", {"10.0.0.1:8080"}) == (None, "heartbeat")
    assert pinned_owner("pulsar/system", {"10.0.0.1:8080"}) is None
    assert pinned_owner("public/default", {"10.0.0.1:8080"}) is None


def test_internal_topics_of_the_extensible_manager_live_on_the_leader() -> None:
    channel = "persistent://pulsar/system/loadbalancer-service-unit-state"
    assert internal_topic_owner(channel, "b2") == "b2"
    assert internal_topic_owner("persistent://pulsar/system/loadbalancer-broker-load-data-partition-0", "b2") == "b2"
    assert internal_topic_owner("persistent://public/default/orders", "b2") is None


@pytest.mark.parametrize("manager", ["ModularLoadManagerImpl", "ExtensibleLoadManagerImpl"])
def test_a_broker_running_another_load_manager_is_filtered_out(manager: str) -> None:
    other = "org.apache.pulsar.broker.loadbalance.impl.SimpleLoadManagerImpl"
    placed = _place(["t/n/0x00000000_0xffffffff"], manager,
                    idle=_broker(1, loadManagerClassName=other),
                    busy=_broker(60, loadManagerClassName=f"org.apache.pulsar.broker.loadbalance.{'extensions' if manager.startswith('Ext') else 'impl'}.{manager}"))
    assert placed["t/n/0x00000000_0xffffffff"] == {"broker": "busy", "candidates": ["busy"]}
