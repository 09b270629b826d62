"""Drains over the real web service (aiohttp test server) on an in-process cluster: a drain
records the token's role, bad input is 4xx naming the value with nothing recorded, a role that
is not a super-user may not drain, the progress is readable, and ``/metrics`` and the status say
draining."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from actors.api import Cluster
from tests.support.web_tokens import super_user_tokens
from web.app import create_app


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with Cluster.start(brokers=3, host="inproc") as started:
        await started.wait_ready(3)
        await started.create_namespace("public/default", bundles=8)
        for number in range(40):
            await started.lookup(f"persistent://public/default/t-{number}")
        yield started


async def _drain_records(cluster: Cluster) -> list[tuple[str, dict[str, object]]]:
    return [(r.envelope.type, dict(r.envelope.payload)) for r in await cluster.log_tail(10_000)
            if r.envelope.type in ("BrokerDrainRequested", "BrokerUndrained", "CommandRejected")]


async def test_drain_progress_status_undrain_with_the_tokens_role(cluster: Cluster, tmp_path: Path) -> None:
    tokens = super_user_tokens(tmp_path)
    auth, admin, app = tokens.auth, tokens.admin, tokens.app
    async with TestClient(TestServer(create_app(cluster, auth=auth))) as client:
        refused = await client.post("/bb/v1/brokers/broker-2/drain", json={}, headers=app)
        assert refused.status == 403
        for path, body, named in (("broker-2", {"ratePerMinute": 0}, "ratePerMinute 0"),
                                  ("broker-2", {"ratePerMinute": -5}, "ratePerMinute -5"),
                                  ("broker-2", {"ratePerMinute": "fast"}, "ratePerMinute 'fast'"),
                                  ("broker-9", {}, "'broker-9'")):
            bad = await client.post(f"/bb/v1/brokers/{path}/drain", json=body, headers=admin)
            assert 400 <= bad.status < 500, body
            assert named in (await bad.json())["reason"]
        assert await _drain_records(cluster) == []
        drained = await client.post("/bb/v1/brokers/broker-2/drain", json={"ratePerMinute": 6}, headers=admin)
        assert drained.status == 200
        payload = await drained.json()
        assert payload["by"] == "ops-admin" and payload["rate_per_minute"] == 6
        progress = await (await client.get("/bb/v1/brokers/broker-2/drain", headers=admin)).json()
        assert progress["drained"] and progress["ratePerMinute"] == 6 and progress["total"] == payload["bundles"]
        status = await (await client.get("/bb/v1/balancer/status", headers=admin)).json()
        assert status["state"] == "draining" and status["draining"][0]["broker"] == "broker-2"
        await asyncio.sleep(2.5)  # the observer fetches the status in the background
        text = await (await client.get("/metrics")).text()
        found = {(s.name, s.labels.get("state") or s.labels.get("broker")): s.value
                 for f in text_string_to_metric_families(text) for s in f.samples if s.name.startswith("bb_balancer")}
        assert found[("bb_balancer_state", "draining")] == 1
        assert found[("bb_balancer_drain_rate_per_minute", "broker-2")] == 6
        assert ("bb_balancer_drain_bundles_left", "broker-2") in found
        undrained = await (await client.post("/bb/v1/brokers/broker-2/undrain", headers=admin)).json()
        assert undrained["undrained"]["by"] == "ops-admin"
        again = await (await client.post("/bb/v1/brokers/broker-2/undrain", headers=admin)).json()
        assert again == {"undrained": None}
    assert [t for t, _ in await _drain_records(cluster)] == ["BrokerDrainRequested", "BrokerUndrained"]


async def test_lbctl_over_rest_drains_and_undrains(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    from lbctl.main import main

    async with TestClient(TestServer(create_app(cluster))) as client:
        url = str(client.make_url("")).rstrip("/")

        def lbctl_rest(*argv: str) -> tuple[int, str, str]:
            code = main(["--admin-url", url, *argv])
            out, err = capsys.readouterr()
            return code, out, err

        code, out, _ = await asyncio.to_thread(lbctl_rest, "brokers", "drain", "broker-1", "--rate", "2/s")
        assert code == 0 and out.startswith("draining broker-1: ") and "at 120/min" in out
        code, out, err = await asyncio.to_thread(lbctl_rest, "brokers", "drain", "broker-3", "--rate", "nan")
        assert code == 2 and out == "" and "'nan'" in err and len(err.strip().splitlines()) == 1
        code, out, _ = await asyncio.to_thread(lbctl_rest, "balancer", "status")
        assert code == 0 and out.startswith("state: draining (broker-1: ")
        code, out, _ = await asyncio.to_thread(lbctl_rest, "brokers", "undrain", "broker-1")
        assert code == 0 and out.startswith("broker-1 back in service; ") and "handing over will finish" in out
