"""The leader's proposals over the real web service (aiohttp test server) on an in-process
cluster in review mode: a super-user's approval is recorded with the token's role, a role that is
not a super-user is refused, an unknown id is 404 and a verdict the proposal cannot take 412,
each naming the id, with nothing recorded."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from actors.api import Cluster
from actors.cluster.inproc_link import InProcLink
from tests.actors.test_control import shed_host
from tests.actors.test_proposals import first_pending
from tests.support.web_tokens import super_user_tokens
from web.app import create_app


async def test_approve_over_rest_records_the_tokens_role(tmp_path: Path) -> None:
    host = shed_host(loadBalancerExecution="review")
    pid = first_pending(host)
    tokens = super_user_tokens(tmp_path)
    auth, admin, app = tokens.auth, tokens.admin, tokens.app
    cluster = Cluster(InProcLink(host))
    async with TestClient(TestServer(create_app(cluster, auth=auth))) as client:
        await asyncio.sleep(2.5)  # the observer fetches the status in the background
        text = await (await client.get("/metrics")).text()
        found = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
        assert found["bb_balancer_proposals_pending"] == 1
        listed = await (await client.get("/bb/v1/proposals", headers=admin)).json()
        assert [p["status"] for p in listed if p["id"] == pid] == ["pending"]
        count = len(host.records)
        assert (await client.post(f"/bb/v1/proposals/{pid}/approve", headers=app)).status == 403
        unknown = await client.post("/bb/v1/proposals/shed-7/approve", headers=admin)
        assert unknown.status == 404 and "proposal 'shed-7' does not exist" in (await unknown.json())["reason"]
        bad = await client.post(f"/bb/v1/proposals/{pid}/merge", headers=admin)
        assert bad.status == 412 and "verdict 'merge'" in (await bad.json())["reason"]
        assert len(host.records) == count
        approved = await client.post(f"/bb/v1/proposals/{pid}/approve", json={}, headers=admin)
        assert approved.status == 200
        assert (await approved.json()) | {"at_ms": 0} == {"event": "ProposalApproved", "proposal_id": pid,
                                                          "by": "ops-admin", "at_ms": 0}
        count = len(host.records)
        again = await client.post(f"/bb/v1/proposals/{pid}/approve", headers=admin)
        assert again.status == 412 and f"proposal '{pid}' is approved" in (await again.json())["reason"]
        assert len(host.records) == count
        shown = await (await client.get(f"/bb/v1/proposals/{pid}", headers=admin)).json()
        assert shown["by"] == "ops-admin" and shown["moves"]
