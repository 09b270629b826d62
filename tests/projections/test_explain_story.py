"""Explain tells a bundle's whole story, and the summary, the dashboard and ``/metrics`` count the
same moves, on one seeded run of the real actor bodies on the in-process host.

The run: 3 brokers, a namespace of 4 bundles under a Zipf workload; the largest bundle is split
with its children unloaded, so the leader places them again (placements after a split); one
child is then transferred. What a user would notice: ``explain`` of the child shows the split
that made it, its unload, the placement with each candidate's score, and the transfer; explain
of the parent shows its split with its children; the run summary's counts, the dashboard's
totals and ``/metrics`` agree.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from random import Random

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from actors import Cluster
from actors.workload import Workload
from lbctl.main import main
from lbctl.runstats import RunStats
from projections.explain import render
from web.app import create_app

NS = "public/default"


async def test_explain_the_summary_the_dashboard_and_metrics_on_one_seeded_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    load = Workload.zipf(Random(11), [NS], topics_per_namespace=40, total_msg_rate=4_000.0)
    async with Cluster.start(conf="conf/broker.conf", brokers=3, host="inproc", workload=load, seed=11,
                             clients=True, log_dir=tmp_path / "log") as cluster:
        await cluster.wait_ready(3)
        await cluster.create_namespace(NS, bundles=4)
        await cluster.sleep(30_000)
        before = {r.bundle for r in cluster.bundles(NS)}
        receipt = await cluster.split_bundle(NS, "LARGEST", unload=True)
        parent = str(receipt.first("SplitRequested")["bundle"])  # type: ignore[index]
        await cluster.sleep(60_000)  # the children, unloaded, are placed again
        child = next(r for r in cluster.bundles(NS) if r.owner and r.bundle not in before)
        assert child.owner is not None
        dst = next(b.broker_id for b in cluster.brokers() if b.broker_id != child.owner)
        await cluster.unload(NS, child.bundle.rsplit("/", 1)[1], destination=dst)
        await _explain_tells_the_whole_story(cluster, parent, child.bundle, dst)
        await _the_readers_count_the_same_moves(cluster, child.bundle, capsys)
    assert await asyncio.to_thread(main, ["explain", child.bundle, "--log-dir", str(tmp_path / "log")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split() == ["#", "time", "(UTC)", "move", "from", "->", "to", "reason",
                                           "decided", "by"]
    assert "split (as child)" in out and "transfer" in out and "None" not in out


async def _explain_tells_the_whole_story(cluster: Cluster, parent: str, child: str, dst: str) -> None:
    story = await cluster.explain(child)
    assert story[0].kind == "split" and story[0].bundle == parent and child in story[0].children
    assert ("unload", "split") in [(m.kind, m.reason) for m in story]
    placed = next(m for m in story if m.kind == "assign")
    placement = placed.decided.placement
    assert placement is not None and placement.broker == placed.dst
    assert set(placement.candidates) <= {"broker-1", "broker-2", "broker-3"} and placement.scores
    moved = story[-1]
    assert (moved.kind, moved.dst) == ("transfer", dst)

    text = render(child, story)
    assert "split (as child)" in text and f"made by the split of {parent}" in text
    assert "placement:" in text and "score" in text and "(chosen)" in text
    assert f"{moved.src} -> {dst}" in text
    assert "None" not in text and "{" not in text  # no Python dict, no None

    parent_story = await cluster.explain(parent)
    split = next(m for m in parent_story if m.kind == "split")
    assert child in split.children and "split (as parent)" in render(parent, parent_story)


async def _the_readers_count_the_same_moves(cluster: Cluster, child: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    stats = RunStats(start_ms=0)
    stats.fold(await cluster.link.history())
    async with TestClient(TestServer(create_app(cluster))) as client:
        for _ in range(200):  # until the observer has folded the whole log
            state = await (await client.get("/bb/v1/dashboard/state")).json()
            if state["totals"]["records"] >= sum(stats.types.values()):
                break
            await asyncio.sleep(0.05)
        text = await (await client.get("/metrics")).text()
        capsys.readouterr()
        url = str(client.make_url("")).rstrip("/")
        assert await asyncio.to_thread(main, ["--admin-url", url, "explain", child]) == 0
        over_http = capsys.readouterr().out  # the same table, from the web service's explain
        assert over_http == render(child, await cluster.explain(child)) + "\n"
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name] = found.get(sample.name, 0.0) + sample.value
    splits = sum(n for (kind, _), n in stats.by_reason.items() if kind == "split")
    assert stats.unloads() >= 1 and splits == 1
    assert stats.unloads() == state["totals"]["unloads"] == found["pulsar_lb_unload_bundle_total"]
    assert splits == state["totals"]["splits"] == found["pulsar_lb_bundles_split_total"]
    assert {m["kind"] for m in state["moves"]} <= {"transfer", "unload", "split", "takeover", "assign"}
    assert "transfer" in {m["kind"] for m in state["moves"]}
