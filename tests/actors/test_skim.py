"""Skimming (events.skim): a broker reads only the header of the other brokers' load reports.

What a user notices: nothing, except the time. A broker handed the other brokers' reports with
their header only folds the state it folds from the full records, reacts the same to every
record, and still names what it must: a skimmed record it reads more of is read in full, and
one whose bytes do not decode is a dead letter in its view. The leader, the shards and every
client view read every report in full.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from actors.body import Follower
from actors.broker import BrokerBody
from actors.runtime import InProcessHost
from balancer.config import LoadBalancerConfig
from events.catalog import LoadReported
from events.codec import encode
from events.log.memory import MemoryEventLog
from events.log.port import DeadLetter, Record, expand, to_item
from events.skim import Skim, Skimmed
from tests.actors.test_body_snapshots import canonical
from tests.actors.test_shared_fold import busy_host


@pytest.fixture(scope="module")
def host() -> InProcessHost:
    return busy_host(shared=False)


def as_read(records: Sequence[Record], skim: Skim | None) -> list[Record]:
    """``records`` as a log reading their bytes for a reader with ``skim`` hands them."""
    out = []
    for record in records:
        envelope = record.envelope
        item = to_item(record.partition, record.offset, encode(envelope), envelope.key, envelope.ts_ms, skim)
        assert isinstance(item, Record)
        out.append(item)
    return out


def fresh(host: InProcessHost, name: str) -> BrokerBody:
    body = host._factories[name]()  # what the host builds for a (re)start
    assert isinstance(body, BrokerBody) and body.shared is None
    return body


def folded(body: Follower) -> Any:
    return canonical(body.snapshot_state())


def brokers_of(host: InProcessHost) -> list[str]:
    return sorted(name for name in host._factories if isinstance(host.body(name), BrokerBody))


def test_a_broker_skims_the_other_brokers_reports_and_only_those(host: InProcessHost) -> None:
    broker = fresh(host, brokers_of(host)[0])
    records = as_read(host.records, broker.skim)
    skimmed = [r for r in records if isinstance(r.envelope, Skimmed)]
    reports = [r for r in host.records if r.envelope.type == LoadReported.TYPE]
    others = [r for r in reports if r.envelope.key != broker.broker_id]
    assert len(others) > 10 and len(others) < len(reports)  # its own are read in full
    assert [r.offset for r in skimmed] == [r.offset for r in others]
    for header, full in zip(skimmed, others, strict=True):
        assert header.envelope[:9] == full.envelope[:9] and header.envelope[10:] == full.envelope[10:]
        assert header.envelope.payload is None
        with pytest.raises(TypeError, match="skimmed"):
            header.envelope.typed  # noqa: B018  # never passes for the full event
        assert expand(header) == full


def test_a_skimming_broker_recovers_the_state_a_full_fold_gives(host: InProcessHost) -> None:
    for name in brokers_of(host):
        full, skimming = fresh(host, name), fresh(host, name)
        full.recover(host.records)
        skimming.recover(as_read(host.records, skimming.skim))
        assert folded(skimming) == folded(full), name
        assert skimming.ownership.anomalies == full.ownership.anomalies


def test_a_skimming_broker_reacts_as_a_full_one_to_every_record(host: InProcessHost) -> None:
    name = brokers_of(host)[1]
    full, skimming = fresh(host, name), fresh(host, name)
    for plain, skimmed in zip(host.records, as_read(host.records, skimming.skim), strict=True):
        now = plain.envelope.ts_ms
        assert skimming.on_event(skimmed, now) == full.on_event(plain, now), plain.offset
    assert folded(skimming) == folded(full)


def test_a_tampered_report_is_forged_in_a_skimming_view_as_in_a_full_one(host: InProcessHost) -> None:
    name = brokers_of(host)[0]
    at = next(i for i, r in enumerate(host.records)
              if r.envelope.type == LoadReported.TYPE and r.envelope.key != name.partition(":")[2]
              and r.envelope.payload["bundles"])
    victim = host.records[at]
    raw = encode(victim.envelope)
    tampered = raw.replace(b"public/default", b"public/defaulu", 1)  # same length, still msgpack
    assert tampered != raw
    records = list(host.records)
    item = to_item(victim.partition, victim.offset, tampered, victim.envelope.key, 0)
    assert isinstance(item, Record)
    records[at] = item
    full, skimming = fresh(host, name), fresh(host, name)
    full.recover(records)
    skimming.recover(as_read(records, skimming.skim))
    assert isinstance(as_read(records, skimming.skim)[at].envelope, Skimmed)
    assert [a.kind for a in full.ownership.anomalies][:1] == ["forged"]  # then a gap after it
    assert folded(skimming) == folded(full)


def test_the_workloads_clients_skim_every_report_and_fold_what_a_full_fold_gives(
        host: InProcessHost) -> None:
    full, skimming = host._factories["clients"](), host._factories["clients"]()
    assert isinstance(skimming, Follower) and skimming.skim is not None
    skimmed = as_read(host.records, skimming.skim)
    assert sum(isinstance(r.envelope, Skimmed) for r in skimmed) == sum(
        r.envelope.type == LoadReported.TYPE for r in host.records)
    for plain, header in zip(host.records, skimmed, strict=True):
        now = plain.envelope.ts_ms
        assert skimming.on_event(header, now) == full.on_event(plain, now), plain.offset
        assert skimming.on_tick(now) == full.on_tick(now)
    assert folded(skimming) == folded(full)


def test_a_body_that_does_not_skim_reads_a_skimmed_record_in_full(host: InProcessHost) -> None:
    brokers = brokers_of(host)
    reader, other = fresh(host, brokers[0]), fresh(host, brokers[1])
    full = fresh(host, brokers[0])
    # Records skimmed for another broker: every report but that broker's comes as a header.
    reader.recover(as_read(host.records, other.skim))
    full.recover(host.records)
    assert folded(reader) == folded(full)


def test_a_skimmed_record_whose_bytes_do_not_decode_is_a_dead_letter_where_read(
        host: InProcessHost) -> None:
    report = next(r for r in host.records if r.envelope.type == LoadReported.TYPE)
    raw = encode(report.envelope)
    at = raw.index(b"msg_rate_in")  # inside the payload: the header still reads
    broken = raw[:at - 1] + b"\xc1" + raw[at:]  # 0xc1: never used by msgpack
    keep = Skim(LoadReported.TYPE, keep="someone-else")
    assert to_item(0, 7, broken, report.envelope.key, 0, None).__class__ is DeadLetter
    header = to_item(0, 7, broken, report.envelope.key, 0, keep)
    assert isinstance(header, DeadLetter)  # the skip reads the payload's bytes: refused there too
    header = to_item(0, 7, raw, report.envelope.key, 0, keep)
    assert isinstance(header, Record) and isinstance(header.envelope, Skimmed)
    header.envelope.raw = broken  # the bytes rot after the skim: the full read names them
    body = Follower(LoadBalancerConfig())
    assert body.readable(header) is None
    assert [a.kind for a in body.ownership.anomalies][-1:] == ["dead_letter"]


@pytest.mark.parametrize("mangle", ["other_type", "own_key", "old_version", "trailing", "short_id"])
def test_what_is_not_skimmed_is_decoded_in_full(host: InProcessHost, mangle: str) -> None:
    report = next(r for r in host.records if r.envelope.type == LoadReported.TYPE)
    envelope = report.envelope
    skim = Skim(LoadReported.TYPE, keep="someone-else")
    key = envelope.key
    if mangle == "other_type":
        envelope = next(r for r in host.records if r.envelope.type != LoadReported.TYPE).envelope
        key = envelope.key
    elif mangle == "own_key":
        skim = Skim(LoadReported.TYPE, keep=envelope.key)
    elif mangle == "old_version":
        envelope = envelope._replace(version=0)
    elif mangle == "short_id":
        envelope = envelope._replace(event_id="x")
    raw = encode(envelope) + (b"\x00" if mangle == "trailing" else b"")
    item = to_item(0, 1, raw, key, 0, skim)
    assert not (isinstance(item, Record) and isinstance(item.envelope, Skimmed))


def test_a_log_hands_skimmed_records_to_its_reader_only_when_asked() -> None:
    import asyncio

    async def run() -> tuple[int, int]:
        log = MemoryEventLog()
        await log.start()
        report = LoadReported(broker_id="b1", broker_load={}, bundles=[])
        await log.append("b1", [report, report], epoch=0)
        plain = (await log.read()).records
        log.skim = Skim(LoadReported.TYPE, keep="b2")
        skimmed = (await log.read()).records
        return (sum(isinstance(r.envelope, Skimmed) for r in plain),
                sum(isinstance(r.envelope, Skimmed) for r in skimmed))

    assert asyncio.run(run()) == (0, 2)


def test_a_host_asks_its_log_to_skim_what_its_body_skims() -> None:
    from actors.runtime.bodies import BodySpec
    from actors.runtime.realtime import LiveHost
    from actors.runtime.specs import Clock
    from tests.actors.test_live_host import CONFIG, SETTINGS, LocalTransport

    skims = {}
    for kind, name in (("broker", "broker-1"), ("namespace", None), ("leader", None), ("clients", None)):
        log = MemoryEventLog()
        spec = BodySpec(kind, CONFIG, SETTINGS, broker_id=name)  # type: ignore[arg-type]
        LiveHost(spec.build(), log, Clock.starting_now(), LocalTransport())
        skims[kind] = log.skim
    assert skims == {"broker": Skim(LoadReported.TYPE, keep="broker-1"), "namespace": None, "leader": None,
                     "clients": Skim(LoadReported.TYPE)}  # a workload's clients read no report
