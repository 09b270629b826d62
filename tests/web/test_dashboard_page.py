"""The dashboard's page and data as a user meets them: the page comes drawn by the server (no
waiting for the event feed), nothing from the cluster is read as markup, moves use the CLI's
words, and the "why not" panel says why a shedder moved nothing, with the numbers and the
threshold's broker.conf key."""

from __future__ import annotations

import asyncio
import html
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from actors.api import Cluster
from balancer.config import LoadBalancerConfig
from web.app import create_app
from web.observe import page
from web.observe.whynot import WhyNot


@pytest.fixture
async def client() -> AsyncIterator[TestClient]:
    async with Cluster.start(brokers=3, host="inproc") as cluster:
        await cluster.wait_ready(3)
        await cluster.create_namespace("public/default", 4)
        for i in range(8):  # owned bundles: a lookup places each one it reaches
            await cluster.lookup(f"persistent://public/default/topic-{i}")
        async with TestClient(TestServer(create_app(cluster))) as started:
            yield started


async def test_the_page_comes_drawn_with_its_state(client: TestClient) -> None:
    reply = await client.get("/")
    body = await reply.text()
    assert reply.status == 200 and reply.headers["Cache-Control"] == "no-store"
    policy = reply.headers["Content-Security-Policy"]  # no script but its own, never framed
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    for broker in ("broker-1", "broker-2", "broker-3"):
        assert f'data-broker="{broker}"' in body
    assert body.count('class="bundle') >= 1 and 'data-namespace="public/default"' in body
    assert "<!--" not in body.split("<body>", 1)[1]  # every placeholder filled
    embedded = re.search(r'<script id="initial-state" type="application/json">(.*?)</script>', body, re.S)
    assert embedded is not None
    state = json.loads(embedded.group(1))
    assert {b["id"] for b in state["brokers"]} == {"broker-1", "broker-2", "broker-3"}
    assert state["threshold"]["key"] and "why_not" in state


async def test_a_transfer_is_called_a_transfer_as_the_cli_says(client: TestClient) -> None:
    state = await (await client.get("/bb/v1/dashboard/state")).json()
    bundle = next(b for b in state["namespaces"][0]["bundles"] if b["owner"])
    dst = next(b["id"] for b in state["brokers"] if b["id"] != bundle["owner"])
    moved = await client.put(f"/admin/v2/namespaces/public/default/{bundle['bundle'].rsplit('/', 1)[1]}"
                             f"/unload?destinationBroker={dst}")
    assert moved.status == 204
    for _ in range(100):
        state = await (await client.get("/bb/v1/dashboard/state")).json()
        if any(m["bundle"] == bundle["bundle"] for m in state["moves"]):
            break
        await asyncio.sleep(0.1)
    move = next(m for m in state["moves"] if m["bundle"] == bundle["bundle"])
    assert (move["kind"], move["src"], move["dst"]) == ("transfer", bundle["owner"], dst)


def state_with(broker: str) -> dict[str, Any]:
    return {"now_ms": 0, "host": "inproc", "leader": {"id": broker, "epoch": 1},
            "brokers": [{"id": broker, "bundles": 1, "domain": None, "series": [[0, 50.0, 10.0]]}],
            "namespaces": [{"name": "t/n", "bundles": [{"bundle": "t/n/0x00000000_0xffffffff", "lower": 0,
                                                         "upper": 1 << 32, "state": "Owned", "owner": broker}]}],
            "moves": [{"ts_ms": 0, "kind": "transfer", "bundle": "t/n/0x00000000_0xffffffff", "src": broker,
                       "dst": "b", "reason": broker}],
            "anomalies": {"counts": {}, "recent": []}, "balancer": None, "why_not": [],
            "threshold": {"strategy": "ThresholdShedder", "percent": 60.0, "key": "k"},
            "totals": {"unloads": 0, "splits": 0, "records": 1}}


def test_nothing_from_the_cluster_is_read_as_markup() -> None:
    hostile = "</script><img src=x onerror=alert(1)>"
    body = page.render(state_with(hostile), role=hostile)
    assert hostile not in body and "<img" not in body
    assert html.escape(hostile) in body  # shown as text
    embedded = body.split('<script id="initial-state" type="application/json">', 1)[1].split("</script>", 1)[0]
    assert json.loads(embedded)["leader"]["id"] == hostile


def test_the_why_not_panel_gives_the_skips_with_the_numbers_and_the_threshold() -> None:
    why = WhyNot()
    usage = {"broker-1": 50.5, "broker-2": 24.2}
    for i in range(596):
        why.take("SheddingSkipped", {"strategy": "TransferShedder", "reason": "Balanced"}, 60_000 * (i + 1), usage)
    config = LoadBalancerConfig.from_mapping({"loadBalancerLoadSheddingStrategy": "TransferShedder",
                                              "loadManagerClassName": "ExtensibleLoadManagerImpl"})
    [entry] = why.panel(config)
    assert (entry["strategy"], entry["reason"], entry["runs"]) == ("TransferShedder", "Balanced", 596)
    assert entry["figures"]["highest"] == {"broker": "broker-1", "percent": 50.5}
    assert entry["figures"]["lowest"] == {"broker": "broker-2", "percent": 24.2}
    assert (entry["rule"]["key"], entry["rule"]["value"]) == ("loadBalancerBrokerLoadTargetStd", 0.25)
    lines = page.why_not_lines(entry)
    assert lines[0].startswith("TransferShedder: skipped 596 runs in a row as Balanced")
    assert lines[1] == "Balanced: no broker met the rule below"
    assert "highest broker-1 50.5 %, lowest broker-2 24.2 %" in lines[2]
    assert "exceeds 25 %" in lines[3] and "(loadBalancerBrokerLoadTargetStd=0.25)" in lines[3]

    # The running shedder's own figures of its last run, from the balancer's status.
    status = {"lastCycle": {"atMs": 60_000 * 596, "outcome": "Balanced", "moves": 0,
                            "inputs": {"avg": 0.3735, "std": 0.1315, "target_std": 0.25, "brokers": 2,
                                       "hit_count": 0}}}
    [told] = why.panel(config, status)
    assert told["shedder"] == "avg 37.4 %, std 13.2 %, target std 25.0 %, brokers 2, hit count 0"
    assert "the shedder's own figures at its last run (smoothed): avg 37.4 %" in " ".join(page.why_not_lines(told))

    # A move of one of its runs ends the streak; an admin's move does not.
    why.take("TransferPrepared", {"decision": {"strategy": "TransferShedder"}}, 1, usage)
    assert why.panel(config)[0]["runs"] == 596
    why.take("TransferPrepared", {"decision": {"strategy": "TransferShedder", "run_ms": 5}}, 2, usage)
    assert why.panel(config) == []
    why.take("SheddingSkipped", {"strategy": "TransferShedder", "reason": "HitCount"}, 3, usage)
    [again] = why.panel(config)
    assert (again["reason"], again["runs"], again["totals"]) == ("HitCount", 1, {"Balanced": 596, "HitCount": 1})
