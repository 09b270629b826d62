"""The modular shedding strategies as a user sees them (behaviour §4.0-§4.3, §4.5, §4.6).

Each test is one example of the behaviour spec: which bundle moves, from where, and why; when
nothing moves, the skip reason (Balanced, NoBundles, HitCount); the grace period.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from balancer.config import LoadBalancerConfig
from balancer.decisions import Reason, ShedResult
from balancer.load import MIB, BrokerReport, BundleStats, LoadModel, ResourceUsage
from balancer.shedding.avg import AvgShedder
from balancer.shedding.base import ClusterView
from balancer.shedding.run import SheddingRun
from balancer.shedding.threshold import ThresholdShedder

T0 = 1_700_000_000_000
MINUTE = 60_000


def bundle_id(namespace: str, index: int) -> str:
    """The index-th bundle (0-based) of a 16-bundle layout of ``namespace``."""
    low = index << 28
    high = (index + 1) << 28 if index < 15 else 0xFFFFFFFF
    return f"{namespace}/0x{low:08x}_0x{high:08x}"


def report(
    name: str, cpu: float = 0.0, tput: float = 0.0, rate: float = 0.0, bw: float = 0.0
) -> BrokerReport:
    """A broker at ``cpu`` % CPU and ``bw`` % bandwidth, with in+out totals split evenly."""
    return BrokerReport(
        name,
        cpu=ResourceUsage(cpu, 100.0),
        memory=ResourceUsage(0.0, 100.0),
        direct_memory=ResourceUsage(0.0, 100.0),
        bandwidth_in=ResourceUsage(bw, 100.0),
        bandwidth_out=ResourceUsage(bw, 100.0),
        msg_rate_in=rate / 2,
        msg_rate_out=rate / 2,
        msg_throughput_in=tput / 2,
        msg_throughput_out=tput / 2,
    )


def stats(bundle: str, tput: float = 0.0, rate: float = 0.0) -> BundleStats:
    return BundleStats(
        bundle,
        msg_rate_in=rate / 2,
        msg_rate_out=rate / 2,
        msg_throughput_in=tput / 2,
        msg_throughput_out=tput / 2,
        topics=1,
    )


@dataclass
class Cluster:
    """One report round: broker reports and bundles (owner, stats)."""

    brokers: dict[str, BrokerReport] = field(default_factory=dict)
    bundles: dict[str, tuple[str | None, BundleStats]] = field(default_factory=dict)

    def broker(self, name: str, **kwargs: float) -> Cluster:
        self.brokers[name] = report(name, **kwargs)
        return self

    def own(self, owner: str | None, bundle: str, tput: float = 0.0, rate: float = 0.0) -> Cluster:
        self.bundles[bundle] = (owner, stats(bundle, tput, rate))
        return self


class Harness:
    """Drives one strategy through report rounds exactly as ``lbctl decide shed`` does."""

    def __init__(self, strategy: str, **config: Any) -> None:
        self.config = LoadBalancerConfig.from_mapping(
            {"loadBalancerLoadSheddingStrategy": strategy, **config}
        )
        self.model = LoadModel(self.config)
        self.shedding = SheddingRun(self.config)
        self.now_ms = T0

    @property
    def strategy(self) -> Any:
        return self.shedding.strategy

    def cycle(
        self, cluster: Cluster, recently_unloaded: Mapping[str, int] | None = None
    ) -> ShedResult:
        self.model.apply_round(self.now_ms, cluster.brokers, cluster.bundles)
        view = ClusterView(
            now_ms=self.now_ms,
            config=self.config,
            brokers=dict(self.model.brokers),
            bundles=dict(self.model.bundles),
            recently_unloaded=dict(recently_unloaded or {}),
        )
        result = self.shedding.run(view)
        self.now_ms += MINUTE
        return result


def moved(result: ShedResult) -> list[tuple[str, str | None, str | None]]:
    return [(d.bundle, d.source, d.destination) for d in result.decisions]


# -- §4.0 the run ------------------------------------------------------------------------


def test_one_broker_is_never_shed() -> None:
    cluster = Cluster().broker("a", cpu=99, tput=100 * MIB)
    cluster.own("a", bundle_id("t/a", 0), 60 * MIB).own("a", bundle_id("t/a", 1), 40 * MIB)
    result = Harness("OverloadShedder").cycle(cluster)
    assert result.decisions == ()
    assert result.skip == Reason.NO_BROKERS


def test_pulsar_class_names_select_the_same_strategy() -> None:
    harness = Harness("org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder")
    assert isinstance(harness.strategy, ThresholdShedder)


# -- §4.1 ThresholdShedder ---------------------------------------------------------------


def docs_cluster() -> Cluster:
    """Usages 40/10/10 %; broker1 carries 100 MiB/s over bundles of 40/30/20/10 MiB/s."""
    cluster = Cluster().broker("broker1", cpu=40, tput=100 * MIB)
    cluster.broker("broker2", cpu=10, tput=20 * MIB).broker("broker3", cpu=10, tput=20 * MIB)
    for index, size in enumerate((40, 30, 20, 10)):
        cluster.own("broker1", bundle_id("t/docs", index), size * MIB)
    for broker in ("broker2", "broker3"):
        for index in range(2):
            cluster.own(broker, bundle_id(f"t/{broker}", index), 10 * MIB)
    return cluster


def test_threshold_docs_example_only_the_busy_broker_sheds_15_percent() -> None:
    result = Harness("ThresholdShedder").cycle(docs_cluster())
    assert moved(result) == [(bundle_id("t/docs", 0), "broker1", None)]
    decision = result.decisions[0]
    assert decision.reason == Reason.OVERLOADED
    assert decision.strategy == "ThresholdShedder"
    assert decision.inputs["average"] == pytest.approx(0.2)
    assert decision.inputs["threshold"] == pytest.approx(0.1)
    assert decision.inputs["offload_fraction"] == pytest.approx(0.15)
    assert decision.inputs["need"] == pytest.approx(15 * MIB)
    assert decision.inputs["selected_throughput"] == pytest.approx(40 * MIB)


def test_threshold_ema_carries_history_so_the_broker_sheds_again() -> None:
    harness = Harness("ThresholdShedder")
    first = Cluster().broker("a", cpu=90, tput=100 * MIB).broker("b", cpu=10, tput=10 * MIB)
    for index in range(4):
        first.own("a", bundle_id("t/a", index), 25 * MIB)
    assert len(harness.cycle(first).decisions) >= 1
    second = Cluster(bundles=dict(first.bundles))
    second.broker("a", cpu=50, tput=100 * MIB).broker("b", cpu=50, tput=10 * MIB)
    result = harness.cycle(second)
    assert harness.strategy.emas == pytest.approx({"a": 0.86, "b": 0.14})
    assert result.decisions
    assert {d.source for d in result.decisions} == {"a"}


def test_threshold_usage_above_100_percent_counts_as_it_is() -> None:
    # Pulsar PR #18645 (issue #18598) removed the within-limit fallback of PR #16937.
    cluster = Cluster().broker("a", cpu=1000, bw=99.9, tput=110 * MIB).broker("b")
    for index in range(10):
        cluster.own("a", bundle_id("t/a", index), (index + 1) * 2 * MIB)
    harness = Harness("ThresholdShedder")
    result = harness.cycle(cluster)
    assert harness.strategy.emas["a"] == pytest.approx(10.0, abs=1e-6)
    # need = (10 - 5 - 0.1 + 0.05) x 110 MiB/s, more than the broker has: all ten bundles go.
    assert sorted(d.bundle for d in result.decisions) == [bundle_id("t/a", i) for i in range(10)]


def test_threshold_need_below_the_minimum_throughput_is_balanced() -> None:
    cluster = Cluster().broker("a", cpu=40, tput=10 * MIB).broker("b", cpu=10).broker("c", cpu=10)
    cluster.own("a", bundle_id("t/a", 0), 5 * MIB).own("a", bundle_id("t/a", 1), 5 * MIB)
    result = Harness("ThresholdShedder").cycle(cluster)
    assert result.skip == Reason.BALANCED


def test_threshold_sole_bundle_stays_and_reports_no_bundles() -> None:
    cluster = Cluster().broker("a", cpu=40, tput=100 * MIB).broker("b", cpu=10).broker("c", cpu=10)
    cluster.own("a", bundle_id("t/a", 0), 100 * MIB)
    result = Harness("ThresholdShedder").cycle(cluster)
    assert result.decisions == ()
    assert result.skip == Reason.NO_BUNDLES


def test_threshold_idle_cluster_is_balanced() -> None:
    cluster = Cluster().broker("a").broker("b")
    cluster.own("a", bundle_id("t/a", 0)).own("a", bundle_id("t/a", 1))
    assert Harness("ThresholdShedder").cycle(cluster).skip == Reason.BALANCED


def lower_boundary_cluster(usage: float) -> Cluster:
    """Ten brokers at ``usage`` % with ten 20 MiB/s bundles each, one idle broker."""
    cluster = Cluster()
    for b in range(10):
        cluster.broker(f"broker-{b}", bw=usage, tput=200 * MIB)
        for index in range(10):
            cluster.own(f"broker-{b}", bundle_id(f"t/ns-{b}", index), 20 * MIB)
    return cluster.broker("broker-10")


def test_threshold_ten_busy_one_idle_is_balanced_without_lower_boundary() -> None:
    result = Harness("ThresholdShedder").cycle(lower_boundary_cluster(80))
    assert result.skip == Reason.BALANCED


def test_threshold_lower_boundary_unloads_towards_the_idle_broker() -> None:
    harness = Harness("ThresholdShedder", lowerBoundarySheddingEnabled=True)
    result = harness.cycle(lower_boundary_cluster(80))
    assert moved(result) == [(bundle_id("t/ns-0", 0), "broker-0", None)]
    decision = result.decisions[0]
    assert decision.reason == Reason.UNDERLOADED
    assert decision.inputs["need"] == pytest.approx(10 * MIB)


@pytest.mark.parametrize(("enabled", "expected"), [(False, 0.79), (True, 0.781)])
def test_threshold_lower_boundary_feeds_every_ema_twice(enabled: bool, expected: float) -> None:
    harness = Harness("ThresholdShedder", lowerBoundarySheddingEnabled=enabled)
    harness.cycle(lower_boundary_cluster(80))
    harness.cycle(lower_boundary_cluster(70))
    assert harness.strategy.emas["broker-0"] == pytest.approx(expected)


def test_threshold_forgets_the_ema_of_a_broker_that_left() -> None:
    harness = Harness("ThresholdShedder")
    harness.cycle(docs_cluster())
    cluster = docs_cluster()
    del cluster.brokers["broker3"]
    harness.cycle(cluster)
    assert set(harness.strategy.emas) == {"broker1", "broker2"}


# -- §4.2 OverloadShedder ----------------------------------------------------------------


def overloaded_cluster(cpu: float) -> Cluster:
    """Broker a at ``cpu`` % with bundles of 2, 4, ..., 20 MiB/s (110 MiB/s); b idle."""
    cluster = Cluster().broker("a", cpu=cpu, tput=110 * MIB).broker("b", cpu=10)
    for index in range(10):
        cluster.own("a", bundle_id("t/a", index), (index + 1) * 2 * MIB)
    cluster.own("b", bundle_id("t/b", 0), MIB)
    return cluster


def test_overload_docs_example_sheds_the_two_largest_bundles() -> None:
    result = Harness("OverloadShedder").cycle(overloaded_cluster(99.9))
    assert moved(result) == [(bundle_id("t/a", 9), "a", None), (bundle_id("t/a", 8), "a", None)]
    assert result.decisions[0].inputs["need"] == pytest.approx(0.199 * 110 * MIB, rel=1e-6)
    assert all(d.strategy == "OverloadShedder" for d in result.decisions)


def test_overload_below_threshold_is_balanced() -> None:
    assert Harness("OverloadShedder").cycle(overloaded_cluster(84.9)).skip == Reason.BALANCED


def test_overload_with_every_bundle_in_grace_period_reports_no_bundles() -> None:
    recent = {bundle_id("t/a", i): T0 - MINUTE for i in range(10)}
    result = Harness("OverloadShedder").cycle(overloaded_cluster(95), recent)
    assert result.skip == Reason.NO_BUNDLES


# -- §4.3 UniformLoadShedder -------------------------------------------------------------


def uniform_rate_cluster() -> Cluster:
    cluster = Cluster()
    rates = {"broker0": 50_000, "broker1": 60_000, "broker2": 70_000, "broker3": 10_000}
    for name, rate in {**rates, "broker4": 20_000}.items():
        cluster.broker(name, rate=rate, tput=10 * MIB)
        for index in range(5):
            cluster.own(name, bundle_id(f"t/{name}", index), 2 * MIB, rate / 5)
    return cluster


UNIFORM_RATE_ONLY = {
    "maxUnloadPercentage": 0.5,
    "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": 0,
}


def test_uniform_rate_rule_sheds_from_the_busiest_broker_up_to_the_cap() -> None:
    harness = Harness("UniformLoadShedder", maxUnloadBundleNumPerShedding=1, **UNIFORM_RATE_ONLY)
    result = harness.cycle(uniform_rate_cluster())
    assert moved(result) == [(bundle_id("t/broker2", 0), "broker2", None)]
    assert result.decisions[0].inputs["required"] == 30_000


def test_uniform_without_cap_moves_what_fits_the_required_rate() -> None:
    result = Harness("UniformLoadShedder", **UNIFORM_RATE_ONLY).cycle(uniform_rate_cluster())
    # 30000 -> 16000 -> 2000 msg/s left: two 14000 msg/s bundles.
    assert [d.bundle for d in result.decisions] == [bundle_id("t/broker2", i) for i in (0, 1)]


def test_uniform_required_throughput_is_truncated_to_an_int() -> None:
    cluster = Cluster().broker("broker-1", tput=110 * MIB).broker("broker2")
    for index in range(10):
        cluster.own("broker-1", bundle_id("t/b1", index), (index + 1) * 2 * MIB)
    result = Harness("UniformLoadShedder").cycle(cluster)
    # int((115343360 - 1) x 0.2) = 23068671: 20 MiB fits, the 2 MiB bundle misses by one byte,
    # but Pulsar 4.0 compares with the remainder + 1000 (its "delta"): it goes too.
    assert [d.bundle for d in result.decisions] == [bundle_id("t/b1", 9), bundle_id("t/b1", 0)]
    assert result.decisions[0].inputs["required"] == 23068671


def test_uniform_small_spread_is_balanced() -> None:
    cluster = Cluster().broker("a", rate=1600, tput=MIB).broker("b", rate=1000, tput=MIB)
    cluster.own("a", bundle_id("t/a", 0), rate=800).own("a", bundle_id("t/a", 1), rate=800)
    # 60 % > 50 %, but int(600 x 0.2) = 120 msg/s < minUnloadMessage.
    assert Harness("UniformLoadShedder").cycle(cluster).skip == Reason.BALANCED


def test_uniform_selects_zero_traffic_bundles() -> None:
    cluster = Cluster().broker("a", rate=20_000).broker("b", rate=1_000)
    for index in range(3):
        cluster.own("a", bundle_id("t/a", index))
    result = Harness("UniformLoadShedder").cycle(cluster)
    assert len(result.decisions) == 3


def test_uniform_sole_bundle_reports_no_bundles() -> None:
    cluster = Cluster().broker("a", rate=20_000).broker("b", rate=1_000)
    cluster.own("a", bundle_id("t/a", 0), rate=20_000)
    assert Harness("UniformLoadShedder").cycle(cluster).skip == Reason.NO_BUNDLES


# -- §4.5 AvgShedder ---------------------------------------------------------------------

AVG_DOCS = {
    "maxUnloadPercentage": 0.5,
    "loadBalancerAvgShedderHighThreshold": 40,
    "loadBalancerAvgShedderHitCountHighThreshold": 2,
}


def avg_cluster(cpu_high: float = 80, rate_high: float = 20_000, cpu_mid: float = 50) -> Cluster:
    """CPU 80/30/50, rates 20k/2k/10k; broker1 owns 11 bundles of 900 msg/s."""
    cluster = Cluster().broker("broker1", cpu=cpu_high, rate=rate_high)
    cluster.broker("broker2", cpu=30, rate=2_000).broker("broker3", cpu=cpu_mid, rate=10_000)
    for index in range(11):
        cluster.own("broker1", bundle_id("t/avg", index), rate=900)
    return cluster


def test_avg_docs_example_waits_one_run_then_plans_ten_bundles() -> None:
    harness = Harness("AvgShedder", **AVG_DOCS)
    first = harness.cycle(avg_cluster())
    assert first.decisions == ()
    assert first.skip == Reason.HIT_COUNT
    second = harness.cycle(avg_cluster())
    assert moved(second) == [(bundle_id("t/avg", i), "broker1", "broker2") for i in range(10)]
    strategy: AvgShedder = harness.strategy
    assert strategy.planned == {bundle_id("t/avg", i): "broker2" for i in range(10)}
    assert second.decisions[0].inputs["required"] == pytest.approx(9_000)
    assert second.decisions[0].inputs["mode"] == "msgRate"


def test_avg_counters_restart_after_firing() -> None:
    harness = Harness("AvgShedder", **AVG_DOCS)
    harness.cycle(avg_cluster())
    harness.cycle(avg_cluster())
    assert harness.cycle(avg_cluster()).skip == Reason.HIT_COUNT


def test_avg_low_difference_needs_eight_hits() -> None:
    harness = Harness("AvgShedder", maxUnloadPercentage=0.5)
    skips = [harness.cycle(avg_cluster(cpu_high=55)).skip for _ in range(8)]
    assert skips[:7] == [Reason.HIT_COUNT] * 7
    assert skips[7] is None


def test_avg_scores_within_the_low_threshold_are_balanced_and_clear_counters() -> None:
    harness = Harness("AvgShedder", **AVG_DOCS)
    harness.cycle(avg_cluster())
    assert harness.cycle(avg_cluster(cpu_high=40, cpu_mid=40)).skip == Reason.BALANCED
    assert harness.strategy.hits_high == {} and harness.strategy.hits_low == {}
    # The streak starts again: one hit is not enough.
    assert harness.cycle(avg_cluster()).skip == Reason.HIT_COUNT


def test_avg_fired_pair_with_too_little_traffic_reports_no_bundles() -> None:
    harness = Harness("AvgShedder", **AVG_DOCS)
    harness.cycle(avg_cluster(rate_high=2_500))
    assert harness.cycle(avg_cluster(rate_high=2_500)).skip == Reason.NO_BUNDLES


def test_avg_forgets_counters_of_a_broker_that_left() -> None:
    harness = Harness("AvgShedder", **AVG_DOCS)
    harness.cycle(avg_cluster())
    cluster = avg_cluster()
    del cluster.brokers["broker2"]
    harness.cycle(cluster)
    assert "broker2" not in harness.strategy.hits_high
    assert "broker2" not in harness.strategy.hits_low


# -- §4.6 grace period, system namespaces ------------------------------------------------


def test_a_recently_unloaded_bundle_is_skipped_for_the_grace_period() -> None:
    recent = {bundle_id("t/a", 9): T0 - 29 * MINUTE}
    result = Harness("OverloadShedder").cycle(overloaded_cluster(99.9), recent)
    assert [d.bundle for d in result.decisions] == [bundle_id("t/a", 8), bundle_id("t/a", 7)]


def test_after_the_grace_period_the_bundle_may_move_again() -> None:
    recent = {bundle_id("t/a", 9): T0 - 31 * MINUTE}
    result = Harness("OverloadShedder").cycle(overloaded_cluster(99.9), recent)
    assert result.decisions[0].bundle == bundle_id("t/a", 9)


def test_a_bundle_shed_in_one_cycle_is_not_shed_in_the_next() -> None:
    harness = Harness("OverloadShedder")
    first = harness.cycle(overloaded_cluster(99.9))
    second = harness.cycle(overloaded_cluster(99.9))
    assert not {d.bundle for d in first.decisions} & {d.bundle for d in second.decisions}


def test_system_namespace_bundles_are_never_shed() -> None:
    cluster = overloaded_cluster(99.9)
    cluster.own("a", "pulsar/system/0x00000000_0xffffffff", 500 * MIB)
    result = Harness("OverloadShedder").cycle(cluster)
    assert all(not d.bundle.startswith("pulsar/") for d in result.decisions)
    assert result.decisions
