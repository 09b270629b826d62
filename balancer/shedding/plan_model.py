"""PlannedTransferShedder's plan model: settings, brokers as the plan goes, moves and checks.

Shared by the planner (``planned_transfer``) and its make-room step (``make_room``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from balancer.config import LoadBalancerConfig
from balancer.decisions import Reason

EPS = 1e-12  # ratio comparisons: float noise is not a crossing
HANDS_ON, UNCLEAN, CLEAN = 0, 1, 2  # move tiers, worst first (``Plan.gain``)


@dataclass(frozen=True, slots=True)
class PlanSettings:
    """The strategy's keys, as fractions of the mean and milliseconds."""

    trigger: float
    underload_trigger: float
    tolerance: float
    min_gain: float
    warmup_ms: int
    max_moves: int
    make_room_trigger: float = 0.25

    @classmethod
    def from_config(cls, config: LoadBalancerConfig) -> PlanSettings:
        return cls(
            trigger=config.load_balancer_plan_trigger_percentage / 100.0,
            underload_trigger=config.load_balancer_plan_underload_trigger_percentage / 100.0,
            tolerance=config.load_balancer_plan_tolerance_percentage / 100.0,
            min_gain=config.load_balancer_plan_min_gain_percentage / 100.0,
            warmup_ms=config.load_balancer_plan_warmup_seconds * 1000,
            max_moves=config.load_balancer_plan_max_moves_per_cycle,
            make_room_trigger=config.load_balancer_plan_make_room_trigger_percentage / 100.0,
        )


@dataclass(slots=True)
class Node:
    """One broker as the plan goes: its load changes with every planned move."""

    broker: str
    load: float
    capacity: float
    warming: bool
    bundles: dict[str, float] = field(default_factory=dict)  # movable bundle -> load


@dataclass(frozen=True, slots=True)
class Move:
    bundle: str
    load: float
    source: str
    destination: str
    gain: float
    tier: int  # CLEAN, UNCLEAN or HANDS_ON (``Plan.gain``): clean moves go first, hand-ons last
    reason: Reason
    room_for: str | None = None  # a make-room hop: the bundle it makes room for (``make_room``)
    hops: int = 0  # a move into made room: the hops that made it

    def rank(self) -> tuple[int, float, float]:
        return self.tier, self.gain, self.load


class Checks(Protocol):
    """Where a bundle may go in this run (filters, send-back, group limit)."""

    def allowed(self, bundle: str, destination: str) -> bool: ...

    def taken(self, bundle: str) -> None: ...

    def group(self, bundle: str) -> str | None:
        """The bundle's anti-affinity group (at most one of a group moves per run)."""
        ...


class PlanView(Protocol):
    """What a make-room step reads of the planner (``planned_transfer.Plan`` meets it), so that
    ``make_room`` and the planner that calls it never import each other."""

    nodes: dict[str, Node]
    settings: PlanSettings
    checks: Checks
    util: float

    def ratio(self, node: Node, delta: float = 0.0) -> float: ...

    def distance(self, ratio: float) -> float: ...

    def gain(self, source: Node, destination: Node, load: float) -> tuple[float, int] | None: ...
