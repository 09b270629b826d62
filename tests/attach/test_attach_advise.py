"""The decision side of attach on a mirrored log: what the project's leader would do, cycle by
cycle, recorded as proposals beside what Pulsar did."""

from __future__ import annotations

from random import Random

from attach.advise import Advisor
from attach.drive import Steering
from attach.proposals import Proposal
from balancer.config import LoadBalancerConfig
from events.catalog import ProposalRecorded
from projections.shed_replay import LeaderReplay
from tests.support.mirrored import EXTENSIBLE, MB, Mirrored

MODULAR = ("loadBalancerLoadSheddingStrategy=ThresholdShedder\nloadBalancerCPUResourceWeight=0\n"
           "loadBalancerBundleUnloadMinThroughputThreshold=1\nattachDecisionIntervalSeconds=60\n")


async def _skewed(m: Mirrored) -> list[str]:
    """b1 carries 60 MB/s in three bundles, b2 2 MB/s in one."""
    bundles = await m.cluster(["b1", "b2"], bundles=4, owners={0: "b1", 1: "b1", 2: "b1", 3: "b2"})
    await _report(m, bundles)
    return bundles


async def _report(m: Mirrored, b: list[str], owners: dict[str, str] | None = None) -> None:
    load = {b[0]: 30.0, b[1]: 20.0, b[2]: 10.0, b[3]: 2.0}
    where = owners or {b[0]: "b1", b[1]: "b1", b[2]: "b1", b[3]: "b2"}
    for broker in ("b1", "b2"):
        await m.report(broker, {x: v for x, v in load.items() if where[x] == broker})


async def _cycles(m: Mirrored, steering: Steering, n: int, bundles: list[str],
                  owners: dict[str, str] | None = None) -> list[Proposal]:
    out = []
    for _ in range(n):
        m.clock.advance(60_000)
        await _report(m, bundles, owners)
        proposal = await steering.cycle(m.clock())
        assert proposal is not None
        out.append(proposal)
    return out


async def test_a_skewed_cluster_gets_a_proposal_with_its_numbers_recorded_every_cycle() -> None:
    m = Mirrored()
    bundles = await _skewed(m)
    steering = Steering(m.log, LoadBalancerConfig.from_broker_conf(EXTENSIBLE), "advise", printer=lambda _: None)
    await steering.start(m.clock())
    assert await steering.cycle(m.clock()) is None  # the first cycle comes an interval after start
    (first, second) = await _cycles(m, steering, 2, bundles)
    move = first.moves[0]
    assert (move.kind, move.source, move.destination, move.reason) == ("transfer", "b1", "b2", "Overloaded")
    assert move.decision["strategy"] == "TransferShedder"
    assert move.decision["inputs"]["max_broker"] == "b1" and move.decision["inputs"]["std"] > 0.25
    assert move.load["msg_throughput_in"] in (10 * MB, 20 * MB, 30 * MB)
    assert first.brokers["b1"]["msg_throughput"] == 60 * MB
    predicted = first.predicted or {}
    assert predicted["max_over_mean_after"] < predicted["max_over_mean_before"]
    # Advise mode never remembers its own proposals: Pulsar did not move, so the same move again.
    assert [(m.bundle, m.destination) for m in second.moves] == [(m.bundle, m.destination) for m in first.moves]
    recorded = [r.envelope.typed for r in (await m.log.read()).records
                if isinstance(r.envelope.typed, ProposalRecorded)]
    assert [Proposal.from_event(e) for e in recorded] == [first, second]
    assert all(e.mode == "advise" and e.folded for e in recorded)


async def test_the_advisor_folds_and_sheds_exactly_as_the_leaders_replay() -> None:
    m = Mirrored()
    await _skewed(m)
    config = LoadBalancerConfig.from_broker_conf(EXTENSIBLE)
    records = (await m.log.read()).records
    advisor, replay = Advisor(config, "advise", rng=Random(1)), LeaderReplay(config)
    for record in records:
        advisor.fold(record.partition, record.offset, record.envelope)
        replay.fold(record.offset, record.envelope)
    now = m.clock() + 1000
    proposal = advisor.decide(now)
    decisions = replay.shed(now).decisions
    assert [(d.bundle, d.source, d.destination) for d in decisions] == \
        [(p.bundle, p.source, p.destination) for p in proposal.moves]
    assert proposal.folded == {"0": records[-1].offset}


async def test_a_move_pulsar_made_is_remembered_for_the_grace_period() -> None:
    m = Mirrored()
    bundles = await _skewed(m)
    steering = Steering(m.log, LoadBalancerConfig.from_broker_conf(EXTENSIBLE), "advise", printer=lambda _: None)
    await steering.start(m.clock())
    (first,) = await _cycles(m, steering, 1, bundles)
    moved = first.moves[0]
    await m.pulsar_transfer(moved.bundle, "b1", "b2")  # Pulsar's shedder made the same move
    owners = {b: ("b2" if b in (moved.bundle, bundles[3]) else "b1") for b in bundles}
    later = await _cycles(m, steering, 3, bundles, owners)
    assert all(p.bundle != moved.bundle for proposal in later for p in proposal.moves)


async def test_drive_gives_every_transfer_a_destination_by_placement_when_the_strategy_has_none() -> None:
    m = Mirrored()
    bundles = await _skewed(m)
    config = LoadBalancerConfig.from_broker_conf(MODULAR)
    found: dict[str, Proposal] = {}
    for mode in ("advise", "drive"):
        advisor = Advisor(config, mode, rng=Random(1))
        for record in (await m.log.read()).records:
            advisor.fold(record.partition, record.offset, record.envelope)
        found[mode] = advisor.decide(m.clock())
    (move,) = found["drive"].moves
    assert (move.bundle, move.source, move.destination) == (bundles[0], "b1", "b2")
    assert move.decision["placement"]["broker"] == "b2" and move.strategy_destination is None
    # ThresholdShedder names no destination: the leader's placement picks it in both modes.
    assert [x.destination for x in found["advise"].moves] == ["b2"]


async def test_with_transfer_off_advise_unloads_as_pulsar_would_and_drive_still_names_a_destination() -> None:
    m = Mirrored()
    await _skewed(m)
    config = LoadBalancerConfig.from_broker_conf(EXTENSIBLE + "loadBalancerTransferEnabled=false\n")
    kinds = {}
    for mode in ("advise", "drive"):
        advisor = Advisor(config, mode, rng=Random(1))
        for record in (await m.log.read()).records:
            advisor.fold(record.partition, record.offset, record.envelope)
        kinds[mode] = {(x.kind, x.destination) for x in advisor.decide(m.clock() + 1).moves}
    assert kinds["advise"] == {("unload", None)}
    assert kinds["drive"] and all(kind == "transfer" and dst for kind, dst in kinds["drive"])


async def test_a_hot_bundle_is_proposed_for_a_split_only_when_the_advisor_splits() -> None:
    m = Mirrored()
    bundles = await m.cluster(["b1", "b2"], bundles=2)
    config = LoadBalancerConfig.from_broker_conf(
        EXTENSIBLE + "loadBalancerNamespaceBundleMaxMsgRate=1000\n"
        "loadBalancerNamespaceBundleSplitConditionHitCountThreshold=0\n")
    for splits in (True, False):
        advisor = Advisor(config, "drive", rng=Random(1), splits=splits)
        await m.report("b1", {bundles[0]: 30.0})
        await m.report("b2", {bundles[1]: 30.0})
        for record in (await m.log.read()).records:
            advisor.fold(record.partition, record.offset, record.envelope)
        proposal = advisor.decide(m.clock.advance(1000))
        split = [x for x in proposal.moves if x.kind == "split"]
        if not splits:
            assert split == []
            continue
        assert {x.bundle for x in split} == set(bundles)
        assert all(x.reason == "split:MsgRate" and x.decision["boundaries"] for x in split)


async def test_advise_cycles_lock_onto_pulsars_runs_and_remember_a_run_at_its_first_move() -> None:
    m = Mirrored()
    bundles = await _skewed(m)
    config = LoadBalancerConfig.from_broker_conf(EXTENSIBLE)
    advisor = Advisor(config, "advise", rng=Random(1))
    t0 = m.clock.advance(20_000)
    await m.pulsar_transfer(bundles[0], "b1", "b2")
    m.clock.advance(1000)  # the same run, seen a poll later
    await m.pulsar_transfer(bundles[1], "b1", "b2")
    for record in (await m.log.read()).records:
        advisor.fold(record.partition, record.offset, record.envelope)
    assert advisor.next_ms == t0 + 60_000 - 1500  # just before Pulsar's next run
    assert advisor.replay.memory.recently_unloaded[bundles[1]] == t0
    proposal = advisor.decide(t0 + 58_500)
    assert advisor.next_ms == t0 + 120_000 - 1500 and proposal.run_ms == t0 + 58_500


async def test_the_advisor_ranks_brokers_on_the_emas_their_reports_carry() -> None:
    # Pulsar's leader sheds on each broker's own weightedMaxEMA: when the mirror kept it, a
    # cycle reads it, not an EMA the fold stepped once per published report.
    m = Mirrored()
    bundles = await m.cluster(["b1", "b2"], bundles=4, owners={0: "b1", 1: "b1", 2: "b1", 3: "b2"})
    steering = Steering(m.log, LoadBalancerConfig.from_broker_conf(EXTENSIBLE), "advise", printer=lambda _: None)
    await steering.start(m.clock())
    m.clock.advance(60_000)
    await m.report("b1", {bundles[0]: 30.0, bundles[1]: 20.0, bundles[2]: 10.0},
                   pulsar={"weightedMaxEMA": 0.2, "msgThroughputEMA": 5.0e7})
    await m.report("b2", {bundles[3]: 2.0}, pulsar={"weightedMaxEMA": 0.75, "msgThroughputEMA": 2.0e6})
    proposal = await steering.cycle(m.clock())
    assert proposal is not None
    assert proposal.brokers["b1"]["weighted_max_ema"] == 0.2
    assert proposal.brokers["b2"]["weighted_max_ema"] == 0.75
    assert all(move.source != "b1" for move in proposal.moves)  # b2 is the loaded one, by Pulsar's EMAs
