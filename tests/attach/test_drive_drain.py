"""The operator's drain in drive mode, as on the project's own cluster: a drained broker's bundles
move away at the drain's rate, each an execution Pulsar's channel confirms, to brokers that are
not drained; bad input records nothing; bundles Pulsar keeps on its broker stay and the progress
names them; a restart goes on from the log; and the same verbs reach the attach process over its
web service and from ``lbctl --state-dir`` through it."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
from pathlib import Path
from typing import Any, cast

import pytest

from actors.api import Cluster
from actors.client import ClientView
from actors.cluster.kept import ClusterSpec, write_spec
from actors.cluster.mirror_link import MirrorLink
from actors.control_status import status_document
from attach.drive import Steering
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput, LoadBalancerError, MalformedInput, UnknownBroker
from events.catalog import (
    BrokerDrainRequested,
    BrokerUndrained,
    DrainBroker,
    ExecutionConfirmed,
    ExecutionRequested,
    NamespaceCreated,
    UndrainBroker,
)
from events.envelope import wall_clock_ms
from events.log.memory import MemoryEventLog
from lbctl.admin_http import AdminHttp
from lbctl.main import main
from lbctl.steer import SteerHook
from projections.drain import drain_history
from projections.explain import moves_of, render
from tests.support.fake_pulsar import FakePulsar, fake_pulsar
from tests.support.mirrored import EXTENSIBLE, Clock, Mirrored
from web.serve import serve

B1, B2, B3 = "127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"
NEW = "public/new/0x00000000_0xffffffff"


def _config() -> LoadBalancerConfig:
    return LoadBalancerConfig.from_broker_conf(EXTENSIBLE + "attachDriveExecutionTimeoutSeconds=30\n")


async def _cluster(m: Mirrored) -> list[str]:
    """Three brokers; B1 owns three bundles of public/default, its heartbeat namespace and a
    pulsar/system bundle; B2 one bundle."""
    bundles = await m.cluster([B1, B2, B3], bundles=4, owners={0: B1, 1: B1, 2: B1, 3: B2})
    await m.own(f"pulsar/{B1}/0x00000000_0xffffffff", B1)
    await m.own(f"pulsar/test/{B1}/0x00000000_0xffffffff", B1)
    await m.own("pulsar/system/0x00000000_0x40000000", B1)
    await m.report(B1, {bundles[0]: 3.0, bundles[1]: 2.0, bundles[2]: 1.0})
    await m.report(B2, {bundles[3]: 1.0})
    await m.report(B3, {})
    return bundles


async def _started(m: Mirrored, fake: FakePulsar, lines: list[str] | None = None) -> Steering:
    steering = Steering(m.log, _config(), "drive", admin=fake.admin(5.0),
                        printer=(lines if lines is not None else []).append)
    await steering.start(m.clock())
    return steering


def _drain(broker: str, rate: float, by: str = "ops") -> DrainBroker:
    # A rate as the wire may carry it (NaN included): the hook judges it as the leader does.
    return DrainBroker(command_id=f"drain-{broker}-{rate}", epoch=0, broker=broker,
                       rate_per_minute=cast(int, rate), by=by)


async def _of(log: MemoryEventLog, kind: type) -> list[Any]:
    return [r.envelope.typed for r in (await log.read()).records if isinstance(r.envelope.typed, kind)]


async def _land(m: Mirrored, fake: FakePulsar, landed: int) -> int:
    """Pulsar carries out every unload sent since ``landed``: Owned at its destination."""
    for call in fake.moves()[landed:]:
        bundle = call.path.removeprefix("/admin/v2/namespaces/").removesuffix("/unload")
        src = _owner_in(await m.log.read(), bundle)
        await m.pulsar_transfer(bundle, src, call.query["destinationBroker"])
    return len(fake.moves())


def _owner_in(result: Any, bundle: str) -> str:
    owner = ""
    for record in result.records:
        event = record.envelope.typed
        if getattr(event, "bundle", None) == bundle and type(event).__name__ == "BundleOwned":
            owner = str(event.owner)
    return owner


def _drains(steering: Steering, now_ms: int) -> list[dict[str, Any]]:
    return list(steering.status(now_ms)["control"]["drains"])


async def test_a_drain_moves_the_bundles_away_at_its_rate_and_what_pulsar_keeps_stays() -> None:
    m, lines = Mirrored(), list[str]()
    bundles = await _cluster(m)
    async with fake_pulsar() as fake:
        steering = await _started(m, fake, lines)
        receipt = await steering.drain_or_undrain(_drain(B1, 2), m.clock())  # one move each 30 s
        (drained,) = await _of(m.log, BrokerDrainRequested)
        assert receipt.types() == ["BrokerDrainRequested"] and drained.by == "ops" and drained.bundles == 6
        assert len(fake.moves()) == 1  # the first move at once
        landed = await _land(m, fake, 0)
        await steering.cycle(m.clock.advance(10_000))
        assert len(fake.moves()) == 1  # the rate holds the next one back
        await steering.cycle(m.clock.advance(20_000))
        assert len(fake.moves()) == 2
        await m.put("public/new", NamespaceCreated(namespace="public/new", boundaries=[0, 0xFFFFFFFF]))
        await m.own(NEW, B1)  # a lookup: Pulsar placed a new bundle on the drained broker
        for _ in range(6):
            landed = await _land(m, fake, landed)
            await steering.cycle(m.clock.advance(30_000))
        (left,) = _drains(steering, m.clock())
    requests = await _of(m.log, ExecutionRequested)
    moved = {r.bundle for r in requests}
    assert moved == {bundles[0], bundles[1], bundles[2], NEW}
    assert {r.proposal_id for r in requests} == {f"drain-{B1}-{drained.since_ms}"}
    assert all(r.kind == "transfer" and r.src == B1 and r.dst in (B2, B3) for r in requests)
    times = [r.envelope.ts_ms for r in (await m.log.read()).records if isinstance(r.envelope.typed, ExecutionRequested)]
    assert all(b - a >= 30_000 for a, b in itertools.pairwise(times))  # never above 2/min
    assert {c.execution_id for c in await _of(m.log, ExecutionConfirmed)} == {r.execution_id for r in requests}
    assert left["left"] == 3 and left["stays"] == 3  # heartbeat (both forms) and pulsar/system
    whys = " ".join(s["why"] for s in left["staying"])
    assert "heartbeat namespace of 127.0.0.1:8081" in whys and "pulsar/system" in whys
    status = status_document(_config(), steering.status(m.clock()), {}, [B1, B2, B3])
    assert status["state"] == "draining" and status["draining"][0]["broker"] == B1
    explained = render(bundles[0], moves_of(bundles[0], (await m.log.read()).records))
    assert f"driven by proposal drain-{B1}-{drained.since_ms}" in explained and "requested_by = ops" in explained


async def test_bad_drains_are_refused_naming_the_value_and_nothing_is_recorded() -> None:
    m = Mirrored()
    await _cluster(m)
    async with fake_pulsar() as fake:
        steering = await _started(m, fake)
        for command, error, named in ((_drain("nowhere:1", 60), UnknownBroker, "nowhere:1"),
                                      (_drain(B1, 0), MalformedInput, "0"),
                                      (_drain(B1, math.nan), MalformedInput, "nan")):
            with pytest.raises(error) as refused:
                await steering.drain_or_undrain(command, m.clock())
            assert named in str(refused.value) and "\n" not in str(refused.value)
        await steering.drain_or_undrain(_drain(B2, 60), m.clock())
        await steering.drain_or_undrain(_drain(B3, 60), m.clock())
        with pytest.raises(InvalidInput) as last:
            await steering.drain_or_undrain(_drain(B1, 60), m.clock())
        assert "last broker" in str(last.value)
        with pytest.raises(UnknownBroker):
            await steering.drain_or_undrain(UndrainBroker(command_id="u", epoch=0, broker="x:1", by="ops"), m.clock())
        undrained = await steering.drain_or_undrain(UndrainBroker(command_id="u1", epoch=0, broker=B1, by="ops"),
                                                    m.clock())
        assert undrained.types() == [] and undrained.detail == {"drained": False}
    assert [d.broker for d in await _of(m.log, BrokerDrainRequested)] == [B2, B3]


async def test_no_move_of_the_advisor_goes_to_a_drained_broker() -> None:
    m = Mirrored()
    bundles = await m.cluster(["b1", "b2", "b3"], bundles=4, owners={0: "b1", 1: "b1", 2: "b1", 3: "b2"})
    async with fake_pulsar() as fake:
        steering = await _started(m, fake)
        await steering.drain_or_undrain(_drain("b3", 60), m.clock())  # empty: nothing to move
        proposed: list[Any] = []
        for _ in range(3):
            await m.report("b1", {bundles[0]: 30.0, bundles[1]: 20.0, bundles[2]: 10.0})
            await m.report("b2", {bundles[3]: 2.0})
            await m.report("b3", {})
            proposal = await steering.cycle(m.clock.advance(60_000))
            assert proposal is not None
            proposed += proposal.moves
    assert proposed and all(move.destination != "b3" for move in proposed)
    assert "b3" not in {r.dst for r in await _of(m.log, ExecutionRequested)}
    assert drain_history((await m.log.read()).records).violations() == []


async def test_a_restarted_attach_goes_on_with_the_drain_without_a_burst_and_undrain_ends_it() -> None:
    m = Mirrored()
    await _cluster(m)
    async with fake_pulsar() as fake:
        first = await _started(m, fake)
        await first.drain_or_undrain(_drain(B1, 1), m.clock())
        assert len(fake.moves()) == 1
        await first.close(m.clock())
        m.reopen()
        again = await _started(m, fake)
        await again.cycle(m.clock.advance(20_000))
        assert len(fake.moves()) == 1  # 20 s after the last request at 1/min: none yet
        await again.cycle(m.clock.advance(41_000))
        assert len(fake.moves()) == 2
        assert _drains(again, m.clock())[0]["broker"] == B1
        ended = await again.drain_or_undrain(UndrainBroker(command_id="u", epoch=0, broker=B1, by="alice"),
                                             m.clock())
        assert ended.types() == ["BrokerUndrained"]
        await again.cycle(m.clock.advance(120_000))
        assert _drains(again, m.clock()) == []
    (undrained,) = await _of(m.log, BrokerUndrained)
    assert undrained.by == "alice" and undrained.left == 6
    assert undrained.cancelled == 2  # one bundle in flight; two at rest will not move now
    ids = [r.execution_id for r in await _of(m.log, ExecutionRequested) if r.proposal_id.startswith("drain-")]
    assert len(ids) == len(set(ids)) == 2  # numbered on after the restart; none after the undrain


async def test_a_move_pulsar_refuses_stays_and_the_drain_does_not_wait_for_it() -> None:
    m = Mirrored()
    await _cluster(m)
    async with fake_pulsar(FakePulsar(status=409, reason="cannot unload")) as fake:
        steering = await _started(m, fake)
        await steering.drain_or_undrain(_drain(B1, 600), m.clock())
        for _ in range(4):
            await steering.cycle(m.clock.advance(10_000))
        (drain,) = _drains(steering, m.clock())
    assert len(fake.moves()) == 3  # each of the three moveable bundles asked once, then it stays
    assert drain["stays"] == 6 and any("409 cannot unload" in s["why"] for s in drain["staying"])


async def test_drain_reaches_attach_over_its_web_service_and_lbctl_waits_with_a_progress_bar(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = Mirrored(clock=Clock(wall_clock_ms()))  # the hook's clock is the wall clock
    await _cluster(m)
    config = _config()
    async with fake_pulsar() as fake:
        steering = await _started(m, fake)
        hook = SteerHook(argparse.Namespace(mode="drive", dry_run=False), fake.admin(5.0), config, True)
        hook.steering = steering
        view = ClientView(config, m.log)
        await view.start()
        cluster = Cluster(MirrorLink(view, url="http://127.0.0.1:8080", owns_view=True, steered=hook))
        async with serve(cluster, 0, cluster_name="test") as service:
            write_spec(tmp_path, ClusterSpec(host="pulsar", brokers=0, web_service_url=service.url))
            state = ["--state-dir", str(tmp_path)]
            refused = await asyncio.to_thread(main, ["brokers", "drain", B1, "--rate", "0", *state])
            assert refused == 2
            waiting = asyncio.ensure_future(asyncio.to_thread(
                main, ["brokers", "drain", B1, "--rate", "600/min", "--wait", *state]))
            landed = 0
            while not waiting.done():  # Pulsar carries the moves out; attach cycles
                landed = await _land(m, fake, landed)
                m.clock.now_ms = wall_clock_ms()
                await steering.cycle(m.clock())
                await asyncio.sleep(0.2)
            assert await waiting == 0
            progress = await asyncio.to_thread(AdminHttp(service.url).call, "GET", f"/bb/v1/brokers/{B1}/drain")
            assert progress["drained"] and progress["left"] == 3 and progress["stays"] == 3
            assert await asyncio.to_thread(main, ["balancer", "status", *state]) == 0
            assert await asyncio.to_thread(main, ["brokers", "undrain", B1, *state]) == 0
        await cluster.close()
    out = capsys.readouterr().out
    assert f"{B1} [" in out and "3 stay" in out
    assert f"{B1} holds only the 3 bundle(s) that stay: heartbeat namespace" in out
    assert "draining" in out and "3 left (3 stay)" in out and f"{B1} back in service" in out
    (asked,) = await _of(m.log, BrokerDrainRequested)
    assert asked.by == "anonymous" and asked.rate_per_minute == 600  # no auth configured
    assert len(await _of(m.log, BrokerUndrained)) == 1


async def test_a_mirror_without_a_drive_run_refuses_a_drain_naming_it(tmp_path: Path) -> None:
    m = Mirrored()
    await _cluster(m)
    view = ClientView(_config(), m.log)
    await view.start()
    cluster = Cluster(MirrorLink(view, url="http://127.0.0.1:8080", owns_view=True))
    with pytest.raises(LoadBalancerError) as refused:
        await cluster.drain_broker(B1, 60, "ops")
    assert "no `lbctl attach --mode drive`" in str(refused.value)
    await cluster.close()
    assert await _of(m.log, BrokerDrainRequested) == []
