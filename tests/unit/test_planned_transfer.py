"""PlannedTransferShedder: properties over generated clusters, and the behaviours it promises.

Properties (hypothesis): every decision is a transfer to a broker the §5.2 filters accept for
that bundle (isolation, anti-affinity with failure domains) and never back to the broker the
bundle left; no bundle moves twice within the grace period; on a constant load the moves stop
and no layout repeats (no cycle of moves).
"""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.config import LoadBalancerConfig
from balancer.decisions import Reason
from balancer.load import MIB, BrokerReport, BundleStats, LoadModel, ResourceUsage
from balancer.placement.filters import extensible_candidates
from balancer.shedding.base import ClusterView, IsolationPolicy, NamespacePolicy, create_strategy
from balancer.shedding.run import SheddingRun

T0 = 1_700_000_000_000
MINUTE = 60_000
CAPACITY = 100 * MIB  # bytes/s at 100 % CPU
NAMESPACES = ("t/a", "t/b", "t/iso", "t/g1", "t/g2")
POLICIES = {
    "t/iso": NamespacePolicy("t/iso", isolation=IsolationPolicy(primary=("b[01]",))),
    "t/g1": NamespacePolicy("t/g1", anti_affinity_group="g"),
    "t/g2": NamespacePolicy("t/g2", anti_affinity_group="g"),
}
DOMAINS = {"b0": "east", "b1": "east", "b2": "west", "b3": "west"}
CONFIG = LoadBalancerConfig.from_mapping({"loadBalancerLoadSheddingStrategy": "PlannedTransferShedder",
                                          "failureDomainsEnabled": True,
                                          "loadBalancerSheddingGracePeriodMinutes": 5})


def view_of(owners: Mapping[str, str], loads: Mapping[str, float], brokers: list[str], now_ms: int,
            model: LoadModel | None = None) -> ClusterView:
    """One report round: CPU is throughput over a 100 MiB/s capacity (capped at 100 %)."""
    model = model or LoadModel(CONFIG)
    totals = dict.fromkeys(brokers, 0.0)
    for bundle, owner in owners.items():
        totals[owner] += loads[bundle]
    reports = {b: BrokerReport(b, cpu=ResourceUsage(min(100.0, 100.0 * t / CAPACITY), 100.0),
                               msg_throughput_in=t / 2, msg_throughput_out=t / 2)
               for b, t in totals.items()}
    stats = {bundle: (owner, BundleStats(bundle, msg_throughput_in=loads[bundle] / 2,
                                         msg_throughput_out=loads[bundle] / 2))
             for bundle, owner in owners.items()}
    model.apply_round(now_ms, reports, stats)
    return ClusterView(now_ms, CONFIG, dict(model.brokers), dict(model.bundles), dict(POLICIES),
                       dict(DOMAINS))


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, float], list[str]]:
    brokers = [f"b{i}" for i in range(draw(st.integers(2, 5)))]
    owners: dict[str, str] = {}
    loads: dict[str, float] = {}
    for index in range(draw(st.integers(1, 24))):
        namespace = draw(st.sampled_from(NAMESPACES))
        bundle = f"{namespace}/0x{index:08x}_0x{index + 1:08x}"
        owners[bundle] = draw(st.sampled_from(brokers))
        loads[bundle] = draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 5.0, 12.0, 30.0])) * MIB
    return owners, loads, brokers


def run_rounds(owners: dict[str, str], loads: Mapping[str, float], brokers: list[str], rounds: int,
               check: object = None) -> list[list[tuple[int, str, str, str]]]:
    """Shedding rounds one minute apart on a constant load, moves applied; (round, bundle, src, dst)."""
    shedding = SheddingRun(CONFIG)
    model = LoadModel(CONFIG)
    history: list[list[tuple[int, str, str, str]]] = []
    for round_ in range(rounds):
        view = view_of(owners, loads, brokers, T0 + round_ * MINUTE, model)
        result = shedding.run(view)
        moves = []
        for decision in result.decisions:
            assert decision.destination is not None and decision.source is not None, decision
            assert decision.destination in extensible_candidates(view, decision.bundle), decision
            assert decision.destination != decision.source
            assert owners[decision.bundle] == decision.source
            moves.append((round_, decision.bundle, decision.source, decision.destination))
        for _, bundle, _, dst in moves:
            owners[bundle] = dst
        history.append(moves)
    return history


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_moves_go_only_to_filtered_brokers_never_twice_in_grace_and_never_back(
        cluster: tuple[dict[str, str], dict[str, float], list[str]]) -> None:
    owners, loads, brokers = cluster
    history = run_rounds(dict(owners), loads, brokers, rounds=12)
    last: dict[str, tuple[int, str]] = {}
    grace_rounds = CONFIG.load_balancer_shedding_grace_period_minutes
    for round_, bundle, src, dst in (m for moves in history for m in moves):
        if bundle in last:
            before, left = last[bundle]
            assert round_ - before >= grace_rounds, f"{bundle} moved again after {round_ - before} rounds"
            assert dst != left, f"{bundle} sent back to {left}"
        last[bundle] = (round_, src)


@settings(max_examples=40, deadline=None)
@given(clusters())
def test_on_a_constant_load_moves_stop_and_no_layout_repeats(
        cluster: tuple[dict[str, str], dict[str, float], list[str]]) -> None:
    owners, loads, brokers = cluster
    owners = dict(owners)
    seen = {frozenset(owners.items())}
    history: list[list[tuple[int, str, str, str]]] = []
    shedding, model = SheddingRun(CONFIG), LoadModel(CONFIG)
    for round_ in range(40):
        result = shedding.run(view_of(owners, loads, brokers, T0 + round_ * MINUTE, model))
        for decision in result.decisions:
            assert decision.destination is not None
            owners[decision.bundle] = decision.destination
        history.append(list(result.decisions))  # type: ignore[arg-type]
        if result.decisions:
            layout = frozenset(owners.items())
            assert layout not in seen, f"round {round_} returned to an earlier layout"
            seen.add(layout)
    assert not any(history[-10:]), "still moving after 30 rounds on a constant load"


def test_an_idle_broker_is_filled_by_transfers_to_it() -> None:
    brokers = ["b0", "b1", "b2"]
    bundles = [f"t/a/0x{i:08x}_0x{i + 1:08x}" for i in range(12)]
    owners = {b: brokers[i % 2] for i, b in enumerate(bundles)}
    loads = dict.fromkeys(bundles, 8 * MIB)
    result = create_strategy("PlannedTransferShedder", CONFIG).shed(view_of(owners, loads, brokers, T0))
    assert {d.destination for d in result.decisions} == {"b2"} and len(result.decisions) == 4
    assert all(d.inputs["gain"] > 0 and d.strategy == "PlannedTransferShedder" for d in result.decisions)
    assert {d.reason for d in result.decisions} <= {Reason.UNDERLOADED, Reason.OVERLOADED}


def test_hysteresis_a_small_imbalance_does_not_start_planning() -> None:
    brokers = ["b0", "b1"]
    owners = {"t/a/0x00000000_0x00000001": "b0", "t/a/0x00000001_0x00000002": "b0",
              "t/a/0x00000002_0x00000003": "b1"}
    loads = {"t/a/0x00000000_0x00000001": 27 * MIB, "t/a/0x00000001_0x00000002": 1 * MIB,
             "t/a/0x00000002_0x00000003": 24 * MIB}  # b0 at 1.077x the mean: below the 8 % trigger
    result = create_strategy("PlannedTransferShedder", CONFIG).shed(view_of(owners, loads, brokers, T0))
    assert result.decisions == () and result.skip is Reason.BALANCED


def test_a_joining_broker_warms_up_before_it_is_filled_to_the_mean() -> None:
    strategy = create_strategy("PlannedTransferShedder", CONFIG)
    bundles = [f"t/a/0x{i:08x}_0x{i + 1:08x}" for i in range(8)]
    owners = {b: ("b0" if i % 2 else "b1") for i, b in enumerate(bundles)}
    loads = dict.fromkeys(bundles, 10 * MIB)
    model = LoadModel(CONFIG)
    assert strategy.shed(view_of(owners, loads, ["b0", "b1"], T0, model)).decisions == ()
    # b2 joins empty; b0 and b1 sit at 1.5x the mean, above the trigger: relief may use b2.
    joined = strategy.shed(view_of(owners, loads, ["b0", "b1", "b2"], T0 + MINUTE, model))
    assert {d.destination for d in joined.decisions} == {"b2"}
    assert all(d.inputs["destination_warming"] is True for d in joined.decisions)
