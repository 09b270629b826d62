"""What a user types: ``lbctl attach --mode advise|drive`` refuses bad input and a cluster that
sheds by itself before anything is read, and ``lbctl pulsar advise-report|drive-report`` reads
back what a run recorded (text, JSON, an HTML page)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

from attach.drive import DriveRefused, Steering
from balancer.config import LoadBalancerConfig
from balancer.errors import ConfigError, MalformedInput
from events.envelope import Stamper, counting_ids
from events.log.local import LocalEventLog
from lbctl.admin_http import AdminHttp
from lbctl.main import main
from lbctl.steer import SteerHook, prepare
from tests.support.fake_pulsar import FakePulsar, fake_pulsar
from tests.support.mirrored import EXTENSIBLE, Clock, Mirrored


def _args(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**{"mode": "drive", "dry_run": False, "conf": None, **kw})


async def test_drive_is_refused_on_a_cluster_that_sheds_and_bad_flags_are_refused_first(tmp_path: Path) -> None:
    async with fake_pulsar(FakePulsar(settings={"loadBalancerSheddingEnabled": "true"})) as fake:
        http = AdminHttp(f"http://127.0.0.1:{fake.ports[0]}")
        with pytest.raises(DriveRefused, match="loadBalancerSheddingEnabled=true"):
            await asyncio.to_thread(prepare, _args(), http)
        with pytest.raises(MalformedInput, match="--dry-run goes with --mode drive"):
            await asyncio.to_thread(prepare, _args(mode="advise", dry_run=True), http)
        bad = tmp_path / "bad.conf"
        bad.write_text("loadBalancerSheddingStratgy=TransferShedder\n")
        with pytest.raises(ConfigError, match="loadBalancerSheddingStratgy"):
            await asyncio.to_thread(prepare, _args(mode="advise", conf=str(bad)), http)
        assert await asyncio.to_thread(prepare, _args(mode="observe"), http) is None
        hook = await asyncio.to_thread(prepare, _args(mode="advise"), http)  # advise needs no switch off
        assert isinstance(hook, SteerHook) and hook.config.load_balancer_shedding_enabled
        assert fake.moves() == []


async def test_the_reports_read_back_a_recorded_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    clock = Clock()
    log = LocalEventLog(state / "log", fsync=False, stamper=Stamper(clock, counting_ids()))
    await log.start()
    try:
        m = Mirrored(clock=clock)
        m.log = log  # type: ignore[assignment]
        b = await m.cluster(["b1", "b2"], bundles=4, owners={0: "b1", 1: "b1", 2: "b1", 3: "b2"})
        await m.report("b1", {b[0]: 30.0, b[1]: 20.0, b[2]: 10.0})
        await m.report("b2", {b[3]: 2.0})
        async with fake_pulsar() as fake:
            steering = Steering(log, LoadBalancerConfig.from_broker_conf(EXTENSIBLE), "drive",
                                admin=fake.admin(), printer=lambda _: None)
            await steering.start(clock())
            proposal = await steering.cycle(clock.advance(60_000))
            assert proposal is not None
            move = proposal.moves[0]
            await m.pulsar_transfer(move.bundle, move.source, str(move.destination))
            await steering.cycle(clock.advance(1000))
    finally:
        await log.close()
    page = tmp_path / "report.html"
    assert await asyncio.to_thread(main, ["pulsar", "drive-report", "--state-dir", str(state),
                                          "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "drive: 1 executions: confirmed 1" in out and page.read_text().startswith("<!doctype html>")
    assert await asyncio.to_thread(main, ["pulsar", "advise-report", "--state-dir", str(state), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["drive"][0]["outcome"] == "confirmed" and found["advise"]["summary"]["cycles"] == 0
    assert await asyncio.to_thread(main, ["pulsar", "advise-report", "--state-dir", str(tmp_path / "none")]) == 2
    assert "no log there" in capsys.readouterr().err
