"""Placement values and the strategy port shared by both load managers (behaviour §5).

Invariants:
- a ``Placement`` is immutable and explains itself: the chosen broker (None = no broker
  qualifies), the candidate set handed to the strategy for the final pick (ascending ids), every
  candidate's score, the subset the pick was drawn from and the trail of filter steps;
- a strategy picks only among the candidates it is given, and returns None only when they are
  empty;
- randomness comes only from the ``Random`` passed in: ties are drawn uniformly from the best
  brokers listed in ascending id order, so a seed fixes the result;
- a bundle never seen before is placed with Pulsar's default load (50 msg/s and 50000 B/s, in and
  out each) whose time averages are overwritten by the first real sample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.load import (
    DEFAULT_BUNDLE_RATE,
    DEFAULT_BUNDLE_THROUGHPUT,
    BrokerReport,
    BundleData,
    BundleStats,
    RateAverages,
    ResourceWeights,
    weighted_max_usage,
)

if TYPE_CHECKING:
    from random import Random

    from balancer.shedding.base import ClusterView

SYSTEM_NAMESPACE = "pulsar/system"


@dataclass(frozen=True, slots=True)
class Step:
    """One stage of a filter pipeline and the brokers still standing after it."""

    name: str
    brokers: tuple[str, ...]
    note: str = ""


@dataclass(frozen=True, slots=True)
class Selection:
    """What a strategy answered: the pick, each candidate's score and the set it drew from."""

    broker: str | None
    scores: Mapping[str, float] = field(default_factory=dict)
    best: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a bundle goes and why.

    ``source`` says how the broker was found: ``strategy`` (the normal pick), ``recheck`` (the
    modular 0.85 re-selection over the isolation set), ``preallocated`` (an earlier placement not
    yet reported), ``destination`` (an explicit unload destination), ``owner`` (already owned,
    extensible) or ``none`` (no broker qualifies).
    """

    bundle: str
    broker: str | None
    candidates: tuple[str, ...]
    scores: Mapping[str, float] = field(default_factory=dict)
    best: tuple[str, ...] = ()
    strategy: str = ""
    steps: tuple[Step, ...] = ()
    source: str = "strategy"

    def to_output(self) -> dict[str, Any]:
        """The ``lbctl decide place`` form of one assignment (contracts §5)."""
        return {"broker": self.broker, "candidates": list(self.candidates)}

    def to_dict(self) -> dict[str, Any]:
        """The full explanation, JSON-safe (an overloaded broker's infinite score is "inf")."""
        out = self.to_output()
        out.update(
            bundle=self.bundle,
            strategy=self.strategy,
            source=self.source,
            scores={b: _json_number(s) for b, s in self.scores.items()},
            best=list(self.best),
            steps=[
                {"name": s.name, "brokers": list(s.brokers), "note": s.note} for s in self.steps
            ],
        )
        return out


def _json_number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


@dataclass(frozen=True, slots=True)
class PlacementContext:
    """Everything a strategy may read for one pick.

    ``preallocated`` maps a broker to the bundles placed on it and not yet in its report (modular
    only). ``rate_from_report`` makes LeastLongTermMessageRate read a broker's long-term rate from
    its report totals instead of summing its bundles' long-term averages (``lbctl decide place``,
    behaviour §5.7).
    """

    view: ClusterView
    bundle: BundleData
    rng: Random
    preallocated: Mapping[str, Mapping[str, BundleData]] = field(default_factory=dict)
    rate_from_report: bool = False


class PlacementStrategy(Protocol):
    """Picks one broker among candidates (given in ascending id order)."""

    name: ClassVar[str]

    def select(self, candidates: Sequence[str], context: PlacementContext) -> Selection: ...


def pick_uniform(best: Sequence[str], rng: Random) -> str:
    """A uniformly random member of ``best`` (Java's ``list.get(random.nextInt(size))``)."""
    return best[rng.randrange(len(best))]


def modular_usage(view: ClusterView, broker: str) -> float | None:
    """The modular weighted max usage of a broker's latest report; None without load data."""
    data = view.brokers.get(broker)
    if data is None:
        return None
    if view.index is not None:
        return view.index.usage(data.report, view.config, _weighted_usage)
    return _weighted_usage(data.report, view.config)


def _weighted_usage(report: BrokerReport, config: LoadBalancerConfig) -> float:
    return weighted_max_usage(report, ResourceWeights.from_config(config))


def default_bundle_data(bundle: str) -> BundleData:
    """Pulsar's data for an unseen bundle: default rates, zero samples (the first one overwrites)."""
    stats = BundleStats(
        bundle,
        msg_rate_in=DEFAULT_BUNDLE_RATE,
        msg_rate_out=DEFAULT_BUNDLE_RATE,
        msg_throughput_in=DEFAULT_BUNDLE_THROUGHPUT,
        msg_throughput_out=DEFAULT_BUNDLE_THROUGHPUT,
    )
    data = BundleData(bundle, None, stats)
    for averages in (data.short_term, data.long_term):
        _preset(averages, stats)
    return data


def _preset(averages: RateAverages, stats: BundleStats) -> None:
    averages.msg_rate_in = stats.msg_rate_in
    averages.msg_rate_out = stats.msg_rate_out
    averages.msg_throughput_in = stats.msg_throughput_in
    averages.msg_throughput_out = stats.msg_throughput_out


def bundles_by_broker_namespace(
    view: ClusterView, preallocated: Mapping[str, str] | None = None
) -> dict[str, dict[str, set[str]]]:
    """Broker -> namespace -> bundle ids it owns or has preallocated (Pulsar's
    ``brokerToNamespaceToBundleRange``): a bundle counts once per broker."""
    index: dict[str, dict[str, set[str]]] = {}
    for bundle_id in sorted(view.bundles):
        owner = view.bundles[bundle_id].owner
        if owner is not None:
            index.setdefault(owner, {}).setdefault(namespace_of(bundle_id), set()).add(bundle_id)
    for bundle_id, broker in sorted((preallocated or {}).items()):
        index.setdefault(broker, {}).setdefault(namespace_of(bundle_id), set()).add(bundle_id)
    return index

