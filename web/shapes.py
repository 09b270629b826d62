"""Pulsar's JSON shapes of what the admin API returns, built from the cluster's own views.

Invariants: field names are those of Pulsar 4.0's data classes (``BundlesData``,
``FailureDomain``, ``LookupData``, ``BrokerInfo``, ``LocalBrokerData``, ``Policies``), which the real
``PulsarAdmin`` client deserialises; hash boundaries print as ``0x%08x``; nothing here reads
the clock or talks to the cluster: every function is a pure reshaping of values it is given
(``broker_at`` a pure reading of a broker's name against the brokers it is given).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from balancer.bundles import BundleId
from balancer.errors import MalformedInput, UnknownBroker
from projections.ownership import BundleRow


def boundary(value: int) -> str:
    return f"0x{value:08x}"


def bundles_data(rows: Sequence[BundleRow]) -> dict[str, Any]:
    """``BundlesData``: the boundaries of a namespace's bundles, in range order."""
    ranges = [BundleId.parse(row.bundle).range.name.split("_") for row in rows]
    boundaries = [low for low, _ in ranges] + ([ranges[-1][1]] if ranges else [])
    return {"boundaries": boundaries, "numBundles": len(rows)}


def policies(rows: Sequence[BundleRow], anti_affinity_group: str | None) -> dict[str, Any]:
    """``Policies`` of a namespace: its ``bundles`` and ``deleted`` (false); ``antiAffinityGroup``
    (a field of Pulsar's older ``Policies``, a local policy since) when one is set. The policies
    this project does not hold (retention, quotas, rates, ...) are left out, not shown as unset."""
    found: dict[str, Any] = {"bundles": bundles_data(rows), "deleted": False}
    if anti_affinity_group is not None:
        found["antiAffinityGroup"] = anti_affinity_group
    return found


def failure_domain(brokers: Sequence[str]) -> dict[str, Any]:
    return {"brokers": sorted(brokers)}


def http_url(broker_url: str) -> str:
    """A broker's HTTP address from its ``pulsar://host:port`` one (Pulsar's default 8080)."""
    host = broker_url.split("://", 1)[-1].rsplit(":", 1)[0]
    return f"http://{host}:8080"


def broker_at(given: str, brokers: Sequence[tuple[str, str]], what: str) -> str:
    """The id of the broker ``given`` names: an id as it is (an unknown one is the cluster's to
    refuse); ``host:port``, Pulsar's form of a broker's id, as the one broker of ``brokers``
    (id, url) whose broker service or web service listens there. A malformed ``host:port``, or one
    where no broker or several listen, is one error naming ``what`` and the value."""
    ids = [b for b, _ in brokers]
    if given in ids or ":" not in given:
        return given
    host, _, port = given.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise MalformedInput(f"{what} {given!r}: expected a broker id or host:port (port 1-65535)",
                             value=given)
    at = f"{host}:{int(port)}"
    found = sorted({b for b, url in brokers if at in (_address(url), _address(http_url(url)))})
    if len(found) != 1:
        known = ", ".join(f"{b} ({url})" for b, url in brokers) or "none"
        raise UnknownBroker(f"{what} {given!r}: {'no' if not found else 'more than one'} registered "
                            f"broker listens there; brokers: {known}", value=given)
    return found[0]


def _address(url: str) -> str:
    return url.split("://", 1)[-1].rstrip("/")


def lookup_data(broker_url: str) -> dict[str, Any]:
    """``LookupData`` of a topic owned by the broker at ``broker_url`` (no TLS listeners)."""
    return {"brokerUrl": broker_url, "brokerUrlTls": None, "httpUrl": http_url(broker_url),
            "httpUrlTls": None, "nativeUrl": broker_url}


def broker_info(leader_id: str | None, service_url: str) -> dict[str, Any]:
    """``BrokerInfo`` of the leader: its id and the web service that answers for it."""
    return {"brokerId": leader_id, "serviceUrl": service_url}


def local_broker_data(report: Mapping[str, Any], broker_url: str, version: str) -> dict[str, Any]:
    """``LocalBrokerData`` of a broker's latest LoadReported (``Cluster.load_report``)."""
    load: Mapping[str, Any] = report.get("broker_load") or {}
    stats = {str(b["bundle"]): _bundle_stats(b) for b in report.get("bundles") or []}
    return {
        "webServiceUrl": http_url(broker_url), "pulsarServiceUrl": broker_url,
        "persistentTopicsEnabled": True, "nonPersistentTopicsEnabled": True,
        **{pulsar: _usage(load.get(ours)) for pulsar, ours in _RESOURCES.items()},
        **{pulsar: float(load.get(ours, 0.0)) for pulsar, ours in _RATES.items()},
        "numTopics": int(load.get("topics", 0)), "numBundles": int(load.get("bundles", 0)),
        "numProducers": int(load.get("producers", 0)), "numConsumers": int(load.get("consumers", 0)),
        "lastUpdate": report.get("ts_ms") or 0, "bundles": sorted(stats), "lastStats": stats,
        "brokerVersionString": version,
    }


_RESOURCES = {"cpu": "cpu", "memory": "memory", "directMemory": "direct_memory",
              "bandwidthIn": "bandwidth_in", "bandwidthOut": "bandwidth_out"}
_RATES = {"msgRateIn": "msg_rate_in", "msgRateOut": "msg_rate_out",
          "msgThroughputIn": "msg_throughput_in", "msgThroughputOut": "msg_throughput_out"}


def _usage(raw: Mapping[str, Any] | None) -> dict[str, float]:
    raw = raw or {}
    return {"usage": float(raw.get("usage", 0.0)), "limit": float(raw.get("limit", 0.0))}


def _bundle_stats(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``NamespaceBundleStats`` of one bundle of a report."""
    return {**{pulsar: float(raw.get(ours, 0.0)) for pulsar, ours in _RATES.items()},
            "topics": int(raw.get("topics", 0)), "producerCount": int(raw.get("producers", 0)),
            "consumerCount": int(raw.get("consumers", 0))}
