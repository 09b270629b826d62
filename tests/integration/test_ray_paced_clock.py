"""Cluster time on real Ray when the machine cannot keep the speed (``actors.runtime.paced``).

At 60x, Pulsar's 30 s session timeout is half a second of wall time: a broker whose process the
machine does not run for that long looks dead to the leader. With the paced clock, cluster time
stands still for the late broker, so it is not expired, and the cluster says for whom it waited;
a broker really killed is still expired. Without it (``paced=False``) the same stall expires
the broker: the stall is long enough to matter.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from actors.api import Cluster
from actors.cluster.ray_link import RayLink
from lbctl.main import main
from tests.integration.ray_scenarios import unique
from tests.support.patience import patient

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]

SPEED = 60.0
HOG_S = 8.0
HOG = f"import time\nend = time.monotonic() + {HOG_S}\nwhile time.monotonic() < end: pass"
"""A busy loop for ``HOG_S`` wall seconds."""
CONF = str(Path(__file__).resolve().parents[2] / "conf" / "broker.conf")
STALL_S = 2.0
"""Wall seconds one broker's event loop is blocked: 120 s of cluster time at 60x, four session
timeouts."""


async def expired(cluster: Cluster) -> list[str]:
    return [r.envelope.key for r in await cluster.link.history()
            if r.envelope.type == "BrokerLeft" and r.envelope.payload.get("reason") == "expired"]


async def let_pass(cluster: Cluster, virtual_ms: int) -> None:
    """Wait until ``virtual_ms`` of cluster time have passed (however long that takes)."""
    start = cluster.now_ms()
    assert await cluster.clock.wait_for(lambda: cluster.now_ms() - start >= virtual_ms, patient(120.0))


def ray_link(cluster: Cluster) -> RayLink:
    assert isinstance(cluster.link, RayLink)
    return cluster.link


async def stall(cluster: Cluster, broker_id: str) -> None:
    await ray_link(cluster).fleet.broker(broker_id).stall.remote(STALL_S)  # type: ignore[union-attr]


async def test_a_stalled_broker_stops_cluster_time_and_is_not_expired(ray_session: Any) -> None:
    async with Cluster.start(brokers=3, speed=SPEED, ray_namespace=unique("paced")) as cluster:
        await cluster.create_namespace("public/default", bundles=4)
        await let_pass(cluster, 40_000)  # every broker has reported
        before = cluster.now_ms()
        await stall(cluster, "broker-2")
        stood = cluster.now_ms() - before
        await let_pass(cluster, 60_000)  # two session timeouts after the stall
        assert await expired(cluster) == []
        assert sorted(cluster.view.brokers) == ["broker-1", "broker-2", "broker-3"]
        assert stood < cluster.settings.session_timeout_ms  # not 120 s: time stood still
        report = ray_link(cluster).pace()
        assert report is not None and report.stops >= 1
        # The clock stood for the stall. Whom a stop is put down to is the member with the oldest
        # heartbeat at that moment: on a busy machine another late actor (broker-3 in one run
        # beside a second suite) may be older than the stalled one for the whole stall.
        assert report.stood_s > STALL_S / 2, report
        assert report.describe().startswith("cluster time stood still")


async def test_a_killed_broker_is_still_expired(ray_session: Any) -> None:
    async with Cluster.start(brokers=3, speed=SPEED, ray_namespace=unique("paced-kill")) as cluster:
        await cluster.create_namespace("public/default", bundles=4)
        await let_pass(cluster, 40_000)
        await cluster.kill_broker("broker-3")
        await let_pass(cluster, 2 * cluster.settings.session_timeout_ms)
        assert await expired(cluster) == ["broker-3"]
        assert "broker-3" not in cluster.view.brokers


async def test_without_the_paced_clock_the_same_stall_expires_the_broker(ray_session: Any) -> None:
    async with Cluster.start(brokers=3, speed=SPEED, paced=False,
                             ray_namespace=unique("unpaced")) as cluster:
        await cluster.create_namespace("public/default", bundles=4)
        await let_pass(cluster, 40_000)
        assert ray_link(cluster).pace() is None
        await stall(cluster, "broker-2")
        await let_pass(cluster, 10_000)
        assert "broker-2" in await expired(cluster)


@pytest.mark.timeout(600)
def test_lbctl_run_on_a_busy_host_expires_no_broker_and_says_how_it_kept_pace(
        ray_session: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``lbctl run --host ray`` (in this process, on the session's Ray) while busy loops take
    every core for a while (``HOG_S``): the actors are late, cluster time slows for them, no
    broker expires, and the summary says whether the run kept 60x or how far behind it fell and
    for whom it waited."""
    done: list[int] = []
    run = threading.Thread(target=lambda: done.append(main(
        ["run", "--host", "ray", "--conf", CONF, "--minutes", "3", "--topics", "300", "--plain"])))
    run.start()
    out, err, hogs = "", "", []
    try:
        while run.is_alive() and "[00:" not in out:  # the cluster runs: now make it late
            run.join(0.2)
            shown = capsys.readouterr()
            out, err = out + shown.out, err + shown.err
        hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(3)]
        run.join()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    shown = capsys.readouterr()
    out, err = out + shown.out, err + shown.err
    assert done == [0], out[-3000:] + err[-3000:]
    summary = out[out.index("summary:"):]
    assert "simulated 00:03:00" in summary and "brokers expired: none" in summary, summary
    assert "EXPIRED" not in out
    pace = [line for line in summary.splitlines() if line.strip().startswith(("pace:", "cluster time"))]
    with capsys.disabled():
        print("\n" + "\n".join(pace))  # the figure: how far behind this host fell
    assert pace[0] == "  pace: kept 60x" or (" behind (" in pace[0] and pace[1].startswith(
        "    cluster time stood still")), summary
