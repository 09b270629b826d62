"""The advise report: each cycle's proposal beside the moves Pulsar's own shedder made in it,
agreement counted, each disagreement with the load each side saw; and drive's executions."""

from __future__ import annotations

from attach.drive import Steering
from attach.proposals import Proposal, ProposedMove
from attach.report import (
    advise_report,
    executions,
    render_advise,
    render_drive,
    render_html,
    to_json,
)
from balancer.config import LoadBalancerConfig
from events.catalog import UnloadRequested
from tests.support.fake_pulsar import fake_pulsar
from tests.support.mirrored import EXTENSIBLE, Mirrored


async def _report(m: Mirrored, b: list[str], owners: dict[str, str]) -> None:
    load = {b[0]: 30.0, b[1]: 20.0, b[2]: 10.0, b[3]: 2.0}
    for broker in ("b1", "b2"):
        await m.report(broker, {x: v for x, v in load.items() if owners[x] == broker})


async def test_ours_beside_pulsars_moves_cycle_by_cycle_with_both_inputs_for_a_disagreement() -> None:
    m = Mirrored()
    b = await m.cluster(["b1", "b2"], bundles=4, owners={0: "b1", 1: "b1", 2: "b1", 3: "b2"})
    owners = {b[0]: "b1", b[1]: "b1", b[2]: "b1", b[3]: "b2"}
    await _report(m, b, owners)
    config = LoadBalancerConfig.from_broker_conf(EXTENSIBLE + "loadBalanceSheddingDelayInSeconds=0\n")
    steering = Steering(m.log, config, "advise", printer=lambda _: None)
    await steering.start(m.clock())
    m.clock.advance(60_000)
    first = await steering.cycle(m.clock())
    assert first is not None and first.moves
    # Pulsar's shedder, 1.5 s later, makes our first move: the cycle agrees on it, not on the rest.
    same = first.moves[0]
    m.clock.advance(1500)
    await m.pulsar_transfer(same.bundle, same.source, str(same.destination))
    owners[same.bundle] = str(same.destination)
    # Next cycle: Pulsar moves something else, from b1 to b2, that we did not propose.
    m.clock.advance(58_500)
    await _report(m, b, owners)
    second = await steering.cycle(m.clock())
    assert second is not None
    other = next(x for x in b if owners[x] == "b1" and x not in {mv.bundle for mv in second.moves})
    m.clock.advance(1500)
    await m.pulsar_transfer(other, "b1", "b2")
    report = advise_report((await m.log.read()).records)
    summary = report.summary()
    assert summary["cycles"] == 2 and summary["strategy"] == "TransferShedder"
    assert summary["matched"] == 1 and summary["pulsar"] == 2 and summary["ours"] == len(first.moves) + len(second.moves)
    assert summary["agreement"] == 1 / (summary["ours"] + 2 - 1)
    assert [len(c.pulsar) for c in report.cycles] == [1, 1]
    assert report.cycles[0].pulsar_saw["b1"]["msg_throughput_in"] > 0  # what Pulsar's run read
    text = render_advise(report)
    assert "DIFFER" in text and "ours ema" in text and "Pulsar's" in text
    page = render_html(report, [])
    assert page.startswith("<!doctype html>") and page.count("<tr class=") == 2
    assert to_json(report, [])["advise"]["summary"] == summary


async def test_pulsar_executing_our_requests_is_not_counted_as_its_own_shedding() -> None:
    m = Mirrored()
    b = await m.cluster(["b1", "b2"], bundles=4, owners={0: "b1", 1: "b1", 2: "b1", 3: "b2"})
    owners = {b[0]: "b1", b[1]: "b1", b[2]: "b1", b[3]: "b2"}
    await _report(m, b, owners)
    config = LoadBalancerConfig.from_broker_conf(EXTENSIBLE)
    async with fake_pulsar() as fake:
        steering = Steering(m.log, config, "drive", admin=fake.admin(), printer=lambda _: None)
        await steering.start(m.clock())
        m.clock.advance(60_000)
        proposal = await steering.cycle(m.clock())
        assert proposal is not None
        move = proposal.moves[0]
        m.clock.advance(300)
        await m.pulsar_transfer(move.bundle, move.source, str(move.destination))
        m.clock.advance(1000)
        await steering.cycle(m.clock())
    records = (await m.log.read()).records
    report = advise_report(records, mode="drive")
    assert report.summary()["pulsar"] == 0 and report.outside == []
    (row,) = executions(records)
    assert row.outcome == "confirmed" and row.answer.startswith("204")
    assert row.decision_to_owned_ms == 300
    assert "confirmed 1" in render_drive([row]) and "decision->Owned 300 ms" in render_drive([row])


async def test_a_pulsar_unload_without_destination_agrees_on_bundle_and_source() -> None:
    m = Mirrored()
    b = await m.cluster(["b1", "b2"], bundles=2, owners={0: "b1", 1: "b1"})
    ours = ProposedMove(b[0], "transfer", "b1", "b2", "Overloaded")
    other = ProposedMove(b[1], "transfer", "b1", "b2", "Overloaded")
    proposal = Proposal("advise-1", "UniformLoadShedder", "advise", m.clock(), (ours, other))
    await m.log.append("_proposals", [proposal.to_event()], epoch=0)
    m.clock.advance(1500)
    await m.put("public/default", UnloadRequested(bundle=b[0], src="b1", reason="pulsar"))
    report = advise_report((await m.log.read()).records)
    assert [x.bundle for x in report.cycles[0].matched] == [b[0]]
    assert report.summary()["matched"] == 1 and not report.cycles[0].agrees
