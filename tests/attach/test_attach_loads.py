"""Pulsar's load reports, brokers and the modular manager's polls through the mirror's translators.

What a user would notice: a real BrokerLoadData becomes the broker's LoadReported with Pulsar's
own figures and time, top bundles ride with the broker's load, a broker that vanished leaves, a
new leader is a new epoch, and a poll of the modular manager's owners tells moves the fold takes.
"""

from __future__ import annotations

import json
from pathlib import Path

from attach.channel import SourceMessage
from attach.loads import BROKER_LOAD_TOPIC, TOP_BUNDLES_TOPIC, LoadTranslator
from attach.members import Members, leader_id
from attach.modular import OwnershipPoll
from attach.positions import Position
from balancer.ownership import BundleState
from events.catalog import MIRROR_KEY, LoadReported, SourceMessageRejected
from tests.attach.test_attach_channel import Folder

SAMPLES = Path(__file__).parent.parent / "fixtures" / "pulsar"
NS = "public/default"


def test_a_recorded_broker_load_becomes_the_brokers_report_with_pulsars_figures() -> None:
    rows = [json.loads(line) for line in (SAMPLES / "loads.jsonl").read_text().splitlines()]
    load_rows = [r for r in rows if r["topic"] == BROKER_LOAD_TOPIC]
    assert load_rows, "the recorded samples hold a BrokerLoadData"
    translator = LoadTranslator()
    row = load_rows[0]
    appends = translator.translate(SourceMessage(BROKER_LOAD_TOPIC, Position(*row["position"]), row["key"],
                                                 row["value"].encode(), row["publish_ms"]))
    event = appends[0].events[0]
    assert isinstance(event, LoadReported) and event.broker_id == row["key"] == appends[0].key
    doc = json.loads(row["value"])
    assert event.broker_load["cpu"] == doc["cpu"]
    assert event.broker_load["msg_throughput_in"] == doc["msgThroughputIn"]
    assert event.broker_load["pulsar"]["weightedMaxEMA"] == doc["weightedMaxEMA"]
    assert appends[0].ts_ms == doc["updatedAt"]  # what Pulsar's shedder judges the data by


def test_top_bundles_wait_for_their_brokers_load_then_ride_with_it() -> None:
    translator = LoadTranslator()
    top = {"topBundlesLoadData": [{"bundleName": f"{NS}/0x00000000_0x40000000",
                                   "stats": {"msgRateIn": 10.0, "msgThroughputIn": 1000.0, "topics": 3}}]}
    held = translator.translate(SourceMessage(TOP_BUNDLES_TOPIC, Position(0, 0), "b:1",
                                              json.dumps(top).encode(), 10))
    assert held == []
    load = {"cpu": {"usage": 1, "limit": 100}, "msgRateIn": 10.0, "updatedAt": 20}
    appends = translator.translate(SourceMessage(BROKER_LOAD_TOPIC, Position(0, 0), "b:1",
                                                 json.dumps(load).encode(), 21))
    event = appends[0].events[0]
    assert isinstance(event, LoadReported)
    assert event.bundles[0]["bundle"] == f"{NS}/0x00000000_0x40000000" and event.bundles[0]["topics"] == 3
    bad = translator.translate(SourceMessage(BROKER_LOAD_TOPIC, Position(0, 0), "b:1", b"[]", 22))
    assert bad[0].key == MIRROR_KEY and isinstance(bad[0].events[0], SourceMessageRejected)


def test_brokers_join_and_leave_and_a_new_leader_takes_the_next_epoch() -> None:
    members = Members()
    first = members.brokers_seen(["b:1", "b:2"], scheme="http", ts_ms=1, causation_id="c")
    assert [a.events[0].TYPE for a in first] == ["BrokerRegistered", "BrokerRegistered"]
    assert members.brokers_seen(["b:1", "b:2"], scheme="http", ts_ms=2, causation_id="c") == []
    left = members.brokers_seen(["b:1"], scheme="http", ts_ms=3, causation_id="c")
    assert left[0].events[0].TYPE == "BrokerLeft" and left[0].events[0].reason == "expired"  # type: ignore[attr-defined]
    assert members.leader_seen(leader_id({"brokerId": "b:1"}), ts_ms=4, causation_id="c")[0].events[0].epoch == 1  # type: ignore[attr-defined]
    assert members.leader_seen("b:1", ts_ms=5, causation_id="c") == []
    assert members.leader_seen(leader_id({"serviceUrl": "http://b:2"}), ts_ms=6, causation_id="c")[0].events[0].epoch == 2  # type: ignore[attr-defined]


def test_polls_of_the_modular_managers_owners_tell_moves_the_fold_takes() -> None:
    poll, folder = OwnershipPoll(), Folder()
    a, b = f"{NS}/0x00000000_0x80000000", f"{NS}/0x80000000_0xffffffff"
    folder.fold(poll.layout_seen(NS, [0, 0x80000000, 0xFFFFFFFF], {}, ts_ms=1, causation_id="c"))
    folder.fold(poll.owners_seen(NS, {a: "x:1", b: "x:1"}, ts_ms=2, causation_id="c"))
    moved = poll.owners_seen(NS, {a: "y:2"}, ts_ms=3, causation_id="c")
    folder.fold(moved)
    assert [e.TYPE for e in moved[0].events] == ["TransferPrepared", "BundleAssigned", "BundleOwned",
                                                 "UnloadRequested", "BundleReleased"]
    assert moved[0].events[0].decision["label"] == "pulsar"  # type: ignore[attr-defined]
    split = poll.layout_seen(NS, [0, 0x40000000, 0x80000000, 0xFFFFFFFF], {}, ts_ms=4, causation_id="c")
    folder.fold(split)
    assert [e.TYPE for e in split[0].events] == ["SplitRequested", "SplitCompleted"]
    assert folder.projection.anomalies == []
    assert folder.projection.owner(f"{NS}/0x40000000_0x80000000") == "y:2"
    assert folder.projection.state(b) is BundleState.FREE
