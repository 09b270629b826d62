"""``lbctl replay audit`` proves the operator's hold from the log: a shedding move that started
while a pause held is named (``paused_move``), and so is each start over the throttle's caps
(``throttle_cap``); the recorded run itself, throttled by the leader, is clean."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from actors.leader_control import caps_of
from balancer.config import LoadBalancerConfig
from balancer.control import Caps
from events.catalog import BalancerPaused
from events.codec import encode
from events.envelope import Envelope
from events.log.local import LocalEventLog
from events.log.port import Record
from projections.control import control_history
from spark_replay.audit import audit
from spark_replay.sources import read_local

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_move_while_paused_and_a_start_over_a_cap_are_named(spark: Any, recorded: list[Record],
                                                               tmp_path: Path) -> None:
    spans = control_history(recorded).spans
    assert spans, "the recorded run shed load"
    first = min(s.start_ms for s in spans)
    inside = sorted(s.bundle for s in spans if first <= s.start_ms < first + 1)
    leader = [r.envelope for r in recorded if r.envelope.key == "_leader"][-1]
    # A pause recorded as if it had held over the first shedding run: the moves of that run
    # started while it held.
    pause = BalancerPaused(since_ms=first - 1_000, until_ms=first + 1, reason="forged", by="test")
    forged = Envelope("forged-pause", pause.TYPE, pause.VERSION, "_leader", leader.seq + 1, leader.epoch,
                      recorded[-1].envelope.ts_ms + 1, None, None, pause.to_payload())

    async def write() -> None:
        async with LocalEventLog(tmp_path / "log", fsync=False) as log:
            for envelope in [r.envelope for r in recorded] + [forged]:
                await log.append_raw(envelope.key, [encode(envelope)], ts_ms=envelope.ts_ms)

    asyncio.run(write())
    df = read_local(spark, tmp_path / "log")
    caps = caps_of(LoadBalancerConfig())
    report = audit(df, caps=caps)
    assert sorted(v.bundle or "" for v in report.of("paused_move")) == inside
    assert report.of("throttle_cap") == []
    tight = audit(df, caps=Caps(per_broker=1, cluster=1, per_minute=1))
    assert tight.of("throttle_cap"), "the recorded run moved more than one bundle a minute"
    assert all("cap 1)" in v.detail for v in tight.of("throttle_cap"))


def _write(records: list[Envelope], path: Path) -> None:
    async def write() -> None:
        async with LocalEventLog(path, fsync=False) as log:
            for envelope in records:
                await log.append_raw(envelope.key, [encode(envelope)], ts_ms=envelope.ts_ms)

    asyncio.run(write())


def test_a_bundle_a_drained_broker_received_is_named_and_a_real_drain_is_clean(
        spark: Any, recorded: list[Record], tmp_path: Path) -> None:
    from events.catalog import BrokerDrainRequested, DrainBroker, TransferPrepared
    from projections.drain import SEEN_LEADER_SEQ
    from tests.support.cluster_scenarios import call, make_host, place_all

    transfer = next(r.envelope for r in recorded if r.envelope.type == "TransferPrepared")
    dst, decided = transfer.payload["dst"], int(transfer.payload["decision"].get("started_ms", transfer.ts_ms))
    leader = [r.envelope for r in recorded if r.envelope.key == "_leader"][-1]
    shard = [r.envelope for r in recorded if r.envelope.key == transfer.key][-1]
    # A drain recorded as if it had held when that transfer was decided, though its shard had not
    # folded it (a race: no breach), then a transfer to the drained broker by a shard that had.
    drain = BrokerDrainRequested(broker=dst, since_ms=decided - 1_000, rate_per_minute=60, by="test", bundles=0)
    at = recorded[-1].envelope.ts_ms + 1
    forged = Envelope("forged-drain", drain.TYPE, drain.VERSION, "_leader", leader.seq + 1, leader.epoch,
                      at, None, None, drain.to_payload())
    move = TransferPrepared(bundle=transfer.payload["bundle"], src=transfer.payload["src"], dst=dst, reason="admin",
                            decision={"started_ms": at + 1, SEEN_LEADER_SEQ: leader.seq + 1})
    breach = Envelope("forged-move", move.TYPE, move.VERSION, shard.key, shard.seq + 1, shard.epoch,
                      at + 1, None, None, move.to_payload())
    _write([r.envelope for r in recorded] + [forged, breach], tmp_path / "forged")
    report = audit(read_local(spark, tmp_path / "forged"), caps=caps_of(LoadBalancerConfig()))
    assert {"paused_move", "throttle_cap", "drained_received"} <= set(report.checks)
    named = report.of("drained_received")
    assert [(v.bundle, v.detail.split(":")[0]) for v in named] == [(transfer.payload["bundle"], str(at + 1))]
    assert all(f"{dst} received" in v.detail for v in named)
    # Every earlier reception of that broker after the drain's since raced it: named, no breach.
    assert report.notes[0].split(";")[0] == (f"raced a drain: {decided}: {dst} received "
                                             f"{transfer.payload['bundle']} by transfer while drained "
                                             f"(since {decided - 1_000})")
    assert all(f": {dst} received " in note and "its writer had folded _leader to seq" in note
               for note in report.notes)
    # A drain the leader ran: its broker received nothing, and the audit says so.
    config = LoadBalancerConfig.from_mapping({"loadBalancerAutoBundleSplitEnabled": False})
    host = make_host(config, bundles=8)
    place_all(host)
    call(host, DrainBroker, broker="broker-2", rate_per_minute=30, by="test")
    host.advance(3 * 60_000)
    _write([r.envelope for r in host.records], tmp_path / "drained")
    clean = audit(read_local(spark, tmp_path / "drained"), caps=caps_of(config))
    assert clean.of("drained_received") == [] and clean.of("paused_move") == []
def test_a_move_without_an_approval_is_named_in_review_mode(spark: Any, tmp_path: Path) -> None:
    from tests.actors.test_control import shed_host
    from tests.actors.test_proposals import first_pending, review

    host = shed_host(loadBalancerExecution="review")
    pid = first_pending(host)
    review(host, pid, "approve")
    host.advance(2 * 60_000)
    kept = [r.envelope for r in host.records]

    def write(where: Path, envelopes: list[Envelope]) -> Any:
        async def go() -> None:
            async with LocalEventLog(where, fsync=False) as log:
                for envelope in envelopes:
                    await log.append_raw(envelope.key, [encode(envelope)], ts_ms=envelope.ts_ms)

        asyncio.run(go())
        return read_local(spark, where)

    clean = audit(write(tmp_path / "clean", kept), review=True)
    assert clean.of("unapproved_move") == [] and "unapproved_move" in clean.checks
    # The same history without its approval: each of the proposal's moves is named.
    forged = write(tmp_path / "forged", [e for e in kept if e.type != "ProposalApproved"])
    found = audit(forged, review=True).of("unapproved_move")
    started = {r.envelope.payload["bundle"] for r in host.events("TransferPrepared", "UnloadRequested")}
    assert started and {v.bundle for v in found} == started
    assert all(f"ran proposal {pid}, never approved" in v.detail for v in found)
