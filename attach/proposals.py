"""Proposals of an attached cluster: the modes of ``lbctl attach`` and the id of a cycle's proposal.

The proposal type and its pure rules are shared with the project's own leader: the type
(``Proposal``, round-tripping ``ProposalRecorded``) lives in ``projections.proposals``, the moves,
the predicted balance and the staleness rule in ``balancer.proposals``; they are re-exported
here under the names ``attach`` has always used.

Invariants: an attached cycle's proposal is ``advise`` (never executed) or ``drive`` (executed,
each move traced by the Execution* events naming ``proposal_id``).
"""

from __future__ import annotations

from balancer.proposals import (
    SPLIT,
    TRANSFER,
    UNLOAD,
    ProposedMove,
    broker_summary,
    bundle_load,
    max_over_mean,
    predict,
    split_move,
)
from projections.proposals import Proposal

ADVISE = "advise"
DRIVE = "drive"
MODES = (ADVISE, DRIVE)

__all__ = ["ADVISE", "DRIVE", "MODES", "SPLIT", "TRANSFER", "UNLOAD", "Proposal", "ProposedMove",
           "broker_summary", "bundle_load", "max_over_mean", "predict", "proposal_id", "split_move"]


def proposal_id(mode: str, run_ms: int) -> str:
    """A cycle's proposal id: its mode and its time (one cycle per millisecond at most)."""
    return f"{mode}-{run_ms}"
