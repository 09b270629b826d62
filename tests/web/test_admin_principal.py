"""Who asked for an admin write, over the real web service (aiohttp test server) on an
in-process cluster: a namespace's creation, a split, a namespace's anti-affinity group set and
removed, a failure domain set and deleted each record the token's role in its event (``by``),
as a whole namespace's unload does in each bundle's decision (``requested_by``), ``anonymous``
without authentication; the REST log tail and explain (and ``lbctl --admin-url``
explain) show it; a refused role records nothing."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from actors.api import Cluster
from lbctl.admin_http import TOKEN_PLUGINS
from projections.explain import render
from projections.moves import Move
from tests.support.web_tokens import LBCTL, SUPER_USER, super_user_tokens
from web.app import create_app

NS = "/admin/v2/namespaces/public/asked"
DOMAINS = "/admin/v2/clusters/standalone/failureDomains"
ADMIN_EVENTS = ("NamespaceCreated", "NamespacePolicySet", "FailureDomainSet", "SplitRequested", "SplitCompleted")


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with Cluster.start(brokers=2, host="inproc") as started:
        await started.wait_ready(2)
        yield started


async def _admin_events(cluster: Cluster, since: int) -> list[tuple[str, dict[str, object]]]:
    records = await cluster.log_tail(10_000)
    return [(r.envelope.type, dict(r.envelope.payload)) for r in records[since:]
            if r.envelope.type in ADMIN_EVENTS]


async def _unloads_asked_by(cluster: Cluster, since: int) -> set[object]:
    """Who asked for each admin unload since ``since`` (a whole namespace's: one per bundle)."""
    records = await cluster.log_tail(10_000)
    return {r.envelope.payload["decision"].get("requested_by") for r in records[since:]
            if r.envelope.type == "UnloadRequested" and r.envelope.payload["reason"] == "admin"}


async def _writes(client: TestClient, cluster: Cluster, headers: dict[str, str]) -> str:
    """Every admin write over REST but a single bundle's unload (``test_control_api``); the
    split's parent bundle."""
    async def ok(method: str, path: str, **kwargs: Any) -> None:
        answer = await client.request(method, path, headers=headers, **kwargs)
        assert answer.status == 204, (method, path, await answer.text())

    await ok("PUT", NS, json={"bundles": {"numBundles": 2}})
    owner = await cluster.lookup("persistent://public/asked/t")
    parent = next(r.bundle for r in cluster.bundles("public/asked") if r.owner == owner)
    await ok("PUT", f"{NS}/{parent.rsplit('/', 1)[1]}/split?splitAlgorithmName=range_equally_divide", data="")
    await ok("POST", NS + "/antiAffinity", data="g1")
    await ok("DELETE", NS + "/antiAffinity")
    await ok("POST", DOMAINS + "/d1", json={"brokers": ["broker-1"]})
    await ok("DELETE", DOMAINS + "/d1")
    await ok("PUT", NS + "/unload", data="")
    return parent


async def test_every_admin_write_over_rest_records_the_tokens_role(cluster: Cluster, tmp_path: Path) -> None:
    """Before: only an unload or transfer (in its decision) and a pause named who asked; a split,
    a namespace's creation or policy and a failure domain recorded nobody."""
    tokens = super_user_tokens(tmp_path)
    since = len(await cluster.log_tail(10_000))
    async with TestClient(TestServer(create_app(cluster, auth=tokens.auth))) as client:
        refused = await client.post(DOMAINS + "/d9", json={"brokers": ["broker-2"]}, headers=tokens.app)
        assert refused.status == 403
        parent = await _writes(client, cluster, tokens.admin)
        tail = await (await client.get("/bb/v1/log/tail?limit=200", headers=tokens.admin)).json()
        explained = await (await client.get(f"/bb/v1/explain/{parent}", headers=tokens.admin)).json()
        url = str(client.make_url("")).rstrip("/")
        shown = await asyncio.to_thread(_lbctl_explain, url, tokens.admin["Authorization"], parent)
    events = await _admin_events(cluster, since)
    assert [t for t, _ in events] == ["NamespaceCreated", "SplitRequested", "SplitCompleted",
                                      "NamespacePolicySet", "NamespacePolicySet", "FailureDomainSet",
                                      "FailureDomainSet"]
    assert {(t, p["by"]) for t, p in events} == {(t, SUPER_USER) for t, _ in events}
    assert all(p.get("domain") != "d9" for _, p in events)  # the refused role wrote nothing
    assert await _unloads_asked_by(cluster, since) == {SUPER_USER}
    recorded = [r["payload"]["by"] for r in tail["records"] if r["type"] in ADMIN_EVENTS]
    assert recorded and set(recorded) == {SUPER_USER}
    split = next(Move.from_dict(m) for m in explained["moves"] if m["kind"] == "split")
    assert f"requested by: {SUPER_USER}" in render(parent, [split])
    assert f"requested by: {SUPER_USER}" in shown


def _lbctl_explain(url: str, authorization: str, bundle: str) -> str:
    token = authorization.removeprefix("Bearer ")
    return subprocess.run(
        [LBCTL, "--admin-url", url, "--auth-plugin", TOKEN_PLUGINS[0], "--auth-params", f"token:{token}",
         "explain", bundle], check=True, capture_output=True, text=True).stdout


async def test_without_authentication_every_admin_write_records_anonymous(cluster: Cluster) -> None:
    since = len(await cluster.log_tail(10_000))
    async with TestClient(TestServer(create_app(cluster))) as client:
        await _writes(client, cluster, {})
    events = await _admin_events(cluster, since)
    assert len(events) == 7 and {p["by"] for _, p in events} == {"anonymous"}
    assert await _unloads_asked_by(cluster, since) == {"anonymous"}
