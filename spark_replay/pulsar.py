"""Pulsar load reports -> LoadReported events, so a what-if runs on a real cluster's data.

Reads the JSON ``pulsar-admin broker-stats load-report`` prints for the modular load manager
(``LocalBrokerData``: resource usages, rates, ``lastStats`` per bundle, ``lastUpdate``) and the
extensible manager's ``BrokerLoadData`` (usages and rates, ``updatedAt``/``reportedAt``, no
bundles). A file holds one report, a JSON array of them, or JSON lines.

Invariants: every report becomes one ``LoadReported`` under its broker's key, stamped with the
report's own time; a report that is neither format is a ``MalformedInput`` naming the file and
the entry; nothing is written unless every file parsed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from balancer.errors import MalformedInput
from events.catalog import LoadReported

_RESOURCES = {"cpu": "cpu", "memory": "memory", "directMemory": "direct_memory",
              "bandwidthIn": "bandwidth_in", "bandwidthOut": "bandwidth_out"}
_RATES = {"msgRateIn": "msg_rate_in", "msgRateOut": "msg_rate_out",
          "msgThroughputIn": "msg_throughput_in", "msgThroughputOut": "msg_throughput_out"}


def _documents(path: Path) -> list[Any]:
    text = path.read_text()
    try:
        doc = json.loads(text)
        return doc if isinstance(doc, list) else [doc]
    except json.JSONDecodeError:
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise MalformedInput(f"{path}: not JSON or JSON lines ({exc})", value=str(path)) from None


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


def _bundles(stats: Any) -> list[dict[str, Any]]:
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
    """(report time ms, the event) of one Pulsar report."""
    if not isinstance(report, dict) or not isinstance(report.get("cpu"), dict):
        raise MalformedInput(f"{where}: not a LocalBrokerData or BrokerLoadData report "
                             "(no cpu usage)", value=where)
    broker = _broker_id(report, fallback_broker)
    load: dict[str, Any] = {ours: _usage(report.get(theirs)) for theirs, ours in _RESOURCES.items()}
    load.update({ours: float(report.get(theirs, 0.0)) for theirs, ours in _RATES.items()})
    load["topics"] = int(report.get("numTopics", report.get("topics")) or 0)
    load["bundles"] = int(report.get("numBundles", report.get("bundleCount")) or 0)
    ts = int(report.get("lastUpdate") or report.get("reportedAt") or report.get("updatedAt") or 0)
    return ts, LoadReported(broker_id=broker, broker_load=load, bundles=_bundles(report.get("lastStats")))


def read_reports(files: Iterable[str | Path]) -> list[tuple[int, LoadReported]]:
    """Every report of every file, in time order (stable for equal times)."""
    out: list[tuple[int, LoadReported]] = []
    for file in files:
        path = Path(file)
        if not path.is_file():
            raise MalformedInput(f"{file}: no such file", value=str(file))
        for i, doc in enumerate(_documents(path)):
            out.append(to_event(doc, where=f"{path}[{i}]", fallback_broker=path.stem))
    return sorted(out, key=lambda item: item[0])
