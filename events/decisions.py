"""Typed reading of a stored decision: label, reason, strategy and the numbers behind a move.

Events store ``decision`` as a plain map (what ``Decision.to_dict()``, the leader's additions, a
split decision or a mirror wrote); ``DecisionRecord.from_payload`` reads any of them, and
``to_payload`` gives the same map back.

Invariants:
- lossless: ``DecisionRecord.from_payload(d).to_payload() == d`` for every map of plain data:
  a key this module does not name is kept in ``extra``, a key that was absent stays absent;
- never raises on a stored map: a value of the wrong kind (or a stored None) is kept in
  ``extra`` under its key and its typed field stays None (what ``events.usable`` refuses never reaches a fold anyway);
- ``placement`` is where a placement put the bundle and why: the candidates, each one's score
  (an overloaded broker's infinite score is the text ``"inf"``), the best set and the filter
  steps (``balancer.placement.base.Placement.to_dict``). What an assignment stores is bounded
  (``stored_placement``): at most ``KEEP_CANDIDATES`` candidates with their scores (the chosen
  one, the best set, then the lowest scores) and ``candidate_count`` saying how many there were;
  a filter step keeps its broker list only when it is that short, its ``count`` always, so a
  cluster of hundreds of brokers does not write kilobytes per placement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_TEXT = ("strategy", "label", "reason", "kind", "source", "destination")
KEEP_CANDIDATES = 8


def stored_placement(placement: Mapping[str, Any], keep: int = KEEP_CANDIDATES) -> dict[str, Any]:
    """``Placement.to_dict()`` bounded for the log (see the module docstring)."""
    candidates = [str(c) for c in _list(placement.get("candidates"))]
    scores = placement.get("scores")
    scores = scores if isinstance(scores, Mapping) else {}
    first = [placement.get("broker"), *_list(placement.get("best"))]

    def rank(broker: str) -> tuple[int, float, str]:
        score = scores.get(broker)
        value = score if isinstance(score, int | float) else float("inf")
        return (first.index(broker) if broker in first else len(first), float(value), broker)

    kept = sorted(candidates, key=rank)[:keep]
    steps = [{"name": s.get("name", ""), "count": len(_list(s.get("brokers"))), "note": s.get("note", ""),
              **({"brokers": s["brokers"]} if len(_list(s.get("brokers"))) <= keep else {})}
             for s in _list(placement.get("steps")) if isinstance(s, Mapping)]
    return {**placement, "candidates": [c for c in candidates if c in kept],
            "scores": {b: v for b, v in scores.items() if b in kept}, "candidate_count": len(candidates),
            "steps": steps}


@dataclass(frozen=True, slots=True)
class PlacementRecord:
    """Where a placement put a bundle, among which candidates, with what scores."""

    broker: str | None
    candidates: tuple[str, ...] = ()
    scores: Mapping[str, float | str] = field(default_factory=dict)
    best: tuple[str, ...] = ()
    strategy: str = ""
    source: str = ""
    steps: tuple[Mapping[str, Any], ...] = ()
    candidate_count: int = 0
    """How many candidates there were (``candidates`` may list only the first of them)."""
    stored: Mapping[str, Any] | None = None
    """The map it was read from, given back as it was by ``to_payload``."""

    @classmethod
    def from_payload(cls, raw: Mapping[str, Any]) -> PlacementRecord:
        scores, broker, count = raw.get("scores"), raw.get("broker"), raw.get("candidate_count")
        candidates = tuple(str(c) for c in _list(raw.get("candidates")))
        return cls(
            broker=broker if isinstance(broker, str) else None,
            candidates=candidates,
            scores={str(b): v for b, v in scores.items()} if isinstance(scores, Mapping) else {},
            best=tuple(str(b) for b in _list(raw.get("best"))),
            strategy=str(raw.get("strategy") or ""), source=str(raw.get("source") or ""),
            steps=tuple(s for s in _list(raw.get("steps")) if isinstance(s, Mapping)),
            candidate_count=count if type(count) is int else len(candidates), stored=raw,
        )

    def to_payload(self) -> dict[str, Any]:
        if self.stored is not None:
            return dict(self.stored)
        return {"broker": self.broker, "candidates": list(self.candidates), "strategy": self.strategy,
                "source": self.source, "scores": dict(self.scores), "best": list(self.best),
                "steps": [dict(s) for s in self.steps], "candidate_count": self.candidate_count}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """A stored decision, typed: None/empty where the writer left a part out."""

    strategy: str | None = None
    label: str | None = None
    reason: str | None = None
    kind: str | None = None
    source: str | None = None
    destination: str | None = None
    inputs: Mapping[str, Any] | None = None
    placement: PlacementRecord | None = None
    run_ms: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Every other key, as stored (``bundle``, ``folded``, ``started_ms``, a split's figures)."""

    @classmethod
    def from_payload(cls, raw: Mapping[str, Any] | None) -> DecisionRecord:
        if not raw:
            return EMPTY
        typed: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in raw.items():
            if key in _TEXT and isinstance(value, str):
                typed[key] = value
            elif key == "inputs" and isinstance(value, Mapping):
                typed[key] = dict(value)
            elif key == "placement" and isinstance(value, Mapping):
                typed[key] = PlacementRecord.from_payload(value)
            elif key == "run_ms" and type(value) is int:
                typed[key] = value
            else:
                extra[key] = value
        return cls(**typed, extra=extra)

    def to_payload(self) -> dict[str, Any]:
        out = dict(self.extra)
        for name in (*_TEXT, "inputs", "placement", "run_ms"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value.to_payload() if isinstance(value, PlacementRecord) else (
                    dict(value) if isinstance(value, Mapping) else value)
        return out

    def __bool__(self) -> bool:
        return any(getattr(self, n) is not None for n in (*_TEXT, "inputs", "placement", "run_ms")) \
            or bool(self.extra)

    @property
    def numbers(self) -> Mapping[str, Any]:
        """The inputs and scores the decision was made on (empty when none were stored)."""
        return self.inputs or {}


EMPTY = DecisionRecord()
