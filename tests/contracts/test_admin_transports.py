"""The admin verbs' contract, run over both transports: the ``Cluster`` itself and the REST
service (``lbctl --admin-url``), a real aiohttp server on 127.0.0.1 over the same in-process
cluster. Every test runs twice with the same arguments and expects the same output and exit
status, checked against the cluster's own view; nothing here knows which transport it has.

Bad input (an unknown tenant, namespace or topic, a malformed name, a bad ``host:port``) is one
line on stderr naming the bad value, exit 2, nothing on stdout and nothing appended to the log.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from actors.api import Cluster
from lbctl.attach import using
from lbctl.main import main
from web.serve import serve
from web.shapes import local_broker_data

NS = "public/default"
TOPIC = "persistent://public/default/orders"
# The fields of Pulsar's LocalBrokerData that broker-stats load-report prints.
LOCAL_BROKER_DATA = {"webServiceUrl", "pulsarServiceUrl", "persistentTopicsEnabled",
                     "nonPersistentTopicsEnabled", "cpu", "memory", "directMemory", "bandwidthIn",
                     "bandwidthOut", "msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut",
                     "numTopics", "numBundles", "numProducers", "numConsumers", "lastUpdate", "bundles",
                     "lastStats", "brokerVersionString"}


@dataclass
class Lbctl:
    """``lbctl`` as a user runs it, on one transport: ``await lbctl(*argv)`` -> (status, out, err)."""

    cluster: Cluster
    prefix: list[str]
    capsys: pytest.CaptureFixture[str]

    async def __call__(self, *argv: str) -> tuple[int, str, str]:
        code = await asyncio.to_thread(main, [*self.prefix, *argv])
        out, err = self.capsys.readouterr()
        return code, out, err

    async def ok(self, *argv: str) -> str:
        code, out, err = await self(*argv)
        assert code == 0, err
        return out

    async def json(self, *argv: str) -> Any:
        return json.loads(await self.ok(*argv, "--json"))


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with Cluster.start(brokers=3, host="inproc") as started:
        await started.wait_ready(3)
        await started.create_namespace(NS, bundles=4)
        yield started


@pytest.fixture(params=["cluster", "rest"])
async def lbctl(request: pytest.FixtureRequest, cluster: Cluster,
                capsys: pytest.CaptureFixture[str]) -> AsyncIterator[Lbctl]:
    if request.param == "cluster":
        with using(cluster):
            yield Lbctl(cluster, [], capsys)
    else:
        async with serve(cluster, 0) as service:
            yield Lbctl(cluster, ["--admin-url", service.url], capsys)


async def _appended(cluster: Cluster) -> list[str]:
    return [r.envelope.type for r in await cluster.log_tail(100_000) if r.envelope.type != "LoadReported"]


# -- reads -----------------------------------------------------------------------------------------


async def test_tenants_namespaces_and_policies(lbctl: Lbctl, cluster: Cluster) -> None:
    await cluster.create_namespace("acme/orders", bundles=2)
    assert await lbctl.ok("tenants", "list") == "acme\npublic\n"  # pulsar-admin: one per line
    assert await lbctl.ok("namespaces", "list", "public") == "public/default\n"
    assert await lbctl.json("namespaces", "list", "acme") == ["acme/orders"]
    policies = json.loads(await lbctl.ok("namespaces", "policies", NS))
    assert policies == {"bundles": {"numBundles": 4, "boundaries": [
        "0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"]}, "deleted": False}
    await lbctl.ok("namespaces", "set-anti-affinity-group", NS, "-g", "g1")
    assert (await lbctl.json("namespaces", "policies", NS))["antiAffinityGroup"] == "g1"
    assert (await lbctl.ok("namespaces", "get-anti-affinity-group", NS)).strip() == "g1"
    table = (await lbctl.ok("namespaces", "bundles", NS)).splitlines()
    assert table[0].split() == ["RANGE", "STATE", "OWNER", "VERSION"] and len(table) == 5


async def test_lookup_prints_the_broker_url_as_pulsar_admin_does(lbctl: Lbctl, cluster: Cluster) -> None:
    url = (await lbctl.ok("topics", "lookup", TOPIC)).strip()
    owner = cluster.owner_of(TOPIC)
    assert url == f"pulsar://{owner}:6650"
    # Pulsar's short forms name the same topic.
    assert (await lbctl.ok("topics", "lookup", "public/default/orders")).strip() == url
    assert (await lbctl.ok("topics", "lookup", "orders")).strip() == url
    assert await lbctl.ok("topics", "lookup", TOPIC, "--table") == f"{owner}\t{url}\n"
    found = await lbctl.json("topics", "lookup", TOPIC)
    assert found == {"broker": owner, "brokerUrl": url, "bundle": cluster.ownership().bundle_of_topic(TOPIC)}


async def test_bundle_range_is_the_topics_bundle_and_assigns_nothing(lbctl: Lbctl, cluster: Cluster) -> None:
    before = await _appended(cluster)
    found = await lbctl.ok("topics", "bundle-range", TOPIC)
    assert found == cluster.ownership().bundle_of_topic(TOPIC).rsplit("/", 1)[1] + "\n"  # as pulsar-admin
    assert cluster.owner_of(TOPIC) is None and await _appended(cluster) == before  # a read: still unowned
    assert await lbctl.ok("topics", "bundle-range", "orders") == found
    assert await lbctl.json("topics", "bundle-range", TOPIC) == {"topic": TOPIC, "range": found.strip()}


async def test_a_lookup_from_a_degraded_view_warns(lbctl: Lbctl, cluster: Cluster) -> None:
    cluster.ownership().apply_dead_letter(7, NS, "bad_json: not an event")  # as a fold meets one
    code, out, err = await lbctl("topics", "lookup", TOPIC)
    assert (code, out) == (0, f"pulsar://{cluster.owner_of(TOPIC)}:6650\n")
    assert err == f"lbctl: warning: the view of {NS} is degraded: offset 7: bad_json: not an event\n"


async def test_a_v1_topic_name_is_looked_up_on_both(lbctl: Lbctl, cluster: Cluster) -> None:
    await cluster.create_namespace("public/standalone/legacy", bundles=2)
    url = (await lbctl.ok("topics", "lookup", "persistent://public/standalone/legacy/t")).strip()
    assert url == f"pulsar://{cluster.owner_of('persistent://public/standalone/legacy/t')}:6650"


async def test_brokers_leader_and_healthcheck(lbctl: Lbctl, cluster: Cluster) -> None:
    listed = await lbctl.json("brokers", "list")
    assert [b["broker"] for b in listed["brokers"]] == ["broker-1", "broker-2", "broker-3"]
    leader_id, epoch = cluster.leader()
    assert (await lbctl.ok("brokers", "leader-broker")).strip() == f"{leader_id} (epoch {epoch})"
    assert await lbctl.ok("brokers", "healthcheck") == "ok\n"  # pulsar-admin's CmdBrokers prints ok


async def test_load_report_is_pulsars_local_broker_data(lbctl: Lbctl, cluster: Cluster) -> None:
    await cluster.lookup(TOPIC)
    await cluster.sleep(10_000)  # every broker reports its load
    report = json.loads(await lbctl.ok("broker-stats", "load-report", "broker-2:6650"))
    assert set(report) == LOCAL_BROKER_DATA
    status = next(b for b in cluster.brokers() if b.broker_id == "broker-2")
    assert report == local_broker_data(cluster.load_report("broker-2"), status.url, status.version)
    first = await lbctl.json("broker-stats", "load-report")
    assert first["pulsarServiceUrl"] == "pulsar://broker-1:6650"


# -- moves ---------------------------------------------------------------------------------------


async def test_create_split_transfer_and_unload(lbctl: Lbctl, cluster: Cluster) -> None:
    assert (await lbctl.ok("namespaces", "create", "public/orders", "-b", "2")).strip() == \
        "created public/orders with 2 bundle(s)"
    await cluster.lookup("persistent://public/orders/o-1")
    bundle = cluster.ownership().bundle_of_topic("persistent://public/orders/o-1")
    owner = cluster.owner_of("persistent://public/orders/o-1")
    split = await lbctl.json("namespaces", "split-bundle", "public/orders", "-b", bundle.rsplit("/", 1)[1],
                             "-san", "range_equally_divide")
    low, high = bundle.rsplit("/", 1)[1].split("_")
    middle = f"0x{(int(low, 16) + int(high, 16)) // 2:08x}"
    children = [f"public/orders/{low}_{middle}", f"public/orders/{middle}_{high}"]
    assert split == {"parent": bundle, "children": children, "owner": owner,
                     "algorithm": "range_equally_divide", "unloaded": False}
    assert set(children) <= {r.bundle for r in cluster.bundles("public/orders")}
    child = split["children"][0]
    dst = next(b for b in ("broker-1", "broker-2", "broker-3") if b != owner)
    moved = await lbctl.ok("namespaces", "unload", "public/orders", "-b", child.rsplit("/", 1)[1],
                           "-d", f"{dst}:8080")  # Pulsar's form of a broker id: host:port
    assert moved.strip() == f"transferred {child} from {owner} to {dst}"
    assert {r.bundle: r.owner for r in cluster.bundles("public/orders")}[child] == dst
    owned = sorted(r.bundle for r in cluster.bundles("public/orders") if r.state == "Owned")
    unloaded = await lbctl.json("namespaces", "unload", "public/orders")
    assert sorted(m["bundle"] for m in unloaded["unloaded"]) == owned
    assert not [r for r in cluster.bundles("public/orders") if r.state == "Owned"]


async def test_a_split_with_unload_names_its_owner_and_the_default_algorithm(lbctl: Lbctl,
                                                                             cluster: Cluster) -> None:
    await cluster.lookup(TOPIC)
    bundle = cluster.ownership().bundle_of_topic(TOPIC)
    owner = cluster.owner_of(TOPIC)
    done = await lbctl.json("namespaces", "split-bundle", NS, "-b", bundle.rsplit("/", 1)[1], "-u")
    assert (done["parent"], done["owner"], done["unloaded"]) == (bundle, owner, True)
    assert done["algorithm"] == cluster.config.default_namespace_bundle_split_algorithm
    assert {r.bundle: r.state for r in cluster.bundles(NS)}[done["children"][0]] != "Owned"
    # -sb alone is specified_positions_divide (Pulsar's rule), which splits only a bundle of two
    # topics or more: a bundle of one looked-up topic is not split.
    await cluster.create_namespace("public/sb", bundles=2)
    topic = "persistent://public/sb/t1"
    await cluster.lookup(topic)
    one = cluster.ownership().bundle_of_topic(topic)
    low = int(one.rsplit("/", 1)[1].split("_")[0], 16)
    unsplit = await lbctl.ok("namespaces", "split-bundle", "public/sb", "-b", one.rsplit("/", 1)[1],
                             "-sb", hex(low + 0x1000))
    assert unsplit.strip() == (f"{one}: specified_positions_divide found no boundary; "
                               f"not split (owner {cluster.owner_of(topic)})")


async def test_failure_domains_take_host_port(lbctl: Lbctl, cluster: Cluster) -> None:
    out = await lbctl.ok("clusters", "create-failure-domain", "--domain-name", "d1",
                         "--broker-list", "broker-1,broker-2:6650")
    assert out.strip() == "failure domain d1: broker-1, broker-2"
    assert await lbctl.json("clusters", "list-failure-domains") == {"d1": {"brokers": ["broker-1", "broker-2"]}}
    assert (await lbctl.ok("clusters", "get-failure-domain", "--domain-name", "d1")).strip() == "broker-1, broker-2"
    code, out, err = await lbctl("clusters", "create-failure-domain", "--domain-name", "d2",
                                 "--broker-list", "broker-2")
    assert (code, out) == (1, "") and "broker-2" in err and "d1" in err
    await lbctl.ok("clusters", "delete-failure-domain", "--domain-name", "d1")
    assert cluster.failure_domains() == {}
    assert (await lbctl("clusters", "get-failure-domain", "--domain-name", "d1"))[0] == 2


async def test_balancer_pause_status_resume(lbctl: Lbctl) -> None:
    assert "90 s from now: maintenance" in await lbctl.ok("balancer", "pause", "--for", "90s",
                                                           "--reason", "maintenance")
    assert (await lbctl.json("balancer", "status"))["state"] == "paused"
    assert "balancer resumed" in await lbctl.ok("balancer", "resume")
    assert (await lbctl.ok("balancer", "resume")).strip() == "not paused"


async def test_proposals_list_reads_the_same_book(lbctl: Lbctl, cluster: Cluster) -> None:
    listed = await lbctl.json("proposals", "list")
    assert listed == (await cluster.proposals()).listing()


# -- bad input -------------------------------------------------------------------------------------

BAD: dict[str, tuple[list[str], str]] = {
    # case: (argv, the bad value the message must name)
    "unknown_tenant": (["namespaces", "list", "nope"], "nope"),
    "not_a_tenant": (["namespaces", "list", "public/default"], "public/default"),
    "unknown_namespace": (["namespaces", "policies", "public/nope"], "public/nope"),
    "not_a_namespace": (["namespaces", "bundles", "nope"], "nope"),
    "lookup_unknown_namespace": (["topics", "lookup", "persistent://public/nope/t"], "public/nope"),
    "not_a_topic": (["topics", "lookup", "persistent://public/t"], "persistent://public/t"),
    "bundle_range_unknown_namespace": (["topics", "bundle-range", "persistent://public/nope/t"], "public/nope"),
    "bundle_range_not_a_topic": (["topics", "bundle-range", "public/t"], "public/t"),
    "not_a_topic_domain": (["topics", "lookup", "durable://public/default/t"], "durable://public/default/t"),
    "bad_port": (["namespaces", "unload", NS, "-b", "0x00000000_0x40000000", "-d", "broker-2:99999"],
                 "broker-2:99999"),
    "no_host": (["namespaces", "unload", NS, "-b", "0x00000000_0x40000000", "-d", ":8080"], ":8080"),
    "no_broker_there": (["namespaces", "unload", NS, "-b", "0x00000000_0x40000000", "-d", "elsewhere:8080"],
                        "elsewhere:8080"),
    "bad_broker_list": (["clusters", "create-failure-domain", "--domain-name", "d1",
                         "--broker-list", "broker-1,broker-2:http"], "broker-2:http"),
    "load_report_unknown_broker": (["broker-stats", "load-report", "broker-7"], "broker-7"),
    "load_report_bad_host_port": (["broker-stats", "load-report", "broker-1:0"], "broker-1:0"),
    "proposal_show_unknown": (["proposals", "show", "shed-42"], "shed-42"),
    "proposal_approve_unknown": (["proposals", "approve", "shed-42"], "shed-42"),
    "proposal_cancel_unknown": (["proposals", "cancel", "split-7"], "split-7"),
}


@pytest.mark.parametrize("case", sorted(BAD))
async def test_bad_input_is_one_line_exit_2_and_appends_nothing(case: str, lbctl: Lbctl,
                                                                cluster: Cluster) -> None:
    argv, bad_value = BAD[case]
    await cluster.sleep(10_000)  # load reports exist: only the bad value can be refused
    before = await _appended(cluster)
    code, out, err = await lbctl(*argv)
    assert (code, out) == (2, ""), err
    assert len(err.splitlines()) == 1 and bad_value in err, err
    assert await _appended(cluster) == before
