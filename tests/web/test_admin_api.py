"""The admin REST API over an in-process cluster: Pulsar's paths, JSON shapes, status codes and
error bodies, each answer compared with what the cluster's own view says.

The real ``PulsarAdmin`` client drives the same paths in tests/integration/test_pulsar_admin.py;
these tests pin the answers a caller sees (status, body) without a JVM.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestClient, TestServer

from actors.api import Cluster
from balancer.errors import NamespaceExists, StateConflict
from lbctl.admin_http import refusal
from web.app import create_app
from web.replies import ALGORITHM_HEADER, ERROR_HEADER

NS = "/admin/v2/namespaces/public/default"


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with Cluster.start(brokers=3, host="inproc") as started:
        await started.wait_ready(3)
        await started.create_namespace("public/default", bundles=4)
        yield started


@pytest.fixture
async def client(cluster: Cluster) -> AsyncIterator[TestClient]:
    async with TestClient(TestServer(create_app(cluster))) as test_client:
        yield test_client


async def test_reads_match_the_cluster_view(client: TestClient, cluster: Cluster) -> None:
    assert await (await client.get("/admin/v2/clusters")).json() == ["standalone"]
    assert await (await client.get("/admin/v2/namespaces/public")).json() == ["public/default"]
    bundles = await (await client.get(NS + "/bundles")).json()
    assert bundles == {"numBundles": 4, "boundaries": ["0x00000000", "0x40000000", "0x80000000",
                                                       "0xc0000000", "0xffffffff"]}
    brokers = await (await client.get("/admin/v2/brokers/standalone")).json()
    assert brokers == [b.broker_id for b in cluster.brokers()] == ["broker-1", "broker-2", "broker-3"]
    leader = await (await client.get("/admin/v2/brokers/leaderBroker")).json()
    assert leader["brokerId"] == cluster.leader().leader_id


async def test_tenants_policies_health_and_a_v1_lookup(client: TestClient, cluster: Cluster) -> None:
    assert await (await client.get("/admin/v2/tenants")).json() == ["public"]
    assert await (await client.get(NS)).json() == {"bundles": await (await client.get(NS + "/bundles")).json(),
                                                   "deleted": False}
    health = await client.get("/admin/v2/brokers/health")  # not read as a cluster named "health"
    assert (health.status, await health.text()) == (200, "ok")
    unknown = await client.get("/admin/v2/namespaces/nope")
    assert unknown.status == 404 and "nope" in (await unknown.json())["reason"]
    await cluster.create_namespace("public/standalone/legacy", bundles=2)
    v1 = "/lookup/v2/destination/persistent/public/standalone/legacy/t"
    found = await (await client.get(v1)).json()
    assert found["brokerUrl"] == f"pulsar://{cluster.owner_of('persistent://public/standalone/legacy/t')}:6650"
    ranged = await (await client.get(v1 + "/bundle")).text()
    assert ranged == cluster.ownership().bundle_of_topic("persistent://public/standalone/legacy/t").rsplit("/", 1)[1]


async def test_lookup_places_the_bundle_and_names_its_range(client: TestClient, cluster: Cluster) -> None:
    topic = "persistent://public/default/orders"
    found = await (await client.get("/lookup/v2/topic/persistent/public/default/orders")).json()
    owner = cluster.owner_of(topic)
    assert owner is not None
    assert found["brokerUrl"] == f"pulsar://{owner}:6650"
    reply = await client.get("/lookup/v2/topic/persistent/public/default/orders/bundle")
    assert await reply.text() == cluster.ownership().bundle_of_topic(topic).rsplit("/", 1)[1]


async def test_unload_split_and_anti_affinity(client: TestClient, cluster: Cluster) -> None:
    topic = "persistent://public/default/orders"
    await client.get("/lookup/v2/topic/persistent/public/default/orders")
    bundle = cluster.ownership().bundle_of_topic(topic).rsplit("/", 1)[1]
    owner = cluster.owner_of(topic)
    other = next(b.broker_id for b in cluster.brokers() if b.broker_id != owner)
    moved = await client.put(f"{NS}/{bundle}/unload?destinationBroker={other}:8080", data="")  # pulsar-admin -d
    assert moved.status == 204 and cluster.owner_of(topic) == other
    split = await client.put(f"{NS}/{bundle}/split?unload=false&splitAlgorithmName="
                             "range_equally_divide", data="")
    assert split.status == 204 and len(cluster.bundles("public/default")) == 5
    assert split.headers[ALGORITHM_HEADER] == "range_equally_divide"
    assert (await client.post(NS + "/antiAffinity", data="g1")).status == 204
    assert await (await client.get(NS + "/antiAffinity")).text() == "g1"
    assert cluster.anti_affinity_group("public/default") == "g1"
    assert (await client.delete(NS + "/antiAffinity")).status == 204
    assert cluster.anti_affinity_group("public/default") is None


async def test_failure_domains(client: TestClient, cluster: Cluster) -> None:
    domains = "/admin/v2/clusters/standalone/failureDomains"
    assert (await client.post(domains + "/d1", json={"brokers": ["broker-1", "broker-2"]})).status == 204
    assert await (await client.get(domains)).json() == {"d1": {"brokers": ["broker-1", "broker-2"]}}
    conflict = await client.post(domains + "/d2", json={"brokers": ["broker-2"]})
    assert conflict.status == 409 and "broker-2" in (await conflict.json())["reason"]
    assert (await client.delete(domains + "/d1")).status == 204
    assert cluster.failure_domains() == {}
    missing = await client.get(domains + "/d1")
    assert missing.status == 404 and "d1" in (await missing.json())["reason"]


@pytest.mark.parametrize(("method", "path", "body", "status", "named"), [
    ("GET", "/admin/v2/namespaces/public/nope/bundles", None, 404, "public/nope"),
    ("PUT", NS, "", 409, "public/default"),
    ("PUT", NS + "/0x00000000_0x20000000/unload", "", 404, "0x00000000_0x20000000"),
    ("PUT", NS + "/0x00000000_0x40000000/unload?destinationBroker=nope", "", 412, "nope"),
    ("PUT", NS + "/0x00000000_0x40000000/unload?destinationBroker=broker-2:0", "", 412, "broker-2:0"),
    ("PUT", NS + "/0x00000000_0x40000000/unload?destinationBroker=nowhere:8080", "", 412, "nowhere:8080"),
    ("PUT", NS + "/zz/split", "", 412, "zz"),
    ("DELETE", "/admin/v2/clusters/standalone/failureDomains/none", None, 404, "none"),
    ("GET", "/admin/v2/brokers/elsewhere", None, 404, "elsewhere"),
    ("GET", "/lookup/v2/topic/persistent/public/nope/t", None, 404, "public/nope"),
])
async def test_refusals_have_pulsar_status_and_reason(client: TestClient, method: str, path: str,
                                                      body: str | None, status: int, named: str) -> None:
    reply = await client.request(method, path, data=body)
    assert reply.status == status, await reply.text()
    assert named in (await reply.json())["reason"]


async def test_own_reads_explain_and_log_tail(client: TestClient, cluster: Cluster) -> None:
    topic = "persistent://public/default/orders"
    await client.get("/lookup/v2/topic/persistent/public/default/orders")
    bundle = cluster.ownership().bundle_of_topic(topic)
    other = next(b.broker_id for b in cluster.brokers() if b.broker_id != cluster.owner_of(topic))
    await client.put(f"{NS}/{bundle.rsplit('/', 1)[1]}/unload?destinationBroker={other}", data="")
    explained = await (await client.get(f"/bb/v1/explain/{bundle}")).json()
    assert [m["event"] for m in explained["moves"]] == [m.event for m in await cluster.explain(bundle)]
    assert explained["moves"][-1]["dst"] == other
    tail = (await (await client.get("/bb/v1/log/tail?limit=5")).json())["records"]
    logged = await cluster.log_tail(5)
    assert [(r["offset"], r["type"]) for r in tail] == [(r.offset, r.envelope.type) for r in logged]
    refused = await client.get("/bb/v1/log/tail?limit=0")
    assert refused.status == 412 and "limit=0" in (await refused.json())["reason"]
    rows = await (await client.get("/bb/v1/namespaces/public/default/bundles")).json()
    assert {r["range"]: r["owner"] for r in rows["bundles"]}[bundle.rsplit("/", 1)[1]] == other
    brokers = await (await client.get("/bb/v1/brokers")).json()
    assert [b["broker"] for b in brokers["brokers"]] == ["broker-1", "broker-2", "broker-3"]


async def test_a_refusal_names_the_error_so_lbctl_over_rest_exits_as_it_does_locally(
        client: TestClient) -> None:
    again = await client.put(NS, json={"numBundles": 4})
    assert again.status == 409 and again.headers[ERROR_HEADER] == "namespace_exists"
    error = refusal(again.status, await again.text(), "PUT", NS, again.headers[ERROR_HEADER])
    assert isinstance(error, NamespaceExists)  # an InvalidInput: exit 2, as `lbctl namespaces create`
    assert "409" in error.message and "public/default" in error.message
    assert isinstance(refusal(409, '{"reason": "x"}', "PUT", NS), StateConflict)  # another service
