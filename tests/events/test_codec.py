"""The wire format: round trips, stored bytes of earlier code, upcasting, bad input, JSON export."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import msgpack
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.errors import DecodeError, OutOfRange
from events import _fields
from events import catalog as c
from events._fields import MAX_ITEMS, MAX_TEXT
from events.bounds import TS_MAX, TS_MIN
from events.codec import (
    PRINCIPAL_ADDED,
    PROPOSAL_ADDED,
    decode,
    decode_message,
    encode,
    export_jsonl,
    to_json,
)
from events.envelope import Envelope, Stamper, counting_ids, seal
from events.times import iso

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "events"
BUNDLE = "public/default/0x00000000_0x40000000"
DECISION = {"label": "Success", "reason": "Overloaded", "inputs": {"cpu": 0.93, "threshold": 0.85}}


def samples() -> list[c.Message]:
    """One message of every type, with values that exercise the awkward cases."""
    cmd: dict[str, Any] = {"command_id": "cmd-1", "epoch": 4}
    return [
        c.LeaderElected(leader_id="broker-1", epoch=4),
        c.BrokerRegistered(broker_id="broker-1", url="pulsar://h:6650", failure_domain="d1",
                           version="4.0.0", capacity={"cpu": 100.0, "memory": 2**33}),
        c.BrokerLeft(broker_id="broker-3", reason="graceful"),
        c.LoadReported(broker_id="broker-1", broker_load={"cpu": {"usage": 40.5, "limit": 100}},
                       bundles=[{"bundle": BUNDLE, "msg_rate_in": 1.5, "topic_hashes": [1, 2**32 - 1]}]),
        c.NamespaceCreated(namespace="public/default", boundaries=[0, 2**31, 2**32 - 1],
                           anti_affinity_group=None, isolation={"primary": ["broker-.*"]}),
        c.NamespacePolicySet(namespace="public/default", anti_affinity_group="g1"),
        c.FailureDomainSet(domain="d1", brokers=["broker-1", "broker-2"]),
        c.BundleAssigned(bundle=BUNDLE, dst="broker-2", src="broker-1", reason="transfer", force=True),
        c.BundleOwned(bundle=BUNDLE, owner="broker-2", src="broker-1"),
        c.UnloadRequested(bundle=BUNDLE, src="broker-1", reason="Overloaded", decision=DECISION),
        c.TransferPrepared(bundle=BUNDLE, src="broker-1", dst="broker-2", reason="Overloaded",
                           decision=DECISION),
        c.BundleReleased(bundle=BUNDLE, src="broker-1"),
        c.SplitRequested(bundle=BUNDLE, src="broker-1", algorithm="specified_positions_divide",
                         positions=[2**30], reason="admin", unload_children=True),
        c.SplitCompleted(parent=BUNDLE, children=["public/default/0x00000000_0x20000000",
                                                  "public/default/0x20000000_0x40000000"],
                         owner="broker-1", boundaries=[0, 2**29, 2**30]),
        c.SheddingSkipped(strategy="ThresholdShedder", reason="HitCount"),
        c.CommandRejected(command_id="cmd-9", command="SplitBundle",
                          error={"code": "unsplittable_bundle", "message": "one hash"}, key="t/n"),
        c.CreateNamespace(**cmd, namespace="t/n", bundles=16),
        c.SetNamespacePolicy(**cmd, namespace="t/n", anti_affinity_group="g1"),
        c.SetFailureDomain(**cmd, domain="d1", brokers=["b1"]),
        c.AssignBundle(**cmd, bundle=BUNDLE),
        c.ConfirmOwnership(**cmd, bundle=BUNDLE, owner="b2"),
        c.UnloadBundle(**cmd, bundle=BUNDLE, dst="b3"),
        c.UnloadNamespace(**cmd, namespace="t/n"),
        c.SplitBundle(**cmd, namespace="t/n", bundle="HOT", algorithm="flow_or_qps_equally_divide"),
        c.ConfirmRelease(**cmd, bundle=BUNDLE, src="b1"),
        c.ConfirmSplit(**cmd, parent=BUNDLE, children=[], owner="b1", boundaries=[0, 2**30]),
        # Types added since the first fixture go last: an older fixture is a prefix of today's.
        c.LeaderHeartbeat(leader_id="broker-1"),
    ]


def later_samples() -> list[c.Message]:
    """One message of every type added after the golden fixtures were stored."""
    move = {"bundle": BUNDLE, "kind": "transfer", "source": "b1", "destination": "b2",
            "reason": "Overloaded", "decision": DECISION, "load": {"msg_throughput_in": 1.5e6}}
    run = {"execution_id": "drive-1:0", "bundle": BUNDLE}
    return [
        c.SourceMessageRejected(source="persistent://pulsar/system/loadbalancer-service-unit-state",
                                message_id="7:3:-1:-1", key=BUNDLE, value="{not json", error="not JSON"),
        c.ProposalRecorded(proposal_id="drive-1", strategy="TransferShedder", mode="drive",
                           run_ms=1_700_000_000_000, moves=[move], folded={"0": 41},
                           brokers={"b1": {"weighted_max_ema": 0.81}}, predicted=None),
        c.ExecutionRequested(**run, proposal_id="drive-1", kind="split", src="b1",
                             algorithm="specified_positions_divide", boundaries=[2**30],
                             decision=DECISION, from_version=3, request="PUT /admin/v2/..."),
        c.ExecutionAccepted(**run, status=204),
        c.ExecutionUnanswered(**run, error="timed out"),
        c.ExecutionRefused(**run, status=412, message="Bundle is not owned"),
        c.ExecutionConfirmed(**run, owner="b2", evidence="pulsar:channel@1:2:0", waited_ms=230),
        c.ExecutionFailed(**run, reason="diverted", state={"state": "Owned", "owner": "b3"}),
        c.BalancerPaused(since_ms=1_700_000_000_000, until_ms=1_700_000_300_000, reason="incident",
                         by="lbctl:ops"),
        c.BalancerResumed(since_ms=1_700_000_000_000, at_ms=1_700_000_100_000, by="expired"),
        c.PauseBalancer(command_id="c-9", epoch=4, duration_ms=300_000, reason="incident", by="lbctl:ops"),
        c.ShedderUnloadsCounted(strategy="TransferShedder", since_ms=1_700_000_000_000,
                                unloaded={"Underloaded": 2}),
        c.ResumeBalancer(command_id="c-10", epoch=4, by="lbctl:ops"),
        c.BrokerDrainRequested(broker="broker-2", since_ms=1_700_000_000_000, rate_per_minute=120,
                               by="lbctl:ops", bundles=41),
        c.BrokerUndrained(broker="broker-2", since_ms=1_700_000_000_000, at_ms=1_700_000_100_000,
                          by="lbctl:ops", cancelled=3, left=5),
        c.DrainBroker(command_id="c-11", epoch=4, broker="broker-2", rate_per_minute=120, by="lbctl:ops"),
        c.UndrainBroker(command_id="c-12", epoch=4, broker="broker-2", by="lbctl:ops"),
        c.ProposalApproved(proposal_id="shed-1700000000000", by="lbctl:ops", at_ms=1_700_000_030_000),
        c.ProposalRejected(proposal_id="shed-1700000060000", by="super", at_ms=1_700_000_090_000,
                           note="not during the sale"),
        c.ProposalCancelled(proposal_id="shed-1700000000000", by="lbctl:ops", at_ms=1_700_000_040_000,
                            bundles=["public/default/0x00000000_0x40000000"]),
        c.ProposalStale(proposal_id="split-1700000120000", reason="older than 300 s", at_ms=1_700_000_500_000),
        c.ReviewProposal(command_id="c-11", epoch=4, proposal_id="shed-1700000000000", verdict="approve",
                         by="lbctl:ops"),
    ]


def golden_envelopes() -> list[Envelope]:
    stamper = Stamper(iter(range(1_700_000_000_000, 1_800_000_000_000, 1000)).__next__, counting_ids())
    return [stamper.seal(m, key=m.default_key(), seq=i, epoch=4, correlation_id="corr-1")
            for i, m in enumerate(samples(), start=1)]


def test_every_type_round_trips() -> None:
    assert {type(m) for m in [*samples(), *later_samples()]} == {*c.EVENTS, *c.COMMANDS}
    stamper = Stamper(iter(range(1_700_000_000_000, 1_800_000_000_000, 1000)).__next__, counting_ids())
    later = [stamper.seal(m, key=m.default_key(), seq=i, epoch=4) for i, m in enumerate(later_samples(), 1)]
    for envelope in [*golden_envelopes(), *later]:
        again = decode(encode(envelope))
        assert again == envelope
        assert again.message() == decode_message(encode(envelope))


@pytest.mark.parametrize("name", ["catalog_2026_11.msgpack", "catalog_2026_11b.msgpack",
                                  "catalog_2026_11c.msgpack", "catalog_2026_11d.msgpack",
                                  "catalog_2026_11e.msgpack", "catalog_2026_12a.msgpack"])
def test_bytes_stored_before_stay_readable(name: str) -> None:
    stored = msgpack.unpackb((FIXTURES / name).read_bytes())
    assert [decode(raw) for raw in stored] == golden_envelopes()[:len(stored)]


def test_bytes_written_today_are_stable() -> None:
    stored = msgpack.unpackb((FIXTURES / "catalog_2026_12a.msgpack").read_bytes())
    assert [encode(env) for env in golden_envelopes()] == stored


def test_a_stored_v1_payload_is_read_through_its_upcaster() -> None:
    envelope = decode((FIXTURES / "broker_left_v1.msgpack").read_bytes())
    assert envelope.version == 2
    assert envelope.message() == c.BrokerLeft(broker_id="broker-7", reason="expired")
    assert (envelope.key, envelope.seq, envelope.epoch) == ("broker-7", 3, 2)


def _v1_of(message: c.Message, **extra: Any) -> bytes:
    """The bytes v1 code wrote for ``message``: its payload without ``by`` (nor the fields of
    later versions), at version 1."""
    payload = {k: v for k, v in message.to_payload().items() if k not in ("by", "proposal")} | extra
    data: bytes = msgpack.packb(["id", message.TYPE, 1, message.default_key(), 1, 4, 1_700_000_000_000,
                                 None, None, payload], use_bin_type=True)
    return data


@pytest.mark.parametrize("kind", PRINCIPAL_ADDED)
def test_an_admin_write_stored_before_it_named_its_principal_reads_with_no_principal(kind: str) -> None:
    """Records of the admin writes from before ``by`` existed read through the upcaster: ``by``
    is None (nobody was named), everything else as stored; a v1 payload holding a ``by`` was not
    written by v1 code and is named (``upcast_failed``), never taken as a principal."""
    sample = {m.TYPE: m for m in samples()}[kind]
    envelope = decode(_v1_of(sample))
    assert (envelope.version, envelope.payload["by"]) == (c.SCHEMAS[kind].version, None)
    assert envelope.message() == sample and envelope.typed == sample
    with pytest.raises(DecodeError) as found:
        decode(_v1_of(sample, by="ops-admin"))
    assert found.value.details["reason"] == "upcast_failed"


@pytest.mark.parametrize("kind", PROPOSAL_ADDED)
def test_a_split_stored_before_it_named_a_proposal_reads_with_none(kind: str) -> None:
    sample = {m.TYPE: m for m in samples()}[kind]
    payload = {k: v for k, v in sample.to_payload().items() if k != "proposal"}

    def v2(body: dict[str, Any]) -> bytes:
        data: bytes = msgpack.packb(["id", kind, 2, sample.default_key(), 1, 4, 1_700_000_000_000, None, None,
                                     body], use_bin_type=True)
        return data

    envelope = decode(v2(payload))
    assert (envelope.version, envelope.payload["proposal"]) == (3, None) and envelope.message() == sample
    with pytest.raises(DecodeError) as found:
        decode(v2({**payload, "proposal": "shed-1"}))
    assert found.value.details["reason"] == "upcast_failed"


@pytest.mark.parametrize("kind", PRINCIPAL_ADDED)
def test_an_admin_write_keeps_its_principal_through_the_wire(kind: str) -> None:
    sample = dataclasses.replace({m.TYPE: m for m in samples()}[kind], by="lbctl:ops")
    envelope = seal(sample, key=sample.default_key(), seq=1, epoch=4, clock_ms=lambda: 1_700_000_000_000)
    again = decode(encode(envelope))
    assert again.message() == sample and again.payload["by"] == "lbctl:ops"
    assert orjson.loads(to_json(again))["payload"]["by"] == "lbctl:ops"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "corrupt"),
        (b"\xc1", "corrupt"),
        (msgpack.packb({"a": 1})[:-1], "corrupt"),
        (msgpack.packb("just a string"), "bad_envelope"),
        (msgpack.packb(["id", "BundleOwned", 1]), "bad_envelope"),
        (msgpack.packb(["id", "BundleOwned", "1", "k", 1, 1, 1, None, None, {}]), "bad_envelope"),
        (msgpack.packb(["id", "BundleOwned", 1, "k", True, 1, 1, None, None, {}]), "bad_envelope"),
        (msgpack.packb(["id", "Teleported", 1, "k", 1, 1, 1, None, None, {}]), "unknown_type"),
        (msgpack.packb(["id", "BundleOwned", 2, "k", 1, 1, 1, None, None,
                        {"bundle": "b", "owner": "o"}]), "future_version"),
        (msgpack.packb(["id", "BundleOwned", 1, "k", 1, 1, 1, None, None, {"bundle": "b"}]),
         "missing_fields"),
        (msgpack.packb(["id", "BundleOwned", 1, "k", 1, 1, 1, None, None,
                        {"bundle": "b", "owner": "o", "colour": "red"}]), "unknown_fields"),
        (msgpack.packb(["id", "BrokerLeft", 1, "k", 1, 1, 1, None, None, []]), "bad_envelope"),
    ],
)
def test_bad_bytes_raise_decode_error_with_a_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as caught:
        decode(raw)
    assert caught.value.details["reason"] == reason
    assert caught.value.message


def test_a_map_shaped_envelope_is_read_too() -> None:
    envelope = golden_envelopes()[0]
    assert decode(msgpack.packb(envelope.to_dict())) == envelope


def test_int_map_keys_and_large_boundaries_survive() -> None:
    event = c.LoadReported(broker_id="b", broker_load={"by_hash": {2**32 - 1: 1.0, 0: 2.0}})
    envelope = seal(event, key="b", seq=1, epoch=1, clock_ms=lambda: 5, new_id=counting_ids())
    assert decode(encode(envelope)).message() == event


def test_json_export_is_deterministic_and_sorted() -> None:
    envelope = golden_envelopes()[3]
    first = to_json(envelope)
    assert first == to_json(decode(encode(envelope)))
    parsed = orjson.loads(first)
    assert list(parsed) == sorted(parsed)
    assert parsed["payload"]["bundles"][0]["topic_hashes"] == [1, 2**32 - 1]
    lines = export_jsonl(golden_envelopes()).splitlines()
    assert len(lines) == len(samples())
    payload: dict[Any, Any] = {"blob": b"\x00\xff", 7: "int key"}
    with_bytes = envelope._replace(payload=payload)
    assert orjson.loads(to_json(with_bytes))["payload"] == {"7": "int key", "blob": "AP8="}


def test_ids_and_time_are_injected() -> None:
    ids = counting_ids()
    one = seal(c.LeaderElected(leader_id="b", epoch=1), key="_leader", seq=1, epoch=1,
               clock_ms=lambda: 42, new_id=ids)
    two = seal(c.LeaderElected(leader_id="b", epoch=1), key="_leader", seq=2, epoch=1,
               clock_ms=lambda: 43, new_id=ids)
    assert (one.ts_ms, two.ts_ms) == (42, 43)
    assert one.event_id != two.event_id
    assert one.event_id == "00000000-0000-4000-8000-000000000001"


def test_a_cluster_id_travels_with_the_envelope_and_an_unstamped_one_keeps_its_bytes() -> None:
    stamper = Stamper(lambda: 1_700_000_000_000, counting_ids(), cluster_id="east")
    env = stamper.seal(c.BundleOwned(bundle=BUNDLE, owner="broker-2"), key="public/default", seq=1, epoch=1)
    assert decode(encode(env)) == env and env.cluster_id == "east"
    assert orjson.loads(to_json(env))["cluster_id"] == "east"
    bare = env._replace(cluster_id=None)
    assert len(msgpack.unpackb(encode(bare))) == 10  # what every earlier record is, byte for byte
    assert decode(encode(bare)) == bare and "cluster_id" not in orjson.loads(to_json(bare))


def _raw(payload: dict[str, Any], ts_ms: int = 1_700_000_000_000) -> bytes:
    data: bytes = msgpack.packb(["id", "NamespacePolicySet", 2, "t/n", 1, 1, ts_ms, None, None, payload],
                                use_bin_type=True)
    return data


@pytest.mark.parametrize("payload", [
    {"namespace": "t/n", "anti_affinity_group": "g" * (MAX_TEXT + 1)},
    {"namespace": "t/n", "isolation": {"primary": ["x"] * (MAX_ITEMS + 1)}},
    {"namespace": "t/n", "isolation": {str(i): 1 for i in range(MAX_ITEMS + 1)}},
])
def test_strings_and_lists_past_the_format_limits_are_dead_letters(payload: dict[str, Any]) -> None:
    with pytest.raises(DecodeError, match="past the log format's limits") as found:
        decode(_raw(payload))
    assert found.value.details["reason"] == "bad_payload"
    at_limit = {"namespace": "t/n", "anti_affinity_group": "g" * MAX_TEXT}
    assert decode(_raw(at_limit)).payload == at_limit


@pytest.mark.parametrize(("claim", "reason"), [
    (b"\xdb" + (100).to_bytes(4, "big"), "corrupt"),  # a 100-byte string in a short record
    (b"\xdd" + (100).to_bytes(4, "big"), "corrupt"),  # a 100-item list
    (b"\xdf" + (100).to_bytes(4, "big"), "corrupt"),  # a 100-entry map
    (b"\xdb" + (MAX_TEXT + 1).to_bytes(4, "big"), "corrupt"),  # msgpack finds the bytes missing first
    (b"\xdd" + (MAX_ITEMS + 1).to_bytes(4, "big"), "bad_payload"),
])
def test_a_short_record_claiming_more_than_it_holds_is_named_by_the_format_limits(
        claim: bytes, reason: str) -> None:
    head: bytes = msgpack.packb(["id", "NamespacePolicySet", 2, "t/n", 1, 1, 1_700_000_000_000, None,
                                 None], use_bin_type=True)
    raw = b"\x9a" + head[1:] + b"\x82\xa9namespace\xa3t/n\xa1x" + claim + b"abc"
    with pytest.raises(DecodeError) as found:
        decode(raw)
    assert found.value.details["reason"] == reason, found.value
    if reason == "bad_payload":
        assert "past the log format's limits" in str(found.value)


@pytest.mark.parametrize("ts_ms", [TS_MIN - 1, TS_MAX + 1, 2**63 - 1, -(2**63)])
def test_a_time_no_date_can_print_is_a_dead_letter_and_never_stamped(ts_ms: int) -> None:
    with pytest.raises(DecodeError, match="years 1 to 9999"):
        decode(_raw({"namespace": "t/n"}, ts_ms))
    assert decode(_raw({"namespace": "t/n"}, TS_MAX)).ts_ms == TS_MAX
    with pytest.raises(OutOfRange, match="leave the range every reader decodes"):
        Stamper(clock_ms=lambda: ts_ms).seal(c.BrokerLeft(broker_id="b", reason="graceful"), key="b",
                                             seq=1, epoch=1)


@pytest.mark.parametrize(("seq", "epoch"), [(2**63, 1), (1, 2**63), (-1, 1)])
def test_a_writer_refuses_a_seq_or_epoch_no_reader_decodes(seq: int, epoch: int) -> None:
    with pytest.raises(OutOfRange, match=f"seq {seq}, epoch {epoch}"):
        seal(c.BrokerLeft(broker_id="b", reason="graceful"), key="b", seq=seq, epoch=epoch,
             clock_ms=lambda: 0)


@pytest.mark.parametrize(("ts_ms", "shown"), [
    (0, "1970-01-01T00:00:00.000Z"), (TS_MIN, "0001-01-01T00:00:00.000Z"),
    (TS_MAX, "9999-12-31T23:59:59.999Z"),
    (2**63 - 1, "9999-12-31T23:59:59.999Z (out of range: 9223372036854775807 ms)"),
])
def test_any_time_prints(ts_ms: int, shown: str) -> None:
    assert iso(ts_ms) == shown


_TRICKY = (None, True, False, 0, -1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 0.5, float("nan"),
           float("inf"), -float("inf"), "", "x", b"x", [], [1], ["a"], [{}], [None], [2**64], {},
           {"a": 1}, {"a": float("nan")}, {1: "x"}, {"a": [2**70]}, {"a": {"b": object()}}, object())


@pytest.mark.parametrize("name", sorted(c.SCHEMAS))
def test_the_compiled_payload_check_accepts_exactly_what_each_field_check_accepts(name: str) -> None:
    """The decoder runs one compiled check per record; it must agree with the field checks
    (which also give the reason) on every value, and name the first field that fails."""
    schema = c.SCHEMAS[name]
    assert schema.check_fields is not None
    assert schema.check_fields({}) is None  # absent fields are the required-fields rule's business
    for field, check in schema.checks:
        for value in _TRICKY:
            named = schema.check_fields({field: value})
            assert (named is None) == (check(value) is None), (field, value)
            assert named in (None, field)
    fails = [(f, next(v for v in _TRICKY if check(v) is not None)) for f, check in schema.checks]
    if len(fails) > 1:  # the first failing field in declaration order is named
        assert schema.check_fields(dict(fails)) == fails[0][0]


def test_a_bad_field_is_named_with_its_reason() -> None:
    env = seal(c.BundleAssigned(bundle="t/n/0x00000000_0xffffffff", dst="b1"), key="t/n", seq=1, epoch=1,
               clock_ms=lambda: 0)
    forged = env._replace(payload={**env.payload, "force": 2**63})
    with pytest.raises(DecodeError, match=r"field force: expected a bool, got int 9223372036854775808"):
        decode(encode(forged))


def _plain_by_the_rule(value: Any, depth: int = 0) -> str | None:
    """The plain-data rule written the direct way: what ``_fields._plain`` must answer."""
    kind = type(value)
    if kind is int:
        return None if -(2**63) <= value <= 2**63 - 1 else f"{value} is outside int64"
    if kind is float:
        return None if math.isfinite(value) else f"{value} is not a finite number"
    if kind in (str, bool, bytes) or value is None:
        return None
    if depth > 32:
        return "nested more than 32 levels deep"
    if kind is list:
        return next((p for p in (_plain_by_the_rule(v, depth + 1) for v in value) if p), None)
    if kind is dict:
        for k, v in value.items():
            problem = _plain_by_the_rule(k, depth + 1) or _plain_by_the_rule(v, depth + 1)
            if problem:
                return problem
        return None
    return f"a {kind.__name__} is not plain data"


_LEAVES = st.one_of(
    st.none(), st.booleans(), st.text(max_size=3), st.binary(max_size=3),
    st.integers(min_value=-(2**64), max_value=2**64), st.floats(allow_nan=True, allow_infinity=True),
    st.just(()), st.just(frozenset()), st.just(1j))
_NESTED = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.text(max_size=2), st.integers(-3, 3), st.none(), st.floats()),
                    inner, max_size=4)), max_leaves=30)


def _deep(levels: int, leaf: Any) -> Any:
    for i in range(levels):
        leaf = [leaf] if i % 2 else {"k": leaf}
    return leaf


@pytest.mark.parametrize("value", [
    [2**63], [-(2**63) - 1], [2**63 - 1, 1.5, None, b"", True], [float("inf")], [float("nan")], [1j],
    {"k": 2**63}, {"k": -(2**63) - 1}, {"k": float("-inf")}, {"k": 1j}, {1: 1}, {None: "x"},
    {2**64: 1}, {"a": 1, "b": [2**63]}, [{"k": [float("nan")]}], {"k": ()},
])
def test_the_plain_data_check_answers_as_the_rule_on_each_kind_inside_a_list_and_a_map(value: Any) -> None:
    assert _fields._plain(value) == _plain_by_the_rule(value)


@settings(max_examples=400)
@given(_NESTED)
def test_the_plain_data_check_answers_as_the_rule_on_nested_values(value: Any) -> None:
    assert _fields._plain(value) == _plain_by_the_rule(value)


@pytest.mark.parametrize("levels", [31, 32, 33, 34])
@pytest.mark.parametrize("leaf", [1, 2**64, float("nan"), "x", [], {}, ()])
def test_the_plain_data_check_answers_as_the_rule_at_the_depth_limit(levels: int, leaf: Any) -> None:
    value = _deep(levels, leaf)
    assert _fields._plain(value) == _plain_by_the_rule(value)
