"""Pulsar's ownership channel through the mirror's translator (``attach.channel``).

What a user would notice: every record of Pulsar's channel becomes events the project's own
ownership fold takes without an anomaly, the fold ends where Pulsar's channel ends, a transfer
names both brokers, a killed broker's bundles are taken over by force, a split re-tiles the
namespace, and a message that is not a record is named, not dropped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from attach.channel import CHANNEL_TOPIC, Append, ChannelTranslator, SourceMessage, unsplit
from attach.positions import Position, parse_causation
from balancer.bundles import HashRange, NamespaceBundles
from balancer.ownership import BundleState, OwnershipRecord, judge
from events.catalog import MIRROR_KEY, Event
from events.envelope import Envelope, seal
from projections.ownership import OwnershipProjection

NS = "public/default"
HALF = f"{NS}/0x00000000_0x80000000"
OTHER = f"{NS}/0x80000000_0xffffffff"
SAMPLES = Path(__file__).parent.parent / "fixtures" / "pulsar"


class Folder:
    """Seals appends as the mirror would and folds them through the real ownership fold."""

    def __init__(self) -> None:
        self.projection = OwnershipProjection()
        self.seq: dict[str, int] = {}
        self.offset = 0
        self.envelopes: list[Envelope] = []

    def fold(self, appends: Sequence[Append]) -> None:
        for append in appends:
            for event, cause in zip(append.events, append.causation_ids, strict=True):
                seq = self.seq[append.key] = self.seq.get(append.key, 0) + 1
                envelope = seal(event, key=append.key, seq=seq, epoch=0, clock_ms=lambda ts=append.ts_ms: ts,
                                causation_id=cause, correlation_id=append.correlation_id)
                self.projection.apply(self.offset, envelope)
                self.envelopes.append(envelope)
                self.offset += 1


def message(key: str, value: dict[str, Any] | None, entry: int, publish_ms: int = 1_000) -> SourceMessage:
    raw = None if value is None else json.dumps(value).encode()
    return SourceMessage(CHANNEL_TOPIC, Position(7, entry), key, raw, publish_ms)


def record(state: str, dst: str | None = None, src: str | None = None, *, version: int = 1,
           force: bool = False, ts: int = 5_000, children: dict[str, Any] | None = None) -> dict[str, Any]:
    value: dict[str, Any] = {"state": state, "dstBroker": dst, "sourceBroker": src, "force": force,
                             "timestamp": ts, "versionId": version}
    if children is not None:
        value["splitServiceUnitToDestBroker"] = children
    return value


def translator_with(namespace: str = NS, boundaries: Sequence[int] = (0, 0x80000000, 0xFFFFFFFF),
                    pending: Sequence[SourceMessage] = ()) -> ChannelTranslator:
    translator = ChannelTranslator()
    CREATED[id(translator)] = [translator.add_namespace(namespace, list(boundaries), pending,
                                                        causation_id=f"pulsar:GET /admin/v2/namespaces/{namespace}/bundles")]
    return translator


CREATED: dict[int, list[Append]] = {}


def run(translator: ChannelTranslator, messages: Sequence[SourceMessage]) -> tuple[list[Append], Folder]:
    folder = Folder()
    appends = [*CREATED.pop(id(translator), []), *(a for m in messages for a in translator.translate(m))]
    folder.fold(appends)
    return appends, folder


def types(appends: Sequence[Append]) -> list[str]:
    return [e.TYPE for a in appends for e in a.events]


def test_a_transfer_names_both_brokers_and_the_fold_follows_it() -> None:
    translator = translator_with()
    a, b = "127.0.0.1:8080", "127.0.0.1:8081"
    appends, folder = run(translator, [
        message(HALF, record("Assigning", a, version=1), 1),
        message(HALF, record("Owned", a, version=2), 2),
        message(HALF, record("Releasing", b, a, version=3), 3),
        message(HALF, record("Assigning", b, a, version=4), 4),
        message(HALF, record("Owned", b, a, version=5, ts=9_000), 5),
    ])
    assert types(appends) == ["NamespaceCreated", "BundleAssigned", "BundleOwned", "TransferPrepared",
                              "BundleAssigned", "BundleOwned"]
    move = appends[3].events[0]
    assert (move.src, move.dst, move.reason) == (a, b, "pulsar")  # type: ignore[attr-defined]
    assert folder.projection.anomalies == []
    assert folder.projection.owner(HALF) == b
    # Each record says where it came from and carries Pulsar's time and version.
    last = folder.envelopes[-1]
    assert parse_causation(last.causation_id) == (CHANNEL_TOPIC, Position(7, 5))
    assert last.ts_ms == 9_000 and last.correlation_id == "pulsar-version:5"


def test_a_forced_takeover_of_a_dead_brokers_bundle_is_an_orphan_assignment() -> None:
    translator = translator_with()
    appends, folder = run(translator, [
        message(HALF, record("Owned", "dead:1"), 1),
        message(HALF, record("Owned", "live:2", "dead:1", force=True, version=2), 2),
    ])
    assert types(appends)[-2:] == ["BundleAssigned", "BundleOwned"]
    forced = appends[-1].events[0]
    assert forced.force and forced.reason == "orphan"  # type: ignore[attr-defined]
    assert folder.projection.anomalies == [] and folder.projection.owner(HALF) == "live:2"


def test_a_split_retiles_the_namespace_and_holds_the_children_until_the_parent_is_deleted() -> None:
    translator = translator_with(boundaries=(0, 0xFFFFFFFF))
    whole, left, right = f"{NS}/0x00000000_0xffffffff", "0x00000000_0x7fffffff", "0x7fffffff_0xffffffff"
    appends, folder = run(translator, [
        message(whole, record("Owned", "b:1"), 1),
        message(whole, record("Splitting", None, "b:1", version=2, children={left: None, right: None}), 2),
        message(f"{NS}/{left}", record("Owned", "b:1"), 3),
        message(f"{NS}/{right}", record("Owned", "b:1"), 4),
        message(whole, record("Deleted", None, "b:1", version=3), 5),
        message(whole, None, 6),  # Pulsar's tombstone of the deleted parent
        message(f"{NS}/{left}", record("Releasing", "c:2", "b:1", version=2), 7),
    ])
    assert types(appends) == ["NamespaceCreated", "BundleOwned", "SplitRequested", "SplitCompleted",
                              "TransferPrepared"]
    assert appends[2].events[0].positions == [0x7FFFFFFF]  # type: ignore[attr-defined]
    assert folder.projection.anomalies == []
    assert [r.bundle.rpartition("/")[2] for r in folder.projection.bundles(NS)] == [left, right]
    assert folder.projection.owner(f"{NS}/{right}") == "b:1"


def test_a_layout_seen_after_its_splits_is_unsplit_so_the_channel_replays_them() -> None:
    whole, left, right = f"{NS}/0x00000000_0xffffffff", "0x00000000_0x7fffffff", "0x7fffffff_0xffffffff"
    history = [message(whole, record("Owned", "b:1"), 1),
               message(whole, record("Splitting", None, "b:1", version=2, children={left: None, right: None}), 2),
               message(f"{NS}/{left}", record("Owned", "b:1"), 3),
               message(f"{NS}/{right}", record("Owned", "b:1"), 4),
               message(whole, record("Deleted", None, "b:1", version=3), 5)]
    translator = translator_with(boundaries=(0, 0x7FFFFFFF, 0xFFFFFFFF), pending=history)
    appends, folder = run(translator, history)
    assert appends[0].events[0].boundaries == [0, 0xFFFFFFFF]  # type: ignore[attr-defined]
    assert folder.projection.anomalies == []
    assert len(list(folder.projection.bundles(NS))) == 2
    assert unsplit([0, 1, 2, 3], [HashRange(0, 2)]) == [0, 2, 3]


def test_a_message_that_is_not_a_record_is_named_and_the_mirror_goes_on() -> None:
    translator = translator_with()
    bad = SourceMessage(CHANNEL_TOPIC, Position(7, 1), HALF, b"{not json", 1_000)
    appends, folder = run(translator, [bad, message(HALF, record("Owned", "a:1"), 2),
                                       message("no-bundle-key", record("Owned", "a:1"), 3),
                                       message("other/ns/0x00000000_0xffffffff", record("Owned", "a:1"), 4)])
    rejected = [a for a in appends if a.key == MIRROR_KEY]
    assert len(rejected) == 3
    first: Any = rejected[0].events[0]
    assert (first.source, first.message_id, first.key, first.value) == (CHANNEL_TOPIC, "7:1:-1:-1", HALF, "{not json")
    assert "not JSON" in first.error
    assert folder.projection.owner(HALF) == "a:1"


def test_a_replayed_message_emits_nothing_yet_rebuilds_a_split_in_flight() -> None:
    whole, left, right = f"{NS}/0x00000000_0xffffffff", "0x00000000_0x7fffffff", "0x7fffffff_0xffffffff"
    first = translator_with(boundaries=(0, 0xFFFFFFFF))
    before = [message(whole, record("Owned", "b:1"), 1),
              message(whole, record("Splitting", None, "b:1", version=2, children={left: None, right: None}), 2),
              message(f"{NS}/{left}", record("Owned", "b:1"), 3)]
    written, _ = run(first, before)
    # A restart: the shadow is folded back from the log, the messages after the split's start are
    # read again, the mirrored ones as a replay.
    again = ChannelTranslator()
    for append in written:
        for event in append.events:
            again.observe(event)
    assert again.translate(before[2], replay=True) == []
    after, _ = run(again, [message(f"{NS}/{right}", record("Owned", "b:1"), 4),
                                message(whole, record("Deleted", None, "b:1", version=3), 5)])
    assert types(after) == ["SplitCompleted"]


def test_recorded_channel_samples_fold_without_an_anomaly() -> None:
    """Values as a real Pulsar 4.0.7 wrote them (captured by tests/integration/test_pulsar_mirror.py)."""
    sample = SAMPLES / "channel.jsonl"
    if not sample.is_file():
        raise AssertionError(f"{sample} is missing: the recorded samples are part of the suite")
    rows = [json.loads(line) for line in sample.read_text().splitlines() if line.strip()]
    layouts = {row["namespace"]: row["boundaries"] for row in rows if "namespace" in row}
    messages = [SourceMessage(CHANNEL_TOPIC, Position(*row["position"]), row["key"],
                              None if row["value"] is None else row["value"].encode(), row["publish_ms"])
                for row in rows if "key" in row]
    translator = ChannelTranslator()
    CREATED[id(translator)] = [translator.add_namespace(namespace, boundaries, messages)
                               for namespace, boundaries in layouts.items()]
    appends, folder = run(translator, messages)
    assert [a for a in appends if a.key == MIRROR_KEY] == []
    assert folder.projection.anomalies == []
    assert types(appends).count("TransferPrepared") >= 1


# -- the property: any sequence of channel records of one bundle ------------------------------

BROKERS = st.sampled_from(["a:1", "b:2", "c:3"])
MAYBE = st.one_of(st.none(), BROKERS)
LEFT, RIGHT = "0x00000000_0x40000000", "0x40000000_0x80000000"


@st.composite
def values(draw: st.DrawFn) -> dict[str, Any] | None:
    kind = draw(st.sampled_from(["Owned", "Assigning", "Releasing", "Free", "Splitting", "tombstone"]))
    force = draw(st.booleans())
    if kind == "tombstone":
        return None
    if kind in ("Owned", "Assigning"):
        return record(kind, draw(BROKERS), draw(MAYBE), force=force)
    if kind == "Releasing":
        return record(kind, draw(MAYBE), draw(BROKERS), force=force)
    if kind == "Free":
        return record(kind, None, draw(MAYBE), force=force)
    return record(kind, draw(MAYBE) if force else None, draw(BROKERS), force=force,
                  children={LEFT: None, RIGHT: None})


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(values(), st.sampled_from([1, 1, 1, 0, 2])), min_size=1, max_size=12), st.booleans())
def test_any_sequence_of_records_folds_without_anomaly_to_the_channels_last_record(
        steps: list[tuple[dict[str, Any] | None, int]], end_with_delete: bool) -> None:
    """Whatever Pulsar's channel holds for a bundle, versions racing and repeating included: the
    records Pulsar's own rules skip are named (and skipped), the rest fold without an anomaly and
    the fold ends on the record Pulsar's channel ends on."""
    sequence, version = [], 0
    for value, step in steps:
        version = 0 if value is None else version + step  # a tombstone starts the versions again
        sequence.append(None if value is None else {**value, "versionId": max(1, version)})
    last = next((v for v in reversed(sequence) if v is not None), None)
    if end_with_delete and sequence[-1] is not None and sequence[-1]["state"] == "Splitting":
        sequence.append(record("Deleted", None, sequence[-1]["sourceBroker"], version=sequence[-1]["versionId"] + 1))
    translator = translator_with()
    messages = [message(HALF, value, i) for i, value in enumerate(sequence, start=1)]
    appends, folder = run(translator, messages)
    expected, refused = _pulsars_view(sequence)
    assert folder.projection.anomalies == []
    if expected == "unknown children":
        return  # a Deleted whose split was never seen: named, the split cannot be told
    assert len([a for a in appends if a.key == MIRROR_KEY]) == refused
    held = folder.projection.records.get(HALF)
    if expected is None:
        assert held is None or held.state in (BundleState.FREE, BundleState.DELETED)
        return
    assert held is not None
    state, dst, src = expected
    assert held.state is state
    if state in (BundleState.OWNED, BundleState.ASSIGNING, BundleState.RELEASING):
        assert (held.dst, held.src) == (dst, src)
    if state in (BundleState.SPLITTING, BundleState.DELETED):
        assert held.src == src
    if state is BundleState.DELETED:
        layout = folder.projection.namespaces[NS].layout
        assert layout == NamespaceBundles.from_boundaries(NS, [0, 0x40000000, 0x80000000, 0xFFFFFFFF])
    del last


def _pulsars_view(sequence: Sequence[dict[str, Any] | None]) -> tuple[Any, int]:
    """What Pulsar's table view ends on (its rules: ``balancer.ownership.judge``), and how many
    records it skipped."""
    current: OwnershipRecord | None = None
    refused = 0
    for doc in sequence:
        incoming = None
        if doc is not None:
            state, dst, src = _normal(BundleState(doc["state"]), doc.get("dstBroker"), doc.get("sourceBroker"))
            incoming = OwnershipRecord.trusted(state, dst, src, 0, doc["versionId"], doc["force"])
        if judge(current, incoming):
            if incoming is not None and incoming.state is BundleState.DELETED and (
                    current is None or current.state is not BundleState.SPLITTING):
                return "unknown children", refused
            current = incoming
        else:
            refused += 1
    return (None if current is None else (current.state, current.dst, current.src)), refused


def _normal(state: BundleState, dst: str | None, src: str | None
            ) -> tuple[BundleState, str | None, str | None]:
    if dst is not None and dst == src:
        owning = state in (BundleState.OWNED, BundleState.ASSIGNING)
        return (state, dst, None) if owning else (state, None, src)
    return state, dst, src


def _events(appends: Sequence[Append]) -> list[Event]:
    return [e for a in appends for e in a.events]
