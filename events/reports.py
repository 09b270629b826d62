"""The codec of a broker's load report: ``balancer.load`` values <-> ``LoadReported`` payloads.

A broker body sends typed values (``BrokerReport``, ``BundleStats``) and every reader gets typed
values back (``LoadReported.report()``, ``LoadReported.bundle_stats()``): the plain maps the log
stores are this module's business alone.

Invariants:
- the stored form is the one every log already holds: ``broker_load`` maps each resource to
  ``{"usage", "limit"}`` plus the four rates and four counts; a bundle is ``bundle``, the four
  rates, ``topics``, ``producers``, ``consumers``. Encoding is unchanged, so old records, the
  event fixtures and Kafka topics read as before;
- decoding is lenient where old writers were: a missing resource is a zero ``ResourceUsage``,
  a missing rate or count is 0 (a mirrored Pulsar report may leave some out); extra keys (a
  mirror's ``pulsar`` figures) are kept in the stored map and ignored by the typed form;
- a report of more bundles than ``report_parts.BUNDLES_PER_PART`` is several events
  (``load_reported``); a continuation's ``report()`` is None, its bundles count as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from balancer.load import BrokerReport, BundleStats, ResourceUsage
from events.report_parts import DELTA, continuation, is_continuation, split_bundles

RESOURCES = ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out")
RATES = ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")
_REPORT_COUNTS = ("topics", "bundles", "producers", "consumers")


def report_to_payload(report: BrokerReport) -> dict[str, Any]:
    """The ``broker_load`` field of a LoadReported event."""
    out: dict[str, Any] = {
        name: {"usage": getattr(report, name).usage, "limit": getattr(report, name).limit}
        for name in RESOURCES
    }
    for name in (*RATES, *_REPORT_COUNTS):
        out[name] = getattr(report, name)
    return out


def report_from_payload(broker_id: str, payload: Mapping[str, Any],
                        failure_domain: str | None = None) -> BrokerReport:
    """The typed report of a stored ``broker_load`` (not a continuation's marker)."""
    fields: dict[str, Any] = {}
    for name in RESOURCES:
        raw = payload.get(name)
        if raw is not None:
            fields[name] = ResourceUsage(float(raw.get("usage", 0)), float(raw.get("limit", 0)))
    for name in RATES:
        fields[name] = float(payload.get(name, 0.0))
    for name in _REPORT_COUNTS:
        fields[name] = int(payload.get(name, 0))
    return BrokerReport(broker_id, failure_domain=failure_domain, **fields)


def stats_to_payload(stats: BundleStats) -> dict[str, Any]:
    """One element of a LoadReported's ``bundles``."""
    return {
        "bundle": stats.bundle, **{name: getattr(stats, name) for name in RATES},
        "topics": stats.topics, "producers": stats.producers, "consumers": stats.consumers,
    }


def stats_from_payload(payload: Mapping[str, Any]) -> BundleStats:
    return BundleStats(
        str(payload["bundle"]),
        msg_rate_in=float(payload.get("msg_rate_in", 0.0)),
        msg_rate_out=float(payload.get("msg_rate_out", 0.0)),
        msg_throughput_in=float(payload.get("msg_throughput_in", 0.0)),
        msg_throughput_out=float(payload.get("msg_throughput_out", 0.0)),
        topics=int(payload.get("topics", 0)),
        producers=int(payload.get("producers", 0)),
        consumers=int(payload.get("consumers", 0)),
    )


def typed_report(broker_id: str, broker_load: Mapping[str, Any],
                 failure_domain: str | None = None) -> BrokerReport | None:
    """The report a stored ``broker_load`` holds; None for a continuation part."""
    if is_continuation(broker_load):
        return None
    return report_from_payload(broker_id, broker_load, failure_domain)


def report_parts(report: BrokerReport, stats: list[BundleStats], *, delta: bool = False
                 ) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(broker_load, bundles) of each part of one report, in order: one part when it fits; a
    delta (``stats``: the changed bundles only) is always one part."""
    if delta:
        return [({**report_to_payload(report), DELTA: True}, [stats_to_payload(s) for s in stats])]
    parts = split_bundles([stats_to_payload(s) for s in stats])
    return [(report_to_payload(report) if i == 0 else continuation(i), bundles)
            for i, bundles in enumerate(parts)]
