"""Bundle split algorithms and the auto-split conditions of both load managers (behaviour §2).

Invariants:
- the four algorithms reproduce Pulsar, quirks included: the full range splits at 0x7fffffff,
  ``topic_count_equally_divide`` takes the midpoint of the two middle-left hashes (not the median),
  ``flow_or_qps_equally_divide`` adds 1 to each midpoint;
- ``split_boundaries`` returns boundaries strictly inside the bundle and strictly increasing, or
  none (no split); a one-hash bundle, or an algorithm answer that cannot cut the bundle, raises
  ``UnsplittableBundle``; every topic given must lie in the bundle (``InvalidBundle`` otherwise);
- auto-split looks at bundles in ascending id order (the project's tie rule); M has no hit
  count; E's hit counts are a value passed in and returned, never hidden state;
- every decision is immutable and carries the bundle, the reason and the numbers behind it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import pairwise
from types import MappingProxyType
from typing import Any

from balancer.bundles import BundleId, HashRange, topic_hash, validate_hash
from balancer.config import SPLIT_ALGORITHMS, LoadBalancerConfig
from balancer.errors import (
    ConfigError,
    InvalidBundle,
    InvalidInput,
    MalformedInput,
    UnknownNamespace,
    UnknownStrategy,
    UnsplittableBundle,
)

MIB = 1 << 20

RANGE_EQUALLY_DIVIDE = "range_equally_divide"
TOPIC_COUNT_EQUALLY_DIVIDE = "topic_count_equally_divide"
SPECIFIED_POSITIONS_DIVIDE = "specified_positions_divide"
FLOW_OR_QPS_EQUALLY_DIVIDE = "flow_or_qps_equally_divide"


@dataclass(frozen=True, slots=True)
class TopicLoad:
    """One topic of a bundle: its hash and in+out rates; ``has_stats=False`` = no stats known."""

    hash: int
    msg_rate: float = 0.0
    throughput: float = 0.0
    has_stats: bool = True
    name: str | None = None

    def __post_init__(self) -> None:
        validate_hash(self.hash)
        for what, value in (("msgRate", self.msg_rate), ("throughput", self.throughput)):
            if not (math.isfinite(value) and value >= 0):
                raise InvalidInput(f"topic {self.label}: {what} {value!r} is not a finite number >= 0",
                                   value=value)

    @classmethod
    def named(cls, topic: str, msg_rate: float = 0.0, throughput: float = 0.0,
              has_stats: bool = True) -> TopicLoad:
        return cls(topic_hash(topic), msg_rate, throughput, has_stats, topic)

    @property
    def label(self) -> str:
        where = f"hash {self.hash} ({self.hash:#010x})"
        return f"{self.name!r} ({where})" if self.name is not None else f"with {where}"


# -- the four algorithms --------------------------------------------------------------------


def equal_pieces(hash_range: HashRange, pieces: int) -> tuple[int, ...]:
    """Inner boundaries of ``pieces`` equal parts: ``lower + j * ((upper - lower) // pieces)``."""
    if isinstance(pieces, bool) or not isinstance(pieces, int) or pieces < 1:
        raise InvalidInput(f"{pieces!r} pieces: expected an integer >= 1", value=pieces)
    seg = hash_range.width // pieces
    if pieces > 1 and seg < 1:
        raise UnsplittableBundle(
            f"bundle {hash_range.name} ({hash_range.width} hashes) cannot be cut into {pieces} pieces",
            value=hash_range.name)
    return tuple(hash_range.lower + j * seg for j in range(1, pieces))


def range_equally_divide(hash_range: HashRange) -> tuple[int, ...]:
    """The midpoint, rounded down on the width: the full range splits at 0x7fffffff."""
    return (hash_range.lower + hash_range.width // 2,)


def topic_count_equally_divide(hashes: Iterable[int]) -> tuple[int, ...]:
    """Midpoint of ``h[max(n//2 - 1, 0)]`` and ``h[n//2]`` of the sorted hashes; n <= 1: none."""
    ordered = sorted(hashes)
    n = len(ordered)
    if n <= 1:
        return ()
    start, end = ordered[max(n // 2 - 1, 0)], ordered[n // 2]
    return (start + (end - start) // 2,)


def specified_positions_divide(hash_range: HashRange, topic_count: int,
                               positions: Sequence[int] | None, *, force: bool = False) -> tuple[int, ...]:
    """Sorted distinct positions strictly inside the range; <= 1 topic: none (unless ``force``)."""
    if not positions:
        raise MalformedInput(
            f"{SPECIFIED_POSITIONS_DIVIDE} needs a non-empty positions list, got {positions!r}",
            value=positions)
    if topic_count <= 1 and not force:
        return ()
    # Duplicates would cut an empty bundle; Pulsar keeps them, we drop them.
    return tuple(sorted({p for p in positions if hash_range.lower < p < hash_range.upper}))


def flow_or_qps_equally_divide(topics: Sequence[TopicLoad], max_msg_rate: float,
                               max_bandwidth_bytes: float, difference: float) -> tuple[int, ...]:
    """Cut where the running in+out rate or throughput would pass the bundle limits (PIP-169).

    ``difference`` is a fraction (10 % = 0.1). Topics without stats or with no traffic at all
    are ignored; nothing is cut unless a limit is exceeded by more than the difference.
    """
    if len(topics) <= 1:
        return ()
    loaded = sorted((t for t in topics if t.has_stats and not (t.msg_rate <= 0 and t.throughput <= 0)),
                    key=lambda t: t.hash)
    if len(loaded) < 2:
        return ()
    total_rate = total_tput = 0.0
    for topic in topics:  # Java sums in the topics' own order, one double at a time
        if topic.has_stats and not (topic.msg_rate <= 0 and topic.throughput <= 0):
            total_rate += topic.msg_rate
            total_tput += topic.throughput
    if total_rate < max_msg_rate * (1 + difference) and total_tput < max_bandwidth_bytes * (1 + difference):
        return ()
    cuts: list[int] = []
    acc_rate, acc_tput = loaded[0].msg_rate, loaded[0].throughput
    for previous, topic in pairwise(loaded):
        if acc_rate + topic.msg_rate > max_msg_rate or acc_tput + topic.throughput > max_bandwidth_bytes:
            # The "+ 1" is Pulsar's: PIP-169 describes the plain midpoint, the code adds one.
            cuts.append(previous.hash + (topic.hash - previous.hash) // 2 + 1)
            acc_rate, acc_tput = topic.msg_rate, topic.throughput
        else:
            acc_rate += topic.msg_rate
            acc_tput += topic.throughput
    return tuple(cuts)


def check_algorithm(algorithm: str, config: LoadBalancerConfig) -> str:
    """The algorithm name if known and allowed by ``supportedNamespaceBundleSplitAlgorithms``."""
    if algorithm not in SPLIT_ALGORITHMS:
        raise UnknownStrategy(
            f"unknown split algorithm {algorithm!r}; accepted: {', '.join(SPLIT_ALGORITHMS)}",
            value=algorithm)
    supported = config.supported_namespace_bundle_split_algorithms
    if algorithm not in supported:
        raise ConfigError(
            f"split algorithm {algorithm!r} is not in supportedNamespaceBundleSplitAlgorithms; "
            f"accepted: {', '.join(supported)}",
            key="supportedNamespaceBundleSplitAlgorithms", value=algorithm)
    return algorithm


def split_boundaries(algorithm: str, hash_range: HashRange, topics: Sequence[TopicLoad],
                     config: LoadBalancerConfig, positions: Sequence[int] | None = None) -> tuple[int, ...]:
    """Boundaries ``algorithm`` gives for the bundle ``hash_range`` holding ``topics``."""
    check_algorithm(algorithm, config)
    if not hash_range.splittable:
        raise UnsplittableBundle(f"bundle {hash_range.name} covers one hash and cannot be split",
                                 value=hash_range.name)
    for topic in topics:
        if topic.hash not in hash_range:
            raise InvalidBundle(
                f"topic {topic.label} is not in bundle {hash_range.name}",
                value=topic.label)
    if algorithm == RANGE_EQUALLY_DIVIDE:
        cuts = range_equally_divide(hash_range)
    elif algorithm == TOPIC_COUNT_EQUALLY_DIVIDE:
        cuts = topic_count_equally_divide(t.hash for t in topics)
    elif algorithm == SPECIFIED_POSITIONS_DIVIDE:
        cuts = specified_positions_divide(hash_range, len(topics), positions)
    else:
        cuts = flow_or_qps_equally_divide(
            topics, config.load_balancer_namespace_bundle_max_msg_rate,
            config.load_balancer_namespace_bundle_max_bandwidth_mbytes * MIB,
            config.flow_or_qps_difference_threshold_percentage / 100.0)
    hash_range.split_at(cuts)  # the same check the layout makes: Pulsar's split would fail too
    return cuts


# -- auto-split -----------------------------------------------------------------------------


class SplitReason(StrEnum):
    """Pulsar's ``SplitDecision.Reason``, in the order the conditions are tried."""

    TOPICS = "Topics"
    SESSIONS = "Sessions"
    MSG_RATE = "MsgRate"
    BANDWIDTH = "Bandwidth"
    ADMIN = "Admin"


@dataclass(frozen=True, slots=True)
class BundleSplitStats:
    """What auto-split looks at for one bundle (M: long-term rates; E: the current report)."""

    bundle: str
    topics: int = 0
    sessions: int = 0
    msg_rate: float = 0.0
    throughput: float = 0.0
    topic_loads: tuple[TopicLoad, ...] = ()
    """Per-topic data, needed only when the default algorithm looks at topics (E)."""


@dataclass(frozen=True, slots=True)
class SplitLimits:
    """The bundle limits of behaviour §2, from the configuration."""

    max_topics: int
    max_sessions: int
    max_msg_rate: float
    max_bandwidth_bytes: float
    max_bundles: int

    @classmethod
    def from_config(cls, config: LoadBalancerConfig) -> SplitLimits:
        return cls(
            max_topics=config.load_balancer_namespace_bundle_max_topics,
            max_sessions=config.load_balancer_namespace_bundle_max_sessions,
            max_msg_rate=config.load_balancer_namespace_bundle_max_msg_rate,
            max_bandwidth_bytes=config.load_balancer_namespace_bundle_max_bandwidth_mbytes * MIB,
            max_bundles=config.load_balancer_namespace_maximum_bundles,
        )

    def first_trigger(self, stats: BundleSplitStats) -> tuple[SplitReason, float, float] | None:
        """(reason, value, limit) of the first condition met, in Pulsar's order; None if none."""
        if stats.topics > self.max_topics:
            return SplitReason.TOPICS, stats.topics, self.max_topics
        if self.max_sessions > 0 and stats.sessions > self.max_sessions:
            return SplitReason.SESSIONS, stats.sessions, self.max_sessions
        if stats.msg_rate > self.max_msg_rate:
            return SplitReason.MSG_RATE, stats.msg_rate, self.max_msg_rate
        if stats.throughput > self.max_bandwidth_bytes:
            return SplitReason.BANDWIDTH, stats.throughput, self.max_bandwidth_bytes
        return None


@dataclass(frozen=True, slots=True)
class SplitDecision:
    """Split ``bundle`` because ``value`` passed ``limit`` (``reason``); the stats that showed it."""

    bundle: str
    reason: SplitReason
    value: float
    limit: float
    stats: BundleSplitStats
    algorithm: str
    boundaries: tuple[int, ...] = ()
    """E: the one boundary already chosen; M: empty (the owner computes them when it splits)."""
    hit_count: int = 0
    unload_children: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "bundle": self.bundle, "reason": str(self.reason), "value": self.value,
            "limit": self.limit, "algorithm": self.algorithm, "boundaries": list(self.boundaries),
            "hitCount": self.hit_count, "unloadChildren": self.unload_children,
            "topics": self.stats.topics, "sessions": self.stats.sessions,
            "msgRate": self.stats.msg_rate, "throughput": self.stats.throughput,
        }


def _namespace_count(counts: Mapping[str, int], namespace: str) -> int:
    try:
        return counts[namespace]
    except KeyError:
        raise UnknownNamespace(f"no bundle count for namespace {namespace!r}", value=namespace) from None


def modular_split_candidates(bundles: Iterable[BundleSplitStats], bundle_counts: Mapping[str, int],
                             config: LoadBalancerConfig) -> tuple[SplitDecision, ...]:
    """M: bundles the leader splits now (long-term rates in ``bundles``; counts per namespace).

    No hit count and no per-cycle limit; a namespace takes candidates while its bundle count plus
    the candidates already taken for it stays below ``loadBalancerNamespaceMaximumBundles``.
    """
    if not config.load_balancer_auto_bundle_split_enabled:
        return ()
    limits = SplitLimits.from_config(config)
    taken: dict[str, int] = {}
    decisions: list[SplitDecision] = []
    for stats in sorted(bundles, key=lambda s: s.bundle):
        if stats.topics < 2:
            continue
        trigger = limits.first_trigger(stats)
        if trigger is None:
            continue
        namespace = BundleId.parse(stats.bundle).namespace
        if _namespace_count(bundle_counts, namespace) + taken.get(namespace, 0) >= limits.max_bundles:
            continue
        taken[namespace] = taken.get(namespace, 0) + 1
        reason, value, limit = trigger
        decisions.append(SplitDecision(
            stats.bundle, reason, value, limit, stats, config.default_namespace_bundle_split_algorithm,
            unload_children=config.load_balancer_auto_unload_split_bundles_enabled))
    return tuple(decisions)


@dataclass(frozen=True, slots=True)
class SplitHitCounts:
    """E: consecutive cycles each bundle met a split condition; carried from cycle to cycle."""

    counts: Mapping[str, int] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", MappingProxyType(dict(self.counts)))

    def get(self, bundle: str) -> int:
        return self.counts.get(bundle, 0)


@dataclass(frozen=True, slots=True)
class ExtensibleSplitResult:
    """E: this cycle's decisions, the hit counts for the next cycle, unsplittable bundles seen."""

    decisions: tuple[SplitDecision, ...]
    hit_counts: SplitHitCounts
    failures: tuple[str, ...] = ()


@dataclass
class _Cycle:
    """Working state of one E cycle (local to one call, never shared)."""

    counts: dict[str, int]
    taken: dict[str, int] = field(default_factory=dict)
    decisions: list[SplitDecision] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def extensible_split_candidates(
    bundles: Iterable[BundleSplitStats], bundle_counts: Mapping[str, int], hit_counts: SplitHitCounts,
    config: LoadBalancerConfig, splitting: Iterable[str] = (),
) -> ExtensibleSplitResult:
    """E: one broker's split cycle over the bundles it owns (current report values).

    Hit counts of bundles not in ``bundles`` are dropped first.
    ``splitting`` lists the bundle ids now in the Splitting state; a bundle with the same lower or
    the same upper boundary as one of them waits (Pulsar's check, ``_shares_edge``). A decision needs hit count > the threshold (the 4th consecutive
    hit by default) and exactly one boundary from the default algorithm.
    """
    if not config.load_balancer_auto_bundle_split_enabled:
        return ExtensibleSplitResult((), hit_counts)
    limits = SplitLimits.from_config(config)
    busy = [BundleId.parse(b) for b in splitting]
    reported = sorted(bundles, key=lambda s: s.bundle)
    names = {s.bundle for s in reported}
    # a bundle not reported this cycle loses its hit count (Pulsar: retainAll on the bundle stats)
    cycle = _Cycle({b: n for b, n in hit_counts.counts.items() if b in names})
    cap = config.load_balancer_max_number_of_bundles_to_split_per_cycle
    for stats in reported:
        decision = _consider(stats, cycle, limits, bundle_counts, busy, config)
        if decision is not None:
            cycle.decisions.append(decision)
            if len(cycle.decisions) >= cap:
                break
    return ExtensibleSplitResult(tuple(cycle.decisions), SplitHitCounts(cycle.counts), tuple(cycle.failures))


def _consider(stats: BundleSplitStats, cycle: _Cycle, limits: SplitLimits, bundle_counts: Mapping[str, int],
              busy: Sequence[BundleId], config: LoadBalancerConfig) -> SplitDecision | None:
    if stats.topics < 2:
        return None
    bundle = BundleId.parse(stats.bundle)
    if not bundle.range.splittable:
        cycle.failures.append(stats.bundle)
        return None
    trigger = limits.first_trigger(stats)
    if trigger is None:
        cycle.counts.pop(stats.bundle, None)
        return None
    hits = cycle.counts[stats.bundle] = cycle.counts.get(stats.bundle, 0) + 1
    if hits <= config.load_balancer_namespace_bundle_split_condition_hit_count_threshold:
        return None
    namespace = bundle.namespace
    if _namespace_count(bundle_counts, namespace) + cycle.taken.get(namespace, 0) >= limits.max_bundles:
        return None
    if any(_shares_edge(bundle, other) for other in busy):
        return None
    boundaries = _one_boundary(bundle.range, stats, config)
    if boundaries is None:
        return None
    del cycle.counts[stats.bundle]
    cycle.taken[namespace] = cycle.taken.get(namespace, 0) + 1
    reason, value, limit = trigger
    return SplitDecision(stats.bundle, reason, value, limit, stats,
                         config.default_namespace_bundle_split_algorithm, boundaries, hits)


def _shares_edge(bundle: BundleId, other: BundleId) -> bool:
    """Pulsar 4.0's parent-in-Splitting check, as written: the splitting bundle's id starts with the
    namespace (a string prefix: ``t/ns1/...`` starts with ``t/ns``) and its range starts with this
    bundle's lower boundary or ends with its upper one; an adjacent bundle does not wait."""
    if not str(other).startswith(bundle.namespace):
        return False
    return other.range.lower == bundle.range.lower or other.range.upper == bundle.range.upper


def _one_boundary(hash_range: HashRange, stats: BundleSplitStats,
                  config: LoadBalancerConfig) -> tuple[int, ...] | None:
    # E's scheduler splits in two only; anything but exactly one boundary waits for a later cycle.
    try:
        cuts = split_boundaries(config.default_namespace_bundle_split_algorithm, hash_range,
                                stats.topic_loads, config)
    except (UnsplittableBundle, MalformedInput):
        return None
    return cuts if len(cuts) == 1 else None
