"""The load view: membership, liveness, EMAs that match the leader's, snapshot round trip."""

from __future__ import annotations

import msgpack

from balancer.load import BrokerReport, BundleStats, ResourceUsage
from events.envelope import Envelope
from projections.load import LoadProjection, report_to_payload, stats_to_payload


def _report(seq: int, ts: int, cpu: float, bundles: list[BundleStats]) -> Envelope:
    report = BrokerReport("b1", cpu=ResourceUsage(cpu, 100), msg_throughput_in=1000)
    payload = {"broker_id": "b1", "broker_load": report_to_payload(report),
               "bundles": [stats_to_payload(b) for b in bundles]}
    return Envelope(f"e{seq}", "LoadReported", 1, "b1", seq, 1, ts, None, None, payload)


def test_reports_update_emas_liveness_and_bundle_averages() -> None:
    view = LoadProjection()
    register = Envelope("r", "BrokerRegistered", 1, "b1", 1, 1, 100, None, None,
                        {"broker_id": "b1", "url": "http://b1", "failure_domain": "d1", "version": "3.0"})
    view.apply(0, register)
    stats = BundleStats("p/d/0x00000000_0xffffffff", msg_rate_in=10, msg_throughput_in=100)
    view.apply(1, _report(2, 1_000, 50, [stats]))
    view.apply(2, _report(3, 2_000, 10, [stats]))
    load = view.broker_loads()["b1"]
    assert abs(load.weighted_max_ema - (0.5 * 0.9 + 0.1 * 0.1)) < 1e-9
    assert view.brokers["b1"].failure_domain == "d1"
    assert view.expired(now_ms=2_500, timeout_ms=1_000) == []
    assert view.expired(now_ms=4_000, timeout_ms=1_000) == ["b1"]
    assert view.bundles[stats.bundle].short_term.msg_rate == 10


def test_broker_left_removes_it_and_duplicates_are_ignored() -> None:
    view = LoadProjection()
    first = _report(1, 1_000, 50, [])
    view.apply(0, first)
    view.apply(1, first)  # redelivered
    assert view.broker_loads()["b1"].reports == 1
    view.apply(2, Envelope("l", "BrokerLeft", 1, "b1", 2, 1, 3_000, None, None,
                           {"broker_id": "b1", "reason": "graceful"}))
    assert view.live_brokers() == []


def test_snapshot_round_trip_through_msgpack() -> None:
    view = LoadProjection()
    view.apply(0, _report(1, 1_000, 50, [BundleStats("p/d/0x00000000_0xffffffff", msg_rate_in=5)]))
    raw = msgpack.unpackb(msgpack.packb(view.snapshot()), strict_map_key=False)
    again = LoadProjection.restore(raw)
    assert again.snapshot() == view.snapshot()
