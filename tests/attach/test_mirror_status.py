"""A state directory that mirrors a real Pulsar has no leader of the project's: its balancer
status says that Pulsar balances it, never "stalled: no leader"."""

from __future__ import annotations

from pathlib import Path

from actors.api import Cluster
from actors.cluster.mirror_link import MirrorLink
from actors.control_status import status_text


async def test_the_status_of_a_mirror_says_pulsar_balances_it(tmp_path: Path) -> None:
    link = await MirrorLink.open(tmp_path / "log", "http://127.0.0.1:8080")
    cluster = Cluster(link)
    try:
        status = await cluster.balancer_status()
    finally:
        await cluster.close()
    assert status["state"] == "mirrored" and not status["stalled"]
    assert "Pulsar at http://127.0.0.1:8080 balances this cluster" in status_text(status)
