"""Review mode of drive (``loadBalancerExecution=review``), as an operator of a real Pulsar would
notice it: a cycle's proposal waits and nothing is sent; the next cycles planning the same moves
leave it standing; an approval records who approved and sends its moves (over several cycles
when the caps hold some back, each move once); a rejected one never runs; an approval that comes
too late records the staleness instead; the audit's approval rule holds on the drive log and
bites without the approval; the verdicts reach the attach process over its web service and from
``lbctl proposals`` on its state directory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from actors.cluster.kept import ClusterSpec, write_spec
from attach.drive import Steering
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput, ProposalClosed, UnknownProposal
from events.catalog import (
    ExecutionRequested,
    ProposalApproved,
    ProposalRecorded,
    ProposalStale,
    ReviewProposal,
)
from events.envelope import wall_clock_ms
from events.log.memory import MemoryEventLog
from events.log.port import Record
from lbctl.admin_http import AdminHttp
from lbctl.main import main
from projections.proposals import ApprovalHistory, proposal_book
from tests.attach.test_drive_control import _of, _report, _skewed, _started, attach_service
from tests.support.fake_pulsar import fake_pulsar
from tests.support.mirrored import EXTENSIBLE, Clock, Mirrored

MINUTE = 60_000


def _config(extra: str = "") -> LoadBalancerConfig:
    return LoadBalancerConfig.from_broker_conf(EXTENSIBLE + "attachDriveExecutionTimeoutSeconds=30\n"
                                               "loadBalancerExecution=review\n" + extra)


async def _waiting(m: Mirrored, steering: Steering, bundles: list[str]) -> str:
    """Cycles until a proposal waits for review; its id."""
    for _ in range(3):
        m.clock.advance(MINUTE)
        await _report(m, bundles)
        await steering.cycle(m.clock())
        pending = proposal_book(await _records(m.log)).pending()
        if pending:
            return pending[-1].proposal.proposal_id
    raise AssertionError("no proposal waits for review")


def _verdict(pid: str, verdict: str, by: str = "ops") -> ReviewProposal:
    return ReviewProposal(command_id=f"{verdict}-{pid}", epoch=0, proposal_id=pid, verdict=verdict, by=by)


async def _records(log: MemoryEventLog) -> list[Record]:
    return list((await log.read()).records)


def _violations(records: list[Record]) -> list[tuple[str, int, str]]:
    history = ApprovalHistory(review=True)
    for record in records:
        history.take(record.envelope.typed, record.envelope.ts_ms)
    return history.violations()


async def test_a_proposal_waits_stands_and_runs_once_approved() -> None:
    m, config, lines = Mirrored(), _config("attachDriveMaxExecutionsPerCycle=5\n"), []
    bundles = await _skewed(m)
    async with fake_pulsar() as fake:
        steering = await _started(m, fake, config, lines)
        pid = await _waiting(m, steering, bundles)
        assert fake.moves() == [] and await _of(m.log, ExecutionRequested) == []
        assert any(f"lbctl proposals approve {pid}" in line for line in lines)
        for _ in range(2):  # the same plan again: the waiting proposal stands, nothing is recorded
            m.clock.advance(MINUTE)
            await _report(m, bundles)
            await steering.cycle(m.clock())
        assert [p.proposal_id for p in await _of(m.log, ProposalRecorded) if p.moves] == [pid]
        receipt = await steering.review_verdict(_verdict(pid, "approve"), m.clock())
        assert receipt.types() == ["ProposalApproved"] and receipt.first("ProposalApproved")["by"] == "ops"
        sent = await _of(m.log, ExecutionRequested)
        assert sent and {r.proposal_id for r in sent} == {pid} and len(fake.moves()) == len(sent)
        m.clock.advance(MINUTE)
        await steering.cycle(m.clock())
        assert len(await _of(m.log, ExecutionRequested)) == len(sent)  # each move once
    records = await _records(m.log)
    entry = proposal_book(records).entry(pid)
    assert entry.by == "ops" and entry.started == {r.bundle for r in sent}
    assert _violations(records) == []
    unapproved = [r for r in records if r.envelope.type != "ProposalApproved"]
    assert {b for b, _, _ in _violations(unapproved)} == {r.bundle for r in sent}


async def test_an_approved_proposal_held_by_the_caps_sends_the_rest_on_later_cycles() -> None:
    m, config = Mirrored(), _config("attachDriveMaxExecutionsPerCycle=1\n")
    bundles = await _skewed(m)
    async with fake_pulsar() as fake:
        steering = await _started(m, fake, config, [])
        pid = await _waiting(m, steering, bundles)
        moves = proposal_book(await _records(m.log)).entry(pid).proposal.moves
        assert len(moves) >= 2, moves
        await steering.review_verdict(_verdict(pid, "approve"), m.clock())
        assert len(fake.moves()) == 1
        for _ in range(len(moves)):
            m.clock.advance(MINUTE)
            await steering.cycle(m.clock())
        sent = await _of(m.log, ExecutionRequested)
    assert sorted(r.execution_id for r in sent) == [f"{pid}:{i}" for i in range(len(moves))]


async def test_a_rejected_proposal_never_runs_and_a_late_approval_records_the_staleness() -> None:
    m, config = Mirrored(), _config("loadBalancerProposalMaxAgeSeconds=90\n")
    bundles = await _skewed(m)
    async with fake_pulsar() as fake:
        steering = await _started(m, fake, config, [])
        pid = await _waiting(m, steering, bundles)
        assert (await steering.review_verdict(_verdict(pid, "reject"), m.clock())).types() == ["ProposalRejected"]
        with pytest.raises(ProposalClosed, match=f"proposal '{pid}' is rejected"):
            await steering.review_verdict(_verdict(pid, "approve"), m.clock())
        later = await _waiting(m, steering, bundles)
        assert later != pid
        m.clock.advance(100_000)  # past the age bound, before the next cycle found it
        receipt = await steering.review_verdict(_verdict(later, "approve"), m.clock())
        assert receipt.types() == ["ProposalStale"] and "older than 90 s" in receipt.first("ProposalStale")["reason"]
        with pytest.raises(UnknownProposal, match="'drive-42' does not exist"):
            await steering.review_verdict(_verdict("drive-42", "approve"), m.clock())
        assert fake.moves() == []
    assert [s.proposal_id for s in await _of(m.log, ProposalStale)] == [later]
    assert await _of(m.log, ProposalApproved) == []


async def test_a_verdict_on_auto_drive_mode_is_refused_naming_why() -> None:
    m = Mirrored()
    await _skewed(m)
    async with fake_pulsar() as fake:
        steering = await _started(m, fake, LoadBalancerConfig.from_broker_conf(EXTENSIBLE), [])
        with pytest.raises(InvalidInput, match="executes without review"):
            await steering.review_verdict(_verdict("drive-1", "approve"), m.clock())


async def test_verdicts_reach_the_attach_process_over_rest_and_from_lbctl(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    m, config = Mirrored(clock=Clock(wall_clock_ms())), _config()  # the hook's clock is the wall clock
    bundles = await _skewed(m)
    async with fake_pulsar() as fake:
        steering = await _started(m, fake, config, [])
        first = await _waiting(m, steering, bundles)
        async with attach_service(m, fake, config, steering) as url:
            http = AdminHttp(url)
            listed = await asyncio.to_thread(http.call, "GET", "/bb/v1/proposals")
            assert [p["id"] for p in listed if p["status"] == "pending"] == [first]
            write_spec(tmp_path, ClusterSpec(host="pulsar", brokers=0, web_service_url=url))
            code = await asyncio.to_thread(main, ["proposals", "approve", first, "--state-dir", str(tmp_path)])
            assert code == 0, capsys.readouterr()
            shown = await asyncio.to_thread(http.call, "GET", f"/bb/v1/proposals/{first}")
            assert shown["status"] in ("approved", "executed") and shown["started"]
    (approved,) = await _of(m.log, ProposalApproved)
    assert approved.by == "anonymous"  # the service checks no token
