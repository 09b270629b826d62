"""TransferShedder properties over random clusters: every transfer names a bundle its source owns,
a destination the §5.2 filters allow, and never a bundle inside its grace period."""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st

from balancer.config import LoadBalancerConfig
from balancer.load import BrokerReport, BundleStats, LoadModel, ResourceUsage
from balancer.placement.filters import extensible_candidates
from balancer.shedding.base import ClusterView, NamespacePolicy, create_strategy
from balancer.shedding.run import SheddingRun

MIB = 1024 * 1024
T0 = 1_700_000_000_000
NAMESPACES = ("t/a", "t/b", "t/c")


@st.composite
def clusters(draw: st.DrawFn) -> dict:
    brokers = [f"b{i}" for i in range(draw(st.integers(2, 6)))]
    bundles = {}
    for index in range(draw(st.integers(2, 30))):
        namespace = draw(st.sampled_from(NAMESPACES))
        bundle = f"{namespace}/0x{index:08x}_0x{index + 1:08x}"
        bundles[bundle] = (draw(st.sampled_from(brokers)), draw(st.sampled_from([0.0, 1.0, 5.0, 20.0, 80.0])) * MIB)
    groups = {ns: draw(st.sampled_from([None, "g1"])) for ns in NAMESPACES}
    recent = {b: T0 - draw(st.sampled_from([1, 10, 29])) * 60_000
              for b in bundles if draw(st.integers(0, 4)) == 0}
    return {"brokers": brokers, "bundles": bundles, "groups": groups, "recent": recent,
            "policies": draw(st.booleans()), "transfer": draw(st.booleans()),
            "domains": {b: draw(st.sampled_from(["d1", "d2"])) for b in brokers},
            "debug": draw(st.booleans())}


def _view(c: dict, config: LoadBalancerConfig, now: int) -> ClusterView:
    totals = {b: 0.0 for b in c["brokers"]}
    for owner, tput in c["bundles"].values():
        totals[owner] += tput
    capacity = max(sum(totals.values()), MIB)
    reports = {b: BrokerReport(b, cpu=ResourceUsage(100 * t / capacity, 100), msg_throughput_in=1,
                               msg_throughput_out=t) for b, t in totals.items()}
    stats = {bundle: (owner, BundleStats(bundle, msg_throughput_out=tput))
             for bundle, (owner, tput) in c["bundles"].items()}
    model = LoadModel(config)
    model.apply_round(now, reports, stats)
    policies = {ns: NamespacePolicy(ns, anti_affinity_group=g) for ns, g in c["groups"].items()}
    return ClusterView(now, config, dict(model.brokers), dict(model.bundles), policies,
                       dict(c["domains"]), recently_unloaded=dict(c["recent"]))


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_transfers_respect_ownership_filters_and_grace(c: dict) -> None:
    config = LoadBalancerConfig.from_mapping({
        "loadManagerClassName": "ExtensibleLoadManagerImpl",
        "loadBalancerLoadSheddingStrategy": "TransferShedder",
        "loadBalancerSheddingConditionHitCountThreshold": 0,
        "loadBalancerSheddingBundlesWithPoliciesEnabled": c["policies"],
        "loadBalancerTransferEnabled": c["transfer"],
        "loadBalancerDebugModeEnabled": c["debug"],
        "failureDomainsEnabled": True,
    })
    run = SheddingRun(config, create_strategy("TransferShedder", config))
    view = _view(c, config, T0)
    recent_before = set(c["recent"])
    result = run.run(view)
    event(f"decisions: {min(len(result.decisions), 3)}")
    seen: set[str] = set()
    for decision in result.decisions:
        assert c["bundles"][decision.bundle][0] == decision.source
        assert decision.bundle not in recent_before
        assert decision.bundle not in seen
        seen.add(decision.bundle)
        if decision.destination is not None:
            assert decision.destination != decision.source
            assert decision.destination in extensible_candidates(view, decision.bundle)
