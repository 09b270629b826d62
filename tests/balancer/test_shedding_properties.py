"""Properties every modular shedding strategy keeps, over generated clusters and several rounds.

- a decision names a bundle its source owns in that round;
- never a bundle inside its grace period, never a system-namespace bundle, never one twice;
- a run either decides something or says why not (skip), never both;
- only AvgShedder names a destination, and it is the planned broker, not the source;
- strategies terminate and equal inputs give equal decisions (inputs included).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.bundles import namespace_of
from balancer.decisions import ShedResult
from balancer.load import MIB
from balancer.shedding.base import is_system_namespace
from tests.balancer.test_shedding_modular import MINUTE, T0, Cluster, Harness, bundle_id

STRATEGIES = ("ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder")
NAMESPACES = ("t/a", "t/b", "t/c", "pulsar/system", "pulsar/host:8080")
GRACE_MS = 30 * MINUTE


@dataclass(frozen=True)
class Round:
    cluster: Cluster
    recently_unloaded: Mapping[str, int]


@st.composite
def rounds(draw: st.DrawFn, brokers: list[str]) -> Round:
    cluster = Cluster()
    present = [b for b in brokers if b in brokers[:2] or draw(st.booleans())]
    for name in present:
        cluster.broker(
            name,
            cpu=draw(st.floats(0, 150)),
            bw=draw(st.floats(0, 120)),
            tput=draw(st.floats(0, 500)) * MIB,
            rate=draw(st.floats(0, 50_000)),
        )
    for index in range(draw(st.integers(0, 16))):
        namespace = draw(st.sampled_from(NAMESPACES))
        bundle = bundle_id(namespace, index)
        owner = draw(st.sampled_from([*present, None]))
        tput = draw(st.sampled_from([0.0, 1.0, 2.0, 5.0, 20.0, 60.0])) * MIB
        cluster.own(owner, bundle, tput, draw(st.sampled_from([0.0, 900.0, 5_000.0])))
    recent = {
        bundle: T0 - draw(st.sampled_from([1, 29, 31, 60])) * MINUTE
        for bundle in cluster.bundles
        if draw(st.integers(0, 4)) == 0
    }
    return Round(cluster, recent)


CONFIGS = st.fixed_dictionaries(
    {
        "lowerBoundarySheddingEnabled": st.booleans(),
        "maxUnloadPercentage": st.sampled_from([0.2, 0.5, 1.0]),
        "maxUnloadBundleNumPerShedding": st.sampled_from([-1, 1, 3]),
        "loadBalancerAvgShedderHitCountHighThreshold": st.integers(1, 3),
        "loadBalancerAvgShedderHitCountLowThreshold": st.integers(1, 3),
        "loadBalancerBundleUnloadMinThroughputThreshold": st.sampled_from([0.0, 10.0]),
    }
)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[str, dict[str, Any], list[Round]]:
    brokers = [f"b{i}" for i in range(draw(st.integers(1, 5)))]
    strategy = draw(st.sampled_from(STRATEGIES))
    return strategy, draw(CONFIGS), draw(st.lists(rounds(brokers), min_size=1, max_size=4))


def play(strategy: str, config: dict[str, Any], plan: list[Round]) -> list[ShedResult]:
    harness = Harness(strategy, **config)
    return [harness.cycle(r.cluster, r.recently_unloaded) for r in plan]


def in_grace(plan: list[Round], results: list[ShedResult], index: int) -> set[str]:
    """Bundles that round ``index`` must not touch: unloaded within the grace period."""
    now = T0 + index * MINUTE
    blocked: dict[str, int] = {}
    for earlier in range(index + 1):
        for bundle, when in plan[earlier].recently_unloaded.items():
            blocked[bundle] = max(when, blocked.get(bundle, when))
        if earlier < index:
            for decision in results[earlier].decisions:
                blocked[decision.bundle] = T0 + earlier * MINUTE
    return {b for b, when in blocked.items() if when >= now - GRACE_MS}


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_decisions_respect_ownership_grace_and_system_namespaces(
    scenario: tuple[str, dict[str, Any], list[Round]],
) -> None:
    strategy, config, plan = scenario
    results = play(strategy, config, plan)
    for index, (played, result) in enumerate(zip(plan, results, strict=True)):
        blocked = in_grace(plan, results, index)
        bundles = [d.bundle for d in result.decisions]
        assert len(bundles) == len(set(bundles))
        assert (result.skip is None) == bool(result.decisions)
        for decision in result.decisions:
            owner, _ = played.cluster.bundles[decision.bundle]
            assert decision.source == owner
            assert decision.bundle not in blocked
            assert not is_system_namespace(namespace_of(decision.bundle))
            assert decision.strategy == strategy
            if strategy == "AvgShedder":
                assert decision.destination is not None
                assert decision.destination != decision.source
                assert decision.destination in played.cluster.brokers
            else:
                assert decision.destination is None


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_equal_inputs_give_equal_decisions(
    scenario: tuple[str, dict[str, Any], list[Round]],
) -> None:
    strategy, config, plan = scenario
    first = play(strategy, config, plan)
    second = play(strategy, config, plan)
    assert [[d.to_dict() for d in r.decisions] for r in first] == [
        [d.to_dict() for d in r.decisions] for r in second
    ]
    assert [r.skip for r in first] == [r.skip for r in second]
