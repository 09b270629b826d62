"""Proposals: one decision cycle's moves on an attached cluster, as data and as a recorded event.

Invariants:
- a proposal is immutable and self-explaining: each move carries its bundle, kind (transfer,
  unload or split), source, destination, reason, the strategy's decision (with ``placement``
  when placement chose the destination) and the bundle's reported load; the proposal carries
  the load each broker showed the cycle and what the cycle had folded (``folded``);
- ``to_event`` and ``from_event`` round-trip (``ProposalRecorded``); a stored move that lacks a
  field reads back with its default, never raises;
- ``predicted`` is a plain estimate: each broker's reported throughput with each transfer's
  bundle throughput taken from its source and given to its destination (splits move nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.load import BrokerLoadData, BundleData, ResourceWeights, max_usage, weighted_max_usage
from balancer.shedding.base import ClusterView
from events.catalog import ProposalRecorded

ADVISE = "advise"
DRIVE = "drive"
MODES = (ADVISE, DRIVE)
TRANSFER, UNLOAD, SPLIT = "transfer", "unload", "split"


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


@dataclass(frozen=True)
class Proposal:
    """One cycle's proposal; ``moves`` may be empty (then ``skip`` says why)."""

    proposal_id: str
    strategy: str
    mode: str
    run_ms: int
    moves: tuple[ProposedMove, ...] = ()
    skip: str | None = None
    folded: Mapping[str, int] = field(default_factory=dict)
    brokers: Mapping[str, Any] = field(default_factory=dict)
    predicted: Mapping[str, Any] | None = None

    def to_event(self) -> ProposalRecorded:
        return ProposalRecorded(
            proposal_id=self.proposal_id, strategy=self.strategy, mode=self.mode, run_ms=self.run_ms,
            moves=[m.to_dict() for m in self.moves], skip=self.skip, folded=dict(self.folded),
            brokers={b: dict(v) for b, v in self.brokers.items()},
            predicted=None if self.predicted is None else dict(self.predicted))

    @classmethod
    def from_event(cls, event: ProposalRecorded) -> Proposal:
        return cls(str(event.proposal_id), str(event.strategy), str(event.mode), int(event.run_ms),
                   tuple(ProposedMove.from_dict(m) for m in event.moves or ()), event.skip,
                   dict(event.folded or {}), dict(event.brokers or {}),
                   None if event.predicted is None else dict(event.predicted))


def proposal_id(mode: str, run_ms: int) -> str:
    """A cycle's proposal id: its mode and its time (one cycle per millisecond at most)."""
    return f"{mode}-{run_ms}"


def bundle_load(data: BundleData | None) -> dict[str, Any]:
    """The reported rates of a bundle (empty when it never reported)."""
    if data is None:
        return {}
    stats = data.stats
    return {"msg_rate_in": stats.msg_rate_in, "msg_rate_out": stats.msg_rate_out,
            "msg_throughput_in": stats.msg_throughput_in, "msg_throughput_out": stats.msg_throughput_out,
            "msg_throughput": stats.msg_throughput, "topics": stats.topics}


def broker_summary(view: ClusterView) -> dict[str, dict[str, Any]]:
    """What each broker's load looked like to the cycle (the numbers strategies read)."""
    weights = ResourceWeights.from_config(view.config)
    return {broker: _broker_numbers(data, weights, view) for broker, data in sorted(view.brokers.items())}


def _broker_numbers(data: BrokerLoadData, weights: ResourceWeights, view: ClusterView) -> dict[str, Any]:
    report = data.report
    return {"weighted_max_ema": data.weighted_max_ema, "msg_throughput_ema": data.msg_throughput_ema,
            "weighted_max_usage": weighted_max_usage(report, weights, extensible=view.config.extensible),
            "max_usage": max_usage(report), "msg_rate": report.msg_rate,
            "msg_throughput": report.msg_throughput, "bundles": view.bundle_count(data.broker_id),
            "updated_ms": data.updated_ms, "reports": data.reports}


def predict(brokers: Mapping[str, Mapping[str, Any]], moves: Iterable[ProposedMove]) -> dict[str, Any]:
    """Each broker's throughput now and after the moves, and max/mean of both."""
    before = {b: float(v.get("msg_throughput", 0.0)) for b, v in brokers.items()}
    after = dict(before)
    for move in moves:
        if move.kind == SPLIT or move.destination is None:
            continue
        amount = float(move.load.get("msg_throughput", 0.0))
        if move.source in after:
            after[move.source] = max(0.0, after[move.source] - amount)
        after[move.destination] = after.get(move.destination, 0.0) + amount
    return {"msg_throughput_before": before, "msg_throughput_after": after,
            "max_over_mean_before": max_over_mean(before.values()),
            "max_over_mean_after": max_over_mean(after.values())}


def max_over_mean(values: Iterable[float]) -> float:
    """max/mean of the values (1.0 when they sum to nothing)."""
    found = list(values)
    total = sum(found)
    return 1.0 if not found or total <= 0 else max(found) / (total / len(found))
