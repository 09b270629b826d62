"""``lbctl explain`` on a mirrored cluster: a move this project drove names its proposal, its
decision and its execution's outcome; a move Pulsar made itself says so, with its message id;
an execution that moved nothing is listed with its outcome."""

from __future__ import annotations

from attach.drive import Steering
from balancer.config import LoadBalancerConfig
from projections.explain import moves_of, render
from tests.support.fake_pulsar import FakePulsar, fake_pulsar
from tests.support.mirrored import EXTENSIBLE, Mirrored


async def test_a_driven_move_a_pulsar_move_and_a_refused_execution_each_say_where_they_came_from() -> None:
    m = Mirrored()
    b = await m.cluster(["b1", "b2"], bundles=4, owners={0: "b1", 1: "b1", 2: "b1", 3: "b2"})
    await m.report("b1", {b[0]: 30.0, b[1]: 20.0, b[2]: 10.0})
    await m.report("b2", {b[3]: 2.0})
    await m.pulsar_transfer(b[3], "b2", "b1")  # Pulsar's own, before attach drove anything
    config = LoadBalancerConfig.from_broker_conf(EXTENSIBLE + "loadBalanceSheddingDelayInSeconds=0\n")
    async with fake_pulsar(FakePulsar()) as fake:
        steering = Steering(m.log, config, "drive", admin=fake.admin(), printer=lambda _: None)
        await steering.start(m.clock())
        proposal = await steering.cycle(m.clock.advance(60_000))
        assert proposal is not None
        driven = proposal.moves[0]
        await m.pulsar_transfer(driven.bundle, "b1", "b2")
        fake.status, fake.reason = 500, "Failed to unload"
        await m.report("b1", {x: 10.0 for x in b if x != driven.bundle})
        later = await steering.cycle(m.clock.advance(60_000))
        assert later is not None
    records = (await m.log.read()).records
    story = moves_of(driven.bundle, records)  # the whole story: its assignment, then the move
    assert [(m.kind, m.origin) for m in story] == [("assign", ""), ("transfer", "driven")]
    move = story[1]
    assert move.origin == "driven" and move.execution["proposal"] == proposal.proposal_id
    assert move.decision["strategy"] == "TransferShedder"
    text = render(driven.bundle, [move])
    assert f"driven by proposal {proposal.proposal_id} (TransferShedder, drive mode)" in text
    assert "carried out by Pulsar: pulsar:loadbalancer-service-unit-state@" in text
    assert "accepted 204; confirmed: Owned at b2" in text and "max_broker = b1" in text
    assign, own = moves_of(b[3], records)
    assert assign.kind == "assign" and own.kind == "transfer"
    assert own.origin == "pulsar"
    assert "made by Pulsar itself, not by this project: pulsar:loadbalancer-service-unit-state@" in render(b[3], [own])
    refused = [x for bundle in b for x in moves_of(bundle, records) if x.origin == "execution"]
    assert refused and all(x.reason == "refused" for x in refused)
    assert "refused 500 Failed to unload" in render(refused[0].event, refused)
