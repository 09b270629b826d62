"""One fold of moves (``projections.moves``) and the typed payloads it reads (``events.reports``,
``events.decisions``): the run summary and ``/metrics``' tally count the same moves on any log;
the report codec keeps the bytes every log already holds; old records read through upcasters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.decisions import Decision, Reason
from balancer.load import BrokerReport, BundleStats, ResourceUsage
from balancer.placement.base import Placement, Step
from events.catalog import BundleAssigned, LoadReported
from events.codec import decode, encode, encode_message
from events.decisions import DecisionRecord, PlacementRecord, stored_placement
from events.envelope import Envelope
from events.log.port import Record
from events.report_parts import BUNDLES_PER_PART
from events.reports import (
    report_from_payload,
    report_to_payload,
    stats_from_payload,
    stats_to_payload,
)
from lbctl.runstats import RunStats
from projections.explain import render
from projections.moves import Move, MovesFold
from web.observe.tally import Tally

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "events"
NS = "t/n"
BUNDLES = [f"{NS}/0x{i:08x}_0x{i + 1:08x}" for i in range(4)]
BROKERS = ["b1", "b2", "b3"]


def _record(offset: int, kind: str, payload: dict[str, Any], key: str = NS, ts: int = 0) -> Record:
    return Record(0, offset, Envelope(f"id-{offset}", kind, 1, key, offset + 1, 1, ts, None, None, payload))


def _report() -> BrokerReport:
    return BrokerReport("b1", cpu=ResourceUsage(60.0, 100.0), bandwidth_in=ResourceUsage(1e3, 1e4),
                        msg_rate_in=12.5, msg_rate_out=3.0, msg_throughput_in=1e6, topics=7, bundles=2,
                        producers=3, consumers=4)


# -- the typed report and its codec -----------------------------------------------------------


def test_a_report_round_trips_through_its_stored_form() -> None:
    report, stats = _report(), [BundleStats(BUNDLES[0], msg_rate_in=5.0, topics=2, producers=1)]
    (event,) = LoadReported.parts(report, stats)
    assert event.broker_load == report_to_payload(report)  # the stored form: what logs hold
    assert event.report() == report and event.bundle_stats() == stats
    assert report_from_payload("b1", report_to_payload(report)) == report
    assert [stats_from_payload(stats_to_payload(s)) for s in stats] == stats


def test_a_report_too_big_for_one_message_is_parts_and_only_the_first_has_the_load() -> None:
    stats = [BundleStats(f"{NS}/0x{i:08x}_0x{i + 1:08x}") for i in range(BUNDLES_PER_PART + 1)]
    first, second = LoadReported.parts(_report(), stats)
    assert first.report() == _report() and second.report() is None
    assert first.bundle_stats() + second.bundle_stats() == stats


def test_reports_stored_by_earlier_code_read_typed() -> None:
    stored = msgpack.unpackb((FIXTURES / "catalog_2026_11.msgpack").read_bytes())
    reports = [decode(raw).typed for raw in stored if decode(raw).type == "LoadReported"]
    assert reports
    for event in reports:
        assert isinstance(event, LoadReported)
        assert event.report() is not None and event.report() == report_from_payload(event.broker_id, event.broker_load)
        assert [s.bundle for s in event.bundle_stats()] == [b["bundle"] for b in event.bundles]


def test_an_assignment_stored_before_it_kept_its_placement_reads_with_none() -> None:
    stored = msgpack.unpackb((FIXTURES / "catalog_2026_11c.msgpack").read_bytes())
    old = [raw for raw in stored if decode(raw).type == "BundleAssigned"]
    assert old and msgpack.unpackb(old[0])[2] == 1  # version 1 on disk
    envelope = decode(old[0])
    assert envelope.version == 2 and isinstance(envelope.typed, BundleAssigned)
    assert envelope.typed.decision == {}
    assert decode(encode(envelope)).payload == envelope.payload


# -- the typed decision ------------------------------------------------------------------------

_plain = st.recursive(st.none() | st.booleans() | st.integers(-(2**62), 2**62) | st.text(max_size=5)
                      | st.floats(allow_nan=False, allow_infinity=False),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                      max_leaves=8)
_keys = st.sampled_from(["strategy", "label", "reason", "kind", "source", "destination", "inputs",
                         "placement", "run_ms", "folded", "bundle", "started_ms", "other"])


@given(st.dictionaries(_keys, _plain, max_size=8))
@settings(max_examples=300, deadline=None)
def test_a_stored_decision_reads_typed_and_back_unchanged(raw: dict[str, Any]) -> None:
    assert DecisionRecord.from_payload(raw).to_payload() == raw


def test_a_leaders_decision_reads_typed() -> None:
    stored = Decision(BUNDLES[0], "b1", "b2", reason=Reason.OVERLOADED, strategy="ThresholdShedder",
                      inputs={"gain": 0.25}).to_dict()
    stored.update(run_ms=7, placement={"broker": "b2", "candidates": ["b2", "b3"], "bundle": BUNDLES[0],
                                       "strategy": "LRU", "source": "strategy", "scores": {"b2": 0.1, "b3": "inf"},
                                       "best": ["b2"], "steps": []})
    typed = DecisionRecord.from_payload(stored)
    assert (typed.strategy, typed.label, typed.reason, typed.destination, typed.run_ms) == (
        "ThresholdShedder", "Success", "Overloaded", "b2", 7)
    assert typed.numbers == {"gain": 0.25} and typed.placement is not None
    assert typed.placement.scores == {"b2": 0.1, "b3": "inf"} and typed.to_payload() == stored


# -- one rule for a move -----------------------------------------------------------------------


def test_an_unload_told_again_as_a_transfer_is_one_transfer() -> None:
    decision = {"label": "Success", "reason": "Overloaded", "strategy": "S", "run_ms": 1}
    fold, changes = MovesFold(), []
    for offset, (kind, payload) in enumerate([
        ("UnloadRequested", {"bundle": BUNDLES[0], "src": "b1", "reason": "Overloaded", "decision": decision}),
        ("TransferPrepared", {"bundle": BUNDLES[0], "src": "b1", "dst": "b2", "reason": "Overloaded",
                              "decision": decision}),
        ("BundleAssigned", {"bundle": BUNDLES[0], "src": "b1", "dst": "b2", "reason": "transfer", "force": False}),
        ("BundleOwned", {"bundle": BUNDLES[0], "owner": "b2", "src": "b1"}),
    ]):
        changes.append(fold.take(_record(offset, kind, payload)))
    first, again, half, owned = changes
    assert first is not None and first.move.kind == "unload"
    assert again is not None and again.previous == first.move and again.move.kind == "transfer"
    assert (again.move.dst, again.move.why, again.move.label) == ("b2", "Overloaded", "Success")
    assert half is None and owned is None  # a transfer's destination half is no move


def test_kinds_of_moves() -> None:
    fold = MovesFold()
    found = [fold.take(_record(i, kind, payload)) for i, (kind, payload) in enumerate([
        ("BundleAssigned", {"bundle": BUNDLES[0], "dst": "b1", "reason": "lookup", "force": False}),
        ("BundleAssigned", {"bundle": BUNDLES[1], "src": "b3", "dst": "b1", "reason": "orphan", "force": True}),
        ("SplitRequested", {"bundle": BUNDLES[2], "src": "b1", "algorithm": "a", "reason": "admin"}),
        ("SplitCompleted", {"parent": BUNDLES[2], "children": ["c1", "c2"], "owner": "b1", "boundaries": [5]}),
        ("UnloadRequested", {"bundle": "c1", "src": "b1", "reason": "split"}),
    ])]
    moves = [c.move for c in found if c is not None]
    assert [(m.kind, m.reason) for m in moves] == [
        ("assign", "lookup"), ("takeover", "orphan"), ("split", "admin"), ("split", "admin"), ("unload", "split")]
    assert moves[3].children == ("c1", "c2") and not moves[4].sheds


# -- the readers agree on any log --------------------------------------------------------------

_bundle, _broker = st.sampled_from(BUNDLES), st.sampled_from(BROKERS)
_reason = st.sampled_from(["Overloaded", "Underloaded", "admin", "split", "shutdown"])


@st.composite
def _steps(draw: st.DrawFn) -> list[tuple[str, dict[str, Any]]]:
    """One step of a log: a move told as the writers tell it (some twice), or what ends one."""
    bundle, src, dst, reason = draw(_bundle), draw(_broker), draw(_broker), draw(_reason)
    decision = draw(st.sampled_from([{}, {"label": "Success", "reason": reason, "run_ms": draw(st.integers(0, 3))}]))
    unload = ("UnloadRequested", {"bundle": bundle, "src": src, "reason": reason, "decision": decision})
    transfer = ("TransferPrepared", {"bundle": bundle, "src": src, "dst": dst, "reason": reason,
                                     "decision": decision})
    return draw(st.sampled_from([
        [unload], [transfer], [unload, transfer],
        [("BundleAssigned", {"bundle": bundle, "dst": dst, "reason": draw(st.sampled_from(["lookup", "admin"])),
                             "force": False})],
        [("BundleAssigned", {"bundle": bundle, "dst": dst, "src": draw(st.sampled_from([src, None])),
                             "reason": "orphan", "force": True})],
        [("BundleAssigned", {"bundle": bundle, "dst": dst, "src": src, "reason": "transfer", "force": False})],
        [("SplitRequested", {"bundle": bundle, "src": src, "algorithm": "a", "reason": "admin"}),
         ("SplitCompleted", {"parent": bundle, "children": [f"{bundle}-a", f"{bundle}-b"], "owner": src,
                             "boundaries": [1]})],
        [("BundleReleased", {"bundle": bundle, "src": src})],
        [("BundleOwned", {"bundle": bundle, "owner": dst, "src": src})],
        [("LeaderElected", {"leader_id": dst, "epoch": draw(st.integers(1, 5))})],
    ]))


@given(st.lists(_steps(), max_size=25))
@settings(max_examples=300, deadline=None)
def test_the_summary_and_the_metrics_tally_count_the_same_moves(steps: list[list[tuple[str, dict[str, Any]]]]) -> None:
    records = [_record(i, kind, payload, key="_leader" if kind == "LeaderElected" else NS, ts=i)
               for i, (kind, payload) in enumerate(x for step in steps for x in step)]
    stats, tally = RunStats(start_ms=0), Tally()
    stats.fold(records)
    for record in records:
        tally.take(record)
    by_kind = {kind: sum(n for (k, _), n in stats.by_reason.items() if k == kind) for kind in
               ("transfer", "unload", "split", "takeover", "assign")}
    assert stats.unloads() == sum(tally.unload_bundles.values())
    assert by_kind["split"] == sum(tally.splits.values())  # every split of these logs completes
    takeovers_unowned = sum(1 for m in stats.moves if m.kind == "takeover" and not m.src)
    assert stats.placements + by_kind["assign"] + takeovers_unowned == sum(
        n for (_, result), n in tally.assign_breakdown.items() if result == "Success")
    assert len(stats.moves) == sum(by_kind.values())


def test_a_placement_among_hundreds_of_brokers_is_stored_bounded_and_explained() -> None:
    brokers = [f"broker-{i:03d}" for i in range(300)]
    placement = Placement(BUNDLES[0], "broker-150", tuple(brokers),
                          scores={b: (float("inf") if i == 0 else float(i)) for i, b in enumerate(brokers)},
                          best=("broker-150",), strategy="LeastResourceUsageWithWeight",
                          steps=(Step("filters", tuple(brokers)), Step("best", ("broker-150",))))
    stored = stored_placement(placement.to_dict())
    assert len(encode_message(BundleAssigned(bundle=BUNDLES[0], dst="broker-150", decision={
        "kind": "assign", "placement": stored}))) < 1_000
    typed = PlacementRecord.from_payload(stored)
    assert typed.candidate_count == 300 and typed.candidates[0] == "broker-001"
    assert set(typed.candidates) == {"broker-150", *(f"broker-{i:03d}" for i in range(1, 8))}
    assert [s.get("count") for s in typed.steps] == [300, 1] and "brokers" not in typed.steps[0]
    text = render(BUNDLES[0], [Move("assign", BUNDLES[0], None, "broker-150", "lookup", 0, 1,
                                    decision={"kind": "assign", "placement": stored})])
    assert "among 300 candidate(s), the first 8 shown" in text and "broker-150: score 150 (chosen)" in text
    assert "after filters: 300 broker(s)" in text and "after best: broker-150" in text
