"""Helpers for the placement tests: `lbctl decide place` documents and cluster views built from
brokers, bundles and namespaces the way a test states them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.load import BrokerReport, BundleStats, LoadModel
from balancer.shedding.base import ClusterView, NamespacePolicy
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


def view_of(
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
