"""The operator's hold on drive mode, as on the project's own cluster: a pause holds every move
back while proposals go on being recorded and ends by itself, the throttle's in-flight caps
hold, the status says paused/executing/stalled with the leader's words, the audit names a move
started while paused, and the same verbs reach the attach process over its web service (and
from ``lbctl --state-dir`` through it)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from actors.api import Cluster
from actors.client import ClientView
from actors.cluster.kept import ClusterSpec, write_spec
from actors.cluster.mirror_link import MirrorLink
from actors.control_status import status_document
from attach.drive import Steering
from balancer.config import LoadBalancerConfig
from balancer.errors import Unavailable
from events.catalog import (
    BalancerPaused,
    BalancerResumed,
    ExecutionRequested,
    PauseBalancer,
    ResumeBalancer,
)
from events.envelope import wall_clock_ms
from events.log.memory import MemoryEventLog
from lbctl.admin_http import AdminHttp
from lbctl.main import main
from lbctl.steer import SteerHook
from projections.control import control_history
from tests.attach.test_attach_drive import _Flaky
from tests.support.fake_pulsar import FakePulsar, fake_pulsar
from tests.support.mirrored import EXTENSIBLE, Clock, Mirrored
from web.serve import serve


def _config(extra: str = "") -> LoadBalancerConfig:
    return LoadBalancerConfig.from_broker_conf(EXTENSIBLE + "attachDriveExecutionTimeoutSeconds=30\n" + extra)


async def _skewed(m: Mirrored) -> list[str]:
    bundles = await m.cluster(["b1", "b2", "b3"], bundles=4, owners={0: "b1", 1: "b1", 2: "b1", 3: "b2"})
    await _report(m, bundles)
    return bundles


async def _report(m: Mirrored, b: list[str]) -> None:
    await m.report("b1", {b[0]: 30.0, b[1]: 20.0, b[2]: 10.0})
    await m.report("b2", {b[3]: 2.0})
    await m.report("b3", {})


async def _started(m: Mirrored, fake: FakePulsar, config: LoadBalancerConfig, lines: list[str]) -> Steering:
    steering = Steering(m.log, config, "drive", admin=fake.admin(5.0), printer=lines.append)
    await steering.start(m.clock())
    return steering


def _pause(minutes: float, reason: str = "incident 42", by: str = "ops") -> PauseBalancer:
    return PauseBalancer(command_id=f"pause-{reason}", epoch=0, duration_ms=int(minutes * 60_000),
                         reason=reason, by=by)


def _status(steering: Steering, now_ms: int, config: LoadBalancerConfig) -> dict[str, Any]:
    leader = steering.status(now_ms)
    return status_document(config, leader, leader["position"], ["b1", "b2", "b3"])


async def _of(log: MemoryEventLog, kind: type) -> list[Any]:
    return [r.envelope.typed for r in (await log.read()).records if isinstance(r.envelope.typed, kind)]


@contextlib.asynccontextmanager
async def attach_service(m: Mirrored, fake: FakePulsar, config: LoadBalancerConfig,
                         steering: Steering) -> AsyncIterator[str]:
    """The web service ``lbctl attach --mode drive --web-service-port 0`` serves over ``steering``
    (its pause, resume, verdicts and status go to the hook): its URL."""
    hook = SteerHook(argparse.Namespace(mode="drive", dry_run=False), fake.admin(5.0), config, True)
    hook.steering = steering
    view = ClientView(config, m.log)
    await view.start()
    cluster = Cluster(MirrorLink(view, url="http://127.0.0.1:8080", owns_view=True, steered=hook))
    try:
        async with serve(cluster, 0, cluster_name="test") as service:
            yield service.url
    finally:
        await cluster.close()


async def test_a_pause_holds_every_move_back_keeps_proposing_and_ends_by_itself() -> None:
    m, config, lines = Mirrored(), _config("attachDriveMaxExecutionsPerCycle=5\n"), []
    bundles = await _skewed(m)
    async with fake_pulsar() as fake:
        steering = await _started(m, fake, config, lines)
        receipt = await steering.pause_or_resume(_pause(3), m.clock())
        assert receipt.types() == ["BalancerPaused"]
        m.clock.advance(60_000)
        await _report(m, bundles)
        proposal = await steering.cycle(m.clock())
        assert proposal is not None and proposal.moves  # the advice goes on
        assert fake.moves() == [] and await _of(m.log, ExecutionRequested) == []
        assert any("paused until" in line and "incident 42" in line for line in lines)
        status = _status(steering, m.clock(), config)
        assert status["state"] == "paused" and status["paused"]["by"] == "ops"
        assert [q["why"] for q in status["throttle"]["queue"]] == ["paused"] * len(proposal.moves)
        m.clock.advance(150_000)  # past the pause's end
        await _report(m, bundles)
        await steering.cycle(m.clock())
        (ended,) = await _of(m.log, BalancerResumed)
        assert ended.by == "expired"
        assert fake.moves()  # moves go out again
    history = control_history((await m.log.read()).records)
    assert history.spans and history.violations() == []


async def test_a_resume_ends_the_pause_now_and_a_second_resume_records_nothing() -> None:
    m, config = Mirrored(), _config()
    await _skewed(m)
    async with fake_pulsar() as fake:
        steering = await _started(m, fake, config, [])
        await steering.pause_or_resume(_pause(10), m.clock())
        resume = ResumeBalancer(command_id="r1", epoch=0, by="ops")
        assert (await steering.pause_or_resume(resume, m.clock.advance(5_000))).types() == ["BalancerResumed"]
        again = await steering.pause_or_resume(ResumeBalancer(command_id="r2", epoch=0, by="ops"), m.clock())
        assert again.types() == [] and again.detail == {"paused": False}
        assert _status(steering, m.clock(), config)["state"] != "paused"
    assert len(await _of(m.log, BalancerPaused)) == 1 and len(await _of(m.log, BalancerResumed)) == 1


async def test_the_throttles_in_flight_caps_hold_drive_mode_as_they_hold_the_leader() -> None:
    m = Mirrored()
    config = _config("attachDriveMaxExecutionsPerCycle=5\nloadBalancerMaxMovesInFlightPerBroker=1\n")
    bundles = await _skewed(m)
    async with fake_pulsar() as fake:
        lines: list[str] = []
        steering = await _started(m, fake, config, lines)
        m.clock.advance(60_000)
        await _report(m, bundles)
        proposal = await steering.cycle(m.clock())
        assert proposal is not None and len(proposal.moves) >= 2
        assert len(fake.moves()) == 1  # every move leaves b1: one at a time on it
        assert any("broker_cap" in line for line in lines)
        status = _status(steering, m.clock(), config)
        assert status["state"] == "executing" and status["throttle"]["inFlight"] == 1
        assert status["throttle"]["caps"]["perBroker"] == 1


async def test_the_audit_names_a_drive_move_started_while_a_pause_held() -> None:
    m, config = Mirrored(), _config()
    bundles = await _skewed(m)
    async with fake_pulsar() as fake:
        steering = await _started(m, fake, config, [])
        await steering.pause_or_resume(_pause(5, reason="freeze"), m.clock())
    m.clock.advance(10_000)
    stray = ExecutionRequested(execution_id="x:0", proposal_id="x", bundle=bundles[0], kind="transfer",
                               src="b1", dst="b2")
    await m.put("_proposals", stray, epoch=0)
    (named,) = control_history((await m.log.read()).records).paused_moves()
    assert named[0].bundle == bundles[0] and "freeze" in named[2]


async def test_the_attach_web_service_and_lbctl_on_its_state_directory_pause_and_tell_the_status(
        tmp_path: Path) -> None:
    m, config = Mirrored(clock=Clock(wall_clock_ms())), _config()  # the hook's clock is the wall clock
    bundles = await _skewed(m)
    async with fake_pulsar() as fake:
        steering = await _started(m, fake, config, [])
        async with attach_service(m, fake, config, steering) as url:
            http = AdminHttp(url)
            paused = await asyncio.to_thread(http.call, "POST", "/bb/v1/balancer/pause",
                                             {"for": "5m", "reason": "deploy"})
            assert paused["reason"] == "deploy"
            write_spec(tmp_path, ClusterSpec(host="pulsar", brokers=0, web_service_url=url))
            args = ["balancer", "status", "--state-dir", str(tmp_path)]
            assert await asyncio.to_thread(main, args) == 0
            resumed = await asyncio.to_thread(main, ["balancer", "resume", "--state-dir", str(tmp_path)])
            assert resumed == 0
            status = await asyncio.to_thread(http.call, "GET", "/bb/v1/balancer/status")
            assert status["state"] == "idle" and status["leader"] == "lbctl-attach", status
    assert [e.by for e in await _of(m.log, BalancerResumed)] == ["anonymous"]  # no auth configured
    assert bundles



async def test_brokers_are_stalled_only_when_silent_beyond_pulsars_report_interval() -> None:
    m, config = Mirrored(), _config("loadBalancerReportUpdateMaxIntervalMinutes=2\n")
    await _skewed(m)
    m.clock.advance(10 * 60_000)  # the reports in the log are ten minutes old when attach starts
    async with fake_pulsar() as fake:
        steering = await _started(m, fake, config, [])
        assert _status(steering, m.clock.advance(60_000), config)["stalled"] == []
        stalled = _status(steering, m.clock.advance(200_000), config)["stalled"]
        assert len(stalled) == 1 and "loadBalancerReportUpdateMaxIntervalMinutes=2" in stalled[0]


async def test_a_pause_the_log_refused_is_refused_and_never_recorded_later() -> None:
    m, config = Mirrored(), _config()
    await _skewed(m)
    flaky = _Flaky(store=m.store, stamper=m.log._stamper)
    async with fake_pulsar() as fake:
        steering = Steering(flaky, config, "drive", admin=fake.admin(5.0), printer=lambda _: None)
        await steering.start(m.clock())
        flaky.down = True
        with pytest.raises(Unavailable):
            await steering.pause_or_resume(_pause(5), m.clock())
        flaky.down = False
        await steering.cycle(m.clock.advance(1_000))
    assert await _of(m.log, BalancerPaused) == [] and steering.unwritten == []
