"""The balancer's pause, resume and status over the real web service (aiohttp test server) on an
in-process cluster: the pause records the token's role, bad input is 412 naming the value with
nothing recorded, a role that is not a super-user may not pause, and ``/metrics`` carries the
status."""

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
    async with Cluster.start(brokers=2, host="inproc") as started:
        await started.wait_ready(2)
        yield started


async def test_pause_status_resume_with_the_tokens_role(cluster: Cluster, tmp_path: Path) -> None:
    tokens = super_user_tokens(tmp_path)
    auth, admin, app = tokens.auth, tokens.admin, tokens.app
    async with TestClient(TestServer(create_app(cluster, auth=auth))) as client:
        refused = await client.post("/bb/v1/balancer/pause", json={"for": "5m", "reason": "x"}, headers=app)
        assert refused.status == 403
        for body, named in (({"for": "0", "reason": "x"}, "for '0'"), ({"for": "nan", "reason": "x"}, "for 'nan'"),
                            ({"for": "3d", "reason": "x"}, "for 3d"), ({"for": "5m", "reason": ""}, "--reason ''"),
                            ({"durationMs": -1, "reason": "x"}, "--for -1")):
            bad = await client.post("/bb/v1/balancer/pause", json=body, headers=admin)
            assert bad.status == 412, body
            assert named in (await bad.json())["reason"]
        paused = await client.post("/bb/v1/balancer/pause", json={"for": "5m", "reason": "incident 9"},
                                   headers=admin)
        assert paused.status == 200
        payload = await paused.json()
        assert payload["by"] == "ops-admin" and payload["until_ms"] - payload["since_ms"] == 300_000
        status = await (await client.get("/bb/v1/balancer/status", headers=admin)).json()
        assert status["state"] == "paused" and status["paused"]["by"] == "ops-admin"
        await asyncio.sleep(2.5)  # the observer fetches the status in the background
        text = await (await client.get("/metrics")).text()
        found = {(s.name, s.labels.get("state")): s.value
                 for f in text_string_to_metric_families(text) for s in f.samples if s.name.startswith("bb_balancer")}
        assert found[("bb_balancer_state", "paused")] == 1
        assert found[("bb_balancer_paused_until_seconds", None)] == payload["until_ms"] / 1000
        resumed = await (await client.post("/bb/v1/balancer/resume", headers=admin)).json()
        assert resumed["resumed"]["by"] == "ops-admin"
        again = await (await client.post("/bb/v1/balancer/resume", headers=admin)).json()
        assert again == {"resumed": None}
    pauses = [r async for r in _leader_records(cluster)]
    assert [t for t, _ in pauses] == ["BalancerPaused", "BalancerResumed"]


async def _leader_records(cluster: Cluster) -> AsyncIterator[tuple[str, dict[str, object]]]:
    for record in await cluster.log_tail(10_000):
        if record.envelope.type in ("BalancerPaused", "BalancerResumed"):
            yield record.envelope.type, dict(record.envelope.payload)


async def test_lbctl_over_rest_pauses_and_says_so(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    from lbctl.main import main

    async with TestClient(TestServer(create_app(cluster))) as client:
        url = str(client.make_url("")).rstrip("/")

        def lbctl_rest(*argv: str) -> tuple[int, str, str]:
            code = main(["--admin-url", url, *argv])
            out, err = capsys.readouterr()
            return code, out, err

        code, out, _ = await asyncio.to_thread(lbctl_rest, "balancer", "pause", "--for", "90s", "--reason", "rest")
        assert code == 0 and "90 s from now: rest" in out
        code, out, _ = await asyncio.to_thread(lbctl_rest, "balancer", "status")
        assert code == 0 and out.startswith("state: paused until") and "by anonymous: rest" in out
        code, out, err = await asyncio.to_thread(lbctl_rest, "balancer", "pause", "--for", "0", "--reason", "x")
        assert code == 2 and out == "" and "'0'" in err and len(err.strip().splitlines()) == 1
        code, out, _ = await asyncio.to_thread(lbctl_rest, "balancer", "resume")
        assert code == 0 and "balancer resumed" in out


async def test_an_unload_over_rest_records_the_tokens_role_and_explain_shows_it(
        cluster: Cluster, tmp_path: Path) -> None:
    """Before: an operator's unload recorded no principal (only a pause said who asked)."""
    from projections.explain import render

    tokens = super_user_tokens(tmp_path)
    auth, admin = tokens.auth, tokens.admin
    await cluster.create_namespace("public/default", 4)
    owner = await cluster.lookup("persistent://public/default/who-asked")
    bundle = next(r.bundle for r in cluster.bundles("public/default") if r.owner == owner)
    namespace, _, hash_range = bundle.rpartition("/")
    async with TestClient(TestServer(create_app(cluster, auth=auth))) as client:
        answer = await client.put(f"/admin/v2/namespaces/{namespace}/{hash_range}/unload", headers=admin)
        assert answer.status == 204, await answer.text()
    assert "requested by: ops-admin" in render(bundle, await cluster.explain(bundle))
