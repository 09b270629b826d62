"""Apache Pulsar's own ``PulsarAdmin`` client (4.0.0, from Maven Central) against the web service of
``lbctl run --web-service-port``: on the in-process host with token authentication on, and on Ray
over real Kafka. tests/integration/java/AdminWalk.java calls every admin method the project serves and
prints what it got; each answer is held against the cluster's own view afterwards. On the same
service, ``lbctl`` over REST (a client.conf's webServiceUrl, authPlugin, authParams) runs the
README's admin walk-through with pulsar-admin's flag spellings.

Needs the jars of ``make pulsar-admin-jars`` (``make test`` fetches them first); without them
this fails with the command to run, it does not skip. Auto-split and shedding are off in these
runs so that the view after the walk is the one the walk left.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.api import Cluster
from tests.integration.test_deployment import deployment_file
from web.shapes import bundles_data

ROOT = Path(__file__).resolve().parents[2]
LBCTL = str(Path(sys.executable).parent / "lbctl")
WALK = ROOT / "tests" / "integration" / "java" / "AdminWalk.java"
NS, DEFAULT, TOPIC = "public/walk", "public/default", "persistent://public/walk/orders"
QUIET = "loadBalancerAutoBundleSplitEnabled=false\nloadBalancerSheddingEnabled=false\n"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def admin_libs() -> Path:
    return Path(os.environ.get("PULSAR_ADMIN_LIBS", ROOT / ".cache" / "pulsar-admin-libs"))


@pytest.fixture(scope="module", autouse=True)
def _jars() -> None:
    if not (admin_libs() / "pulsar-client-admin-original-4.0.0.jar").is_file():
        pytest.fail(f"no PulsarAdmin jars in {admin_libs()}: run 'make pulsar-admin-jars' (make test does)")


def java(url: str, token: str = "", mode: str = "walk") -> list[dict[str, Any]]:
    done = subprocess.run(["java", "-cp", f"{admin_libs()}/*", str(WALK), url, token, mode],
                          capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def broker_conf(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "broker.conf"
    path.write_text((ROOT / "conf" / "broker.conf").read_text() + QUIET + extra)
    return path


def start(argv: list[str], tmp_path: Path) -> tuple[subprocess.Popen[str], str]:
    """``lbctl ... run --keep --web-service-port 0``, once kept; and its service's URL."""
    run = subprocess.Popen([LBCTL, *argv, "--keep", "--web-service-port", "0", "--plain",
                            "--minutes", "2", "--topics", "400", "--bundles", "4",
                            "--state-dir", str(tmp_path / "state")],
                           stdout=subprocess.PIPE, stderr=(tmp_path / "run.err").open("w"),
                           text=True, cwd=ROOT)
    assert run.stdout is not None
    url, lines = None, []
    for line in run.stdout:
        lines.append(line)
        if line.startswith("web service: "):
            url = line.split()[-1]
        if line.startswith("kept:"):
            break
    assert url is not None and lines[-1].startswith("kept:"), "".join(lines) + (tmp_path / "run.err").read_text()
    return run, url


def stop(run: subprocess.Popen[str]) -> None:
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=120) == 0


class Walk:
    """The lines AdminWalk printed, looked up by call (in order)."""

    def __init__(self, lines: list[dict[str, Any]]) -> None:
        self.lines = lines

    def all(self, call: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["call"] == call]

    def ok(self, call: str, index: int = 0) -> Any:
        line = self.all(call)[index]
        assert "error" not in line, line
        return line.get("result")

    def refused(self, call: str, index: int) -> dict[str, Any]:
        line = self.all(call)[index]
        assert "error" in line, line
        return line


async def check_against_view(walk: Walk, cluster: Cluster) -> None:
    """Every answer of the walk against what ``cluster``'s view (and log) says."""
    await cluster.wait_ready(3)  # an attached view follows the log: until it has caught up
    await cluster.catch_up()
    brokers = [b.broker_id for b in cluster.brokers()]
    assert walk.ok("getClusters") == ["standalone"]
    assert walk.ok("getActiveBrokers") == brokers == ["broker-1", "broker-2", "broker-3"]
    assert walk.ok("getLeaderBroker")["brokerId"] == cluster.leader().leader_id
    check_domains(walk, cluster)
    check_namespaces(walk, cluster)
    check_moves(walk, cluster)
    assert walk.ok("getNamespaceAntiAffinityGroup", 0) == "g1"
    assert walk.ok("getNamespaceAntiAffinityGroup", 1) in ("", None)  # deleted: Pulsar's 204
    assert cluster.anti_affinity_group(NS) == "g2"
    report = walk.ok("getLoadReport")
    home = cluster.brokers()[0]
    assert report["pulsarServiceUrl"] == home.url
    logged = [r.envelope.payload for r in await cluster.log_tail(1_000_000)
              if r.envelope.type == "LoadReported" and r.envelope.ts_ms == report["lastUpdate"]
              and r.envelope.payload["broker_id"] == home.broker_id]
    assert logged, f"no LoadReported of {home.broker_id} at {report['lastUpdate']}"
    assert report["msgRateIn"] == logged[-1]["broker_load"]["msg_rate_in"]
    assert report["numTopics"] == logged[-1]["broker_load"]["topics"]


def check_domains(walk: Walk, cluster: Cluster) -> None:
    listed = walk.ok("getFailureDomains")  # a Java Set: in hash order
    assert {d: sorted(v["brokers"]) for d, v in listed.items()} == {"walk-d1": ["broker-1", "broker-2"]}
    assert sorted(walk.ok("getFailureDomain", 0)["brokers"]) == ["broker-1", "broker-2"]
    conflict = walk.refused("createFailureDomain", 1)
    assert (conflict["error"], conflict["status"]) == ("ConflictException", 409)
    assert "broker-2" in conflict["reason"] and "walk-d1" in conflict["reason"]
    gone = walk.refused("getFailureDomain", 1)
    assert (gone["error"], gone["status"]) == ("NotFoundException", 404) and "walk-d1" in gone["reason"]
    assert cluster.failure_domains() == {"walk-d3": ["broker-3"]}


def check_namespaces(walk: Walk, cluster: Cluster) -> None:
    walk.ok("createNamespace", 0)
    twice = walk.refused("createNamespace", 1)
    assert (twice["error"], twice["status"]) == ("ConflictException", 409) and NS in twice["reason"]
    assert walk.ok("getNamespaces") == [n for n in cluster.namespaces() if n.startswith("public/")]
    assert walk.ok("getBundles", 0)["numBundles"] == 4
    nope = walk.refused("getBundles", 1)
    assert (nope["error"], nope["status"]) == ("NotFoundException", 404) and "public/nope" in nope["reason"]
    assert walk.ok("getBundles", 2) == bundles_data(cluster.bundles(NS))  # after the range split
    assert len(cluster.bundles(NS)) == 5
    split = walk.all("splitNamespaceBundle")[1]["args"]
    after = walk.ok("getBundles", 4)
    assert after == bundles_data(cluster.bundles(DEFAULT)) and f"0x{split[4][0]:08x}" in after["boundaries"]


def check_moves(walk: Walk, cluster: Cluster) -> None:
    first_range = walk.ok("getBundleRange", 0)
    assert [line["args"][1] for line in walk.all("unloadNamespaceBundle")[:2]] == [first_range] * 2
    dst = walk.all("unloadNamespaceBundle")[1]["args"][2]
    assert walk.ok("lookupTopic", 3) == f"pulsar://{dst}:6650"
    bad_dst = walk.refused("unloadNamespaceBundle", 2)
    assert (bad_dst["error"], bad_dst["status"]) == ("PreconditionFailedException", 412)
    assert "nope" in bad_dst["reason"]
    no_bundle = walk.refused("unloadNamespaceBundle", 3)
    assert (no_bundle["error"], no_bundle["status"]) == ("NotFoundException", 404)
    assert "0x00000000_0x00000010" in no_bundle["reason"]
    owner = cluster.owner_of(TOPIC)
    assert walk.ok("lookupTopic", 4) == f"pulsar://{owner}:6650" == f"pulsar://{dst}:6650"
    assert walk.ok("getBundleRange", 1) == cluster.ownership().bundle_of_topic(TOPIC).rsplit("/", 1)[1]


def lbctl_rest(via: list[str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LBCTL, *via, *argv], capture_output=True, text=True, timeout=300, cwd=ROOT)


def readme_walkthrough(via: list[str], url: str) -> None:
    """README's admin walk-through, and pulsar-admin's spellings, through ``lbctl`` over REST."""
    def ok(*argv: str) -> str:
        done = lbctl_rest(via, *argv)
        assert done.returncode == 0, f"lbctl {' '.join(argv)}: {done.stderr}"
        return done.stdout

    rows = json.loads(ok("namespaces", "bundles", DEFAULT, "--json"))["bundles"]
    owned = next(r for r in rows if r["state"] == "Owned")
    dst = next(b for b in ("broker-1", "broker-2", "broker-3") if b != owned["owner"])
    moved = ok("namespaces", "unload", DEFAULT, "-b", owned["range"], "--destinationBroker", dst)
    assert moved.strip() == f"transferred {DEFAULT}/{owned['range']} from {owned['owner']} to {dst}"
    again = lbctl_rest(via, "namespaces", "unload", DEFAULT, "-b", owned["range"], "-d", dst)
    assert again.returncode == 2 and dst in again.stderr and len(again.stderr.splitlines()) == 1
    assert "split " in ok("namespaces", "split-bundle", DEFAULT, "-bt", "LARGEST", "-san",
                          "topic_count_equally_divide", "-u")
    assert ok("topics", "lookup", "persistent://public/default/topic-00001").startswith("pulsar://broker-")
    listed = ok("brokers", "list").splitlines()  # one id per line, as pulsar-admin prints them
    assert "broker-1" in listed and all(line.startswith("broker-") for line in listed)
    assert "leader: leader" in ok("brokers", "list", "--table")
    assert json.loads(ok("broker-stats", "load-report", "--json"))["pulsarServiceUrl"] == "pulsar://broker-1:6650"
    assert f"{owned['range']}: " in ok("explain", f"{DEFAULT}/{owned['range']}")
    ok("namespaces", "create", "public/rest", "-b", "2")
    owned = json.loads(ok("topics", "lookup", "persistent://public/rest/t1", "--json"))["bundle"]
    low = int(owned.rsplit("/", 1)[1].split("_")[0], 16)
    unsplit = ok("namespaces", "split-bundle", "public/rest", "-b", owned.rsplit("/", 1)[1], "-san",
                 "specified_positions_divide", "-sb", hex(low + 0x1000))
    assert "not split" in unsplit  # Pulsar's rule: positions split a bundle of two topics or more
    ok("namespaces", "set-anti-affinity-group", "public/rest", "-g", "g7")
    assert ok("namespaces", "get-anti-affinity-group", "public/rest").strip() == "g7"
    ok("namespaces", "delete-anti-affinity-group", "public/rest")
    ok("clusters", "create-failure-domain", "standalone", "--domain-name", "d9", "--broker-list", "broker-1")
    assert json.loads(ok("clusters", "list-failure-domains", "--json"))["d9"] == {"brokers": ["broker-1"]}
    ok("clusters", "delete-failure-domain", "standalone", "--domain-name", "d9")
    gone = lbctl_rest(via, "clusters", "get-failure-domain", "--domain-name", "d9")
    assert gone.returncode == 2 and "d9" in gone.stderr
    assert ok("brokers", "leader-broker").startswith("leader (epoch ")


def test_pulsar_admin_on_the_inproc_host_with_token_auth(tmp_path: Path) -> None:
    key = tmp_path / "secret.key"
    subprocess.run([LBCTL, "tokens", "create-secret-key", "--output", str(key)], check=True)

    def token(role: str) -> str:
        made = subprocess.run([LBCTL, "tokens", "create", "--secret-key", f"file://{key}",
                               "--subject", role], check=True, capture_output=True, text=True)
        return made.stdout.strip()

    conf = broker_conf(tmp_path, "authenticationEnabled=true\nauthorizationEnabled=true\n"
                       "authenticationProviders=org.apache.pulsar.broker.authentication."
                       f"AuthenticationProviderToken\ntokenSecretKey=file://{key}\n"
                       "superUserRoles=admin,ops\n")
    run, url = start(["run", "--host", "inproc", "--speed", "0", "--conf", str(conf)], tmp_path)
    try:
        (tmp_path / "token").write_text(token("ops") + "\n")
        conf = tmp_path / "client.conf"
        conf.write_text(f"webServiceUrl={url}\nauthPlugin=org.apache.pulsar.client.impl.auth."
                        f"AuthenticationToken\nauthParams=file://{tmp_path / 'token'}\n")
        readme_walkthrough(["--client-conf", str(conf)], url)
        walk = Walk(java(url, token("admin")))
        anonymous = java(url, "", "probe")[0]
        assert (anonymous["error"], anonymous["status"]) == ("NotAuthorizedException", 401)
        stranger = java(url, token("app-1"), "probe")[0]
        assert (stranger["error"], stranger["status"]) == ("NotAuthorizedException", 403)
        assert "app-1" in stranger["reason"]
        refused = lbctl_rest(["--admin-url", url], "brokers", "list")
        assert refused.returncode == 2 and "401" in refused.stderr and len(refused.stderr.splitlines()) == 1
    finally:
        stop(run)

    async def view() -> None:
        async with await Cluster.connect(state_dir=tmp_path / "state") as cluster:  # from its log
            await check_against_view(walk, cluster)

    asyncio.run(view())


@pytest.fixture
def kafka_deployment(tmp_path: Path, kafka: Any, ray_session: Any) -> Iterator[Path]:
    path = deployment_file(tmp_path, kafka, ray_session)
    text = path.read_text().replace(str(ROOT / "conf" / "broker.conf"), str(broker_conf(tmp_path)))
    path.write_text(text)
    yield path


@pytest.mark.ray
@pytest.mark.kafka
def test_pulsar_admin_on_ray_over_kafka(tmp_path: Path, kafka_deployment: Path) -> None:
    # Cluster time at 6 x wall time: a broker's session (30 s) is 5 s of wall time. At the
    # default 60 x it was half a second, and a loaded machine's stall expired a broker mid-walk.
    run, url = start(["--cluster", str(kafka_deployment), "run", "--speed", "6"], tmp_path)
    try:
        walk = Walk(java(url))

        async def view() -> None:
            cluster = await Cluster.connect(str(kafka_deployment))  # attached to the running actors
            try:
                await check_against_view(walk, cluster)
            finally:
                await cluster.close()

        asyncio.run(view())
    finally:
        stop(run)
