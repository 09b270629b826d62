"""The load view: each broker's latest load and EMAs, its liveness, and each bundle's load.

Invariants:
- brokers appear on BrokerRegistered or their first LoadReported, and leave on BrokerLeft;
- liveness is the ``ts_ms`` of the broker's last event (a report or its registration): the view
  never reads a clock, callers ask ``expired(now_ms, timeout_ms)``;
- bundle loads are the latest reported by the bundle's reporting broker, fed through the same
  ``balancer.load.LoadModel`` the leader uses, so averages and EMAs match a live leader's;
- reports are admitted once per (key, seq) like every projection (``SequenceTracker``);
- a delta report (``events.report_parts``) samples every bundle of the broker's previous report:
  the listed ones with their new stats, the others with the stats they last had, so the
  averages are exactly those the full report would have given; ``reported`` keeps each broker's
  last reported stats for that, and ``sampled`` names the bundles the last report sampled;
- a report is read typed (``LoadReported.report``/``bundle_stats``, codec in ``events.reports``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.errors import DecodeError, LoadBalancerError
from balancer.load import (
    LONG_TERM_SAMPLES,
    SHORT_TERM_SAMPLES,
    BrokerLoadData,
    BundleData,
    BundleStats,
    RateAverages,
)
from events.catalog import BrokerLeft, BrokerRegistered, LoadReported
from events.report_parts import fold_listed, is_delta
from events.reports import (
    report_from_payload,
    report_to_payload,
    stats_from_payload,
    stats_to_payload,
)
from projections.tracking import Anomaly, EnvelopeLike, SequenceTracker

LOAD_TYPES = frozenset(cls.TYPE for cls in (LoadReported, BrokerRegistered, BrokerLeft))
"""The type names of the load view's events: one set lookup skips every other record untyped."""
BrokerEvent = LoadReported | BrokerRegistered | BrokerLeft
@dataclass(slots=True)
class BrokerInfo:
    broker_id: str
    url: str = ""
    failure_domain: str | None = None
    version: str = ""
    last_seen_ms: int = 0
    load: BrokerLoadData | None = None


@dataclass
class LoadProjection:
    """Folds broker membership and load reports into the load view."""

    config: LoadBalancerConfig = field(default_factory=LoadBalancerConfig)
    brokers: dict[str, BrokerInfo] = field(default_factory=dict)
    bundles: dict[str, BundleData] = field(default_factory=dict)
    tracker: SequenceTracker = field(default_factory=SequenceTracker)
    reported: dict[str, dict[str, BundleStats]] = field(default_factory=dict)
    """Broker -> the stats of each bundle of its last report (a delta's base)."""
    sampled: list[str] = field(default_factory=list)
    """The bundles the last folded report sampled (none if the last record was no report)."""

    name = "load"

    def apply(self, offset: int, envelope: EnvelopeLike) -> bool:
        if self.sampled:
            self.sampled = []
        if envelope.type not in LOAD_TYPES or not self.tracker.admit(offset, envelope):
            return False
        try:
            event = envelope.typed
        except DecodeError as exc:
            self.tracker.record(offset, envelope, "bad_event", f"{type(exc).__name__}: {exc}")
            return False
        assert isinstance(event, BrokerEvent)
        if event.broker_id != envelope.key:  # only a broker's key speaks for it
            self.tracker.record(offset, envelope, "unauthorized",
                                f"{envelope.type} of {event.broker_id!r} under key {envelope.key!r}")
            return False
        try:
            self._apply(event, envelope.ts_ms)
        except (LoadBalancerError, KeyError, TypeError, ValueError, AttributeError) as exc:
            self.tracker.record(offset, envelope, "bad_event", f"{type(exc).__name__}: {exc}")
            return False
        return True

    @property
    def anomalies(self) -> list[Anomaly]:
        return self.tracker.anomalies

    def _apply(self, event: BrokerEvent, ts_ms: int) -> None:
        broker_id = str(event.broker_id)
        if isinstance(event, BrokerLeft):
            self.brokers.pop(broker_id, None)
            self.reported.pop(broker_id, None)
            return
        info = self.brokers.get(broker_id) or BrokerInfo(broker_id)
        self.brokers[broker_id] = info
        info.last_seen_ms = max(info.last_seen_ms, ts_ms)
        if isinstance(event, BrokerRegistered):
            info.url = str(event.url)
            info.failure_domain = event.failure_domain
            info.version = str(event.version)
            return
        self._report(info, event, ts_ms)

    def _report(self, info: BrokerInfo, event: LoadReported, ts_ms: int) -> None:
        report = event.report(info.failure_domain)
        if report is not None:  # None: a later part, which carries bundles only
            if info.load is None:
                info.load = BrokerLoadData(report)
            info.load.apply_report(report, ts_ms, self.config)
        listed = event.bundle_stats()
        broker = info.broker_id
        last = self.reported.setdefault(broker, {})
        fold_listed(last, event.broker_load, ((stats.bundle, stats) for stats in listed))
        samples = list(last.values()) if is_delta(event.broker_load) else listed
        bundles = self.bundles
        for stats in samples:
            data = bundles.get(stats.bundle)
            if data is None:
                data = bundles[stats.bundle] = BundleData(stats.bundle, broker, stats)
            data.owner = broker
            data.add_sample(stats)
        self.sampled = [stats.bundle for stats in samples]

    # -- queries ------------------------------------------------------------------------
    def live_brokers(self) -> list[str]:
        return sorted(self.brokers)

    def expired(self, now_ms: int, timeout_ms: int) -> list[str]:
        """Brokers not heard from for longer than ``timeout_ms`` (ascending ids)."""
        return sorted(b for b, i in self.brokers.items() if now_ms - i.last_seen_ms > timeout_ms)

    def broker_loads(self) -> dict[str, BrokerLoadData]:
        return {b: i.load for b, i in sorted(self.brokers.items()) if i.load is not None}

    def throughputs(self) -> dict[str, float]:
        """Each reporting broker's message throughput (bytes/s) in its latest report: what a
        proposal's staleness compares."""
        return {b: float(i.load.report.msg_throughput) for b, i in self.brokers.items() if i.load is not None}

    def snapshot(self) -> dict[str, Any]:
        return {
            "brokers": {
                b: [i.url, i.failure_domain, i.version, i.last_seen_ms,
                    None if i.load is None else _load_to_list(i.load)]
                for b, i in self.brokers.items()
            },
            "bundles": {b: _bundle_to_list(d) for b, d in self.bundles.items()},
            "tracker": self.tracker.snapshot(),
            "reported": {b: list(last) for b, last in self.reported.items()},
        }

    @classmethod
    def restore(cls, data: Mapping[str, Any],
                config: LoadBalancerConfig | None = None) -> LoadProjection:
        projection = cls(config or LoadBalancerConfig())
        for broker_id, (url, domain, version, seen, load) in data["brokers"].items():
            info = BrokerInfo(broker_id, url, domain, version, seen)
            if load is not None:
                info.load = _load_from_list(broker_id, domain, load)
            projection.brokers[broker_id] = info
        projection.bundles = {b: _bundle_from_list(b, v) for b, v in data["bundles"].items()}
        projection.tracker = SequenceTracker.restore(data["tracker"])
        projection.reported = _reported_from(data.get("reported"), projection)
        return projection


def _reported_from(raw: Mapping[str, list[str]] | None, projection: LoadProjection
                   ) -> dict[str, dict[str, BundleStats]]:
    """Each broker's last reported stats, from the snapshot's names and the bundles' last
    stats (a snapshot written before deltas holds none: the bundles each broker owns)."""
    bundles = projection.bundles
    if raw is None:
        out: dict[str, dict[str, BundleStats]] = {}
        for name, data in bundles.items():
            if data.owner is not None:
                out.setdefault(data.owner, {})[name] = data.stats
        return out
    return {broker: {name: bundles[name].stats for name in names if name in bundles}
            for broker, names in raw.items()}


def _load_to_list(load: BrokerLoadData) -> list[Any]:
    return [report_to_payload(load.report), load.updated_ms, load.weighted_max_ema,
            load.msg_throughput_ema, load.reports]


def _load_from_list(broker_id: str, domain: str | None, raw: list[Any]) -> BrokerLoadData:
    report = report_from_payload(broker_id, raw[0], domain)
    return BrokerLoadData(report, int(raw[1]), float(raw[2]), float(raw[3]), int(raw[4]))


def _averages_to_list(averages: RateAverages) -> list[float]:
    # [samples, value] per rate: the layout of the snapshots written when each rate kept its own
    # count (they always moved together), so those snapshots still restore.
    n = averages.samples
    return [n, averages.msg_rate_in, n, averages.msg_rate_out, n, averages.msg_throughput_in,
            n, averages.msg_throughput_out]


def _averages_from_list(max_samples: int, raw: list[float]) -> RateAverages:
    counts = {int(raw[index]) for index in range(0, 8, 2)}
    if len(counts) != 1:
        raise ValueError(f"time averages with different sample counts {sorted(counts)}: {raw!r}")
    return RateAverages(max_samples, counts.pop(), float(raw[1]), float(raw[3]), float(raw[5]),
                        float(raw[7]))


def _bundle_to_list(data: BundleData) -> list[Any]:
    return [data.owner, stats_to_payload(data.stats), _averages_to_list(data.short_term),
            _averages_to_list(data.long_term)]


def _bundle_from_list(bundle: str, raw: list[Any]) -> BundleData:
    return BundleData(bundle, raw[0], stats_from_payload(raw[1]),
                      _averages_from_list(SHORT_TERM_SAMPLES, raw[2]),
                      _averages_from_list(LONG_TERM_SAMPLES, raw[3]))
