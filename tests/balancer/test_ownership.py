"""The ownership state machine: transitions, accept(), owner query and orphan overrides (behaviour §6)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidBundle, InvalidInput, MalformedInput
from balancer.ownership import (
    TRANSITIONS,
    VERSION_MAX,
    VERSION_MIN,
    AcceptMode,
    BundleState,
    OwnershipRecord,
    accept,
    in_flight_expired,
    is_orphaned_by,
    judge,
    next_version,
    override_for_lost_broker,
    override_stuck_in_flight,
    owner_of,
    tombstone_due,
    transition_allowed,
)
from lbctl.decide import decide

S = BundleState
COMPACTED, STRICT = AcceptMode.COMPACTED, AcceptMode.STRICT


def rec(state: BundleState, dst: str | None = None, src: str | None = None, version: int = 1,
        force: bool = False, **extra: Any) -> OwnershipRecord:
    return OwnershipRecord(state, dst, src, force=force, version=version, **extra)


# -- the table -----------------------------------------------------------------------------


def test_transition_table_is_the_one_of_the_spec() -> None:
    expected = {
        S.INIT: set(S) - {S.INIT},
        S.FREE: {S.ASSIGNING, S.INIT},
        S.OWNED: {S.SPLITTING, S.RELEASING},
        S.ASSIGNING: {S.OWNED},
        S.RELEASING: {S.ASSIGNING, S.FREE},
        S.SPLITTING: {S.DELETED},
        S.DELETED: {S.INIT},
    }
    assert {k: set(v) for k, v in TRANSITIONS.items()} == expected
    assert [transition_allowed(S.INIT, s, STRICT) for s in S] == [s is S.ASSIGNING for s in S]
    assert [transition_allowed(S.FREE, s, STRICT) for s in S] == [s is S.ASSIGNING for s in S]


def test_state_groups() -> None:
    assert {s for s in S if s.in_flight} == {S.ASSIGNING, S.RELEASING, S.SPLITTING}
    assert {s for s in S if s.active} == {S.ASSIGNING, S.RELEASING, S.SPLITTING, S.OWNED}


# -- records -------------------------------------------------------------------------------


def test_record_normalises_blank_brokers_and_freezes_children() -> None:
    record = rec(S.SPLITTING, "", "a", split_children={"0x0_0x1": None})
    assert record.dst is None
    with pytest.raises(TypeError):
        record.split_children["x"] = "b"  # type: ignore[index]
    assert hash(record) == hash(rec(S.SPLITTING, None, "a", split_children={"0x0_0x1": None}))


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"state": S.OWNED}, "Owned"),
        ({"state": S.OWNED, "dst": " "}, "Owned"),
        ({"state": S.OWNED, "dst": "a", "version": 1 << 63}, str(1 << 63)),
        ({"state": "Lost", "dst": "a"}, "'Lost'"),
    ],
)
def test_bad_records_are_refused(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        OwnershipRecord(**kwargs)
    assert named in caught.value.message


def test_free_may_name_no_broker() -> None:
    assert rec(S.FREE).dst is None


def test_next_version_wraps_like_a_java_long() -> None:
    assert next_version(1) == 2 and next_version(VERSION_MAX) == VERSION_MIN


# -- accept ----------------------------------------------------------------------------------


def test_the_protocols_of_the_spec_are_accepted_step_by_step() -> None:
    steps = [
        rec(S.ASSIGNING, "b1", version=1),
        rec(S.OWNED, "b1", version=2),
        rec(S.RELEASING, "b2", "b1", version=3),  # transfer to b2
        rec(S.ASSIGNING, "b2", "b1", version=4),
        rec(S.OWNED, "b2", "b1", version=5),
        rec(S.SPLITTING, None, "b2", version=6),
        rec(S.DELETED, None, "b2", version=7),
        rec(S.INIT, "b2", version=8),
    ]
    for mode in AcceptMode:
        current = None
        for step in steps:
            assert accept(current, step, mode), (mode, current, step)
            current = step


def test_version_rules() -> None:
    owned = rec(S.OWNED, "d", "s", version=10)
    release = rec(S.RELEASING, "b2", "d", version=11)
    assert accept(owned, release)
    assert not accept(owned, rec(S.RELEASING, "b2", "d", version=10))
    assert not accept(owned, rec(S.RELEASING, "b2", "d", version=5))
    gap = rec(S.OWNED, "b2", "d", version=12)  # not even a transition: the gap wins in compacted mode
    assert accept(owned, gap, COMPACTED) and not accept(owned, gap, STRICT)
    top = rec(S.OWNED, "d", "s", version=VERSION_MAX)
    assert accept(top, rec(S.RELEASING, "b2", "d", version=VERSION_MIN))
    assert not accept(top, rec(S.RELEASING, "b2", "d", version=VERSION_MIN + 1), STRICT)


def test_no_record_in_strict_mode_the_version_decides_alone() -> None:
    assert accept(None, rec(S.ASSIGNING, "d"), STRICT)
    assert accept(None, rec(S.OWNED, "d"), STRICT)  # no transition check follows
    assert not accept(None, rec(S.ASSIGNING, "d", version=2), STRICT)
    assert accept(None, rec(S.OWNED, "d", version=2), COMPACTED)


def test_no_record_in_compacted_mode_refuses_init() -> None:
    assert not accept(None, rec(S.INIT, "d"), COMPACTED)
    assert accept(None, rec(S.INIT, "d", force=True), COMPACTED)
    assert not accept(rec(S.INIT, "d"), rec(S.INIT, "d", version=2), COMPACTED)


def test_tombstone_and_force() -> None:
    assert accept(rec(S.SPLITTING, None, "s", version=7), None, STRICT)
    forced = rec(S.OWNED, "x", version=2, force=True)
    assert accept(rec(S.OWNED, "d"), forced)
    assert not accept(rec(S.OWNED, "d", version=3), forced)  # force does not beat the version


@pytest.mark.parametrize(
    ("current", "incoming", "accepted"),
    [
        (rec(S.OWNED, "d"), rec(S.RELEASING, None, "d", version=2), True),
        (rec(S.OWNED, "d"), rec(S.RELEASING, None, "s", version=2), False),
        (rec(S.OWNED, "d"), rec(S.RELEASING, "d", "d", version=2), False),
        (rec(S.OWNED, "d"), rec(S.RELEASING, "d2", None, version=2), False),
        (rec(S.OWNED, "d"), rec(S.SPLITTING, None, "d", version=2), True),
        (rec(S.OWNED, "d"), rec(S.SPLITTING, "d", "d", version=2), False),
        (rec(S.ASSIGNING, "d1"), rec(S.OWNED, "d2", version=2), False),
        (rec(S.RELEASING, "d1", "s"), rec(S.ASSIGNING, "d2", "s", version=2), False),
        (rec(S.RELEASING, None, "s"), rec(S.ASSIGNING, None, "s", version=2), False),
        (rec(S.RELEASING, None, "s"), rec(S.FREE, None, "x", version=2), False),
        (rec(S.FREE, "b"), rec(S.ASSIGNING, "d", "s", version=2), False),
        (rec(S.FREE), rec(S.ASSIGNING, "d", version=2), True),
        (rec(S.SPLITTING, "d", "s"), rec(S.DELETED, "d", "x", version=2), False),
    ],
)
def test_broker_checks(current: OwnershipRecord, incoming: OwnershipRecord, accepted: bool) -> None:
    verdict = judge(current, incoming)
    assert verdict.accepted is accepted, verdict.rule


def test_a_rejection_says_why() -> None:
    assert "not newer" in judge(rec(S.OWNED, "d", version=3), rec(S.RELEASING, None, "d", version=3)).rule
    assert "not a transition" in judge(rec(S.OWNED, "d"), rec(S.OWNED, "e", version=2)).rule


# -- properties ------------------------------------------------------------------------------

BROKERS = st.sampled_from([None, "a", "b", "c"])
VERSIONS = st.one_of(st.integers(-3, 6), st.sampled_from([VERSION_MIN, VERSION_MIN + 1, VERSION_MAX - 1, VERSION_MAX]))


@st.composite
def records(draw: st.DrawFn) -> OwnershipRecord:
    state = draw(st.sampled_from(list(S)))
    dst, src = draw(BROKERS), draw(BROKERS)
    if dst is None and src is None and state is not S.FREE:
        dst = "a"
    return rec(state, dst, src, draw(VERSIONS), draw(st.booleans()))


@settings(max_examples=1000)
@given(st.one_of(st.none(), records()), st.one_of(st.none(), records()), st.sampled_from(list(AcceptMode)))
def test_accept_never_takes_an_older_version(current: OwnershipRecord | None, incoming: OwnershipRecord | None,
                                             mode: AcceptMode) -> None:
    verdict = judge(current, incoming, mode)
    if not verdict.accepted or incoming is None:
        return
    if current is None:
        if mode is STRICT:
            assert incoming.version == 1
    else:
        wrapped = current.version == VERSION_MAX and incoming.version == VERSION_MIN
        assert wrapped or incoming.version > current.version
        if mode is STRICT:
            assert wrapped or incoming.version == current.version + 1
    gap = current is not None and mode is COMPACTED and current.version < incoming.version - 1
    strict_first = current is None and mode is STRICT
    if not incoming.force and not gap and not strict_first:
        before = current.state if current is not None else S.INIT
        assert transition_allowed(before, incoming.state, mode)


@settings(max_examples=500)
@given(st.one_of(st.none(), records()), records())
def test_strict_accepts_only_what_compacted_accepts(current: OwnershipRecord | None,
                                                    incoming: OwnershipRecord) -> None:
    # Without a current record strict mode lets the version rule decide alone (behaviour §6.1
    # step 2): a version-1 record of any state is accepted there, while compacted mode goes on
    # to the transition check (no record = Init, and Init -> Init is refused).
    if current is None and incoming.version == 1:
        return
    if accept(current, incoming, STRICT):
        assert accept(current, incoming, COMPACTED)


@settings(max_examples=2000)
@given(st.one_of(st.none(), records()), st.one_of(st.none(), records()), st.sampled_from(list(AcceptMode)))
def test_fast_accept_agrees_with_the_explained_judgement(current: OwnershipRecord | None,
                                                         incoming: OwnershipRecord | None,
                                                         mode: AcceptMode) -> None:
    # accept() is the folds' hot path; judge() says why. They must never disagree.
    assert accept(current, incoming, mode) == judge(current, incoming, mode).accepted


# -- owner query -------------------------------------------------------------------------------


def test_owner_query() -> None:
    assert owner_of(None) is None
    assert owner_of(rec(S.OWNED, "d", "s")) == "d"
    assert owner_of(rec(S.SPLITTING, None, "s")) == "s"
    assert owner_of(rec(S.ASSIGNING, "d")) == "d"
    assert owner_of(rec(S.RELEASING, "d", "s")) == "d"
    assert owner_of(rec(S.RELEASING, None, "s")) is None
    assert owner_of(rec(S.FREE, None, "s")) is None and owner_of(rec(S.INIT, "d")) is None
    with pytest.raises(InvalidBundle, match="public/default/0x00000000_0x40000000"):
        owner_of(rec(S.DELETED, None, "s"), "public/default/0x00000000_0x40000000")


# -- §6.3 overrides ----------------------------------------------------------------------------


def test_orphans_of_a_lost_broker() -> None:
    assert is_orphaned_by(rec(S.OWNED, "x"), "x")
    assert is_orphaned_by(rec(S.RELEASING, "b", "x"), "x")
    assert not is_orphaned_by(rec(S.OWNED, "b", "x"), "x")  # src of a settled record
    assert not is_orphaned_by(rec(S.FREE, None, "x"), "x")
    assert override_for_lost_broker(rec(S.OWNED, "b", "x"), "x", "c", now_ms=5) is None


def test_override_records_for_a_lost_broker() -> None:
    def over(record: OwnershipRecord, new: str | None, graceful: bool = False) -> tuple[Any, ...]:
        out = override_for_lost_broker(record, "x", new, now_ms=99, graceful=graceful)
        assert out is not None and out.force and out.version == next_version(record.version)
        assert out.timestamp_ms == 99
        return out.state, out.dst, out.src

    assert over(rec(S.OWNED, "x", "s", version=4), "n") == (S.OWNED, "n", "x")
    assert over(rec(S.OWNED, "x", "s"), "n", graceful=True) == (S.RELEASING, "n", "x")
    assert over(rec(S.ASSIGNING, "x", "s"), "n") == (S.OWNED, "n", "s")
    assert over(rec(S.ASSIGNING, "x", "n"), "n") == (S.OWNED, "n", None)
    assert over(rec(S.RELEASING, "d", "x"), "n") == (S.OWNED, "n", "x")
    children = {"public/default/0x00000000_0x20000000": None}
    split = rec(S.SPLITTING, None, "x", split_children=children)
    assert over(split, "n") == (S.SPLITTING, None, "n")
    assert override_for_lost_broker(split, "x", "n", now_ms=1).split_children == children  # type: ignore[union-attr]
    assert over(rec(S.OWNED, "x", version=VERSION_MAX), None) == (S.FREE, None, "x")
    with pytest.raises(InvalidInput, match="'x'"):
        override_for_lost_broker(rec(S.OWNED, "x"), "x", "x", now_ms=1)


def test_an_override_is_accepted_over_the_record_it_replaces() -> None:
    for record in (rec(S.OWNED, "x", version=3), rec(S.ASSIGNING, "x", version=3), rec(S.SPLITTING, None, "x")):
        for new in ("n", None):
            out = override_for_lost_broker(record, "x", new, now_ms=1)
            assert out is not None
            assert accept(record, out, COMPACTED) and accept(record, out, STRICT)


def test_stuck_in_flight_overrides_and_timers() -> None:
    stuck = rec(S.ASSIGNING, "d", "s", timestamp_ms=1000)
    assert override_stuck_in_flight(stuck, "n", now_ms=40_000).dst == "n"
    freed = override_stuck_in_flight(stuck, None, now_ms=40_000)
    assert (freed.state, freed.src, freed.force) == (S.FREE, "s", True)
    with pytest.raises(InvalidInput, match="Owned"):
        override_stuck_in_flight(rec(S.OWNED, "d"), "n", now_ms=1)
    config = LoadBalancerConfig()
    assert not in_flight_expired(stuck, 31_000, config) and in_flight_expired(stuck, 31_001, config)
    free = rec(S.FREE, timestamp_ms=0)
    assert not tombstone_due(free, 3_600_000, config) and tombstone_due(free, 3_600_001, config)
    assert not tombstone_due(rec(S.OWNED, "d"), 10**12, config)


# -- decide accept -----------------------------------------------------------------------------


def _case(**changes: Any) -> dict[str, Any]:
    case: dict[str, Any] = {"mode": "compacted", "current": None,
                            "incoming": {"state": "Assigning", "dst": "d", "src": None, "version": 1}}
    case.update(changes)
    return {"cases": [case]}


def test_decide_accept() -> None:
    assert decide("accept", _case()) == {"results": [True]}
    assert decide("accept", _case(mode="strict", incoming=None)) == {"results": [True]}


@pytest.mark.parametrize(
    ("document", "named"),
    [
        (_case(mode="lenient"), "'lenient'"),
        (_case(incoming={"state": "Gone", "dst": "d", "version": 1}), "'Gone'"),
        (_case(incoming={"state": "Owned", "dst": "d", "version": "1"}), "cases[0].incoming.version"),
        (_case(incoming={"state": "Owned", "dst": "d"}), "version"),
        (_case(incoming={"state": "Owned", "dst": 5, "version": 1}), "cases[0].incoming.dst"),
        (_case(incoming={"state": "Owned", "dst": "d", "version": 1, "force": "yes"}), "force"),
        (_case(incoming={"state": "Owned", "dst": "d", "version": 1, "owner": "d"}), "'owner'"),
        (_case(incoming={"state": "Owned", "version": 1}), "cases[0].incoming"),
        (_case(incoming={"state": "Owned", "dst": "d", "version": 1 << 63}), str(1 << 63)),
        ({"cases": [{"mode": "compacted", "current": None}]}, "'incoming'"),
        ({"cases": "all"}, "cases"),
    ],
)
def test_decide_accept_bad_input(document: dict[str, Any], named: str) -> None:
    with pytest.raises(MalformedInput) as caught:
        decide("accept", document)
    assert named in caught.value.message
