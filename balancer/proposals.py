"""Proposals as pure rules: a cycle's moves, the balance predicted after them, when they go stale.

Invariants:
- pure: time comes in as ``now_ms``; nothing here reads a clock, the log or the network;
- a proposed move is self-explaining: bundle, kind (transfer, unload or split), source,
  destination, reason, the strategy's decision (with ``placement`` when placement chose the
  destination) and the bundle's reported load; a stored move lacking a field reads back with its
  default, never raises;
- ``predict`` is a plain estimate: each broker's reported throughput, with each move's bundle
  throughput taken from its source and given to its destination; a move whose destination is
  picked only when it starts is left out, or (``place_unplaced``, the leader's proposals) given
  to the broker then least loaded (splits move nothing);
- ``stale_reason`` names why a proposal must not run any more (too old; a broker it was computed
  on gone, or its throughput moved beyond the tolerance; a bundle no longer on its source);
  ``None`` means it may still run;
- ``supersession``: a new plan of a kind replaces the waiting plans of that kind, unless one of
  them already proposes exactly its moves (bundle, kind, source, destination), which then stands;
- a proposal's status moves only forward: pending -> approved | rejected | stale | cancelled,
  approved -> cancelled | stale; ``verdict_refusal`` names the value when a verdict does not apply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.load import BrokerLoadData, BundleData, ResourceWeights, max_usage, weighted_max_usage
from balancer.shedding.base import ClusterView
from balancer.split import SplitDecision

TRANSFER, UNLOAD, SPLIT = "transfer", "unload", "split"
AUTO, REVIEW = "auto", "review"
"""The leader's execution modes: executed at once (still recorded), or waiting for an approval."""
PENDING, APPROVED, REJECTED, STALE, CANCELLED, EXECUTED = (
    "pending", "approved", "rejected", "stale", "cancelled", "executed")
APPROVE, REJECT, CANCEL = "approve", "reject", "cancel"
VERDICTS = (APPROVE, REJECT, CANCEL)
_ACCEPTS = {APPROVE: (PENDING,), REJECT: (PENDING,), CANCEL: (PENDING, APPROVED)}
OUTCOME = {APPROVE: APPROVED, REJECT: REJECTED, CANCEL: CANCELLED}


@dataclass(frozen=True)
class ProposedMove:
    """One move of a proposal."""

    bundle: str
    kind: str
    source: str
    destination: str | None
    reason: str
    decision: Mapping[str, Any] = field(default_factory=dict)
    load: Mapping[str, Any] = field(default_factory=dict)

    @property
    def strategy_destination(self) -> str | None:
        """The destination the strategy itself chose (None: placement chose it, or none)."""
        return None if "placement" in self.decision else self.destination

    def to_dict(self) -> dict[str, Any]:
        return {"bundle": self.bundle, "kind": self.kind, "source": self.source,
                "destination": self.destination, "reason": self.reason,
                "decision": dict(self.decision), "load": dict(self.load)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ProposedMove:
        dst = raw.get("destination")
        return cls(str(raw.get("bundle", "")), str(raw.get("kind", TRANSFER)), str(raw.get("source", "")),
                   None if dst is None else str(dst), str(raw.get("reason", "")),
                   dict(raw.get("decision") or {}), dict(raw.get("load") or {}))


def split_move(decision: SplitDecision, owner: str, now_ms: int, load: Mapping[str, Any]) -> ProposedMove:
    """A split decision as a proposal's move (its owner stays the owner of the children)."""
    stored = {**decision.to_dict(), "strategy": "split", "kind": SPLIT, "run_ms": now_ms}
    return ProposedMove(decision.bundle, SPLIT, owner, None, f"split:{decision.reason}", stored, dict(load))


def bundle_load(data: BundleData | None) -> dict[str, Any]:
    """The reported rates of a bundle (empty when it never reported)."""
    if data is None:
        return {}
    stats = data.stats
    return {"msg_rate_in": stats.msg_rate_in, "msg_rate_out": stats.msg_rate_out,
            "msg_throughput_in": stats.msg_throughput_in, "msg_throughput_out": stats.msg_throughput_out,
            "msg_throughput": stats.msg_throughput, "topics": stats.topics}


def broker_summary(view: ClusterView, *, light: bool = False) -> dict[str, dict[str, Any]]:
    """What each broker's load looked like to the cycle (the numbers strategies read).
    ``light`` (the leader's proposals, at every shedding run of a large cluster): the usage
    averages the strategies read and the report's own bundle count, without recomputing each
    report's instantaneous usage or walking the view's bundles."""
    weights = ResourceWeights.from_config(view.config)
    if light:
        return {broker: _light_numbers(data) for broker, data in sorted(view.brokers.items())}
    return {broker: _broker_numbers(data, weights, view) for broker, data in sorted(view.brokers.items())}


def _light_numbers(data: BrokerLoadData) -> dict[str, Any]:
    report = data.report
    return {"weighted_max_ema": data.weighted_max_ema, "msg_throughput_ema": data.msg_throughput_ema,
            "msg_rate": report.msg_rate, "msg_throughput": report.msg_throughput, "bundles": report.bundles,
            "updated_ms": data.updated_ms, "reports": data.reports}


def _broker_numbers(data: BrokerLoadData, weights: ResourceWeights, view: ClusterView) -> dict[str, Any]:
    report = data.report
    return {"weighted_max_ema": data.weighted_max_ema, "msg_throughput_ema": data.msg_throughput_ema,
            "weighted_max_usage": weighted_max_usage(report, weights, extensible=view.config.extensible),
            "max_usage": max_usage(report), "msg_rate": report.msg_rate,
            "msg_throughput": report.msg_throughput, "bundles": view.bundle_count(data.broker_id),
            "updated_ms": data.updated_ms, "reports": data.reports}


def predict(brokers: Mapping[str, Mapping[str, Any]], moves: Iterable[ProposedMove], *,
            place_unplaced: bool = False) -> dict[str, Any]:
    """Each broker's throughput now and after the moves, and max/mean of both; a move without a
    destination is left out unless ``place_unplaced`` (then the least loaded broker gets it)."""
    before = {b: float(v.get("msg_throughput", 0.0)) for b, v in brokers.items()}
    after = dict(before)
    for move in moves:
        if move.kind == SPLIT:
            continue
        amount = float(move.load.get("msg_throughput", 0.0))
        dst = move.destination
        if dst is None and not place_unplaced:
            continue
        if dst is None:  # placed when it starts: the estimate gives it to the least loaded other broker
            others = [b for b in after if b != move.source]
            if not others:
                continue
            dst = min(others, key=lambda b: (after[b], b))
        if move.source in after:
            after[move.source] = max(0.0, after[move.source] - amount)
        after[dst] = after.get(dst, 0.0) + amount
    return {"msg_throughput_before": before, "msg_throughput_after": after,
            "max_over_mean_before": max_over_mean(before.values()),
            "max_over_mean_after": max_over_mean(after.values())}


def max_over_mean(values: Iterable[float]) -> float:
    """max/mean of the values (1.0 when they sum to nothing)."""
    found = list(values)
    total = sum(found)
    return 1.0 if not found or total <= 0 else max(found) / (total / len(found))


@dataclass(frozen=True, slots=True)
class Staleness:
    """When a proposal may no longer run (broker.conf: ``loadBalancerProposalMaxAgeSeconds``,
    ``loadBalancerProposalLoadTolerance``)."""

    max_age_ms: int
    tolerance: float
    """The largest change of a broker's throughput, as a share of the larger of its own and
    the cluster's mean throughput when the proposal was computed (a quiet broker's small
    swings do not count as the load moving)."""


def stale_reason(*, run_ms: int, now_ms: int, then: Mapping[str, Mapping[str, Any]],
                 now: Mapping[str, float], moves: Iterable[ProposedMove],
                 owners: Mapping[str, str | None], rule: Staleness) -> str | None:
    """Why a proposal computed at ``run_ms`` on the brokers' numbers ``then`` must not run at
    ``now_ms`` (``now``: each broker's throughput; ``owners``: each move's bundle -> its owner
    at rest, None when it is not); None: it may run."""
    age = now_ms - run_ms
    if age > rule.max_age_ms:
        return (f"older than {rule.max_age_ms / 1000:g} s ({age / 1000:g} s old; "
                "loadBalancerProposalMaxAgeSeconds)")
    for move in moves:
        owner = owners.get(move.bundle)
        if owner != move.source:
            where = "not at rest" if owner is None else f"owned by {owner}"
            return f"{move.bundle} is no longer on {move.source} ({where})"
    before = {b: float(v.get("msg_throughput", 0.0)) for b, v in then.items()}
    mean = sum(before.values()) / len(before) if before else 0.0
    for broker, value in sorted(before.items()):
        if broker not in now:
            return f"broker {broker} it was computed on is gone"
        base = max(value, mean)
        if base > 0 and abs(now[broker] - value) / base > rule.tolerance:
            return (f"the load of {broker} moved {abs(now[broker] - value) / base:.0%} "
                    f"({value:.0f} -> {now[broker]:.0f} B/s; loadBalancerProposalLoadTolerance="
                    f"{rule.tolerance:g})")
    return None


def move_keys(moves: Iterable[ProposedMove]) -> frozenset[tuple[str, str, str, str | None]]:
    """What makes two plans the same: each move's bundle, kind, source and destination (not the
    numbers behind them, which change with every report)."""
    return frozenset((m.bundle, m.kind, m.source, m.destination) for m in moves)


def supersession(waiting: Iterable[tuple[str, Iterable[ProposedMove]]],
                 moves: Iterable[ProposedMove]) -> tuple[str | None, list[str]]:
    """For a new plan ``moves`` and the waiting proposals of its kind (id, moves), oldest first:
    the one that stands because it proposes the same moves (then nothing is superseded), or
    None and the ids the new proposal supersedes."""
    wanted = move_keys(moves)
    found = [(pid, move_keys(old)) for pid, old in waiting]
    for pid, keys in found:
        if keys == wanted:
            return pid, []
    return None, [pid for pid, _ in found]


def verdict_refusal(proposal_id: str, status: str | None, verdict: str) -> str | None:
    """Why ``verdict`` does not apply to a proposal in ``status`` (None: unknown); None: it does."""
    if verdict not in VERDICTS:
        return f"verdict {verdict!r}: expected one of {', '.join(VERDICTS)}"
    if status is None:
        return f"proposal {proposal_id!r} does not exist"
    if status not in _ACCEPTS[verdict]:
        return f"proposal {proposal_id!r} is {status}: only a {' or '.join(_ACCEPTS[verdict])} one can be {OUTCOME[verdict]}"
    return None
