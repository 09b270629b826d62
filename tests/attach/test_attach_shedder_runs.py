"""Pulsar's shedding runs that moved nothing, read off its leader's metrics: each new ``Skip``
becomes one ``SheddingSkipped`` of Pulsar's shedder, and advise mode keeps Pulsar's cadence by
them and shows their reasons beside its own."""

from __future__ import annotations

from random import Random

from attach.advise import PHASE_LEAD_MS, Advisor
from attach.attribution import Attribution
from attach.channel import Append
from attach.report import advise_report, render_advise
from attach.shedder_runs import ShedderRuns, breakdown
from balancer.config import LoadBalancerConfig
from events.catalog import Event, ProposalRecorded, ShedderUnloadsCounted, SheddingSkipped
from tests.support.mirrored import EXTENSIBLE, Mirrored

T0 = 1_700_000_000_000


def exposition(skips: dict[str, int], success: int = 0, broker: str = "127.0.0.1:8080") -> str:
    """The leader's metrics as Pulsar prints them: other families around, labels in its order."""
    labels = f'cluster="c",broker="{broker}",metric="bundleUnloading"'
    family = "pulsar_lb_unload_broker_breakdown_total"
    lines = [f"# TYPE {family} gauge", f"pulsar_lb_unload_broker_total{{{labels}}} 3"]
    for reason in ("HitCount", "NoBundles", "CoolDown", "OutDatedData", "NoLoadData", "NoBrokers", "Unknown"):
        lines.append(f'{family}{{{labels},result="Skip",reason="{reason}"}} {skips.get(reason, 0)}')
    lines.append(f'{family}{{{labels},result="Success",reason="Overloaded"}} {success}')
    lines.append(f'{family}_created{{cluster="c"}} 1.7e9')
    return "\n".join(lines) + "\n"


def test_the_breakdown_family_is_read_by_result_and_reason() -> None:
    counts = breakdown(exposition({"HitCount": 4, "CoolDown": 1}, success=2))
    assert counts[("Skip", "HitCount")] == 4 and counts[("Skip", "CoolDown")] == 1
    assert counts[("Success", "Overloaded")] == 2 and ("", "") not in counts


def test_each_new_skip_is_one_run_stamped_between_the_scrapes() -> None:
    runs = ShedderRuns()
    (first,) = runs.observe("b1", exposition({"HitCount": 5}, success=1), T0)  # history before we looked
    assert first.events == (ShedderUnloadsCounted(strategy="TransferShedder", since_ms=T0, unloaded={}),)
    appends = runs.observe("b1", exposition({"HitCount": 6, "CoolDown": 1}, success=3), T0 + 2_000)
    skips = [e for a in appends for e in a.events if isinstance(e, SheddingSkipped)]
    assert skips == [SheddingSkipped(strategy="TransferShedder", reason="CoolDown"),
                     SheddingSkipped(strategy="TransferShedder", reason="HitCount")]
    assert {a.ts_ms for a in appends if a.key == "_leader"} == {T0 + 1_000}
    counted = [e for a in appends for e in a.events if isinstance(e, ShedderUnloadsCounted)]
    assert counted == [ShedderUnloadsCounted(strategy="TransferShedder", since_ms=T0, unloaded={"Overloaded": 2})]
    assert all(a.causation_ids[0].endswith("GET /metrics on b1") for a in appends)
    assert runs.observe("b1", exposition({"HitCount": 6, "CoolDown": 1}, success=3), T0 + 3_000) == []


def test_a_new_leader_or_a_restarted_one_starts_a_new_baseline() -> None:
    runs = ShedderRuns()
    runs.observe("b1", exposition({"HitCount": 5}), T0)

    def skips(appends: list[Append]) -> list[Event]:
        return [e for a in appends for e in a.events if isinstance(e, SheddingSkipped)]

    assert skips(runs.observe("b2", exposition({"HitCount": 9}), T0 + 1_000)) == []  # another leader's
    assert skips(runs.observe("b2", exposition({"HitCount": 1}), T0 + 2_000)) == []  # b2 restarted
    assert len(skips(runs.observe("b2", exposition({"HitCount": 2}), T0 + 3_000))) == 1


async def test_advise_keeps_pulsars_cadence_by_its_skipped_runs() -> None:
    m = Mirrored()
    await m.cluster(["b1", "b2"], bundles=2)
    advisor = Advisor(LoadBalancerConfig.from_broker_conf(EXTENSIBLE), "advise", rng=Random(1))
    await m.put("_leader", SheddingSkipped(strategy="TransferShedder", reason="HitCount"))
    for record in (await m.log.read()).records:
        advisor.fold(record.partition, record.offset, record.envelope)
    skipped = max(r.envelope.ts_ms for r in (await m.log.read()).records
                  if isinstance(r.envelope.typed, SheddingSkipped))
    assert advisor.phase_ms == skipped - PHASE_LEAD_MS
    assert advisor.next_ms == skipped - PHASE_LEAD_MS + 60_000


async def test_the_report_shows_pulsars_skip_reason_beside_ours() -> None:
    m = Mirrored()
    await m.cluster(["b1", "b2"], bundles=2)
    proposal = ProposalRecorded(proposal_id="advise-1", strategy="TransferShedder", mode="advise",
                                run_ms=m.clock(), moves=[], skip="HitCount", folded={}, brokers={},
                                predicted=None)
    await m.put("_proposals", proposal)
    m.clock.advance(1_500)
    await m.put("_leader", SheddingSkipped(strategy="TransferShedder", reason="HitCount"))
    report = advise_report((await m.log.read()).records)
    (cycle,) = report.cycles
    assert cycle.pulsar_skips == ["HitCount"] and cycle.same_skip and cycle.agrees
    assert report.summary()["same_skip_reason"] == 1
    assert "Pulsar's [-] (HitCount)" in render_advise(report)


def test_only_the_moves_the_counters_claim_are_the_shedders() -> None:
    found: Attribution[str] = Attribution()
    assert found.moved(T0, "before any count") == [(T0, "before any count")]  # no counters: every move
    assert found.counted(T0 + 1_000, T0 + 1_000, 0) == []  # the first read: counting from now on
    assert found.moved(T0 + 10_000, "an operator's") == []
    assert found.moved(T0 + 70_000, "the shedder's") == []
    claimed = found.counted(T0 + 69_000, T0 + 71_000, 1)
    assert claimed == [(T0 + 70_000, "the shedder's")]  # the operator's move was older than the window
    # A count read before its move comes down the channel keeps a credit for it.
    assert found.counted(T0 + 129_000, T0 + 131_000, 1) == []
    assert found.moved(T0 + 130_500, "read late") == [(T0 + 130_500, "read late")]
    assert found.moved(T0 + 131_000, "one too many") == []


async def test_an_operators_unload_puts_no_cool_down_on_the_advice() -> None:
    # Pulsar's shedder does not remember an admin unload; neither does the advisor, once the
    # counters say the shedder unloaded nothing then.
    m = Mirrored()
    bundles = await m.cluster(["b1", "b2"], bundles=4, owners={0: "b1", 1: "b1", 2: "b1", 3: "b2"})
    await m.put("_mirror", ShedderUnloadsCounted(strategy="TransferShedder", since_ms=m.clock(), unloaded={}))
    await m.pulsar_transfer(bundles[3], "b2", "b1")  # the operator puts everything on b1
    advisor = Advisor(LoadBalancerConfig.from_broker_conf(EXTENSIBLE), "advise", rng=Random(1))
    for record in (await m.log.read()).records:
        advisor.fold(record.partition, record.offset, record.envelope)
    assert advisor.replay.memory.recently_unloaded_brokers == {}
    assert advisor.replay.memory.recently_unloaded == {}
