"""The what-if's recorded load: each broker's bundles per cycle, its reports folded as the load
view folds them (a full report sets them, a later part adds, a delta updates the ones it lists)."""

from __future__ import annotations

from typing import Any

from events import catalog as c
from events.envelope import Envelope, seal
from spark_replay.whatif import _folded_reports

START, MINUTE = 1_700_000_000_000, 60_000


def _report(broker: str, at_ms: int, bundles: dict[str, float], **marks: Any) -> Envelope:
    load = {"cpu": {"usage": 50.0, "limit": 100.0}, **marks} if "continued" not in marks else marks
    entries = [{"bundle": b, "msg_rate_in": rate, "msg_rate_out": 0.0, "msg_throughput_in": 0.0,
                "msg_throughput_out": 0.0, "topics": 1} for b, rate in bundles.items()]
    return seal(c.LoadReported(broker_id=broker, broker_load=load, bundles=entries), key=broker,
                seq=1, epoch=0, clock_ms=lambda: at_ms)


def _held(rows: list[dict[str, Any]], cycle: int, broker: str) -> dict[str, float]:
    row = next(r for r in rows if r["cycle"] == cycle and r["broker"] == broker)
    return {b["bundle"]: b["msg_rate_in"] for b in row["bundles"]}


def test_a_delta_keeps_the_bundles_it_does_not_list_and_a_full_report_drops_the_ones_gone() -> None:
    rows = _folded_reports([
        _report("broker-1", START + 10_000, {"a": 1.0, "b": 2.0}),
        _report("broker-1", START + 20_000, {}, continued=True, part=1),  # a later part: adds nothing
        _report("broker-1", START + 30_000, {"c": 3.0}, continued=True, part=2),
        _report("broker-1", START + MINUTE + 10_000, {"a": 5.0}, delta=True),
        _report("broker-1", START + MINUTE + 20_000, {}, delta=True),
        _report("broker-2", START + MINUTE + 30_000, {"d": 4.0}),
        _report("broker-1", START + 2 * MINUTE + 10_000, {"b": 6.0}),  # full: a and c are gone
    ], START, MINUTE)
    assert [(r["cycle"], r["broker"]) for r in rows] == [(0, "broker-1"), (1, "broker-1"), (1, "broker-2"),
                                                        (2, "broker-1")]
    assert _held(rows, 0, "broker-1") == {"a": 1.0, "b": 2.0, "c": 3.0}
    assert _held(rows, 1, "broker-1") == {"a": 5.0, "b": 2.0, "c": 3.0}
    assert _held(rows, 1, "broker-2") == {"d": 4.0}
    assert _held(rows, 2, "broker-1") == {"b": 6.0}
    assert all(r["cpu"] == 0.5 for r in rows)  # a later part carries no load: the part before's stays
