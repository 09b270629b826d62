"""Load data: broker reports, usage percentages, weighted max usage, EMAs and bundle time averages.

Invariants (behaviour §3):
- percent usage is computed in single precision, ``float32((usage/limit)*100)``, 0 when limit <= 0;
- ``max_usage`` ignores memory; the weighted max of the modular manager ignores memory, the
  extensible one includes it; the within-limit variant drops every term above 100;
- an EMA starts at its first sample; a time average is a mean until full, then an EMA of 1/max;
- reports and bundle stats are immutable values; derived state (EMAs, averages) lives in the
  mutable ``BrokerLoadData`` / ``BundleData`` that a load model updates once per reporting round.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig

MIB = 1024 * 1024
SHORT_TERM_SAMPLES = 10
LONG_TERM_SAMPLES = 1000
DEFAULT_BUNDLE_RATE = 50.0
DEFAULT_BUNDLE_THROUGHPUT = 50000.0


def float32(value: float) -> float:
    """Round a double to the nearest single-precision value, as Java's float does."""
    if math.isinf(value) or math.isnan(value):
        return value
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """One resource of a report: ``usage`` out of ``limit`` (CPU in percent x cores, bandwidth in kbit/s)."""

    usage: float = 0.0
    limit: float = 0.0

    def percent(self) -> float:
        if self.limit <= 0:
            return 0.0
        return float32((self.usage / self.limit) * 100.0)


class _InOutTotals:
    """in+out sums shared by broker reports and bundle stats (the totals every strategy uses)."""

    __slots__ = ()
    msg_rate_in: float
    msg_rate_out: float
    msg_throughput_in: float
    msg_throughput_out: float

    @property
    def msg_rate(self) -> float:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def msg_throughput(self) -> float:
        return self.msg_throughput_in + self.msg_throughput_out


@dataclass(frozen=True, slots=True)
class BrokerReport(_InOutTotals):
    """What a broker says about itself in one load report."""

    broker_id: str
    cpu: ResourceUsage = ResourceUsage()
    memory: ResourceUsage = ResourceUsage()
    direct_memory: ResourceUsage = ResourceUsage()
    bandwidth_in: ResourceUsage = ResourceUsage()
    bandwidth_out: ResourceUsage = ResourceUsage()
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0
    topics: int = 0
    bundles: int = 0
    producers: int = 0
    consumers: int = 0
    failure_domain: str | None = None
    version: str | None = None
    load_manager_class: str | None = None
    """The load manager the broker runs (short name); None: not reported, taken as the configured one."""


@dataclass(frozen=True, slots=True)
class BundleStats(_InOutTotals):
    """One bundle's stats in one report (rates in msg/s, throughput in bytes/s)."""

    bundle: str
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0
    topics: int = 0
    producers: int = 0
    consumers: int = 0
    cache_size: float = 0.0

    @property
    def sessions(self) -> int:
        return self.producers + self.consumers


@dataclass(frozen=True, slots=True)
class ResourceWeights:
    cpu: float = 1.0
    memory: float = 0.0
    direct_memory: float = 0.0
    bandwidth_in: float = 1.0
    bandwidth_out: float = 1.0

    @classmethod
    def from_config(cls, config: LoadBalancerConfig) -> ResourceWeights:
        return cls(
            cpu=config.load_balancer_cpu_resource_weight,
            memory=config.load_balancer_memory_resource_weight,
            direct_memory=config.load_balancer_direct_memory_resource_weight,
            bandwidth_in=config.load_balancer_bandwidth_in_resource_weight,
            bandwidth_out=config.load_balancer_bandwidth_out_resource_weight,
        )


def max_usage(report: BrokerReport) -> float:
    """Max of CPU, direct memory and bandwidth percentages, as a fraction (memory excluded)."""
    return (
        max(
            report.cpu.percent(),
            report.direct_memory.percent(),
            report.bandwidth_in.percent(),
            report.bandwidth_out.percent(),
        )
        / 100.0
    )


def _weighted_terms(report: BrokerReport, weights: ResourceWeights, extensible: bool) -> list[float]:
    terms = [
        report.cpu.percent() * weights.cpu,
        report.direct_memory.percent() * weights.direct_memory,
        report.bandwidth_in.percent() * weights.bandwidth_in,
        report.bandwidth_out.percent() * weights.bandwidth_out,
    ]
    if extensible:
        terms.append(report.memory.percent() * weights.memory)
    return terms


def weighted_max_usage(
    report: BrokerReport, weights: ResourceWeights, *, extensible: bool = False
) -> float:
    """Max of percent x weight over the resources, as a fraction (E adds memory)."""
    return max(_weighted_terms(report, weights, extensible)) / 100.0


def ema(previous: float | None, sample: float, history: float) -> float:
    """Exponential moving average: the first sample is taken as is."""
    if previous is None:
        return sample
    return previous * history + (1.0 - history) * sample


@dataclass(slots=True)
class RateAverages:
    """Time averages of the four rates of a bundle (msg/s in/out, bytes/s in/out), each as
    Pulsar's ``TimeAverageMessageData``: the mean of the first ``max_samples`` samples, then an
    EMA with alpha = 1/max_samples. The four are sampled together, so one count serves all
    (four objects per average made a leader's first reports cost 10 objects a bundle)."""

    max_samples: int
    samples: int = 0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0

    def add(self, stats: BundleStats) -> None:
        n = self.samples = min(self.samples + 1, self.max_samples)
        kept = n - 1
        self.msg_rate_in = (kept * self.msg_rate_in + stats.msg_rate_in) / n
        self.msg_rate_out = (kept * self.msg_rate_out + stats.msg_rate_out) / n
        self.msg_throughput_in = (kept * self.msg_throughput_in + stats.msg_throughput_in) / n
        self.msg_throughput_out = (kept * self.msg_throughput_out + stats.msg_throughput_out) / n

    @property
    def msg_rate(self) -> float:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def msg_throughput(self) -> float:
        return self.msg_throughput_in + self.msg_throughput_out


@dataclass(slots=True)
class BundleData:
    """What the leader knows of one bundle: owner, latest stats and its time averages."""

    bundle: str
    owner: str | None
    stats: BundleStats
    short_term: RateAverages = field(default_factory=lambda: RateAverages(SHORT_TERM_SAMPLES))
    long_term: RateAverages = field(default_factory=lambda: RateAverages(LONG_TERM_SAMPLES))

    @property
    def namespace(self) -> str:
        return namespace_of(self.bundle)

    def add_sample(self, stats: BundleStats) -> None:
        self.stats = stats
        self.short_term.add(stats)
        self.long_term.add(stats)


@dataclass(slots=True)
class BrokerLoadData:
    """What the leader knows of one broker: its latest report and the derived values.

    ``weighted_max_ema`` and ``msg_throughput_ema`` are the extensible manager's per-report EMAs
    (``weighted_max_ema`` is 1.0 before the first report, behaviour §3).
    """

    report: BrokerReport
    updated_ms: int = 0
    weighted_max_ema: float = 1.0
    msg_throughput_ema: float = 0.0
    reports: int = 0

    @property
    def broker_id(self) -> str:
        return self.report.broker_id

    def apply_report(self, report: BrokerReport, now_ms: int, config: LoadBalancerConfig) -> None:
        """Take a new report; update the extensible EMAs (first report seeds them)."""
        weights = ResourceWeights.from_config(config)
        usage = weighted_max_usage(report, weights, extensible=True)
        first = self.reports == 0
        history = config.history
        self.weighted_max_ema = ema(None if first else self.weighted_max_ema, usage, history)
        self.msg_throughput_ema = ema(
            None if first else self.msg_throughput_ema, report.msg_throughput, history
        )
        self.report = report
        self.updated_ms = now_ms
        self.reports += 1


def report_change_percent(old: float, new: float) -> float:
    """pct(o, n) of behaviour §3: 0 if both are 0, +inf if only old is 0, else 100|o-n|/o."""
    if old == 0 and new == 0:
        return 0.0
    if old == 0:
        return math.inf
    return 100.0 * abs(old - new) / old


def should_publish_report(
    last: BrokerReport | None,
    current: BrokerReport,
    *,
    last_published_ms: int,
    now_ms: int,
    config: LoadBalancerConfig,
    forced: bool = False,
) -> bool:
    """Whether a broker publishes its report now (behaviour §3, 'Publishing a report')."""
    if forced or last is None:
        return True
    max_interval_ms = config.load_balancer_report_update_max_interval_minutes * 60_000
    if now_ms - last_published_ms > max_interval_ms:
        return True
    change = max(
        100.0 * abs(max_usage(last) - max_usage(current)),
        report_change_percent(last.msg_rate, current.msg_rate),
        report_change_percent(last.msg_throughput, current.msg_throughput),
        report_change_percent(last.bundles, current.bundles),
    )
    return change > config.load_balancer_report_update_threshold_percentage


def is_outdated(data: BrokerLoadData, now_ms: int, config: LoadBalancerConfig) -> bool:
    """The extensible manager ignores broker load data older than the TTL."""
    return now_ms - data.updated_ms > config.load_balancer_broker_load_data_ttl_in_seconds * 1000


def _by_threshold(a: float, b: float, threshold: float) -> int:
    """Pulsar's ``compareBy*``: equal unless more than ``threshold`` apart (NaN apart from nothing)."""
    if abs(a - b) > threshold:
        return (a > b) - (a < b)
    return 0


def compare_bundle_stats(a: BundleStats, b: BundleStats) -> int:
    """``NamespaceBundleStats.compareTo`` of Pulsar 4.0 (behaviour §3, 'Top bundles'): throughput in,
    throughput out (each equal within 1e5 bytes/s), message rate (within 100 msg/s), topics +
    sessions (within 500), cache size (within 1e5), the first that differs decides.

    Not a total order (equal within a threshold is not transitive); ``top_bundles`` breaks its
    ties by bundle id, Pulsar's partial sort by hash-map order (an open tie, docs/conformance.md).
    """
    return (
        _by_threshold(a.msg_throughput_in, b.msg_throughput_in, 1e5)
        or _by_threshold(a.msg_throughput_out, b.msg_throughput_out, 1e5)
        or _by_threshold(a.msg_rate, b.msg_rate, 100.0)
        or _by_threshold(a.topics + a.producers + a.consumers, b.topics + b.producers + b.consumers, 500)
        or _by_threshold(a.cache_size, b.cache_size, 1e5)
    )


def _top_bundle_order(a: BundleStats, b: BundleStats) -> int:
    return compare_bundle_stats(a, b) or (a.bundle > b.bundle) - (a.bundle < b.bundle)


def top_bundles(
    bundles: Iterable[BundleStats], k: int, excluded: Mapping[str, bool] | None = None
) -> list[BundleStats]:
    """The k heaviest bundles in ascending order, skipping excluded and zero-throughput ones.

    ``excluded`` maps a bundle id to True when its namespace must not appear in the report
    (system namespaces, excluded namespaces, policies); ties are broken by bundle id.
    """
    skip = excluded or {}
    kept = [s for s in bundles if s.msg_throughput > 0 and not skip.get(s.bundle, False)]
    kept.sort(key=functools.cmp_to_key(_top_bundle_order))
    return kept if k < 0 else kept[max(0, len(kept) - k) :]


class LoadModel:
    """The leader's load data, updated one reporting round at a time.

    A round replaces the set of available brokers: a broker missing from the round is gone, with
    its derived state (behaviour §8, project choice); a bundle keeps its time averages across
    rounds whoever owns it, and is forgotten when no broker reports it.
    """

    def __init__(self, config: LoadBalancerConfig) -> None:
        self.config = config
        self.brokers: dict[str, BrokerLoadData] = {}
        self.bundles: dict[str, BundleData] = {}

    def apply_round(
        self,
        now_ms: int,
        reports: Mapping[str, BrokerReport],
        bundles: Mapping[str, tuple[str | None, BundleStats]],
    ) -> None:
        """Apply one report from every broker and one sample of every bundle."""
        brokers: dict[str, BrokerLoadData] = {}
        for broker_id in sorted(reports):
            data = self.brokers.get(broker_id) or BrokerLoadData(reports[broker_id])
            data.apply_report(reports[broker_id], now_ms, self.config)
            brokers[broker_id] = data
        self.brokers = brokers
        known: dict[str, BundleData] = {}
        for bundle_id in sorted(bundles):
            owner, stats = bundles[bundle_id]
            data_b = self.bundles.get(bundle_id)
            if data_b is None:
                data_b = BundleData(bundle_id, owner, stats)
            data_b.owner = owner
            data_b.add_sample(stats)
            known[bundle_id] = data_b
        self.bundles = known
