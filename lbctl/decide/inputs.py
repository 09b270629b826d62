"""Parsing of the shared parts of ``decide`` inputs: broker reports, bundle records, policies.

Invariants: every malformed field raises ``MalformedInput`` naming where it is (``brokers.b1.cpu``)
and what was expected; nothing is silently defaulted except what contracts §5 leaves optional;
an unknown key is refused naming the closest accepted one (``known_keys``); numbers are finite
(NaN and infinities are named) and counts fit a signed 64-bit integer.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Mapping
from typing import Any

from balancer.config import LOAD_MANAGERS, LoadBalancerConfig, resolve_class_name
from balancer.errors import ConfigError, MalformedInput
from balancer.load import BrokerReport, BundleStats, ResourceUsage
from balancer.shedding.base import IsolationPolicy, NamespacePolicy

RESOURCES = {
    "cpu": "cpu",
    "memory": "memory",
    "directMemory": "direct_memory",
    "bandwidthIn": "bandwidth_in",
    "bandwidthOut": "bandwidth_out",
}
RATES = {
    "msgRateIn": "msg_rate_in",
    "msgRateOut": "msg_rate_out",
    "msgThroughputIn": "msg_throughput_in",
    "msgThroughputOut": "msg_throughput_out",
}
COUNTS = {"topics": "topics", "producers": "producers", "consumers": "consumers"}


BROKER_KEYS = frozenset({*RESOURCES, *RATES, "topics", "bundles", "producers", "consumers",
                         "failureDomain", "version", "loadManagerClassName", "reportAgeMs"})
BUNDLE_KEYS = frozenset({"owner", *RATES, *COUNTS, "cacheSize"})
INT64_MAX = 2**63 - 1


def known_keys(record: Mapping[str, Any], accepted: Collection[str], where: str) -> None:
    """Refuse a key outside ``accepted``, naming the closest accepted one."""
    for key in record:
        if key not in accepted:
            close = difflib.get_close_matches(str(key), list(accepted), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else f"; accepted: {', '.join(sorted(accepted))}"
            place = f"{where}: unknown key" if where else "unknown key"
            raise MalformedInput(f"{place} {key!r}{hint}", value=key)


def mapping(value: Any, where: str, accepted: Collection[str] | None = None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MalformedInput(f"{where}: expected an object, got {_kind(value)}", value=where)
    if accepted is not None:
        known_keys(value, accepted, where)
    return value


def number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedInput(f"{where}: expected a number, got {value!r}", value=where)
    try:
        result = float(value)
    except OverflowError:
        result = math.inf
    if not math.isfinite(result):
        raise MalformedInput(f"{where}: {value!r} is not a finite number", value=where)
    return result


def integer(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedInput(f"{where}: expected an integer, got {value!r}", value=where)
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise MalformedInput(f"{where}: expected an integer, got {value!r}", value=where)
    if not -INT64_MAX - 1 <= int(value) <= INT64_MAX:
        raise MalformedInput(f"{where}: {value!r} is out of range; accepted: a signed 64-bit integer",
                             value=where)
    return int(value)


def count(value: Any, where: str) -> int:
    """A count (topics, producers, bundles): an integer >= 0."""
    result = integer(value, where)
    if result < 0:
        raise MalformedInput(f"{where}: {value!r} is out of range; accepted: an integer >= 0", value=where)
    return result


def amount(value: Any, where: str) -> float:
    """A rate, throughput or usage: a finite number >= 0."""
    result = number(value, where)
    if result < 0:
        raise MalformedInput(f"{where}: {value!r} is out of range; accepted: a finite number >= 0",
                             value=where)
    return result


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def config_from(document: Mapping[str, Any]) -> LoadBalancerConfig:
    raw = document.get("config") or {}
    try:
        return LoadBalancerConfig.from_mapping(mapping(raw, "config"))
    except ConfigError as exc:
        raise ConfigError(f"config: {exc.message}", **exc.details) from None


def broker_report(broker_id: str, raw: Any) -> BrokerReport:
    where = f"brokers.{broker_id}"
    record = mapping(raw, where, BROKER_KEYS)
    fields: dict[str, Any] = {}
    for key, attr in RESOURCES.items():
        if key in record:
            usage = mapping(record[key], f"{where}.{key}", ("usage", "limit"))
            fields[attr] = ResourceUsage(
                amount(usage.get("usage", 0), f"{where}.{key}.usage"),
                number(usage.get("limit", 0), f"{where}.{key}.limit"),
            )
    for key, attr in RATES.items():
        fields[attr] = amount(record.get(key, 0), f"{where}.{key}")
    for key in ("topics", "bundles", "producers", "consumers"):
        if key in record:
            fields[key] = count(record[key], f"{where}.{key}")
    domain = record.get("failureDomain")
    version = record.get("version")
    manager = record.get("loadManagerClassName")
    return BrokerReport(
        broker_id,
        failure_domain=None if domain is None else str(domain),
        version=None if version is None else str(version),
        load_manager_class=None if manager is None else _manager_class(str(manager)),
        **fields,
    )


def _manager_class(text: str) -> str:
    """A known load manager by its short name; any other class as written (it matches none)."""
    try:
        return resolve_class_name(text, LOAD_MANAGERS, "load manager", "loadManagerClassName")
    except ConfigError:
        return text


def bundle_record(bundle_id: str, raw: Any) -> tuple[str | None, BundleStats]:
    """``(owner, stats)`` of one entry of ``bundles``."""
    where = f"bundles.{bundle_id}"
    record = mapping(raw, where, BUNDLE_KEYS)
    owner = record.get("owner")
    if owner is not None and not isinstance(owner, str):
        raise MalformedInput(f"{where}.owner: expected a broker id or null, got {owner!r}")
    fields: dict[str, Any] = {}
    for key, attr in RATES.items():
        fields[attr] = amount(record.get(key, 0), f"{where}.{key}")
    for key, attr in COUNTS.items():
        fields[attr] = count(record.get(key, 0), f"{where}.{key}")
    if "cacheSize" in record:
        fields["cache_size"] = amount(record["cacheSize"], f"{where}.cacheSize")
    return owner, BundleStats(bundle_id, **fields)


def namespace_policies(raw: Any) -> dict[str, NamespacePolicy]:
    policies: dict[str, NamespacePolicy] = {}
    for namespace, value in mapping(raw or {}, "namespaces").items():
        record = mapping(value, f"namespaces.{namespace}", ("antiAffinityGroup", "isolation"))
        group = record.get("antiAffinityGroup")
        isolation = record.get("isolation")
        policies[namespace] = NamespacePolicy(
            namespace,
            anti_affinity_group=None if group is None else str(group),
            isolation=None if isolation is None else _isolation(isolation, namespace),
        )
    return policies


def _isolation(raw: Any, namespace: str) -> IsolationPolicy:
    where = f"namespaces.{namespace}.isolation"
    record = mapping(raw, where, ("primary", "secondary", "minLimit"))
    return IsolationPolicy(
        primary=tuple(str(p) for p in record.get("primary", [])),
        secondary=tuple(str(p) for p in record.get("secondary", [])),
        min_limit=integer(record.get("minLimit", 1), f"{where}.minLimit"),
    )


def failure_domains(brokers: Mapping[str, BrokerReport], raw: Any) -> dict[str, str]:
    """Broker -> domain, from ``failureDomains`` ({domain: [brokers]}) and brokers' own field."""
    domains: dict[str, str] = {}
    for broker_id, report in brokers.items():
        if report.failure_domain is not None:
            domains[broker_id] = report.failure_domain
    for domain, members in mapping(raw or {}, "failureDomains").items():
        if not isinstance(members, list):
            raise MalformedInput(f"failureDomains.{domain}: expected a list of broker ids")
        for broker_id in members:
            domains[str(broker_id)] = str(domain)
    return domains
