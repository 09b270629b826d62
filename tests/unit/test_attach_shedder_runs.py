"""Pulsar's shedding runs that moved nothing, read off its leader's metrics: each new ``Skip``
becomes one ``SheddingSkipped`` of Pulsar's shedder, and advise mode keeps Pulsar's cadence by
them and shows their reasons beside its own."""

from __future__ import annotations

from random import Random

from attach.advise import PHASE_LEAD_MS, Advisor
from attach.report import advise_report, render_advise
from attach.shedder_runs import ShedderRuns, breakdown
from balancer.config import LoadBalancerConfig
from events.catalog import ProposalRecorded, SheddingSkipped
from tests.unit.mirrored import EXTENSIBLE, Mirrored

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
    assert runs.observe("b1", exposition({"HitCount": 5}), T0) == []  # history before we looked
    appends = runs.observe("b1", exposition({"HitCount": 6, "CoolDown": 1}, success=3), T0 + 2_000)
    events = [e for a in appends for e in a.events]
    assert events == [SheddingSkipped(strategy="TransferShedder", reason="CoolDown"),
                      SheddingSkipped(strategy="TransferShedder", reason="HitCount")]
    assert {a.ts_ms for a in appends} == {T0 + 1_000} and {a.key for a in appends} == {"_leader"}
    assert all(a.causation_ids[0].endswith("GET /metrics on b1") for a in appends)
    assert runs.observe("b1", exposition({"HitCount": 6, "CoolDown": 1}, success=3), T0 + 3_000) == []


def test_a_new_leader_or_a_restarted_one_starts_a_new_baseline() -> None:
    runs = ShedderRuns()
    runs.observe("b1", exposition({"HitCount": 5}), T0)
    assert runs.observe("b2", exposition({"HitCount": 9}), T0 + 1_000) == []  # another leader's history
    assert runs.observe("b2", exposition({"HitCount": 1}), T0 + 2_000) == []  # b2 restarted
    assert len(runs.observe("b2", exposition({"HitCount": 2}), T0 + 3_000)) == 1


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
