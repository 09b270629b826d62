"""Decisions are data: every move the balancer proposes, with its label, reason and the numbers.

Invariants:
- a ``Decision`` is immutable and self-explaining: ``inputs`` holds the values that led to it
  (usages, averages, thresholds, the selected load), so "why did this bundle move?" is answered
  from the decision alone;
- labels and reasons are Pulsar's (PIP-220 ``UnloadDecision``), plus ``Balanced`` and the
  modular strategies' project labels (behaviour §4.0);
- ``to_dict`` gives the stable JSON/event form; ``to_output`` the ``lbctl decide`` form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Label(StrEnum):
    SUCCESS = "Success"
    SKIP = "Skip"
    FAILURE = "Failure"


class Reason(StrEnum):
    OVERLOADED = "Overloaded"
    UNDERLOADED = "Underloaded"
    ADMIN = "Admin"
    HIT_COUNT = "HitCount"
    NO_BUNDLES = "NoBundles"
    COOL_DOWN = "CoolDown"
    OUTDATED_DATA = "OutDatedData"
    NO_LOAD_DATA = "NoLoadData"
    NO_BROKERS = "NoBrokers"
    UNKNOWN = "Unknown"
    BALANCED = "Balanced"


class DecisionKind(StrEnum):
    UNLOAD = "unload"
    TRANSFER = "transfer"
    SPLIT = "split"
    ASSIGN = "assign"


InputValue = float | int | str | bool | None | list[Any] | dict[str, Any]


@dataclass(frozen=True, slots=True)
class Decision:
    """One proposed move: ``bundle`` from ``source`` to ``destination`` (None = plain unload)."""

    bundle: str
    source: str | None
    destination: str | None
    label: Label = Label.SUCCESS
    reason: Reason = Reason.OVERLOADED
    strategy: str = ""
    inputs: Mapping[str, InputValue] = field(default_factory=dict)

    @property
    def kind(self) -> DecisionKind:
        return DecisionKind.UNLOAD if self.destination is None else DecisionKind.TRANSFER

    def to_output(self) -> dict[str, Any]:
        """The ``lbctl decide shed`` form (contracts §5)."""
        return {
            "bundle": self.bundle,
            "source": self.source,
            "destination": self.destination,
            "label": str(self.label),
            "reason": str(self.reason),
        }

    def to_dict(self) -> dict[str, Any]:
        """The stored form (events carry this under ``decision``)."""
        out = self.to_output()
        out["strategy"] = self.strategy
        out["kind"] = str(self.kind)
        out["inputs"] = dict(self.inputs)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decision:
        return cls(
            bundle=str(data["bundle"]),
            source=data.get("source"),
            destination=data.get("destination"),
            label=Label(data.get("label", "Success")),
            reason=Reason(data.get("reason", "Overloaded")),
            strategy=str(data.get("strategy", "")),
            inputs=dict(data.get("inputs") or {}),
        )


@dataclass(frozen=True, slots=True)
class ShedResult:
    """The outcome of one shedding run: the decisions in order, or why nothing moves."""

    decisions: tuple[Decision, ...] = ()
    skip: Reason | None = None
    inputs: Mapping[str, InputValue] = field(default_factory=dict)

    @classmethod
    def skipped(cls, reason: Reason, **inputs: InputValue) -> ShedResult:
        return cls((), reason, inputs)

    def to_output(self) -> dict[str, Any]:
        return {
            "decisions": [d.to_output() for d in self.decisions],
            "skip": None if self.skip is None else str(self.skip),
        }
