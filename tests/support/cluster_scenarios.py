"""Scenario helpers for the live system on the in-process host (tests, the simulator, benches).

``make_host`` builds 3 brokers (by default) and creates the namespaces; ``assert_consistent``
is the check every scenario ends with: every body's live ownership view (and the client's)
equals a fresh replay of the log, the replay refused nothing, and no bundle is Owned by a broker
that is not registered.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from random import Random
from typing import Any

from actors.api import Cluster
from actors.broker import BrokerBody
from actors.cluster.inproc_link import InProcLink
from actors.effects import Receipt
from actors.runtime import InProcessHost, build_cluster, wait_ready
from actors.runtime.tickets import run_sync
from actors.settings import ActorSettings
from actors.workload import Workload
from balancer.config import LoadBalancerConfig
from balancer.ownership import BundleState
from events.catalog import AssignBundle, Command, CreateNamespace, LookupBundle
from projections.ownership import OwnershipProjection

NAMESPACES = ("public/a", "public/b")
RATE = 80_000.0  # msg/s in; with every bundle on broker-1, two leaders' worth of shedding
SETTINGS = ActorSettings()

FOLDED = frozenset({  # the event types OwnershipProjection folds
    "NamespaceCreated", "NamespacePolicySet", "FailureDomainSet", "SplitCompleted", "BundleAssigned",
    "BundleOwned", "UnloadRequested", "TransferPrepared", "BundleReleased", "SplitRequested"})


def client(host: InProcessHost) -> Cluster:
    """The one client (``Cluster``) over ``host``, its view folded from the host's records; its
    verbs never wait on a real clock, so ``run_sync`` runs one to its end."""
    return Cluster(InProcLink(host))


def lookup(host: InProcessHost, topic: str, timeout_s: float = 10.0) -> str:
    """The topic's owner, looked up as every client does (``Cluster.lookup``)."""
    return run_sync(client(host).lookup(topic, timeout_s=timeout_s))


def make_host(config: LoadBalancerConfig | None = None, *, brokers: int | list[str] = 3,
              seed: int = 7, rate: float = 4_000.0, clients: bool = False,
              namespaces: tuple[str, ...] = NAMESPACES, bundles: int = 4,
              settings: ActorSettings = SETTINGS) -> InProcessHost:
    config = config or LoadBalancerConfig.from_mapping({"loadBalancerAutoBundleSplitEnabled": False})
    workload = Workload.zipf(Random(seed), list(namespaces), topics_per_namespace=40,
                             total_msg_rate=rate)
    host = build_cluster(brokers, config=config, seed=seed, settings=settings, workload=workload,
                         clients=clients)
    count = brokers if isinstance(brokers, int) else len(brokers)
    assert wait_ready(host, count)
    for namespace in namespaces:
        call(host, CreateNamespace, namespace=namespace, bundles=bundles)
    return host


def call(host: InProcessHost, cls: type[Command], **fields: Any) -> Receipt:
    reply = host.call(cls(command_id=host.command_id(), epoch=host.epoch, **fields))
    assert isinstance(reply, Receipt)
    return reply


def first(reply: Receipt, kind: str) -> Mapping[str, Any]:
    payload = reply.first(kind)
    assert payload is not None, reply
    return payload


def bundles(host: InProcessHost, namespace: str | None = None) -> list[str]:
    return [row.bundle for row in host.view.bundles(namespace)]


def place_all(host: InProcessHost) -> None:
    for bundle in bundles(host):
        host.submit(LookupBundle(command_id=host.command_id(), epoch=host.epoch, bundle=bundle))
    assert host.run_until(lambda: all_owned(host), 10_000)


def all_owned(host: InProcessHost) -> bool:
    return all(row.state == BundleState.OWNED for row in host.view.bundles())


def owner(host: InProcessHost, bundle: str) -> str:
    found = host.view.owner(bundle)
    assert found is not None, bundle
    return found


def types(host: InProcessHost, since: int = 0) -> list[str]:
    return [r.envelope.type for r in host.records[since:]]


_GAP = re.compile(r"seq (\d+)\.\.(\d+) missing")


def assert_no_anomaly(host: InProcessHost, replay: OwnershipProjection) -> None:
    """No refused, duplicate, stale or missing event anywhere in the log."""
    assert replay.anomalies == [], replay.anomalies[:5]


def assert_consistent(host: InProcessHost, *, owners_registered: bool = True) -> None:
    host.advance(0)  # deliveries already due reach every body
    replay = host.replay()
    assert_no_anomaly(host, replay)
    assert host.view.state_equals(replay)
    for name, body in host.bodies.items():
        assert body.ownership.state_equals(replay), name  # type: ignore[attr-defined]
    if not owners_registered:
        return  # mid-run, an expired broker's bundles wait (briefly) for their reassignment
    for row in host.view.bundles():
        if row.state == BundleState.OWNED:
            assert row.owner in host.client.brokers, row


def topic_in(host: InProcessHost, bundle: str) -> str:
    workload = next(b for b in host.bodies.values() if isinstance(b, BrokerBody)).workload
    topics = workload.topics_in(bundle)
    assert topics, bundle
    return topics[0].name



def shed_host() -> InProcessHost:
    """Every bundle on broker-1 under load: ThresholdShedder moves some away each minute.

    Below 100 % usage and with a 2 % margin, so that shedding takes more than one leader's turn
    (usage above 100 % counts as it is since Pulsar PR #18645: at RATE one run moves everything).
    """
    config = LoadBalancerConfig.from_mapping({"loadBalancerAutoBundleSplitEnabled": False,
                                              "loadBalancerBrokerThresholdShedderPercentage": 2})
    host = make_host(config, rate=30_000.0)
    for bundle in bundles(host):
        call(host, AssignBundle, bundle=bundle, dst="broker-1", reason="admin")
    assert host.run_until(lambda: all_owned(host), 5_000)
    return host


def shed_events(host: InProcessHost) -> list[tuple[int, str, int]]:
    out = []
    for record in host.events("TransferPrepared", "UnloadRequested"):
        envelope = record.envelope
        if envelope.payload.get("decision", {}).get("strategy") == "ThresholdShedder":
            out.append((envelope.ts_ms, envelope.payload["bundle"], envelope.epoch))
    return out


