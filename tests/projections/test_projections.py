"""Projection folds: snapshot + tail equals a full replay; folding is idempotent; bad events are
counted and exposed, never applied and never a crash."""

from __future__ import annotations

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.ownership import (
    VERSION_MAX,
    AcceptMode,
    BundleState,
    OwnershipRecord,
    accept,
    next_version,
)
from events.envelope import Envelope
from projections.ownership import OwnershipProjection
from projections.tracking import SequenceTracker
from tests.support.histories import history, with_redeliveries


def _fold(envelopes: list[Envelope], projection: OwnershipProjection | None = None) -> OwnershipProjection:
    projection = projection or OwnershipProjection()
    for offset, envelope in enumerate(envelopes):
        projection.apply(offset, envelope)
    return projection


def _through_bytes(snapshot: dict) -> dict:
    # A snapshot is stored as msgpack: prove it survives the trip.
    return msgpack.unpackb(msgpack.packb(snapshot), strict_map_key=False)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(1, 120), cut=st.floats(0, 1),
       redeliveries=st.integers(0, 30))
def test_snapshot_plus_tail_equals_full_replay(seed: int, steps: int, cut: float, redeliveries: int) -> None:
    events = with_redeliveries(history(seed, steps), seed, redeliveries)
    full = _fold(events)
    k = int(len(events) * cut)
    head = _fold(events[:k])
    restored = OwnershipProjection.restore(_through_bytes(head.snapshot()))
    for offset, envelope in enumerate(events[k:], start=k):
        restored.apply(offset, envelope)
    assert restored.state_equals(full)
    assert restored.applied == full.applied


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(1, 120), redeliveries=st.integers(0, 40))
def test_redelivered_events_are_never_applied_twice(seed: int, steps: int, redeliveries: int) -> None:
    clean = history(seed, steps)
    once = _fold(clean)
    noisy = _fold(with_redeliveries(clean, seed + 1, redeliveries))
    assert noisy.state_equals(once)
    assert noisy.applied == once.applied
    again = _fold(clean, _fold(clean))
    assert again.state_equals(once)
    assert again.applied == once.applied


def test_lookup_follows_assign_and_own() -> None:
    projection = OwnershipProjection()
    events = [
        Envelope("1", "NamespaceCreated", 1, "p/d", 1, 1, 10, None, None,
                 {"namespace": "p/d", "boundaries": [0, 0x80000000, 0xFFFFFFFF]}),
        Envelope("2", "BundleAssigned", 1, "p/d", 2, 1, 11, None, None,
                 {"bundle": "p/d/0x00000000_0x80000000", "dst": "b1", "src": None}),
    ]
    _fold(events, projection)
    topic = "persistent://p/d/orders"
    bundle = projection.bundle_of_topic(topic)
    assert projection.lookup(topic) is None or bundle != "p/d/0x00000000_0x80000000"
    projection.apply(2, Envelope("3", "BundleOwned", 1, "p/d", 3, 1, 12, None, None,
                                 {"bundle": "p/d/0x00000000_0x80000000", "owner": "b1", "src": None}))
    assert projection.owner("p/d/0x00000000_0x80000000") == "b1"


def test_invalid_transition_gap_and_stale_epoch_are_anomalies_with_offsets() -> None:
    create = Envelope("1", "NamespaceCreated", 1, "p/d", 1, 2, 10, None, None,
                      {"namespace": "p/d", "boundaries": [0, 0xFFFFFFFF]})
    owned_without_assign = Envelope("2", "BundleOwned", 1, "p/d", 2, 2, 11, None, None,
                                    {"bundle": "p/d/0x00000000_0xffffffff", "owner": "b1"})
    release_unowned = Envelope("3", "BundleReleased", 1, "p/d", 3, 2, 12, None, None,
                               {"bundle": "p/d/0x00000000_0xffffffff", "src": "b9"})
    after_gap = Envelope("4", "BundleAssigned", 1, "p/d", 7, 2, 13, None, None,
                         {"bundle": "p/d/0x00000000_0xffffffff", "dst": "b2"})
    stale = Envelope("5", "BundleAssigned", 1, "p/d", 8, 1, 14, None, None,
                     {"bundle": "p/d/0x00000000_0xffffffff", "dst": "b3"})
    garbage = Envelope("6", "BundleOwned", 1, "p/d", 9, 2, 15, None, None, {"nope": 1})
    projection = _fold([create, owned_without_assign, release_unowned, after_gap, stale, garbage])
    kinds = [(a.kind, a.offset) for a in projection.anomalies]
    assert ("invalid_transition", 2) in kinds
    assert ("gap", 3) in kinds
    assert ("stale_epoch", 4) in kinds
    assert ("bad_event", 5) in kinds
    # Init -> Owned is allowed in compacted mode; nothing after it was a valid transition.
    assert projection.state("p/d/0x00000000_0xffffffff") == "Owned"
    assert projection.owner("p/d/0x00000000_0xffffffff") == "b1"


# The fold decides a transition with one table lookup instead of calling accept(): for every held
# record and every ownership event, it must apply exactly what accept() takes.
_EVENTS = {  # event -> (state, payload field naming dst or None, carries force)
    "BundleAssigned": (BundleState.ASSIGNING, "dst", True),
    "BundleOwned": (BundleState.OWNED, "owner", False),
    "UnloadRequested": (BundleState.RELEASING, None, False),
    "TransferPrepared": (BundleState.RELEASING, "dst", False),
    "BundleReleased": (BundleState.FREE, None, False),
    "SplitRequested": (BundleState.SPLITTING, None, False),
}
_REQUIRED = {  # the other fields these events require (the fold reads typed events)
    "UnloadRequested": {"reason": "admin"},
    "TransferPrepared": {"reason": "admin"},
    "SplitRequested": {"algorithm": "range_equally_divide"},
}
_BROKERS = st.sampled_from([None, "", "b1", "b2"])
_BUNDLE = "t/n/0x00000000_0xffffffff"


@settings(max_examples=3000)
@given(held=st.one_of(st.none(), st.tuples(st.sampled_from(list(BundleState)), _BROKERS, _BROKERS,
                                           st.sampled_from([1, 7, VERSION_MAX]))),
       kind=st.sampled_from(sorted(_EVENTS)), dst=_BROKERS, src=_BROKERS, force=st.booleans(),
       mode=st.sampled_from(list(AcceptMode)))
def test_the_folds_table_decides_as_accept_does(held: tuple | None, kind: str, dst: str | None,
                                                src: str | None, force: bool, mode: AcceptMode) -> None:
    projection, current = OwnershipProjection(mode=mode), None
    if held is not None:
        state, held_dst, held_src, version = held
        if not (held_dst or held_src or state is BundleState.FREE):
            return  # not a record the state machine can hold
        current = OwnershipRecord.trusted(state, held_dst or None, held_src or None, 5, version)
        projection.records[_BUNDLE] = current
    state, dst_field, forced = _EVENTS[kind]
    payload = {"bundle": _BUNDLE, "src": src, **({dst_field: dst} if dst_field else {}),
               **({"force": force} if forced else {}), **_REQUIRED.get(kind, {})}
    offered = OwnershipRecord.trusted(state, (dst if dst_field else None) or None, src or None, 9,
                                      1 if current is None else next_version(current.version),
                                      force=force and forced)
    applied = projection.apply(0, Envelope("e", kind, 1, "t/n", 1, 1, 9, None, None, payload))
    assert applied == accept(current, offered, mode), (current, offered)
    assert projection.records.get(_BUNDLE) == (offered if applied else current)
    assert applied == (not projection.anomalies)


def test_the_tracker_snapshot_keeps_its_format() -> None:
    projection = _fold(history(3, 40))
    data = projection.tracker.snapshot()
    assert set(data) == {"last_seq", "max_epoch", "anomalies"}
    assert set(data["last_seq"]) == set(data["max_epoch"])
    restored = SequenceTracker.restore(_through_bytes(data))
    assert restored.positions == projection.tracker.positions
