"""The leader's proposals on the in-process host, as an operator would notice them.

Auto mode moves as before and records each cycle's proposal, each move naming it; review mode
moves nothing until an approval, which records who approved; a rejected or cancelled proposal
never runs; a proposal goes stale with its reason (age, moved load, superseded by another plan),
while a repeat of a waiting plan records nothing; a verdict a proposal cannot take is refused
naming it, and nothing is recorded.
"""

from __future__ import annotations

import json

import pytest

from actors.api import Cluster
from actors.cluster.inproc_link import InProcLink
from actors.runtime import InProcessHost
from actors.settings import LEADER
from balancer.errors import ProposalClosed, UnknownProposal
from balancer.proposals import (
    ProposedMove,
    Staleness,
    predict,
    stale_reason,
    supersession,
    verdict_refusal,
)
from events.catalog import PauseBalancer, ReviewProposal, SplitRequested
from events.log.port import Record
from lbctl.attach import using
from projections.control import control_history
from projections.explain import moves_of, render
from projections.proposals import ApprovalHistory, ProposalBook
from tests.actors.test_control import MINUTE, lbctl, shed_host
from tests.support.cluster_scenarios import assert_consistent, call, shed_events


def approval_violations(records: list[Record], *, review: bool) -> list[tuple[str, int, str]]:
    history = ApprovalHistory(review=review)
    for record in records:
        history.take(record.envelope.typed, record.envelope.ts_ms)
    return history.violations()


def book(host: InProcessHost) -> ProposalBook:
    found = ProposalBook()
    for record in host.records:
        found.fold(record.envelope.typed, record.envelope.ts_ms)
    return found


def review(host: InProcessHost, pid: str, verdict: str, by: str = "lbctl:test") -> object:
    command = ReviewProposal(command_id=host.command_id(), epoch=host.epoch, proposal_id=pid,
                             verdict=verdict, by=by)
    return host.call(command)


def first_pending(host: InProcessHost) -> str:
    assert host.run_until(lambda: bool(book(host).pending()), 5 * MINUTE)
    return book(host).pending()[-1].proposal.proposal_id


# -- the pure rules ----------------------------------------------------------------------------


def test_a_new_plan_supersedes_the_waiting_ones_unless_one_proposes_the_same_moves() -> None:
    def move(bundle: str, dst: str | None = None, *, load: float = 1.0) -> ProposedMove:
        return ProposedMove(bundle, "unload" if dst is None else "transfer", "a", dst, "Overloaded",
                            load={"msg_throughput": load})

    waiting = [("shed-1", [move("t/n/0"), move("t/n/1")]), ("shed-2", [move("t/n/2", "b")])]
    # The same moves in another order, with other numbers behind them: the waiting one stands.
    assert supersession(waiting, [move("t/n/1", load=9.0), move("t/n/0")]) == ("shed-1", [])
    assert supersession(waiting, [move("t/n/2", "b")]) == ("shed-2", [])
    # Another destination, one move more or fewer: a new plan, and every waiting one is replaced.
    assert supersession(waiting, [move("t/n/2", "c")]) == (None, ["shed-1", "shed-2"])
    assert supersession(waiting, [move("t/n/0")]) == (None, ["shed-1", "shed-2"])
    assert supersession([], [move("t/n/0")]) == (None, [])


def test_the_predicted_balance_moves_load_off_the_source() -> None:
    brokers = {"a": {"msg_throughput": 300.0}, "b": {"msg_throughput": 100.0}, "c": {"msg_throughput": 200.0}}
    moves = [ProposedMove("t/n/1", "transfer", "a", "b", "Overloaded", load={"msg_throughput": 100.0}),
             ProposedMove("t/n/2", "unload", "a", None, "Overloaded", load={"msg_throughput": 50.0})]
    found = predict(brokers, moves, place_unplaced=True)
    assert found["msg_throughput_after"] == {"a": 150.0, "b": 250.0, "c": 200.0}  # a tie: the first name
    assert found["max_over_mean_after"] < found["max_over_mean_before"]
    assert predict(brokers, moves)["msg_throughput_after"]["a"] == 200.0  # unplaced left out


def test_staleness_names_its_reason() -> None:
    rule = Staleness(max_age_ms=300_000, tolerance=0.2)
    then = {"a": {"msg_throughput": 1000.0}, "b": {"msg_throughput": 1000.0}}
    move = ProposedMove("t/n/1", "transfer", "a", "b", "Overloaded")
    fine = dict(run_ms=0, now_ms=1000, then=then, now={"a": 1100.0, "b": 950.0}, moves=[move],
                owners={"t/n/1": "a"}, rule=rule)
    assert stale_reason(**fine) is None  # type: ignore[arg-type]
    assert "older than 300 s" in str(stale_reason(**{**fine, "now_ms": 400_000}))  # type: ignore[arg-type]
    assert "the load of a moved 50%" in str(stale_reason(**{**fine, "now": {"a": 1500.0, "b": 1000.0}}))  # type: ignore[arg-type]
    assert "broker b it was computed on is gone" in str(stale_reason(**{**fine, "now": {"a": 1000.0}}))  # type: ignore[arg-type]
    assert "no longer on a (owned by b)" in str(stale_reason(**{**fine, "owners": {"t/n/1": "b"}}))  # type: ignore[arg-type]


def test_a_verdict_that_does_not_apply_is_named() -> None:
    assert verdict_refusal("shed-1", None, "approve") == "proposal 'shed-1' does not exist"
    assert verdict_refusal("shed-1", "stale", "approve") == \
        "proposal 'shed-1' is stale: only a pending one can be approved"
    assert verdict_refusal("shed-1", "approved", "cancel") is None
    assert verdict_refusal("shed-1", "executed", "cancel") is not None


# -- the leader --------------------------------------------------------------------------------


def test_auto_mode_records_each_cycle_and_each_move_names_its_proposal() -> None:
    host = shed_host()
    host.advance(5 * MINUTE)
    moves = [r.envelope.payload for r in host.events("TransferPrepared", "UnloadRequested")
             if r.envelope.payload.get("decision", {}).get("strategy") == "ThresholdShedder"]
    assert moves
    found = book(host)
    named = {m["decision"]["proposal"] for m in moves}
    assert named <= set(found.entries)
    for pid in named:
        entry = found.entries[pid]
        assert entry.proposal.mode == "auto" and entry.by == "auto"
        assert entry.proposal.predicted is not None and entry.proposal.brokers
        assert all(m.reason and m.decision.get("inputs") is not None for m in entry.proposal.moves)
    assert any(e.state == "executed" for e in found.entries.values())
    assert_consistent(host)


def test_review_mode_moves_nothing_until_approved_and_records_who() -> None:
    host = shed_host(loadBalancerExecution="review")
    pid = first_pending(host)
    assert shed_events(host) == []
    assert host.bodies[LEADER].status()["proposals"] == {"mode": "review", "pending": 1}
    reply = review(host, pid, "approve")
    assert reply.first("ProposalApproved")["by"] == "lbctl:test"  # type: ignore[attr-defined]
    assert host.run_until(lambda: bool(shed_events(host)), MINUTE)
    entry = book(host).entries[pid]
    assert entry.status == "approved" and entry.started
    history = control_history(host.records)
    assert history.violations() == []
    # The audit's rule holds on this log, and bites on the same log without the approval.
    assert approval_violations(host.records, review=True) == []
    unapproved = [r for r in host.records if r.envelope.type != "ProposalApproved"]
    assert {b for b, _, _ in approval_violations(unapproved, review=True)} == entry.started
    # explain names the proposal behind the move and who approved it.
    moved = sorted(entry.started)[0]
    story = render(moved, moves_of(moved, host.records))
    assert f"proposal {pid} (review mode, " in story and "approved by lbctl:test at " in story
    assert_consistent(host)


def test_a_rejected_proposal_never_runs_and_a_repeat_of_a_waiting_one_stands() -> None:
    host = shed_host(loadBalancerExecution="review")
    pid = first_pending(host)
    review(host, pid, "reject")
    assert book(host).status_of(pid) == "rejected"
    host.advance(3 * MINUTE)
    assert shed_events(host) == []
    # The cycle after the rejection proposes again; the cycles after it propose the same moves,
    # and that waiting proposal stands instead of being replaced by a copy every minute.
    statuses = [e.state for e in book(host).entries.values()]
    assert statuses == ["rejected", "pending"]
    assert host.events("ProposalStale") == []


def test_a_proposal_older_than_the_bound_goes_stale_with_its_reason() -> None:
    host = shed_host(loadBalancerExecution="review", loadBalancerProposalMaxAgeSeconds=30)
    pid = first_pending(host)
    host.advance(45_000)  # before the next cycle (a minute on) would supersede it
    assert book(host).status_of(pid) == "stale"
    (stale,) = [r.envelope.payload for r in host.events("ProposalStale")]
    assert stale["proposal_id"] == pid and "older than 30 s" in stale["reason"]
    with pytest.raises(ProposalClosed, match=f"proposal '{pid}' is stale"):
        _raise(review(host, pid, "approve"))


def test_cancel_drops_the_moves_not_started() -> None:
    host = shed_host(loadBalancerExecution="review", loadBalancerMaxMovesPerMinute=1)
    pid = first_pending(host)
    review(host, pid, "approve")
    host.advance(1_000)
    cancelled = review(host, pid, "cancel", by="lbctl:oncall").first("ProposalCancelled")  # type: ignore[attr-defined]
    entry = book(host).entries[pid]
    assert entry.status == "cancelled" and len(entry.started) == 1
    assert sorted(cancelled["bundles"]) == sorted(m.bundle for m in entry.proposal.moves
                                                  if m.bundle not in entry.started)
    host.advance(30_000)
    assert len(book(host).entries[pid].started) == 1  # nothing more of it started
    # Who cancelled is recorded beside who approved; the move that ran names its approver.
    assert (entry.by, entry.approved_by) == ("lbctl:oncall", "lbctl:test")
    (moved,) = entry.started
    assert "approved by lbctl:test at " in render(moved, moves_of(moved, host.records))


def test_an_unknown_proposal_is_named() -> None:
    host = shed_host(loadBalancerExecution="review")
    with pytest.raises(UnknownProposal, match="proposal 'shed-42' does not exist"):
        _raise(review(host, "shed-42", "approve"))


def _raise(reply: object) -> None:
    if isinstance(reply, Exception):
        raise reply


# -- lbctl ------------------------------------------------------------------------------------


def test_lbctl_proposals_list_show_approve_and_bad_ids(capsys: pytest.CaptureFixture[str]) -> None:
    host = shed_host(loadBalancerExecution="review")
    pid = first_pending(host)
    with using(Cluster(InProcLink(host))):
        code, out, _ = lbctl(capsys, "proposals", "list")
        assert code == 0 and pid in out and "pending" in out
        code, out, _ = lbctl(capsys, "proposals", "show", pid)
        assert code == 0 and f"proposal {pid}: pending (review, ThresholdShedder" in out
        assert "predicted max/mean throughput" in out and "broker-1 ->" in out
        code, out, _ = lbctl(capsys, "balancer", "status")
        assert code == 0 and "proposals: 1 pending (loadBalancerExecution=review" in out
        count = len(host.records)
        code, _, err = lbctl(capsys, "proposals", "approve", "shed-1")
        assert code == 2 and "proposal 'shed-1' does not exist" in err and err.count("\n") == 1
        assert len(host.records) == count  # nothing recorded
        code, out, _ = lbctl(capsys, "proposals", "approve", pid)
        assert code == 0 and f"proposal {pid} approved by lbctl:" in out
        count = len(host.records)
        code, _, err = lbctl(capsys, "proposals", "reject", pid)
        assert code == 2 and f"proposal '{pid}' is approved: only a pending one can be rejected" in err
        assert len(host.records) == count
        code, out, _ = lbctl(capsys, "proposals", "list", "--json")
        listed = {p["id"]: p for p in json.loads(out)}
        assert listed[pid]["by"].startswith("lbctl:") and listed[pid]["status"] in ("approved", "executed")
    assert_consistent(host)


def test_a_leaders_split_in_review_mode_waits_for_approval_and_names_its_proposal() -> None:
    host = shed_host(loadBalancerExecution="review", loadBalancerAutoBundleSplitEnabled=True,
                     loadBalancerSheddingEnabled=False, loadBalancerNamespaceBundleMaxMsgRate=100)
    pid = first_pending(host)
    assert pid.startswith("split-") and host.events("SplitRequested") == []
    review(host, pid, "approve")
    assert host.run_until(lambda: bool(host.events("SplitRequested")), MINUTE)
    host.advance(1_000)
    splits = [r.envelope.payload for r in host.events("SplitRequested") if r.envelope.payload["proposal"] == pid]
    assert {s["bundle"] for s in splits} == {m.bundle for m in book(host).entries[pid].proposal.moves}
    assert book(host).status_of(pid) == "executed"
    # The audit's rule holds on this log, and bites on the same log without the approval.
    assert approval_violations(host.records, review=True) == []
    unapproved = [r for r in host.records if r.envelope.type != "ProposalApproved"]
    assert [line for _, _, line in approval_violations(unapproved, review=True)] == [
        f"{s_ts}: split of {bundle} ran proposal {pid}, never approved"
        for bundle, s_ts in [(r.envelope.payload["bundle"], r.envelope.ts_ms) for r in host.events("SplitRequested")
                             if r.envelope.payload["proposal"] == pid]]
    # An operator's split is the operator's own act; a leader's split naming no proposal is not.
    history = ApprovalHistory(review=True)
    history.take(SplitRequested(bundle="t/n/0x0_0x1", src="b1", algorithm="range_equally_divide",
                                reason="admin", by="ops"), 5)
    history.take(SplitRequested(bundle="t/n/0x1_0x2", src="b1", algorithm="range_equally_divide",
                                reason="MsgRate"), 6)
    assert [line for _, _, line in history.violations()] == [
        "6: split of t/n/0x1_0x2 named no proposal (loadBalancerExecution=review)"]
    assert_consistent(host)


def test_a_split_approved_during_a_pause_waits_for_its_end_and_the_audit_names_one_that_did_not() -> None:
    host = shed_host(loadBalancerExecution="review", loadBalancerAutoBundleSplitEnabled=True,
                     loadBalancerSheddingEnabled=False, loadBalancerNamespaceBundleMaxMsgRate=100)
    pid = first_pending(host)
    paused = call(host, PauseBalancer, duration_ms=5 * MINUTE, reason="incident", by="ops").first("BalancerPaused")
    assert paused is not None
    review(host, pid, "approve")
    host.advance(4 * MINUTE)
    assert [r for r in host.events("SplitRequested") if r.envelope.payload["proposal"] == pid] == []
    assert host.run_until(lambda: any(r.envelope.payload["proposal"] == pid
                                      for r in host.events("SplitRequested")), 2 * MINUTE)
    requested = [r.envelope.ts_ms for r in host.events("SplitRequested") if r.envelope.payload["proposal"] == pid]
    assert min(requested) >= paused["until_ms"]
    assert control_history(host.records).violations() == []
    # The same split requested inside the pause (a leader that did not hold it) is named.
    history = control_history(host.records)
    bundle, _, _ = history.splits[0]
    history.splits[0] = (bundle, pid, paused["since_ms"] + MINUTE)
    (line,) = history.violations()
    assert line.startswith(f"{paused['since_ms'] + MINUTE}: split of {bundle} sent while paused "
                           f"(since {paused['since_ms']}, by ops: incident; decided or approved at ")
    # Decided before the pause and requested inside it: it raced the pause, no breach.
    raced = control_history(host.records)
    raced.proposed[pid] = paused["since_ms"] - 1
    raced.splits[0] = (bundle, pid, paused["since_ms"] + MINUTE)
    assert raced.violations() == []
    assert_consistent(host)
