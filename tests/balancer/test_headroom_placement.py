"""PlannedTransferShedder's placement side: chosen by the simulator and the live leader alike.

Checks: the leader's ``Placer`` and the simulator's ``pulsar_placer`` both use the headroom
placement when PlannedTransferShedder is configured (and Pulsar's configured one otherwise);
the pick is the candidate with the most headroom and never leaves the candidates the filters (isolation) allow.
"""

from __future__ import annotations

from random import Random

from actors.leader import LeaderBody
from actors.leader_view import Placer
from balancer.config import LoadBalancerConfig
from balancer.placement.headroom import HeadroomPlacement
from balancer.placement.least_long_term_msg_rate import LeastLongTermMessageRate
from balancer.shedding.base import create_strategy
from balancer.simulator import pulsar_placer
from tests.balancer.test_planned_transfer import CONFIG, MIB, T0, view_of

OWNERS = {"t/a/0x00000000_0x40000000": "b0", "t/a/0x40000000_0x80000000": "b1",
          "t/b/0x00000000_0x40000000": "b2", "t/b/0x40000000_0x80000000": "b2"}
LOADS = {"t/a/0x00000000_0x40000000": 40 * MIB, "t/a/0x40000000_0x80000000": 10 * MIB,
         "t/b/0x00000000_0x40000000": 30 * MIB, "t/b/0x40000000_0x80000000": 20 * MIB}
BROKERS = ["b0", "b1", "b2", "b3"]


def test_the_leader_and_the_simulator_choose_the_headroom_placement_for_planned_transfer() -> None:
    shedder = create_strategy("PlannedTransferShedder", CONFIG)
    placer = Placer(CONFIG, shedder=shedder)
    assert placer.modular is not None and isinstance(placer.modular.strategy, HeadroomPlacement)
    leader = LeaderBody(CONFIG, rng=Random(1))
    assert leader.placer.modular is not None
    assert isinstance(leader.placer.modular.strategy, HeadroomPlacement)
    # Same view, same pick: the live placement and the simulated one agree.
    view = view_of(OWNERS, LOADS, BROKERS, T0)
    live = placer.place(view, "t/c/0x00000000_0x40000000", Random(1)).broker
    simulated = pulsar_placer(CONFIG, shedder)(view, "t/c/0x00000000_0x40000000", Random(1), None)
    assert live == simulated == "b3"  # the empty broker


def test_pulsar_strategies_keep_the_configured_placement() -> None:
    config = LoadBalancerConfig.from_mapping({"loadBalancerLoadSheddingStrategy": "ThresholdShedder"})
    leader = LeaderBody(config, rng=Random(1))
    assert leader.placer.modular is not None
    assert isinstance(leader.placer.modular.strategy, LeastLongTermMessageRate)


def test_placements_of_one_round_count_and_filters_hold() -> None:
    shedder = create_strategy("PlannedTransferShedder", CONFIG)
    placer = Placer(CONFIG, shedder=shedder)
    view = view_of(OWNERS, LOADS, BROKERS, T0)
    # t/c may use b2/b3 only (b0/b1 are isolated for t/iso): the empty b3 first; the even-spread
    # filter then leaves b2 alone for its second bundle; isolation keeps t/iso on b0/b1, where
    # b1 (10 MiB/s) has more headroom than b0 (40 MiB/s).
    first = placer.place(view, "t/c/0x00000000_0x40000000", Random(1))
    assert first.broker == "b3" and first.strategy == HeadroomPlacement.name
    assert placer.place(view, "t/c/0x40000000_0x80000000", Random(1)).broker == "b2"
    assert placer.place(view, "t/iso/0x00000000_0x40000000", Random(1)).broker == "b1"
