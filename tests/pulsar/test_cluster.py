"""The real Pulsar test cluster answers as Pulsar does, and real traffic makes real load.

Every test here shares the session's clusters (`pulsar_cluster`: extensible, 2 brokers;
`pulsar_modular_cluster`: modular, 1 broker) and works in a namespace of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest

from bench.pulsar_traffic import TrafficPlan, quiet_logger, run_traffic
from tests.pulsar_server import PulsarCluster, admin_call

pytestmark = [pytest.mark.pulsar, pytest.mark.timeout(300)]

BROKER_LOAD = "non-persistent://pulsar/system/loadbalancer-broker-load-data"
CHANNEL = "persistent://pulsar/system/loadbalancer-service-unit-state"
NewNamespace = Callable[[PulsarCluster, int], str]
BUSY_RATE_IN = 50.0
"""msg/s in a broker report that only the test's traffic explains: the hot topic alone gets 120
(200 msg/s split 1 : 0.35 : 0.19 : 0.13 over 4 topics), while an idle broker's system topics and
health checks make a few."""


@contextmanager
def reader(cluster: PulsarCluster, topic: str, earliest: bool) -> Iterator[Any]:
    import pulsar

    client = pulsar.Client(cluster.service_url, operation_timeout_seconds=15,
                           logger=quiet_logger())
    try:
        start = pulsar.MessageId.earliest if earliest else pulsar.MessageId.latest
        yield client.create_reader(topic, start)
    finally:
        client.close()


def next_value(found: Any, timeout_s: float) -> tuple[str, Any] | None:
    """The next (key, JSON value) of a reader, or None when nothing came in `timeout_s`."""
    try:
        msg = found.read_next(timeout_millis=int(timeout_s * 1000))
    except Exception:  # the client's Timeout
        return None
    data = msg.data()
    return msg.partition_key(), (json.loads(data) if data else None)


def owner_of(cluster: PulsarCluster, topic: str) -> str:
    """Pulsar's own lookup: the broker id (127.0.0.1:webPort) that serves `topic`."""
    found = lookup(cluster, topic)
    assert found is not None, f"no answer to the lookup of {topic}"
    return found


def lookup(cluster: PulsarCluster, topic: str) -> str | None:
    """`owner_of`, or None while Pulsar cannot answer (e.g. the owner just died)."""
    try:
        status, found = cluster.admin("GET", f"/lookup/v2/topic/persistent/{topic}")
    except OSError:  # a timeout: the lookup waited on the dead owner
        return None
    return str(found["httpUrl"]).removeprefix("http://") if status == 200 else None


def bundle_of(cluster: PulsarCluster, topic: str) -> str:
    status, found = cluster.admin("GET", f"/lookup/v2/topic/persistent/{topic}/bundle")
    assert status == 200, found
    return str(found)


def unload_to(cluster: PulsarCluster, namespace: str, bundle: str, broker_id: str) -> None:
    status, body = cluster.admin(
        "PUT", f"/admin/v2/namespaces/{namespace}/{bundle}/unload?destinationBroker={broker_id}")
    assert status == 204, body


def move_topic_elsewhere(cluster: PulsarCluster, namespace: str, topic: str, wait_s: float = 30) -> str:
    """Unload ``topic``'s bundle to the other broker and wait until lookups name it there;
    that broker (the caller checks where the topic ended up)."""
    source = owner_of(cluster, topic)
    target = next(b for b in cluster.broker_ids if b != source)
    unload_to(cluster, namespace, bundle_of(cluster, topic), target)
    deadline = time.monotonic() + wait_s
    while owner_of(cluster, topic) != target and time.monotonic() < deadline:
        time.sleep(0.2)
    return target


def test_every_broker_lists_both_brokers_and_one_leader(pulsar_cluster: PulsarCluster) -> None:
    c = pulsar_cluster
    leaders = set()
    for url in c.web_urls:
        status, brokers = admin_call(url, "GET", f"/admin/v2/brokers/{c.cluster_name}")
        assert status == 200 and sorted(brokers) == sorted(c.broker_ids)
        status, leader = admin_call(url, "GET", "/admin/v2/brokers/leaderBroker")
        assert status == 200
        leaders.add(leader["brokerId"])
    assert len(leaders) == 1 and leaders <= set(c.broker_ids)
    assert c.service_url.count("127.0.0.1:") == 2


def test_a_namespace_made_with_n_bundles_lists_them(pulsar_cluster: PulsarCluster,
                                                     new_namespace: NewNamespace) -> None:
    namespace = new_namespace(pulsar_cluster, 8)
    status, bundles = pulsar_cluster.admin("GET", f"/admin/v2/namespaces/{namespace}/bundles")
    assert status == 200 and bundles["numBundles"] == 8
    bounds = [int(b, 16) for b in bundles["boundaries"]]
    assert bounds[0] == 0 and bounds[-1] == 0xFFFFFFFF and bounds == sorted(bounds)
    assert len(bounds) == 9


def test_an_unload_with_a_destination_moves_the_bundle_there(
        pulsar_cluster: PulsarCluster, new_namespace: NewNamespace) -> None:
    c = pulsar_cluster
    namespace = new_namespace(c, 4)
    topic = f"{namespace}/moved"
    target = move_topic_elsewhere(c, namespace, topic)
    assert owner_of(c, topic) == target


def test_the_ownership_channel_read_from_earliest_holds_the_bundles_transitions(
        pulsar_cluster: PulsarCluster, new_namespace: NewNamespace) -> None:
    c = pulsar_cluster
    namespace = new_namespace(c, 2)
    topic = f"{namespace}/watched"
    source = owner_of(c, topic)
    bundle = f"{namespace}/{bundle_of(c, topic)}"
    target = next(b for b in c.broker_ids if b != source)
    unload_to(c, namespace, bundle.rsplit("/", 1)[1], target)
    seen: list[dict[str, Any]] = []
    with reader(c, CHANNEL, earliest=True) as channel:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _moved(seen, target):
            got = next_value(channel, 5.0)
            if got is not None and got[0] == bundle and got[1] is not None:
                seen.append(got[1])
    moves = [(t["state"], t["dstBroker"], t.get("sourceBroker")) for t in seen]
    assert moves == [("Assigning", source, None), ("Owned", source, None),
                     ("Releasing", target, source), ("Assigning", target, source),
                     ("Owned", target, source)], seen
    assert [t["versionId"] for t in seen] == [1, 2, 3, 4, 5]
    assert not any(t["force"] for t in seen)


def _moved(seen: list[dict[str, Any]], target: str) -> bool:
    return bool(seen) and seen[-1]["state"] == "Owned" and seen[-1]["dstBroker"] == target


def test_traffic_is_produced_consumed_and_shows_in_the_brokers_load_data(
        pulsar_cluster: PulsarCluster, new_namespace: NewNamespace) -> None:
    c = pulsar_cluster
    namespace = new_namespace(c, 4)
    plan = TrafficPlan(service_url=c.service_url, namespace=namespace, topics=4, rate=200,
                       seconds=90, zipf=1.5, size=512)
    hot = plan.topic_names()[0].removeprefix("persistent://")
    stop = threading.Event()
    with reader(c, BROKER_LOAD, earliest=False) as load_data, ThreadPoolExecutor(1) as pool:
        running = pool.submit(run_traffic, plan, stop=stop)
        try:
            owner = _wait_owner(c, hot)
            load = _first_busy_report(load_data, owner, deadline=time.monotonic() + 60)
        finally:
            stop.set()  # the traffic ends as soon as the load shows (or the test fails)
        report = running.result(timeout=60)
    assert load is not None, f"no load report of this traffic from {owner}"
    assert load["msgThroughputIn"] > 0 and load["msgRateIn"] >= BUSY_RATE_IN
    assert report.failed == 0 and report.sent > 0 and report.received == report.sent
    counts = [report.per_topic[name].sent for name in plan.topic_names()]
    assert counts[0] > counts[-1], counts  # Zipf: the first topic is the hottest


def _wait_owner(c: PulsarCluster, topic: str) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status, stats = c.admin("GET", f"/admin/v2/persistent/{topic}/stats")
        if status == 200 and stats.get("publishers"):
            return owner_of(c, topic)
        time.sleep(0.5)
    raise AssertionError(f"{topic}: no producer after 30 s")


def _first_busy_report(load_data: Any, owner: str, deadline: float) -> dict[str, Any] | None:
    while time.monotonic() < deadline:
        got = next_value(load_data, 5.0)
        if got and got[0] == owner and got[1] and got[1].get("msgRateIn", 0) >= BUSY_RATE_IN:
            return dict(got[1])
    return None


def test_lbctl_pulsar_traffic_stops_at_its_message_count_and_reports_it(
        pulsar_cluster: PulsarCluster, new_namespace: NewNamespace) -> None:
    namespace = new_namespace(pulsar_cluster, 4)
    done = subprocess.run(
        [sys.executable, "-m", "lbctl", "pulsar", "traffic", "--service-url",
         pulsar_cluster.service_url, "--namespace", namespace, "--topics", "3", "--rate", "150",
         "--messages", "300", "--size", "64", "--json"],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sent"] == 300 and report["received"] == 300 and report["failed"] == 0
    assert sum(t["sent"] for t in report["topics"].values()) == 300
    assert "sent 300/300" in done.stderr  # the last progress line


def test_the_modular_manager_answers_a_load_report_with_last_stats(
        pulsar_modular_cluster: PulsarCluster, new_namespace: NewNamespace) -> None:
    c = pulsar_modular_cluster
    namespace = new_namespace(c, 2)
    run_traffic(TrafficPlan(service_url=c.service_url, namespace=namespace, topics=2, rate=50,
                            seconds=None, messages=50, size=64))
    deadline = time.monotonic() + 60
    while True:
        status, report = c.admin("GET", "/admin/v2/broker-stats/load-report")
        assert status == 200 and "lastStats" in report, report
        if any(name.startswith(namespace + "/") for name in report["lastStats"]):
            break
        assert time.monotonic() < deadline, f"no bundle of {namespace} in lastStats: {report}"
        time.sleep(1)


def test_a_killed_brokers_bundle_is_taken_over_and_the_broker_comes_back(
        pulsar_cluster: PulsarCluster, new_namespace: NewNamespace) -> None:
    c = pulsar_cluster
    namespace = new_namespace(c, 2)
    topic = f"{namespace}/orphaned"
    survivor, victim = c.broker_ids
    if owner_of(c, topic) != victim:
        unload_to(c, namespace, bundle_of(c, topic), victim)
        _wait_for(lambda: owner_of(c, topic) == victim, 30, f"{topic} on {victim}")
    bundle = f"{namespace}/{bundle_of(c, topic)}"
    c.kill_broker(1)
    try:
        # The survivor takes the bundle over once the victim's metadata session expires.
        _wait_for(lambda: lookup(c, topic) == survivor, 90, f"{topic} taken over by {survivor}")
        with reader(c, CHANNEL, earliest=True) as channel:
            seen = _transitions(channel, bundle)
        assert seen[-1]["state"] == "Owned" and seen[-1]["dstBroker"] == survivor, seen
        assert any(t["force"] for t in seen), seen  # a takeover, not a handover
    finally:
        assert c.start_broker(1) == victim
    status, brokers = c.admin("GET", f"/admin/v2/brokers/{c.cluster_name}")
    assert status == 200 and sorted(brokers) == sorted(c.broker_ids)


def _wait_for(done: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"not after {timeout_s:.0f} s: {what}"
        time.sleep(0.5)


def _transitions(channel: Any, bundle: str) -> list[dict[str, Any]]:
    """Every transition of `bundle` until the channel has been quiet for 3 s."""
    seen: list[dict[str, Any]] = []
    while (got := next_value(channel, 3.0)) is not None:
        if got[0] == bundle and got[1] is not None:
            seen.append(got[1])
    return seen
