"""An index is an optimisation, never a new rule.

The live leader places from a view whose bundles come from an index kept per event
(``balancer.placement.index``, ``projections.views.sync_placing``) and from preallocations kept
per broker. Over random histories (assignments, transfers, releases, splits, load reports with
arbitrary float rates, brokers registering and leaving) and random placements in between, the
indexed pipeline answers exactly what the plain one, which walks every bundle, answers:
the same broker, candidates, scores (bit for bit), trail and preallocations.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.leader import LeaderBody
from balancer.config import LoadBalancerConfig
from balancer.exact_sum import exact_sum
from balancer.placement.extensible import ExtensiblePlacement
from balancer.placement.modular import ModularPlacement
from events.envelope import Envelope
from events.log.port import Record
from projections.views import cluster_view
from tests.support.histories import BROKERS, HistoryBuilder

STRATEGIES = ("LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "RoundRobin")


def _report(builder: HistoryBuilder, broker: str) -> None:
    rng = builder.rng
    bundles = []
    for namespace, layout in sorted(builder.layouts.items()):
        for hash_range in layout:
            if rng.random() < 0.4:
                rate = rng.choice((0.0, 50.0, rng.uniform(0, 5000), rng.random() / 3))
                bundles.append({"bundle": f"{namespace}/{hash_range.name}", "msg_rate_in": rate,
                                "msg_rate_out": rng.uniform(0, 900), "msg_throughput_in": rate * 1024,
                                "msg_throughput_out": 0.0, "topics": rng.randint(0, 40)})
    load = {"cpu": {"usage": rng.uniform(0, 100), "limit": 100.0},
            "memory": {"usage": rng.uniform(0, 100), "limit": 100.0},
            "msg_rate_in": sum(b["msg_rate_in"] for b in bundles), "topics": rng.randint(0, 90),
            "bundles": len(bundles)}
    builder.emit(broker, "LoadReported", broker_id=broker, broker_load=load, bundles=bundles)


def _membership(builder: HistoryBuilder, broker: str) -> None:
    if builder.rng.random() < 0.7:
        builder.emit(broker, "BrokerRegistered", broker_id=broker, url=f"pulsar://{broker}:6650",
                     failure_domain=None, version="3.3.0", capacity={})
    else:
        builder.emit(broker, "BrokerLeft", broker_id=broker, reason="expired")


def _config(strategy: str, even: bool, cap: int) -> LoadBalancerConfig:
    return LoadBalancerConfig.from_mapping({
        "loadBalancerLoadPlacementStrategy": strategy,
        "loadBalancerDistributeBundlesEvenlyEnabled": even,
        "loadBalancerBrokerMaxTopics": cap,
    })


def _fold(leader: LeaderBody, envelopes: list[Envelope], start: int) -> int:
    for offset in range(start, len(envelopes)):
        leader.fold(Record(0, offset, envelopes[offset]))
    return len(envelopes)


def _place(leader: LeaderBody, placement: ModularPlacement, bundle: str, rng: random.Random,
           indexed: bool, exclude: tuple[str, ...]) -> dict[str, Any]:
    view = cluster_view(0, leader.config, ownership=leader.ownership, load=leader.load,
                        registry=leader.brokers, exclude=exclude, placing=True,
                        index=leader.placing if indexed else None)
    if not view.available:
        return {"none": True}
    return placement.place(view, bundle, rng).to_dict()


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(1, 120),
       strategy=st.sampled_from(STRATEGIES), even=st.booleans(), cap=st.sampled_from([30, 50000]))
def test_indexed_placement_equals_the_plain_walk(seed: int, steps: int, strategy: str, even: bool,
                                                 cap: int) -> None:
    config = _config(strategy, even, cap)
    builder = HistoryBuilder(seed)
    leader = LeaderBody(config, rng=random.Random(0))
    plain, indexed = ModularPlacement(config), ModularPlacement(config)
    rng_plain, rng_indexed = random.Random(seed), random.Random(seed)
    folded = 0
    for broker in BROKERS:
        _membership(builder, broker)
    for _ in range(steps):
        roll = builder.rng.random()
        if roll < 0.5:
            builder.step()
        elif roll < 0.65:
            _report(builder, builder.rng.choice(BROKERS))
        elif roll < 0.7:
            _membership(builder, builder.rng.choice(BROKERS))
        folded = _fold(leader, builder.envelopes, folded)
        if roll >= 0.7 or builder.rng.random() < 0.3:
            namespace = builder.rng.choice(sorted(builder.layouts))
            bundle = f"{namespace}/{builder.rng.choice(list(builder.layouts[namespace])).name}"
            exclude = (builder.rng.choice(BROKERS),) if builder.rng.random() < 0.2 else ()
            expected = _place(leader, plain, bundle, rng_plain, False, exclude)
            got = _place(leader, indexed, bundle, rng_indexed, True, exclude)
            assert got == expected
            assert indexed.preallocated == plain.preallocated


def test_the_index_holds_what_the_plain_view_holds() -> None:
    builder = HistoryBuilder(7)
    for broker in BROKERS:
        _membership(builder, broker)
    for _ in range(400):
        builder.step() if builder.rng.random() < 0.8 else _report(builder, builder.rng.choice(BROKERS))
    leader = LeaderBody(_config("LeastLongTermMessageRate", True, 50000), rng=random.Random(0))
    _fold(leader, builder.envelopes, 0)
    kwargs: dict[str, Any] = dict(ownership=leader.ownership, load=leader.load, registry=leader.brokers,
                                  placing=True)
    plain = cluster_view(0, leader.config, **kwargs)
    indexed = cluster_view(0, leader.config, index=leader.placing, **kwargs)
    assert set(plain.bundles) == set(indexed.bundles)
    for bundle, data in plain.bundles.items():
        other = indexed.bundles[bundle]
        assert (other.owner, other.stats, other.long_term.msg_rate) == (data.owner, data.stats,
                                                                         data.long_term.msg_rate)
    for broker in BROKERS:
        assert [(d.bundle, d.owner, d.stats) for d in indexed.bundles_of(broker)] == [
            (d.bundle, d.owner, d.stats) for d in plain.bundles_of(broker)]
        assert leader.placing.long_term_rate(broker) == exact_sum(
            d.long_term.msg_rate for d in plain.bundles_of(broker))


def test_a_recovered_leader_builds_the_index_a_live_one_kept() -> None:
    builder = HistoryBuilder(11)
    for broker in BROKERS:
        _membership(builder, broker)
    for _ in range(500):
        builder.step() if builder.rng.random() < 0.8 else _report(builder, builder.rng.choice(BROKERS))
    config = _config("LeastLongTermMessageRate", True, 50000)
    live, recovered = LeaderBody(config, rng=random.Random(0)), LeaderBody(config, rng=random.Random(0))
    _fold(live, builder.envelopes, 0)
    recovered.recover(Record(0, offset, e) for offset, e in enumerate(builder.envelopes))
    assert live.placing.bundles.keys() == recovered.placing.bundles.keys()
    for bundle, data in live.placing.bundles.items():
        other = recovered.placing.bundles[bundle]
        assert (other.owner, other.stats, other.long_term.msg_rate) == (data.owner, data.stats,
                                                                         data.long_term.msg_rate)
    for broker in BROKERS:
        assert live.placing.long_term_rate(broker) == recovered.placing.long_term_rate(broker)
        assert live.placing.namespace_bundles(broker) == recovered.placing.namespace_bundles(broker)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(1, 120))
def test_indexed_extensible_placement_equals_the_plain_walk(seed: int, steps: int) -> None:
    config = LoadBalancerConfig.from_mapping({"loadManagerClassName": "ExtensibleLoadManagerImpl"})
    builder = HistoryBuilder(seed)
    leader = LeaderBody(config, rng=random.Random(0))
    placement = ExtensiblePlacement(config)
    folded = 0
    for broker in BROKERS:
        _membership(builder, broker)
    for _ in range(steps):
        builder.step() if builder.rng.random() < 0.7 else _report(builder, builder.rng.choice(BROKERS))
        folded = _fold(leader, builder.envelopes, folded)
        namespace = builder.rng.choice(sorted(builder.layouts))
        bundle = f"{namespace}/{builder.rng.choice(list(builder.layouts[namespace])).name}"
        views = [cluster_view(0, config, ownership=leader.ownership, load=leader.load, registry=leader.brokers,
                              placing=True, index=index) for index in (None, leader.placing)]
        if not views[0].available:
            continue
        plain, indexed = (placement.place(view, bundle, random.Random(seed)).to_dict() for view in views)
        assert indexed == plain


def test_a_bundle_put_again_is_listed_with_its_new_data_and_rate() -> None:
    from balancer.load import BundleData, BundleStats
    from balancer.placement.base import default_bundle_data
    from balancer.placement.index import BundleIndex

    index = BundleIndex()
    bundle = "public/default/0x00000000_0x80000000"
    first = default_bundle_data(bundle)
    index.put(bundle, BundleData(bundle, "b1", first.stats, first.short_term, first.long_term))
    assert [d.stats for d in index.bundles_of("b1")] == [first.stats]
    busier = BundleStats(bundle, msg_rate_in=40.0, msg_rate_out=2.0)
    again = BundleData(bundle, "b1", busier, first.short_term, first.long_term)
    again.add_sample(busier)
    index.put(bundle, again)
    assert index.bundles_of("b1") == (again,)
    assert index.long_term_rate("b1") == again.long_term.msg_rate
