"""The operator's approvals in a simulated run: review-mode seeds, verdicts at random steps, the check.

Invariants:
- whether a seed runs in review mode (``loadBalancerExecution=review``, with a short
  ``loadBalancerProposalMaxAgeSeconds`` so that proposals also go stale by age) and its verdicts
  are drawn from their own streams (``Random(f"{seed}:review")``, ``Random(f"{seed}:approve")``),
  so the plans of every other fault are unchanged; about a third of the seeds review;
- a verdict fault names a proposal by a number drawn at plan time: mostly one of those pending
  when it fires, sometimes any recorded one (a stale, rejected or executed proposal: the leader
  must refuse it and change nothing);
- ``approval_violation`` is the audit's rule (``projections.proposals.ApprovalHistory``) over the
  run's whole log: no shedding move without an approved proposal that was neither stale,
  rejected nor cancelled when it started.
"""

from __future__ import annotations

from collections.abc import Mapping
from random import Random
from typing import Any

from actors.runtime.sim.host import Fault, SimHost
from events.catalog import ReviewProposal
from projections.proposals import ApprovalHistory, proposal_book

REVIEW_SHARE = 1 / 3
MAX_AGE_S = 30
VERDICTS = (("approve", 0.6), ("reject", 0.2), ("cancel", 0.2))


def reviews(seed: int) -> bool:
    return Random(f"{seed}:review").random() < REVIEW_SHARE


def review_config(seed: int, config: Mapping[str, Any]) -> dict[str, Any]:
    """The scenario's configuration, in review mode when the seed reviews."""
    if not reviews(seed):
        return dict(config)
    return {**config, "loadBalancerExecution": "review", "loadBalancerProposalMaxAgeSeconds": MAX_AGE_S}


def approval_plan(seed: int, steps: int) -> list[Fault]:
    if not reviews(seed):
        return []
    rng = Random(f"{seed}:approve")
    out: list[Fault] = []
    for step in range(1, steps):
        if rng.random() < 0.05:
            verdict = rng.choices([v for v, _ in VERDICTS], [w for _, w in VERDICTS])[0]
            pick = rng.randrange(1_000_000) * (1 if rng.random() < 0.85 else -1)  # < 0: any proposal
            out.append(Fault(step, verdict, "", pick))
    return out


def fire_verdict(host: SimHost, fault: Fault) -> bool:
    """Send the verdict about the proposal the fault picks; False when none is recorded yet."""
    book = proposal_book(host.records)
    pending = [e.proposal.proposal_id for e in book.pending()]
    every = list(book.entries)
    pool = pending if int(fault.value) >= 0 and pending else every
    if not pool:
        return False
    chosen = pool[abs(int(fault.value)) % len(pool)]
    host.submit(ReviewProposal(command_id=host.command_id("admin"), epoch=host.epoch, proposal_id=chosen,
                               verdict=fault.kind, by="sim"))
    return True


def approval_violation(host: SimHost) -> str | None:
    """The first shedding move the approval rule refuses; None: none."""
    history = ApprovalHistory(review=host.config.load_balancer_execution == "review")
    for record in host.records:
        envelope = record.envelope
        if envelope.type in ("ProposalRecorded", "ProposalApproved", "ProposalRejected", "ProposalCancelled",
                             "ProposalStale", "UnloadRequested", "TransferPrepared"):
            try:
                history.take(envelope.typed, envelope.ts_ms)
            except Exception:  # a hostile fault's corrupt record: the replay check names it
                continue
    found = history.violations()
    return found[0][2] if found else None
