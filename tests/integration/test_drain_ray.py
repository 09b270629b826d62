"""Drains on real Ray (an embedded log): the drained broker empties at its rate through the
leader's placement, receives nothing meanwhile, a rolling restart drains, restarts and undrains
each broker in turn, and the audit's rule holds over the log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.api import Cluster
from projections.drain import drain_history
from tests.integration.ray_scenarios import QUIET, SETTINGS, bundles, topic_in, unique, workload
from tests.support.patience import patient

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


async def test_a_drain_and_a_rolling_restart_on_ray(ray_session: Any, tmp_path: Path) -> None:
    load = workload(["public/d"], topics=40)
    async with Cluster.start(brokers=3, workload=load, settings=SETTINGS, overrides=QUIET,
                             log_dir=tmp_path / "log", ray_namespace=unique("test-drain")) as cluster:
        await cluster.create_namespace("public/d", bundles=8)
        for bundle in bundles(cluster, "public/d"):
            await cluster.lookup(topic_in(load, bundle))
        held = cluster.held_by("broker-2")
        receipt = await cluster.drain_broker("broker-2", 600, "test")
        assert receipt.first("BrokerDrainRequested") is not None
        progress = await cluster.wait_drained("broker-2", 60)
        assert progress.left == 0 and progress.total == held
        undrained = (await cluster.undrain_broker("broker-2", "test")).first("BrokerUndrained")
        assert undrained is not None and undrained["left"] == 0
        steps: list[tuple[str, str]] = []
        await cluster.restart_plan(["broker-1", "broker-3"], 600, "test", timeout_s=patient(120),
                                   step=lambda broker, what: steps.append((broker, what)))
        assert steps[-1] == ("broker-3", "done") and ("broker-1", "restarting") in steps
        records = await cluster.log_tail(100_000)
    assert drain_history(records).violations() == []
    left = [r.envelope.payload["broker_id"] for r in records if r.envelope.type == "BrokerLeft"]
    assert left == ["broker-1", "broker-3"]
