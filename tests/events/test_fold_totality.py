"""Every fold is total: a record its schema allows but no fold can use is a named ``bad_event``,
never an exception, in every fold of the project.

A real log (``lbctl run --host inproc --keep``) is the history; one hostile record follows it:
any event of the catalog whose payload the codec accepts (so its fields have their declared
types) but whose maps and lists hold what an attacker likes: missing keys, wrong nested types,
empty maps, huge ints, the largest finite floats, strings at the format's limit. Every fold of
the project takes history + that record: the projections (ownership, load, explain, the shed
replay), each body (namespace, leader, broker, client, workload; then a tick and a lookup on what
they folded), ``lbctl run``'s stats, the web service's tally, series and shapes, and Spark's
decoding of rows (Arrow, no JVM). None may raise; where the record's typed event is refused
(``events.usable``), every fold that keeps anomalies names it ``bad_event`` at its offset.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path
from random import Random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.api import Cluster
from actors.broker import BrokerBody
from actors.client import ClientView
from actors.deploy import SIGNING_SUBDIR
from actors.leader import LeaderBody
from actors.namespace import NamespaceBody
from actors.runtime.signers import Keyring
from actors.workload import ClientsBody, Workload
from balancer.config import LoadBalancerConfig
from balancer.errors import DecodeError
from events._fields import MAX_TEXT
from events.authority import identity_name, shard_instance
from events.catalog import (
    CLUSTER_KEY,
    EVENTS,
    LEADER_KEY,
    SCHEMAS,
    Event,
    LookupBundle,
)
from events.codec import decode, encode
from events.envelope import Envelope
from events.log.local import LocalEventLog
from events.log.memory import MemoryEventLog
from events.log.port import Record
from events.signing import keyring_root
from lbctl.main import main
from lbctl.runstats import RunStats
from projections.explain import moves_of, render
from projections.load import LOAD_TYPES, LoadProjection
from projections.ownership import OwnershipProjection
from projections.shed_replay import align, recorded_runs
from spark_replay.sources import decode_row, to_batch
from web.observe.observer import Observer
from web.observe.tally import Tally
from web.shapes import local_broker_data

CONF = str(Path(__file__).resolve().parents[2] / "conf" / "broker.conf")
CONFIG = LoadBalancerConfig.from_broker_conf(Path(CONF).read_text())
NAMES = ("bundle", "usage", "limit", "cpu", "memory", "bandwidth_in", "msg_rate_in",
         "msg_throughput_out", "topics", "producers", "continued", "part", "strategy",
         "destination", "source", "reason", "label", "kind", "inputs", "run_ms", "folded",
         "placement", "code", "message", "retriable", "primary", "secondary", "min_limit", "0")
"""Keys the folds read inside maps: hostile maps use them, so they reach the folds."""


# -- the history ---------------------------------------------------------------------------------


class History(list[Record]):
    """The records of a kept run (a short repr: hypothesis prints it with a failing example) and
    the keyring its writers signed with (``keys``), so a hostile record is signed as the writer
    of its key would sign it and reaches the folds (an unsigned one is only ``forged``)."""

    keys: Path

    def __repr__(self) -> str:
        return f"<the {len(self)} records of a kept run>"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> list[Record]:
    state = tmp_path_factory.mktemp("kept")
    assert main(["run", "--host", "inproc", "--conf", CONF, "--plain", "--minutes", "3",
                 "--speed", "0", "--keep", "--state-dir", str(state)]) == 0

    async def read() -> list[Record]:
        log = LocalEventLog(state / "log")
        try:
            return (await log.read()).records
        finally:
            await log.close()

    out = History(asyncio.run(read()))
    out.keys = state / "log" / SIGNING_SUBDIR
    return out


def _names(history: list[Record], field: str) -> list[str]:
    return sorted({str(r.envelope.payload[field]) for r in history if field in r.envelope.payload})


# -- hostile payloads the schema allows ----------------------------------------------------------


def _leaf() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
        st.sampled_from([0, -1, 2**63 - 1, -(2**63), 1.7976931348623157e308, -1e308, 0.5, ""]),
        st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
        st.sampled_from(NAMES), st.just("x" * MAX_TEXT))


def _plain() -> st.SearchStrategy[Any]:
    keys = st.one_of(st.sampled_from(NAMES), st.text(max_size=4), st.integers(-5, 5))
    return st.recursive(_leaf(), lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)), max_leaves=12)


def _value(annotation: str, draw: Callable[[st.SearchStrategy[Any]], Any], names: dict[str, list[str]],
           field: str) -> Any:
    text = annotation.replace(" ", "")
    if text.endswith("|None"):
        return None if draw(st.booleans()) and draw(st.booleans()) else _value(text[:-5], draw, names, field)
    if text == "str":
        known = names.get(field) or ["broker-1"]
        return draw(st.one_of(st.sampled_from(known), st.text(max_size=12), st.just("x" * MAX_TEXT),
                              st.sampled_from(["", "/", "public/default/0x00000000_0xffffffff"])))
    if text == "int":
        return draw(st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([0, 1, 2**63 - 1])))
    if text == "bool":
        return draw(st.booleans())
    if text == "dict[str,Any]":
        return draw(st.dictionaries(st.sampled_from(NAMES), _plain(), max_size=6))
    if text == "dict[str,int]":
        return draw(st.dictionaries(st.one_of(st.sampled_from(["0", "1", "x", "-1", "99999999999"]),
                                              st.text(max_size=3)), st.integers(-(2**63), 2**63 - 1),
                                    max_size=3))
    if text == "list[dict[str,Any]]":
        return draw(st.lists(st.dictionaries(st.sampled_from(NAMES), _plain(), max_size=6), max_size=4))
    if text == "list[int]":
        return draw(st.lists(st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**32)),
                             max_size=6))
    if text == "list[str]":
        return draw(st.lists(st.one_of(st.sampled_from(names.get("bundle") or ["x"]), st.text(max_size=8)),
                             max_size=4))
    raise AssertionError(f"no hostile values for {annotation!r}")


@st.composite
def hostile(draw: Callable[[st.SearchStrategy[Any]], Any], names: dict[str, list[str]]) -> tuple[str, dict[str, Any]]:
    cls = draw(st.sampled_from(EVENTS))
    schema = SCHEMAS[cls.TYPE]
    payload: dict[str, Any] = {}
    for name, annotation in ((f.name, str(f.type)) for f in fields(cls)):
        if name in schema.required or draw(st.booleans()):
            payload[name] = _value(annotation, draw, names, name)
    return cls.TYPE, payload


def _key(kind: str, payload: dict[str, Any]) -> str:
    try:
        event = SCHEMAS[kind].cls(**payload)
        key = event.default_key() if isinstance(event, Event) else LEADER_KEY
    except Exception:  # a name that is no bundle: the writer of some key wrote it all the same
        key = "public/default"
    return key or CLUSTER_KEY


def _writer_of(history: list[Record], key: str) -> str:
    """The identity that writes ``key`` in a kept run: its broker, the elected leader, or the
    one namespace shard."""
    if key.startswith("broker-"):
        return identity_name("broker", key)
    if key in (LEADER_KEY, CLUSTER_KEY):
        leader = [r.envelope.payload["leader_id"] for r in history if r.envelope.type == "LeaderElected"]
        return identity_name("leader", leader[-1])
    return identity_name("namespace", shard_instance(0, 1))


def _record(history: list[Record], kind: str, payload: dict[str, Any]) -> Record | None:
    """The hostile record as the next record of its key, or None if the codec refuses it."""
    key = _key(kind, payload)
    seq = max((r.envelope.seq for r in history if r.envelope.key == key), default=0) + 1
    epoch = max(r.envelope.epoch for r in history)
    last = history[-1].envelope
    if kind == "LeaderElected":
        epoch = payload["epoch"]
    envelope = Envelope("hostile", kind, SCHEMAS[kind].version, key, seq, epoch, last.ts_ms + 1,
                        None, None, payload, last.cluster_id)
    keys = getattr(history, "keys", None)
    if keys is not None:
        signer = Keyring(keyring_root(keys)).identity(_writer_of(history, key))
        envelope = signer.sign_append([envelope], [encode(envelope)])[0][0]
    raw = encode(envelope)
    try:
        return Record(0, history[-1].offset + 1, decode(raw))
    except DecodeError:
        return None


def _unusable(record: Record) -> bool:
    try:
        record.envelope.typed  # noqa: B018  (the usable rules run when the typed event is built)
    except DecodeError:
        return True
    return False


def _fresh(records: list[Record]) -> list[Record]:
    """The records as a reader gets them: envelopes not typed yet."""
    return [Record(r.partition, r.offset, Envelope(*r.envelope)) for r in records]


# -- the folds -------------------------------------------------------------------------------------


def _named(anomalies: list[Any], offset: int) -> set[str]:
    """What the fold named at ``offset``; a payload no fold can use is ``bad_event``, which the
    fold may have named first by who wrote it (a writer's role refused before the payload is read)."""
    kinds = {a.kind for a in anomalies if a.offset == offset}
    return kinds | {"bad_event"} if kinds & {"unauthorized", "unelected_epoch", "out_of_range"} else kinds


def fold_projections(records: list[Record], hostile_at: int, unusable: bool) -> None:
    ownership = OwnershipProjection()
    load = LoadProjection(CONFIG)
    for record in records:
        ownership.apply(record.offset, record.envelope)
        load.apply(record.offset, record.envelope)
    if unusable:
        assert "bad_event" in _named(ownership.anomalies, hostile_at)
        if records[-1].envelope.type in LOAD_TYPES:
            assert "bad_event" in _named(load.anomalies, hostile_at)
    for bundle in {str(r.envelope.payload.get("bundle")) for r in records}:
        render(bundle, moves_of(bundle, records))
    items = [(r.offset, r.envelope) for r in records]
    align([(0, r.offset, r.envelope) for r in records], recorded_runs(items, CONFIG.load_balancer_load_shedding_strategy),
          CONFIG)


def _bodies() -> Iterator[Any]:
    yield NamespaceBody(CONFIG)
    yield LeaderBody(CONFIG, rng=Random(1))
    yield BrokerBody("broker-1", CONFIG, Workload([]))
    yield ClientsBody(CONFIG, Workload([]))
    yield ClientView(CONFIG, MemoryEventLog())


def fold_bodies(records: list[Record], hostile_at: int, unusable: bool) -> None:
    now = records[-1].envelope.ts_ms + 1
    for recovering in (True, False):
        for body in _bodies():
            if recovering:
                body.recover(records)
            else:
                body.recover(records[:-1])
                body.on_event(records[-1], now)
            for step in range(3):
                body.on_tick(now + step * 60_000)
            if isinstance(body, LeaderBody):
                for bundle in list(body.ownership.records)[:4]:
                    body.on_command(LookupBundle(command_id=f"c-{bundle}", epoch=body.epoch,
                                                 bundle=bundle), now)
            if unusable:
                assert "bad_event" in _named(body.ownership.anomalies, hostile_at), type(body).__name__


def fold_outputs(records: list[Record], hostile_at: int, unusable: bool, observer: Observer) -> None:
    stats = RunStats(start_ms=records[0].envelope.ts_ms)
    stats.fold(records)
    stats.balance()
    if unusable:
        assert "bad_event" in _named(stats.anomalies, hostile_at)
    tally = Tally()
    for record in records:
        tally.take(record)
        observer.take(record)
    client = ClientView(CONFIG, MemoryEventLog())
    client.recover(records)
    for broker in [b for b in client.reports if b in client.brokers]:
        local_broker_data(client.load_report(broker), "pulsar://broker-1:6650", "4.0.7")
    rows = [decode_row("events", 0, r.offset, r.envelope.key, r.envelope.ts_ms, encode(r.envelope))
            for r in records]
    to_batch(rows)
    if unusable:
        assert str(rows[-1]["error"]).startswith("bad_event"), rows[-1]["error"]


@pytest.fixture(scope="module")
def observer() -> Iterator[Observer]:
    async def start() -> Cluster:
        return await Cluster.start(conf=CONF, brokers=1, host="inproc")

    cluster = asyncio.run(start())
    yield Observer(cluster)
    asyncio.run(cluster.close())


@settings(max_examples=int(os.environ.get("BB_FOLD_EXAMPLES", "200")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_fold_takes_any_schema_valid_record_and_names_what_it_cannot_use(
        history: list[Record], observer: Observer, data: st.DataObject) -> None:
    names = {field: _names(history, field) for field in ("bundle", "broker_id", "src", "dst",
                                                          "owner", "namespace", "parent", "leader_id")}
    kind, payload = data.draw(hostile(names))
    record = _record(history, kind, payload)
    if record is None:
        return  # the codec refuses it: a dead letter, not this test's subject
    records = [*history, record]
    unusable = _unusable(record)
    fold_projections(_fresh(records), record.offset, unusable)
    fold_bodies(_fresh(records), record.offset, unusable)
    fold_outputs(_fresh(records), record.offset, unusable, observer)


@pytest.mark.parametrize(("kind", "payload", "why"), [
    ("LoadReported", {"broker_id": "broker-1", "broker_load": {}, "bundles": [{}]}, "names no bundle"),
    ("LoadReported", {"broker_id": "broker-1", "broker_load": {"cpu": 5}, "bundles": []}, "usage and limit"),
    ("LoadReported", {"broker_id": "broker-1", "broker_load": {"msg_rate_in": "1"}, "bundles": []},
     "not a load figure"),
    ("LoadReported", {"broker_id": "broker-1", "broker_load": {"topics": 1e300}, "bundles": []},
     "not a count"),
    ("UnloadRequested", {"bundle": "public/default/0x00000000_0x10000000", "src": "broker-1",
                         "reason": "x", "decision": {"folded": {"x": 1}}}, "partition"),
    ("UnloadRequested", {"bundle": "public/default/0x00000000_0x10000000", "src": "broker-1",
                         "reason": "x", "decision": {"inputs": [1]}}, "inputs"),
    ("SheddingSkipped", {"strategy": "ThresholdShedder", "reason": "x", "folded": {"p": 1}}, "partition"),
    ("NamespacePolicySet", {"namespace": "public/default", "isolation": {"primary": ["("]}}, "regex"),
    ("CommandRejected", {"command_id": "c", "command": "X", "error": {"code": 1}}, "not text"),
])
def test_a_payload_no_fold_can_use_is_refused_when_typed_and_named_bad_event(
        history: list[Record], kind: str, payload: dict[str, Any], why: str) -> None:
    record = _record(history, kind, payload)
    assert record is not None, "the codec must accept it: its schema allows it"
    with pytest.raises(DecodeError, match=why):
        record.envelope.typed  # noqa: B018
    records = _fresh([*history, record])
    fold_projections(records, record.offset, True)
    fold_bodies(_fresh(records), record.offset, True)


def test_every_record_the_writers_stored_is_usable(history: list[Record]) -> None:
    assert not [r for r in history if _unusable(r)]
