"""``/metrics`` and the dashboard's feed over a real in-process cluster.

The web service is the real aiohttp application (``web.app.create_app``) on a test server; the
cluster is the real actor bodies on the in-process host. What a user would notice: the unloads
they made are counted under Pulsar's names, a refused one is a Failure, the latency histograms
fill, the exposition parses, the dashboard's events carry every broker and the moves, and a
bundle's explain names its move.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from random import Random

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from actors import Cluster
from actors.workload import Workload
from balancer.errors import InvalidTransition, TransferToCurrentOwner
from web.app import create_app
from web.auth import WebAuth

NS = "public/default"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def served() -> AsyncIterator[tuple[Cluster, TestClient]]:
    load = Workload.zipf(Random(7), [NS], topics_per_namespace=40, total_msg_rate=4_000.0)
    async with Cluster.start(conf="conf/broker.conf", brokers=3, host="inproc", workload=load,
                             clients=True) as cluster:
        await cluster.wait_ready(3)
        await cluster.create_namespace(NS, bundles=4)
        await cluster.sleep(30_000)
        async with TestClient(TestServer(create_app(cluster))) as client:
            yield cluster, client


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def total(found: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for have, v in found.get(name, []) if all(have.get(k) == x for k, x in labels.items()))


async def transfer_one(cluster: Cluster) -> tuple[str, str, str]:
    row = next(r for r in cluster.bundles(NS) if r.owner)
    assert row.owner is not None
    dst = next(b.broker_id for b in cluster.brokers() if b.broker_id != row.owner)
    await cluster.unload(NS, row.bundle.rsplit("/", 1)[1], destination=dst)
    return row.bundle, row.owner, dst


async def scrape(client: TestClient) -> dict[str, list[tuple[dict[str, str], float]]]:
    await asyncio.sleep(0.05)  # the observer takes the records folded by the last verb
    response = await client.get("/metrics")
    assert response.status == 200 and response.headers["Content-Type"].startswith("text/plain")
    return samples(await response.text())


async def test_unloads_are_counted_under_pulsars_names(served: tuple[Cluster, TestClient]) -> None:
    cluster, client = served
    before = await scrape(client)
    assert total(before, "pulsar_lb_unload_bundle_total") == 0
    assert total(before, "pulsar_lb_assign_broker_breakdown_total", result="Success") == 4
    assert {labels["broker"] for labels, _ in before["pulsar_lb_cpu_usage"]} == {
        "broker-1", "broker-2", "broker-3"}

    await transfer_one(cluster)
    bundle, _, owner = await transfer_one(cluster)
    with pytest.raises(TransferToCurrentOwner):  # refused before anything is appended
        await cluster.unload(NS, bundle.rsplit("/", 1)[1], destination=owner)
    after = await scrape(client)

    assert total(after, "pulsar_lb_unload_bundle_total", metric="bundleUnloading") == 2
    assert total(after, "pulsar_lb_unload_broker_breakdown_total", result="Success", reason="Admin") == 2
    for phase in ("unload", "assign", "release"):  # timed on the service's clock: above 0 in process too
        assert total(after, f"brk_lb_{phase}_latency_ms_count", metric="bundleUnloading") == 2
        assert total(after, f"brk_lb_{phase}_latency_ms_sum") > 0
    assert total(after, "bb_transfer_latency_seconds_count") == 2
    assert total(after, "bb_events_appended_total", type="TransferPrepared") == 2
    epoch = after["bb_leader_epoch"][0]
    assert epoch[1] == cluster.leader().epoch and epoch[0]["leader"] == cluster.leader().leader_id
    assert total(after, "pulsar_sunit_state_chn_owned_su_total", metric="sunitStateChn") == 4
    assert total(after, "bb_fold_lag_records", actor="client") == 0


async def test_a_refused_unload_is_a_failure_and_a_rejection(served: tuple[Cluster, TestClient]) -> None:
    cluster, client = served
    bundle, src, dst = await transfer_one(cluster)
    # Past the client's own input check: the cluster refuses an unload of a bundle in flight.
    await cluster.unload(NS, bundle.rsplit("/", 1)[1], destination=src, wait=False)
    with pytest.raises(InvalidTransition):  # the bundle is still Releasing
        await cluster.unload(NS, bundle.rsplit("/", 1)[1], destination=dst)
    found = await scrape(client)
    rejected = total(found, "bb_commands_rejected_by_code_total", code="invalid_transition")
    assert rejected == 1 == total(found, "pulsar_lb_unload_broker_breakdown_total", result="Failure")
    assert total(found, "bb_commands_rejected_total", command="UnloadBundle") == 1
    assert rejected == total(found, "bb_events_appended_total", type="CommandRejected")


async def test_the_dashboard_feed_carries_brokers_ranges_and_moves(served: tuple[Cluster, TestClient]) -> None:
    cluster, client = served
    bundle, src, dst = await transfer_one(cluster)
    await asyncio.sleep(0.05)
    response = await client.get("/bb/v1/dashboard/events")
    assert response.headers["Content-Type"] == "text/event-stream"
    first = await asyncio.wait_for(response.content.readuntil(b"\n\n"), 10)
    event, data = first.decode().split("\n", 1)
    assert event == "event: state"
    state = json.loads(data.removeprefix("data: "))
    response.close()

    assert [b["id"] for b in state["brokers"]] == ["broker-1", "broker-2", "broker-3"]
    assert all(b["series"] for b in state["brokers"])  # every broker has reported its load
    ranges = state["namespaces"][0]["bundles"]
    assert sum(r["upper"] - r["lower"] for r in ranges) == 0xFFFFFFFF
    move = state["moves"][0]
    assert (move["bundle"], move["src"], move["dst"], move["reason"]) == (bundle, src, dst, "admin")
    assert move["kind"] == "transfer"  # a move with a destination: the CLI's word too
    assert state["leader"]["epoch"] >= 1

    explained = await (await client.get("/bb/v1/dashboard/explain", params={"bundle": bundle})).json()
    assert explained["row"]["owner"] == dst
    assert [(m["kind"], m["event"]) for m in explained["moves"]] == [
        ("assign", "BundleAssigned"), ("transfer", "TransferPrepared")]
    placement = explained["moves"][0]["decision"]["placement"]  # why the first owner
    assert set(placement["candidates"]) == {"broker-1", "broker-2", "broker-3"} and placement["scores"]
    assert f"{src} -> {dst}" in explained["text"] and "score" in explained["text"]
    missing = await client.get("/bb/v1/dashboard/explain", params={"bundle": f"{NS}/0x1_0x2"})
    assert missing.status == 404 and "0x1_0x2" in (await missing.json())["error"]


async def test_the_page_and_its_assets_are_served_from_the_package(served: tuple[Cluster, TestClient]) -> None:
    _, client = served
    page = await (await client.get("/")).text()
    assert "/static/dashboard.js" in page and "/static/dashboard.css" in page
    assert "http" not in page.replace("http-equiv", "")  # nothing is fetched from elsewhere
    script = await client.get("/static/dashboard.js")
    assert script.status == 200 and "EventSource" in await script.text()


async def test_every_metric_the_grafana_dashboard_queries_is_exported(served: tuple[Cluster, TestClient]) -> None:
    _, client = served
    text = await (await client.get("/metrics")).text()
    suffixes = {"counter": ("", "_total"), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",),
                "summary": ("", "_count", "_sum")}
    exported = {name + suffix for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)
                for suffix in suffixes[kind]}  # every family, with or without samples yet
    dashboard = json.loads((ROOT / "compose" / "grafana" / "dashboards" / "bundle-balancer.json").read_text())
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"\b((?:brk|pulsar|bb)_[a-zA-Z_]+)", target["expr"])}
    assert queried and queried <= exported, queried - exported


async def test_with_authentication_on_metrics_and_the_page_stay_open(served: tuple[Cluster, TestClient]) -> None:
    """Pulsar's default ``authenticateMetricsEndpoint=false``; the dashboard's data is a ``/bb``
    path like the other reads, so it asks for a token."""
    cluster, _ = served
    auth = WebAuth(authentication_enabled=True, secret_key=b"s" * 32)
    async with TestClient(TestServer(create_app(cluster, auth=auth))) as client:
        assert (await client.get("/metrics")).status == 200
        assert (await client.get("/")).status == 200
        assert (await client.get("/static/dashboard.js")).status == 200
        assert (await client.get("/bb/v1/dashboard/state")).status == 401


async def test_the_counters_agree_with_the_log_after_half_an_hour_of_shedding() -> None:
    """Every Pulsar counter is the log, counted: the moves a shedding run made (by reason and
    source broker per run), its skips, the splits, with nothing counted twice."""
    load = Workload.zipf(Random(1), [NS], topics_per_namespace=500, total_msg_rate=120_000.0)
    async with Cluster.start(conf="conf/broker.conf", brokers=3, host="inproc", workload=load,
                             clients=True, seed=1) as cluster:
        await cluster.wait_ready(3)
        await cluster.create_namespace(NS, bundles=8)
        await cluster.sleep(30 * 60_000)
        async with TestClient(TestServer(create_app(cluster))) as client:
            found = await scrape(client)
            events = cluster.events(from_start=True)
            log = [await anext(events) for _ in range(int(total(found, "bb_events_appended_total")))]
            await events.aclose()
    moves: dict[str, dict[str, object]] = {}  # one per decision: UnloadRequested + TransferPrepared
    for record in log:
        payload = record.envelope.payload
        if record.envelope.type in ("UnloadRequested", "TransferPrepared") and payload["reason"] != "split":
            moves[f"{payload['bundle']}@{payload['decision'].get('run_ms')}"] = payload["decision"]
    kinds = [r.envelope.type for r in log]
    shed = [d for d in moves.values() if d.get("reason") == "Overloaded"]
    assert shed, "the scenario sheds: ThresholdShedder moves bundles off the hottest broker"
    assert total(found, "pulsar_lb_unload_bundle_total") == len(moves)
    assert total(found, "pulsar_lb_unload_broker_breakdown_total", result="Success", reason="Overloaded") == len(shed)
    assert total(found, "pulsar_lb_unload_broker_total") == len({(d["run_ms"], d["source"]) for d in shed})
    assert total(found, "pulsar_lb_unload_broker_breakdown_total", result="Skip") == kinds.count("SheddingSkipped")
    assert total(found, "pulsar_lb_bundles_split_total") == kinds.count("SplitCompleted") > 0
    assert total(found, "pulsar_lb_bundles_split_breakdown_total", reason="MsgRate") == kinds.count("SplitCompleted")


async def test_an_open_page_does_not_hold_the_service_when_it_stops(served: tuple[Cluster, TestClient]) -> None:
    """A dashboard left open keeps an event stream; stopping the service ends it at once instead
    of waiting out aiohttp's grace period for open requests (60 s)."""
    cluster, _ = served
    client = TestClient(TestServer(create_app(cluster)))
    await client.start_server()
    stream = await client.get("/bb/v1/dashboard/events")
    assert (await stream.content.readuntil(b"\n\n")).startswith(b"event: state")
    stopping = asyncio.create_task(client.server.close())
    await asyncio.wait_for(stream.content.read(), 30)  # the end of the stream, well before 60 s
    await asyncio.wait_for(stopping, 30)
    await client.close()
