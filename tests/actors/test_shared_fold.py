"""The in-process host's shared fold (S1): one fold of the log for every body.

What a user notices: a cluster on ``Cluster``'s in-process host behaves as one whose bodies each
fold the log: every body reacts to a record with the view as of that record, a broker is handed
only the records that can concern it (and does nothing with the others), and a body restarted
on the shared fold holds what one folded from offset 0 holds.
"""

from __future__ import annotations

from random import Random
from typing import Any

import pytest

from actors.body import Follower
from actors.broker import BrokerBody, concerned
from actors.effects import NOTHING, Effects
from actors.runtime import InProcessHost, build_cluster, wait_ready
from actors.runtime.sim.run import simulate_on_host
from actors.workload import Workload
from balancer.config import LoadBalancerConfig
from balancer.ownership import AcceptMode, OwnershipRecord
from events.catalog import CreateNamespace, UnloadBundle
from events.log.port import Record
from projections.ownership import OwnershipProjection
from projections.ownership_index import touched
from tests.actors.test_body_snapshots import canonical

NAMESPACE = "public/default"


class Probe(Follower):
    """A body that notes, for every record it reacts to, the view's records of its bundles."""

    name = "probe"

    def __init__(self, config: LoadBalancerConfig) -> None:
        super().__init__(config)
        self.seen: list[tuple[int, dict[str, OwnershipRecord | None]]] = []

    def react(self, record: Record, now_ms: int) -> Effects:
        bundles = touched(record.envelope.typed)
        if bundles:
            self.seen.append((record.offset, {b: self.ownership.records.get(b) for b in bundles}))
        return NOTHING


def busy_host(*, shared: bool, brokers: int = 4, bundles: int = 32) -> InProcessHost:
    """A cluster with every bundle placed, then a few unloads (transfers and releases)."""
    config = LoadBalancerConfig()
    workload = Workload.zipf(Random(3), [NAMESPACE], topics_per_namespace=4 * bundles,
                             total_msg_rate=20_000.0)
    host = build_cluster(brokers, config=config, workload=workload, clients=True, seed=3,
                         shared_fold=shared)
    host.add(lambda: Probe(config))
    assert wait_ready(host, brokers)
    host.call(CreateNamespace(command_id="ns", epoch=host.epoch, namespace=NAMESPACE, bundles=bundles))
    assert host.run_until(lambda: len(host.view.records) == bundles and host.settled(), 120_000)
    for bundle in sorted(host.view.records)[:6]:
        host.call(UnloadBundle(command_id=host.command_id(), epoch=host.epoch, bundle=bundle))
    host.advance(30_000)
    return host


def test_a_body_reacts_to_each_record_with_the_view_as_of_that_record() -> None:
    host = busy_host(shared=True)
    probe = host.body("probe")
    assert isinstance(probe, Probe) and len(probe.seen) > 64
    replay = OwnershipProjection(mode=AcceptMode.from_config(host.config))
    seen = iter(probe.seen)
    offset, records = next(seen)
    for record in host.records:
        replay.apply(record.offset, record.envelope)
        while record.offset == offset:
            assert records == {b: replay.records.get(b) for b in records}, f"offset {offset}"
            offset, records = next(seen, (-1, {}))
    assert offset == -1, "the probe saw a record the log does not hold"


def test_a_cluster_on_the_shared_fold_settles_as_one_that_folds_per_body() -> None:
    hosts = {shared: busy_host(shared=shared) for shared in (True, False)}
    for shared, host in hosts.items():
        assert host.settled(), shared
        replay = host.replay()
        assert replay.anomalies == [], shared
        assert {b: (r.state, r.dst) for b, r in host.view.records.items()} == \
            {b: (r.state, r.dst) for b, r in replay.records.items()}
        assert {r.dst for r in replay.records.values()} <= set(host.client.brokers), shared


def own_part(body: Follower) -> Any:
    return canonical({k: v for k, v in body.snapshot_state().items() if k not in Follower.SNAPSHOT_FIELDS})


def test_bodies_on_the_shared_fold_hold_what_a_fold_from_offset_0_holds() -> None:
    host = busy_host(shared=True)
    for name in ("broker:broker-1", "broker:broker-3", "leader", "ns:0", "clients"):
        body, scratch = host.body(name), host._factories[name]()
        assert isinstance(body, Follower) and isinstance(scratch, Follower)
        scratch.recover(host.records)
        assert own_part(body) == own_part(scratch), name
        host.restart(name)
        restarted = host.body(name)
        assert isinstance(restarted, Follower)
        assert own_part(restarted) == own_part(scratch), f"{name} after a restart"
        assert restarted.ownership is host.client.ownership


def fingerprint(body: BrokerBody) -> Any:
    return [own_part(body), canonical(body._sent)]


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_a_broker_does_nothing_with_a_record_that_does_not_concern_it(seed: int) -> None:
    # Simulated histories with crashes, splits, unloads and leader churn; each broker folds the
    # whole log on its own (the simulator's way) and must not move on a record not naming it.
    result, sim = simulate_on_host(seed, "split_storm", 150)
    assert result.ok, result.violation
    brokers = sorted({n.split(":", 1)[1] for n in sim._factories if n.startswith("broker:")})
    skipped = acted = 0
    for broker_id in brokers:
        broker = BrokerBody(broker_id, sim.config, Workload([]), settings=sim.settings)
        for record in sim.records:
            names = concerned(record)
            if names is None or broker_id in names:
                acted += broker.on_event(record, record.envelope.ts_ms) is not NOTHING
                continue
            before = fingerprint(broker)
            assert broker.on_event(record, record.envelope.ts_ms) is NOTHING
            assert fingerprint(broker) == before, f"{broker_id} moved on offset {record.offset}"
            skipped += 1
    assert skipped > 300 and acted > 20  # it confirmed what named it, and ignored the rest
