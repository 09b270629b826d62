"""``/metrics`` and the probes of a real running web service (``web.serve`` on a port, over an
in-process cluster), read over HTTP as Prometheus and a load balancer read them.

What a user would notice: every family that is not the project's own (``bb_*``) is one of Pulsar
4.0's, with Pulsar's label set and ``metric`` value (``web.observe.pulsar_names``, itself checked
against Pulsar's jar by tests/web/test_pulsar_metric_names.py), so Pulsar's dashboards and
alerts find them; every counter and every latency histogram is there, at 0, before anything
happened; the latencies measure something in process; the per-bundle series follow
``exposeBundlesMetricsInPrometheus``; ``/metrics/``, ``/status.html`` and
``/admin/v2/brokers/health`` answer as a Pulsar broker does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from random import Random

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from actors import Cluster
from actors.workload import Workload
from balancer.errors import ConfigError
from web.auth import WebAuth
from web.observe.pulsar_names import FAMILIES, METRIC_LABEL, labels_of
from web.observe.settings import ObserveSettings
from web.serve import serve
from web.settings import WebSettings

NS = "public/default"
BROKERS = {"broker-1", "broker-2", "broker-3"}
METRIC_VALUE = {"pulsar_lb_cpu_usage": "loadBalancing", "pulsar_lb_resource_usage": "loadBalancing",
                "pulsar_lb_resource_usage_stats": "bundleUnloading",
                "pulsar_lb_unload_broker_total": "bundleUnloading",
                "pulsar_lb_unload_broker_breakdown_total": "bundleUnloading",
                "pulsar_lb_bundles_split_breakdown_total": "bundlesSplit",
                "pulsar_lb_assign_broker_breakdown_total": "assign",
                "brk_lb_unload_latency_ms": "bundleUnloading",
                "pulsar_sunit_state_chn_owned_su_total": "sunitStateChn",
                "pulsar_bundle_msg_rate_in": "bundle"}
Families = dict[str, tuple[str, list[tuple[dict[str, str], float]]]]
"""Family -> (type, [(labels and the sample's ``__name__``, value)]), as the parser reads them."""


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    load = Workload.zipf(Random(3), [NS], topics_per_namespace=40, total_msg_rate=4_000.0)
    async with Cluster.start(conf="conf/broker.conf", brokers=3, host="inproc", workload=load,
                             clients=True) as started:
        await started.wait_ready(3)
        await started.create_namespace(NS, bundles=4)
        await started.sleep(30_000)
        yield started


async def get(url: str, **headers: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as reply:
        return reply.status, reply.headers.get("Content-Type", ""), await reply.text()


async def scrape(url: str, path: str = "/metrics") -> Families:
    status, kind, body = await get(url + path)
    assert status == 200 and kind.startswith("text/plain")
    return {f.name: (f.type, [({**s.labels, "__name__": s.name}, s.value) for s in f.samples])
            for f in text_string_to_metric_families(body)}


def family_name(name: str, kind: str) -> str:
    """A parsed family's name as Pulsar writes it (the parser drops a counter's ``_total``)."""
    return name + "_total" if kind == "counter" else name


async def test_every_family_not_ours_is_pulsars_with_its_labels(cluster: Cluster) -> None:
    async with serve(cluster, 0) as service:
        found = await scrape(service.url)
    pulsars = {family_name(name, kind): samples for name, (kind, samples) in found.items()
               if not name.startswith("bb_")}
    assert set(pulsars) == {f.name for f in FAMILIES} - {f.name for f in FAMILIES if f.name.startswith("pulsar_bundle_")}
    for name, samples in pulsars.items():
        for labels, _ in samples:
            assert tuple(sorted(set(labels) - {"le", "quantile", "__name__"})) in [tuple(sorted(s)) for s in labels_of(name)], (name, labels)
    for name, metric in METRIC_VALUE.items():
        values = {labels["metric"] for labels, _ in pulsars.get(name, [])}
        assert values <= {metric} and metric in METRIC_LABEL, (name, values)
    assert {labels["broker"] for labels, _ in pulsars["pulsar_lb_directMemory_usage"]} == BROKERS
    assert "metric" not in found["bb_lookup_latency_seconds"][1][0][0]  # ours: no Pulsar label


async def test_every_counter_and_histogram_is_there_at_zero_before_anything_happened() -> None:
    async with Cluster.start(brokers=3, host="inproc") as fresh:
        await fresh.wait_ready(3)
        async with serve(fresh, 0) as service:
            found = await scrape(service.url)
    counters = {name: samples for name, (kind, samples) in found.items() if kind == "counter"}
    assert all(counters.values()), [name for name, samples in counters.items() if not samples]
    breakdown = found["pulsar_lb_unload_broker_breakdown"][1]
    assert {(s["result"], s["reason"]) for s, _ in breakdown} >= {("Success", "Admin"), ("Skip", "HitCount")}
    assert all(value == 0 for _, value in breakdown)
    assert {s["command"] for s, _ in found["bb_commands_rejected"][1]} >= {"UnloadBundle", "SplitBundle"}
    for name in ("brk_lb_unload_latency_ms", "brk_lb_assign_latency_ms", "bb_lookup_latency_seconds"):
        counts = {s["broker"]: v for s, v in found[name][1] if s.get("le") == "+Inf"}
        assert counts == dict.fromkeys(BROKERS, 0.0), name


async def test_latencies_measure_the_moves_made_in_process(cluster: Cluster) -> None:
    async with serve(cluster, 0) as service:
        row = next(r for r in cluster.bundles(NS) if r.owner)
        dst = next(b.broker_id for b in cluster.brokers() if b.broker_id != row.owner)
        await cluster.unload(NS, row.bundle.rsplit("/", 1)[1], destination=dst)
        await cluster.catch_up()
        found = await scrape(service.url)
    for name, broker in (("brk_lb_unload_latency_ms", row.owner), ("brk_lb_release_latency_ms", row.owner),
                         ("brk_lb_assign_latency_ms", dst)):
        series = {s["__name__"]: v for s, v in found[name][1] if s["broker"] == broker and "le" not in s}
        assert series[name + "_count"] == 1 and series[name + "_sum"] > 0, (name, broker, series)
    le = {s["le"] for s, _ in found["brk_lb_unload_latency_ms"][1] if "le" in s}
    assert le == {"1.0", "10.0", "100.0", "200.0", "1000.0", "+Inf"}  # Pulsar's buckets, in ms


async def test_lookups_are_counted_and_timed_as_pulsar_does(cluster: Cluster) -> None:
    async with serve(cluster, 0) as service:
        before = await scrape(service.url)
        assert [v for s, v in before["pulsar_broker_lookup"][1] if s["__name__"].endswith("_count")] == [0]
        path = "/lookup/v2/topic/persistent/public/default/orders"
        assert (await get(service.url + path))[0] == 200
        assert (await get(service.url + path + "/bundle"))[0] == 200  # a read, not a lookup
        assert (await get(service.url + "/lookup/v2/topic/persistent/public/nowhere/t"))[0] == 404
        found = await scrape(service.url)
    counts = {name: found[name][1][0][1] for name in ("pulsar_broker_lookup_answers",
              "pulsar_broker_lookup_failures", "pulsar_broker_lookup_redirects")}
    assert counts == {"pulsar_broker_lookup_answers": 1, "pulsar_broker_lookup_failures": 1,
                      "pulsar_broker_lookup_redirects": 0}
    summary = {(s["__name__"], s.get("quantile")): v for s, v in found["pulsar_broker_lookup"][1]}
    assert summary["pulsar_broker_lookup_count", None] == 2 and summary["pulsar_broker_lookup_sum", None] > 0
    assert {q for _, q in summary if q} == {"0.5", "0.99", "0.999", "1.0"}
    assert summary["pulsar_broker_lookup", "1.0"] > 0  # milliseconds, on the service's clock


async def test_per_bundle_series_follow_expose_bundles_metrics(cluster: Cluster) -> None:
    async with serve(cluster, 0, observe_settings=ObserveSettings(expose_bundles=True)) as service:
        found = await scrape(service.url, "/metrics/")  # the trailing slash a Pulsar broker serves
    owners = {row.bundle: row.owner for row in cluster.bundles(NS)}
    rates = found["pulsar_bundle_msg_rate_in"][1]
    assert {labels["bundle"]: labels["broker"] for labels, _ in rates} == owners
    assert all(value > 0 for _, value in rates)  # the workload sends to every bundle
    assert sum(v for _, v in found["pulsar_bundle_topics_count"][1]) == 40
    assert WebSettings.from_text("exposeBundlesMetricsInPrometheus=true\n").observe.expose_bundles
    with pytest.raises(ConfigError, match="exposeBundlesMetricsInPrometheus=yes"):
        WebSettings.from_text("exposeBundlesMetricsInPrometheus=yes\n")


async def test_status_html_follows_the_status_file(cluster: Cluster, tmp_path: Path) -> None:
    status_file = tmp_path / "status"
    status_file.write_text("")
    settings = WebSettings.from_text(f"statusFilePath={status_file}\n").observe
    async with serve(cluster, 0, observe_settings=settings) as service:
        assert await get(service.url + "/status.html") == (200, "text/plain; charset=utf-8", "OK")
        status_file.unlink()  # out of the load balancer's rotation, as with a Pulsar broker
        assert (await get(service.url + "/status.html"))[0] == 404
    async with serve(cluster, 0) as service:  # no statusFilePath: up is OK
        assert (await get(service.url + "/status.html"))[:1] == (200,)


async def test_brokers_health_and_ready_answer_as_a_broker(cluster: Cluster) -> None:
    async with serve(cluster, 0) as service:
        health = service.url + "/admin/v2/brokers/health"
        assert await get(health) == (200, "application/json; charset=utf-8", "ok")
        assert (await get(health + "?topicVersion=V2&brokerId=broker-2"))[::2] == (200, "ok")
        assert await get(health + "?brokerId=broker-9") == (
            404, "application/json; charset=utf-8", '{"reason": "broker broker-9 is not registered"}')
        assert (await get(health + "?topicVersion=V3"))[0] == 404
        assert (await get(service.url + "/admin/v2/brokers/ready"))[::2] == (200, "ok")
        assert (await get(service.url + "/admin/v2/brokers/standalone"))[0] == 200  # still the cluster's list
    auth = WebAuth(authentication_enabled=True, secret_key=b"k" * 32)
    async with serve(cluster, 0, auth=auth) as service:  # an admin path: a token, as on Pulsar
        assert (await get(service.url + "/admin/v2/brokers/health"))[0] == 401
        assert (await get(service.url + "/status.html"))[0] == 200
        assert (await get(service.url + "/metrics/"))[0] == 200
