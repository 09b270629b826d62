"""The ownership protocols of the live system, on the in-process host (docs/design/actors.md §4-5).

3 brokers and 2 namespaces unless a scenario needs otherwise. After every scenario, every body's
live ownership view (and the client's) equals a fresh replay of the log, and the replay found no
anomaly (no event the state machine refuses, no duplicate, no stale epoch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from random import Random

import pytest

from actors.broker import BrokerBody
from actors.effects import Receipt
from actors.leader import LeaderBody, Role
from actors.namespace import NamespaceBody
from actors.runtime import InProcessHost, build_cluster, wait_ready
from actors.settings import ActorSettings, namespace_shard
from actors.workload import Workload
from balancer.bundles import BundleId, topic_hash
from balancer.config import LoadBalancerConfig
from balancer.errors import (
    LoadBalancerError,
    NamespaceExists,
    StaleEpoch,
    StateConflict,
    TransferToCurrentOwner,
    UnknownBroker,
    UnknownBundle,
    UnknownNamespace,
    UnknownStrategy,
    UnsplittableBundle,
)
from balancer.ownership import BundleState
from events.catalog import (
    AssignBundle,
    Command,
    CreateNamespace,
    LookupBundle,
    SetFailureDomain,
    SetNamespacePolicy,
    SplitBundle,
    UnloadBundle,
)
from tests.support.cluster_scenarios import (
    NAMESPACES,
    RATE,
    SETTINGS,
    all_owned,
    assert_consistent,
    bundles,
    call,
    first,
    lookup,
    make_host,
    owner,
    place_all,
    shed_events,
    shed_host,
    topic_in,
    types,
)


@pytest.fixture
def host() -> Iterator[InProcessHost]:
    cluster = make_host()
    yield cluster
    assert_consistent(cluster)


# -- lookups ------------------------------------------------------------------------------


def test_lookups_assign_every_bundle_and_spread_each_namespace(host: InProcessHost) -> None:
    for bundle in bundles(host):
        topic = topic_in(host, bundle)
        found = lookup(host, topic)
        assert found == host.view.lookup(topic) == owner(host, bundle)
    assert all_owned(host)
    for namespace in NAMESPACES:
        counts = {b: 0 for b in host.client.brokers}
        for bundle in bundles(host, namespace):
            counts[owner(host, bundle)] += 1
        assert max(counts.values()) - min(counts.values()) <= 1, counts  # even spread (§5.1 step 6)
    assigned = [r.envelope.payload for r in host.events("BundleAssigned")]
    assert {p["reason"] for p in assigned} == {"lookup"} and len(assigned) == 8
    assert len(host.events("BundleOwned")) == 8


def test_lookup_of_an_owned_topic_appends_nothing(host: InProcessHost) -> None:
    topic = topic_in(host, bundles(host)[0])
    first = lookup(host, topic)
    before = len(host.records)
    reply = call(host, LookupBundle, bundle=bundles(host)[0])
    assert isinstance(reply, Receipt) and reply.detail["owner"] == first
    assert lookup(host, topic) == first
    assert all(t == "LoadReported" for t in types(host, before))


# -- unload and transfer --------------------------------------------------------------------


def test_unload_without_destination_frees_then_the_leader_places_again(host: InProcessHost) -> None:
    place_all(host)
    host.advance(SETTINGS.heartbeat_ms)  # the leader learns each bundle's traffic
    bundle = bundles(host)[0]
    src = owner(host, bundle)
    before = len(host.records)
    reply = call(host, UnloadBundle, bundle=bundle)
    assert isinstance(reply, Receipt) and reply.types() == ["UnloadRequested"]
    assert host.run_until(lambda: host.view.state(bundle) is BundleState.OWNED, 5_000)
    moves = [t for t in types(host, before) if t != "LoadReported"]
    assert moves == ["UnloadRequested", "BundleReleased", "BundleAssigned", "BundleOwned"]
    released = host.events("BundleReleased")[-1].envelope.payload
    assert released == {"bundle": bundle, "src": src}


def test_unload_to_a_destination_is_a_transfer(host: InProcessHost) -> None:
    place_all(host)
    bundle = bundles(host)[1]
    src = owner(host, bundle)
    dst = next(b for b in sorted(host.client.brokers) if b != src)
    before = len(host.records)
    call(host, UnloadBundle, bundle=bundle, dst=dst)
    assert host.run_until(lambda: host.view.state(bundle) is BundleState.OWNED, 5_000)
    trail = [(r.envelope.type, r.envelope.payload) for r in host.records[before:]
             if r.envelope.type != "LoadReported"]
    assert [t for t, _ in trail] == ["TransferPrepared", "BundleAssigned", "BundleOwned"]
    assert trail[0][1]["src"] == src and trail[0][1]["dst"] == dst
    assert trail[1][1]["reason"] == "transfer" and trail[1][1]["src"] == src
    assert trail[2][1] == {"bundle": bundle, "owner": dst, "src": src}
    assert owner(host, bundle) == dst


def test_graceful_shutdown_transfers_every_bundle_then_leaves(host: InProcessHost) -> None:
    place_all(host)
    leaving = "broker-2"
    held = [b for b in bundles(host) if owner(host, b) == leaving]
    assert held
    host.shutdown_broker(leaving)
    assert host.run_until(lambda: leaving not in host.client.brokers, 10_000)
    assert all(owner(host, b) != leaving for b in held)
    transfers = [r.envelope.payload for r in host.events("TransferPrepared")]
    assert sorted(p["bundle"] for p in transfers) == sorted(held)
    assert {p["reason"] for p in transfers} == {"shutdown"}
    left = host.events("BrokerLeft")[-1].envelope.payload
    assert left == {"broker_id": leaving, "reason": "graceful"}
    # It was gone before its session could expire.
    assert not [r for r in host.events("BrokerLeft") if r.envelope.payload["reason"] == "expired"]


def test_namespace_shards_each_write_their_own_namespaces() -> None:
    namespaces = tuple(f"public/n{i}" for i in range(6))
    host = make_host(namespaces=namespaces, bundles=2, settings=ActorSettings(namespace_shards=3))
    place_all(host)
    call(host, UnloadBundle, bundle=bundles(host, "public/n4")[0], dst="broker-1")
    assert host.run_until(lambda: owner(host, bundles(host, "public/n4")[0]) == "broker-1", 5_000)
    shard_of = {n: namespace_shard(n, 3) for n in namespaces}
    assert len(set(shard_of.values())) > 1
    for name in (f"ns:{i}" for i in range(3)):
        body = host.body(name)
        assert isinstance(body, NamespaceBody)
        assert sorted(body.written) == sorted(n for n, s in shard_of.items() if s == body.shard)
    assert_consistent(host)


def test_a_redelivered_record_is_folded_once(host: InProcessHost) -> None:
    place_all(host)
    host.advance(0)
    for body in host.bodies.values():
        for record in host.records:
            assert not body.on_event(record, host.now_ms)  # nothing new: no reaction
    assert_consistent(host)


# -- split ----------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", [
    "range_equally_divide", "topic_count_equally_divide", "specified_positions_divide",
    "flow_or_qps_equally_divide",
])
def test_split_with_unload_for_each_algorithm(algorithm: str) -> None:
    config = LoadBalancerConfig.from_mapping({
        "loadBalancerAutoBundleSplitEnabled": False,
        "loadBalancerNamespaceBundleMaxMsgRate": 10,  # flow_or_qps cuts at 10 msg/s
    })
    host = make_host(config, bundles=2)
    place_all(host)
    parent = bundles(host, "public/a")[0]
    src = owner(host, parent)
    hash_range = BundleId.parse(parent).range
    positions = [hash_range.lower + hash_range.width // 3] if algorithm == "specified_positions_divide" else None
    call(host, SplitBundle, namespace="public/a", bundle=hash_range.name, algorithm=algorithm,
         positions=positions, unload=True)
    assert host.run_until(lambda: host.view.state(parent) is BundleState.DELETED, 5_000)
    done = host.events("SplitCompleted")[-1].envelope.payload
    assert done["parent"] == parent and done["owner"] == src and len(done["children"]) >= 2
    if positions:
        assert done["boundaries"] == positions
    assert done["children"] == bundles(host, "public/a")[: len(done["children"])]
    unloaded = [r.envelope.payload["bundle"] for r in host.events("UnloadRequested")]
    assert unloaded == done["children"]
    # Unloaded children are Free until looked up again (their topics' clients reconnect).
    assert host.run_until(host.settled, 5_000)
    released = [r.envelope.payload["bundle"] for r in host.events("BundleReleased")]
    assert released == done["children"]
    place_all(host)
    assert_consistent(host)


def test_split_largest_and_hot_pick_from_the_reports(host: InProcessHost) -> None:
    place_all(host)
    host.advance(SETTINGS.heartbeat_ms)
    workload = next(b for b in host.bodies.values() if isinstance(b, BrokerBody)).workload
    for namespace, pick in (("public/a", "HOT"), ("public/b", "LARGEST")):
        stats = {b: workload.bundle_stats(b) for b in bundles(host, namespace)}
        score = {b: s.msg_throughput if pick == "HOT" else s.topics for b, s in stats.items()}
        expected = min(score, key=lambda b: (-score[b], b))
        reply = call(host, SplitBundle, namespace=namespace, bundle=pick, algorithm="range_equally_divide")
        assert first(reply, "SplitRequested")["bundle"] == expected
        assert host.run_until(lambda b=expected: host.view.state(b) is BundleState.DELETED, 5_000)  # type: ignore[misc]


def test_auto_split_of_a_hot_bundle_unloads_the_children() -> None:
    config = LoadBalancerConfig.from_mapping({"loadBalancerNamespaceBundleMaxMsgRate": 2_000,
                                              "loadBalancerSheddingEnabled": False})
    host = make_host(config, clients=True, rate=8_000.0)
    assert host.run_until(lambda: bool(host.events("SplitCompleted")), 180_000)
    request = host.events("SplitRequested")[0].envelope.payload
    assert request["reason"] == "MsgRate" and request["unload_children"] is True
    # The leader's own split names no principal: only an admin command does.
    assert request["by"] is None and host.events("SplitCompleted")[0].envelope.payload["by"] is None
    assert host.run_until(lambda: all_owned(host) and host.settled(), 60_000)
    assert_consistent(host)


# -- placement with anti-affinity ----------------------------------------------------------------


def test_anti_affinity_across_two_failure_domains() -> None:
    """Behaviour §5.3's example: D1 = {B1, B2}, D2 = {B3, B4}, four namespaces of one group."""
    config = LoadBalancerConfig.from_mapping({"failureDomainsEnabled": True,
                                              "loadBalancerAutoBundleSplitEnabled": False})
    brokers = ["b1", "b2", "b3", "b4"]
    group = [f"public/ns{i}" for i in range(1, 5)]
    host = make_host(config, brokers=brokers, namespaces=tuple(group), bundles=1)
    call(host, SetFailureDomain, domain="d1", brokers=["b1", "b2"])
    call(host, SetFailureDomain, domain="d2", brokers=["b3", "b4"])
    for namespace in group:
        call(host, SetNamespacePolicy, namespace=namespace, anti_affinity_group="G1")
    placed: list[str] = []
    for namespace in group:
        (bundle,) = bundles(host, namespace)
        host.call(LookupBundle(command_id=host.command_id(), epoch=host.epoch, bundle=bundle))
        assert host.run_until(lambda b=bundle: host.view.state(b) is BundleState.OWNED, 5_000)  # type: ignore[misc]
        placed.append(owner(host, bundle))
    domain = {"b1": "d1", "b2": "d1", "b3": "d2", "b4": "d2"}
    assert domain[placed[0]] != domain[placed[1]]  # ns2 goes to the other domain
    assert domain[placed[2]] == domain[placed[0]]  # ns3 back to the first, on its other broker
    assert sorted(placed) == brokers  # ns4 takes the last free broker
    assert_consistent(host)


# -- broker loss -------------------------------------------------------------------------------


def test_crashed_broker_bundles_are_owned_elsewhere_after_expiry(host: InProcessHost) -> None:
    place_all(host)
    lost = "broker-3"
    held = [b for b in bundles(host) if owner(host, b) == lost]
    assert held
    crashed_at = host.now_ms
    host.crash(f"broker:{lost}")
    assert host.run_until(
        lambda: all_owned(host) and all(owner(host, b) != lost for b in held),
        SETTINGS.session_timeout_ms + 2_000)
    assert host.now_ms - crashed_at <= SETTINGS.session_timeout_ms + 2_000
    left = [r.envelope for r in host.events("BrokerLeft")]
    assert [(e.payload["broker_id"], e.payload["reason"], e.key) for e in left] == [(lost, "expired", lost)]
    forced = [r.envelope.payload for r in host.events("BundleAssigned") if r.envelope.payload["force"]]
    assert sorted(p["bundle"] for p in forced) == sorted(held)
    assert all(p["reason"] == "orphan" and p["src"] == lost for p in forced)
    # Restarted, it reads its expiry from the log and registers again.
    host.restart(f"broker:{lost}")
    assert host.run_until(lambda: lost in host.client.brokers, 5_000)


# -- the leader --------------------------------------------------------------------------------


def test_leader_crash_elects_a_higher_epoch_and_no_decision_runs_twice() -> None:
    host = shed_host()
    assert host.run_until(lambda: bool(shed_events(host)), 120_000)
    old = host.leader()
    assert isinstance(old, LeaderBody) and old.my_epoch == 1
    memory = dict(old.shedding.memory.recently_unloaded)
    host.crash("leader")
    host.advance(5_000)
    new = host.restart("leader")
    assert isinstance(new, LeaderBody)
    assert new.shedding.memory.recently_unloaded == memory  # rebuilt from the decision events
    assert host.run_until(lambda: new.leads, 5_000) and new.my_epoch == 2
    host.advance(6 * 60_000)
    epochs = [r.envelope.payload["epoch"] for r in host.events("LeaderElected")]
    assert epochs == [1, 2]
    shed = shed_events(host)
    assert {epoch for _, _, epoch in shed} == {1, 2}  # both leaders shed
    grace = host.config.grace_period_ms
    seen: dict[str, int] = {}
    for ts, bundle, _ in shed:
        assert bundle not in seen or ts - seen[bundle] > grace, f"{bundle} shed twice"
        seen[bundle] = ts
    for record in host.events("TransferPrepared"):
        decision = record.envelope.payload["decision"]
        assert decision["destination"] == record.envelope.payload["dst"] and decision["inputs"]
    # The deposed leader's epoch is refused everywhere.
    with pytest.raises(StaleEpoch):
        host.call(UnloadBundle(command_id="zombie-1", epoch=1, bundle=bundles(host)[0]))
    assert host.records[-1].envelope.type == "CommandRejected"
    assert_consistent(host)


def test_election_is_a_compare_and_set_and_the_loser_follows() -> None:
    config = LoadBalancerConfig()
    host = build_cluster(1, config=config, settings=SETTINGS)
    second = host.add(lambda: LeaderBody(config, rng=host.rng_for("leader-b"), settings=SETTINGS,
                                         leader_id="leader-b", name="leader-b"))
    assert wait_ready(host, 1)
    host.advance(5_000)
    elected = [r.envelope.payload for r in host.events("LeaderElected")]
    assert elected == [{"leader_id": "leader", "epoch": 1}]
    assert isinstance(second, LeaderBody) and second.role is Role.FOLLOWER
    assert any(isinstance(exc, StateConflict) for name, _, exc in host.failed_appends if name == "leader-b")
    assert host.leader() is host.body("leader")
    assert_consistent(host)


def test_extensible_manager_transfers_and_splits_with_hit_counts() -> None:
    config = LoadBalancerConfig.from_mapping({
        "loadManagerClassName": "ExtensibleLoadManagerImpl",
        "loadBalancerLoadSheddingStrategy": "TransferShedder",
        "loadBalancerNamespaceBundleMaxMsgRate": 20_000,
    })
    host = make_host(config, rate=RATE, clients=True)
    for bundle in bundles(host):
        call(host, AssignBundle, bundle=bundle, dst="broker-1", reason="admin")
    host.advance(15 * 60_000)
    moved = [r.envelope.payload for r in host.events("TransferPrepared")]
    assert moved and {p["decision"]["strategy"] for p in moved} == {"TransferShedder"}
    assert all(p["src"] == "broker-1" and p["dst"] == p["decision"]["destination"] for p in moved)
    splits = [r.envelope for r in host.events("SplitRequested")]
    # E waits for the 4th consecutive hit: no split before four split intervals.
    assert splits and min(e.ts_ms for e in splits) - host.records[0].envelope.ts_ms >= 4 * 60_000
    assert {e.payload["reason"] for e in splits} == {"MsgRate"}
    assert not host.events("CommandRejected")
    assert_consistent(host)


# -- bad input --------------------------------------------------------------------------------


def _unsplittable_host() -> InProcessHost:
    host = make_host()
    call(host, CreateNamespace, namespace="public/tiny", boundaries=[0, 1, 0xFFFFFFFF])
    place_all(host)
    return host


def _first(host: InProcessHost) -> str:
    return bundles(host, "public/a")[0]


Build = Callable[[InProcessHost, str, int], Command]
BAD_INPUT: dict[str, tuple[type[LoadBalancerError], Build]] = {
    "unknown_namespace": (UnknownNamespace, lambda h, c, e: UnloadBundle(
        command_id=c, epoch=e, bundle="public/nope/0x00000000_0xffffffff")),
    "unknown_bundle": (UnknownBundle, lambda h, c, e: UnloadBundle(
        command_id=c, epoch=e, bundle="public/a/0x00000000_0x20000000")),
    "unknown_broker": (UnknownBroker, lambda h, c, e: UnloadBundle(
        command_id=c, epoch=e, bundle=_first(h), dst="broker-9")),
    "unsplittable": (UnsplittableBundle, lambda h, c, e: SplitBundle(
        command_id=c, epoch=e, namespace="public/tiny", bundle="0x00000000_0x00000001",
        algorithm="range_equally_divide")),
    "transfer_to_owner": (TransferToCurrentOwner, lambda h, c, e: UnloadBundle(
        command_id=c, epoch=e, bundle=_first(h), dst=owner(h, _first(h)))),
    "namespace_exists": (NamespaceExists, lambda h, c, e: CreateNamespace(
        command_id=c, epoch=e, namespace="public/a", bundles=2)),
    "unknown_algorithm": (UnknownStrategy, lambda h, c, e: SplitBundle(
        command_id=c, epoch=e, namespace="public/a", bundle="LARGEST", algorithm="halve_it")),
    "unknown_domain_broker": (UnknownBroker, lambda h, c, e: SetFailureDomain(
        command_id=c, epoch=e, domain="d1", brokers=["broker-1", "nope"])),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_is_a_typed_error_and_only_a_command_rejected(case: str) -> None:
    host = _unsplittable_host()
    error, build = BAD_INPUT[case]
    command = build(host, host.command_id(), host.epoch)
    snapshot = host.view.snapshot()
    before = len(host.records)
    with pytest.raises(error):
        host.call(command)
    added = [r for r in host.records[before:] if r.envelope.type != "LoadReported"]
    assert [r.envelope.type for r in added] == ["CommandRejected"]
    rejected = added[0].envelope.payload
    assert rejected["command_id"] == command.command_id and rejected["error"]["code"] == error.code
    assert rejected["key"] == command.default_key()
    snapshot["tracker"] = host.view.snapshot()["tracker"]  # only the seq bookkeeping moved
    assert host.view.snapshot() == snapshot
    # A repeat returns the first answer and appends nothing.
    after = len(host.records)
    with pytest.raises(error):
        host.call(command)
    assert [r.envelope.type for r in host.records[after:] if r.envelope.type != "LoadReported"] == []
    assert_consistent(host)


def test_lookup_of_an_unknown_namespace_fails_without_an_event(host: InProcessHost) -> None:
    before = len(host.records)
    with pytest.raises(UnknownNamespace):
        lookup(host, "persistent://public/nope/t1")
    assert len(host.records) == before


def test_a_repeated_command_returns_its_first_receipt(host: InProcessHost) -> None:
    place_all(host)
    bundle = bundles(host)[0]
    dst = next(b for b in sorted(host.client.brokers) if b != owner(host, bundle))
    command = UnloadBundle(command_id="admin-42", epoch=host.epoch, bundle=bundle, dst=dst)
    first = host.call(command)
    host.run_until(lambda: owner(host, bundle) == dst if host.view.state(bundle) is BundleState.OWNED
                   else False, 5_000)
    before = len(host.records)
    again = host.call(command)
    assert isinstance(first, Receipt) and isinstance(again, Receipt)
    assert again.duplicate and again.events == first.events
    assert [t for t in types(host, before) if t != "LoadReported"] == []


# -- determinism ------------------------------------------------------------------------------


def _trail() -> list[tuple[str, str, int, int, str]]:
    host = shed_host()
    host.advance(3 * 60_000)
    return [(e.type, e.key, e.seq, e.ts_ms, repr(sorted(e.payload.items())))
            for e in (r.envelope for r in host.records)]


def test_a_seed_fixes_the_whole_log() -> None:
    assert _trail() == _trail()


def test_workload_bundle_stats_add_up_across_a_split() -> None:
    workload = Workload.zipf(Random(3), ["t/n"], topics_per_namespace=200)
    whole = workload.bundle_stats("t/n/0x00000000_0xffffffff")
    halves = [workload.bundle_stats(b) for b in ("t/n/0x00000000_0x7fffffff", "t/n/0x7fffffff_0xffffffff")]
    assert sum(h.topics for h in halves) == whole.topics == 200
    assert sum(h.msg_rate for h in halves) == pytest.approx(whole.msg_rate)
    assert all(topic_hash(t.name) == t.hash for t in workload.topics())
