"""Pulsar's load reports -> ``LoadReported`` events: the one converter of both load managers.

- The modular manager's ``LocalBrokerData`` (``pulsar-admin broker-stats load-report``, ``GET
  /admin/v2/broker-stats/load-report``): resource usages, rates, ``lastStats`` per bundle,
  ``lastUpdate``.
- The extensible manager's ``BrokerLoadData`` on
  ``non-persistent://pulsar/system/loadbalancer-broker-load-data`` (keyed by broker id: usages
  as usage/limit, rates, ``bundleCount``, ``topics``, ``weightedMaxEMA``, ``msgThroughputEMA``,
  ``updatedAt``/``reportedAt``; no bundles) and its top bundles on
  ``non-persistent://pulsar/system/loadbalancer-top-bundles-load-data``
  (``{"topBundlesLoadData": [{"bundleName", "stats": {...}}]}``, keyed by broker id).

``LoadTranslator`` joins the two topics of the extensible manager: each message of either
becomes one ``LoadReported`` of its broker, with the broker's latest load and latest top
bundles (a top-bundles message before any load data of its broker is held until one arrives).

Invariants: pure (no I/O, no clock); a report becomes one event under its broker's key stamped
with the report's own time (``lastUpdate``, or the extensible manager's ``updatedAt``: the time
its shedder judges the data by; else the message's publish time); a value that is neither format
raises ``MalformedInput`` naming where it came from (the mirror names it in a
``SourceMessageRejected``); the extensible manager's own figures that the project's load model
does not read (``weightedMaxEMA``, ``maxResourceUsage``, ``msgThroughputEMA``) ride along under
``broker_load["pulsar"]`` for readers that compare with Pulsar's shedder.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

from attach.channel import Append, SourceMessage, rejected
from attach.positions import topic_causation
from balancer.errors import MalformedInput
from events.catalog import LoadReported

BROKER_LOAD_TOPIC = "non-persistent://pulsar/system/loadbalancer-broker-load-data"
TOP_BUNDLES_TOPIC = "non-persistent://pulsar/system/loadbalancer-top-bundles-load-data"
_RESOURCES = {"cpu": "cpu", "memory": "memory", "directMemory": "direct_memory",
              "bandwidthIn": "bandwidth_in", "bandwidthOut": "bandwidth_out"}
_RATES = {"msgRateIn": "msg_rate_in", "msgRateOut": "msg_rate_out",
          "msgThroughputIn": "msg_throughput_in", "msgThroughputOut": "msg_throughput_out"}
_EXTENSIBLE = ("weightedMaxEMA", "maxResourceUsage", "msgThroughputEMA", "updatedAt", "reportedAt")


def _broker_id(report: dict[str, Any], fallback: str) -> str:
    for key in ("brokerId", "broker", "webServiceUrl", "pulsarServiceUrl"):
        value = report.get(key)
        if isinstance(value, str) and value:
            parsed = urlparse(value)
            return parsed.netloc or value
    return fallback


def _usage(raw: Any) -> dict[str, float]:
    if not isinstance(raw, dict):
        return {"usage": 0.0, "limit": 0.0}
    return {"usage": float(raw.get("usage", 0.0)), "limit": float(raw.get("limit", 0.0))}


def bundle_stats(stats: Any) -> list[dict[str, Any]]:
    """Bundle name -> Pulsar's ``NamespaceBundleStats`` as the event's bundle rows."""
    if not isinstance(stats, dict):
        return []
    return [{"bundle": name, "msg_rate_in": float(s.get("msgRateIn", 0.0)),
             "msg_rate_out": float(s.get("msgRateOut", 0.0)),
             "msg_throughput_in": float(s.get("msgThroughputIn", 0.0)),
             "msg_throughput_out": float(s.get("msgThroughputOut", 0.0)),
             "topics": int(s.get("topics", 0)), "producers": int(s.get("producerCount", 0)),
             "consumers": int(s.get("consumerCount", 0))}
            for name, s in sorted(stats.items()) if isinstance(s, dict)]


def to_event(report: Any, *, where: str, fallback_broker: str) -> tuple[int, LoadReported]:
    """(report time ms, the event) of one Pulsar report (either manager's)."""
    if not isinstance(report, dict) or not isinstance(report.get("cpu"), dict):
        raise MalformedInput(f"{where}: not a LocalBrokerData or BrokerLoadData report "
                             "(no cpu usage)", value=where)
    broker = _broker_id(report, fallback_broker)
    load: dict[str, Any] = {ours: _usage(report.get(theirs)) for theirs, ours in _RESOURCES.items()}
    load.update({ours: float(report.get(theirs, 0.0)) for theirs, ours in _RATES.items()})
    load["topics"] = int(report.get("numTopics", report.get("topics")) or 0)
    load["bundles"] = int(report.get("numBundles", report.get("bundleCount")) or 0)
    # The extensible manager's shedder judges a broker's data by ``updatedAt`` (its TTL and the
    # cool-down after an unload); ``reportedAt`` is when the broker last published, up to an
    # interval older.
    ts = int(report.get("lastUpdate") or report.get("updatedAt") or report.get("reportedAt") or 0)
    return ts, LoadReported(broker_id=broker, broker_load=load, bundles=bundle_stats(report.get("lastStats")))


def top_bundles(doc: Any, where: str) -> list[dict[str, Any]]:
    """The bundle rows of a ``TopBundlesLoadData`` document."""
    found = doc.get("topBundlesLoadData") if isinstance(doc, dict) else None
    if not isinstance(found, list):
        raise MalformedInput(f"{where}: not a TopBundlesLoadData document (no topBundlesLoadData list)",
                             value=where)
    return bundle_stats({str(item.get("bundleName")): item.get("stats")
                         for item in found if isinstance(item, dict) and item.get("bundleName")})


class LoadTranslator:
    """The extensible manager's two load topics -> one ``LoadReported`` per message."""

    def __init__(self) -> None:
        self.loads: dict[str, tuple[int, dict[str, Any]]] = {}
        """Broker -> (time, broker_load) of its latest load data."""
        self.tops: dict[str, list[dict[str, Any]]] = {}
        """Broker -> its latest top bundles."""

    def translate(self, message: SourceMessage) -> list[Append]:
        if message.value is None:
            return []  # a tombstone: the broker is gone; its BrokerLeft comes from the broker list
        where = f"{message.topic}@{message.position} (key {message.key})"
        try:
            doc = json.loads(message.value)
            if message.topic == TOP_BUNDLES_TOPIC:
                self.tops[message.key] = top_bundles(doc, where)
                found = self.loads.get(message.key)
                if found is None:
                    return []  # held: the broker's load data has not been read yet
                ts, load = found[0] if found[0] > 0 else message.publish_ms, found[1]
            else:
                ts, event = to_event(doc, where=where, fallback_broker=message.key)
                load = dict(event.broker_load)
                load["pulsar"] = {name: doc[name] for name in _EXTENSIBLE if name in doc}
                ts = ts or message.publish_ms
                self.loads[message.key] = (ts, load)
        except (ValueError, UnicodeDecodeError) as exc:
            return [rejected(message, f"not JSON ({exc})")]
        except MalformedInput as exc:
            return [rejected(message, exc.message)]
        event = LoadReported(broker_id=message.key, broker_load=load, bundles=list(self.tops.get(message.key, [])))
        return [Append(message.key, (event,), ts, (topic_causation(message.topic, message.position),))]
