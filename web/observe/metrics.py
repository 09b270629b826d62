"""``/metrics``: the Prometheus text format, under Pulsar 4.0's own names and the project's.

Two kinds of families (the full list with each Pulsar source: docs/operations.md#metrics):
- Pulsar's, letter for letter as a Pulsar 4.0 broker's ``/metrics`` shows them
  (``web.observe.pulsar_names``: ``pulsar_lb_*``, ``pulsar_sunit_state_chn_owned_su_total``,
  PIP-307's ``brk_lb_*_latency_ms`` histograms, the lookups' ``pulsar_broker_lookup*``
  (``web.observe.lookups``), and ``pulsar_bundle_*`` when broker.conf's
  ``exposeBundlesMetricsInPrometheus`` is true), with Pulsar's labels (``cluster``, ``broker``,
  ``metric`` and ``result``/``reason``/``feature``/``stat``/``bundle`` where Pulsar has them);
- ``bb_*``: what only this project has (the log, folds, anomalies, elections, the balancer).

Invariants: a scrape reads the observer's tally and latencies and the client's views and asks
no actor anything; every sample is computed at scrape time from that state (a custom collector
on a registry of this service's own, so two services in one process never see each other's
series); every counter has its series from the first scrape, at 0 (each Pulsar breakdown key,
each event type, command and anomaly kind), and so has every latency histogram for every
registered broker, so a dashboard panel shows 0, never "No data". Pulsar's names break four
``promtool check metrics`` lint rules (camelCase ``directMemory``, the ``_ms`` unit, gauges ending
``_total`` or ``_count``): they are kept, since Pulsar's dashboards query them as they are.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from balancer.errors import LoadBalancerError
from balancer.load import max_usage
from events.catalog import COMMANDS, EVENTS
from web.observe.balancer_metrics import balancer_families
from web.observe.lookups import LookupStats
from web.observe.observer import Observer
from web.observe.pulsar_names import FAMILIES, USAGE
from web.observe.tally import ASSIGN_KEYS, SPLIT_KEYS, UNLOAD_KEYS

USAGE_ATTRS = dict(zip(USAGE, ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out"),
                       strict=True))
ANOMALY_KINDS = ("gap", "duplicate", "stale_epoch", "out_of_range", "invalid_transition", "bad_event",
                 "dead_letter", "retained", "forged", "unauthorized", "unelected_epoch",
                 "unregistered_owner")
"""Every kind ``projections.tracking.Anomaly`` names: each one's counter starts at 0."""


def _codes(error: type[LoadBalancerError]) -> set[str]:
    return {error.code}.union(*(_codes(sub) for sub in error.__subclasses__()))


ERROR_CODES = sorted(_codes(LoadBalancerError))
"""Every code of the project's error tree (``balancer.errors``): a refusal carries one of them."""
LATENCIES = (
    ("unload", "brk_lb_unload_latency_ms", "Total time duration of unload operations on source "
     "brokers: from the move's decision until the bundle is owned again or free"),
    ("assign", "brk_lb_assign_latency_ms", "Time spent in the Assigning state on destination brokers"),
    ("release", "brk_lb_release_latency_ms", "Time spent in the Releasing state on source brokers"),
)
OUR_LATENCIES = (
    ("lookup", "bb_lookup_latency_seconds", "From the assignment of an unowned bundle (a lookup) "
     "until its owner has it, by its owner"),
    ("transfer", "bb_transfer_latency_seconds", "From a transfer's decision until the bundle is "
     "owned by its new broker, by source broker"),
)
BUNDLE_STATS = (("msg_rate_in", "msg_rate_in"), ("msg_rate_out", "msg_rate_out"),
                ("topics_count", "topics"), ("consumer_count", "consumers"),
                ("producer_count", "producers"), ("msg_throughput_in", "msg_throughput_in"),
                ("msg_throughput_out", "msg_throughput_out"))


def pulsar_labels(name: str, kind: str) -> list[str]:
    """Pulsar's fullest label set of ``name``, which ``pulsar_names`` must list as a ``kind``."""
    found = sorted((f.labels for f in FAMILIES if f.name == name and f.kind == kind),
                   key=lambda labels: -len(labels))
    if not found:
        raise LookupError(f"{name} is not a Pulsar {kind} of web.observe.pulsar_names")
    return list(found[0])


def pulsar_gauge(name: str, help_text: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, labels=pulsar_labels(name, "gauge"))


def pulsar_counter(name: str, help_text: str) -> CounterMetricFamily:
    return CounterMetricFamily(name, help_text, labels=pulsar_labels(name, "counter"))


def pulsar_histogram(name: str, help_text: str) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, help_text, labels=pulsar_labels(name, "histogram"))


class ClusterCollector(Collector):
    """Every family, built from the observer and the cluster's views at each scrape."""

    def __init__(self, observer: Observer, cluster_name: str, *, expose_bundles: bool = False,
                 lookups: LookupStats | None = None) -> None:
        self.observer, self.cluster_name, self.expose_bundles = observer, cluster_name, expose_bundles
        self.lookups = lookups or LookupStats()

    def collect(self) -> Iterator[Metric]:
        yield from self._usage()
        yield from self._unloads()
        yield from self._splits_and_assigns()
        yield from self._latencies()
        yield from self._owned()
        yield from self._lookups()
        if self.expose_bundles:
            yield from self._bundles()
        yield from self._ours()

    # -- Pulsar's: the load managers ----------------------------------------------------------
    def _usage(self) -> Iterable[Metric]:
        c, loads = self.cluster_name, self.observer.cluster.view.load.broker_loads()
        for resource, attr in USAGE_ATTRS.items():
            family = pulsar_gauge(f"pulsar_lb_{resource}_usage", f"Broker {resource} usage, "
                                   "percent of its limit, from its latest load report")
            for broker, load in loads.items():
                family.add_metric([c, broker, "loadBalancing"], getattr(load.report, attr).percent())
            yield family
        usage = pulsar_gauge("pulsar_lb_resource_usage", "Broker resource usage (fraction): "
                              "feature=max_ema the weighted max EMA the shedder reads, max the max "
                              "of CPU, memory, direct memory and bandwidth")
        for broker, load in loads.items():
            usage.add_metric([c, broker, "loadBalancing", "max_ema"], load.weighted_max_ema)
            usage.add_metric([c, broker, "loadBalancing", "max"], max_usage(load.report))
        yield usage
        yield self._usage_stats([load.weighted_max_ema for load in loads.values()])

    def _usage_stats(self, emas: list[float]) -> Metric:
        stats = pulsar_gauge("pulsar_lb_resource_usage_stats", "Average and standard deviation of "
                              "the brokers' weighted max EMA (when both are above 0, as in Pulsar)")
        if len(emas) > 1:
            avg, std = statistics.fmean(emas), statistics.pstdev(emas)
            if avg > 0 and std > 0:
                leader = self.observer.tally.leader
                for stat, value in (("avg", avg), ("std", std)):
                    stats.add_metric([self.cluster_name, leader, "bundleUnloading", "max_ema", stat], value)
        return stats

    def _unloads(self) -> Iterable[Metric]:
        c, tally = self.cluster_name, self.observer.tally
        brokers = pulsar_counter("pulsar_lb_unload_broker_total", "Brokers unloaded by shedding "
                                "(once per shedding run)")
        bundles = pulsar_counter("pulsar_lb_unload_bundle_total", "Bundles unloaded (shedding and admin)")
        for leader in tally.leaders():
            brokers.add_metric([c, leader, "bundleUnloading"], tally.unload_brokers[leader])
            bundles.add_metric([c, leader, "bundleUnloading"], tally.unload_bundles[leader])
        breakdown = pulsar_counter("pulsar_lb_unload_broker_breakdown_total", "Unload decisions by "
                                  "result (Success, Skip, Failure) and reason")
        for leader, result, reason in _keys(tally.leaders(), UNLOAD_KEYS, tally.unload_breakdown):
            breakdown.add_metric([c, leader, "bundleUnloading", result, reason],
                                 tally.unload_breakdown[leader, result, reason])
        yield from (brokers, bundles, breakdown)

    def _splits_and_assigns(self) -> Iterable[Metric]:
        c, tally = self.cluster_name, self.observer.tally
        total = pulsar_counter("pulsar_lb_bundles_split_total", "Bundles split")
        for leader in tally.leaders():
            total.add_metric([c, leader, "bundlesSplit"], tally.splits[leader])
        breakdown = pulsar_counter("pulsar_lb_bundles_split_breakdown_total", "Split decisions by "
                                  "result and reason")
        for leader, result, reason in _keys(tally.leaders(), SPLIT_KEYS, tally.split_breakdown):
            breakdown.add_metric([c, leader, "bundlesSplit", result, reason],
                                 tally.split_breakdown[leader, result, reason])
        assign = pulsar_counter("pulsar_lb_assign_broker_breakdown_total", "Assignments of unowned "
                               "bundles by result")
        for leader in tally.leaders():
            for result in ASSIGN_KEYS:
                assign.add_metric([c, leader, "assign", result], tally.assign_breakdown[leader, result])
        yield from (total, breakdown, assign)

    def _latencies(self) -> Iterable[Metric]:
        latencies, c = self.observer.latencies, self.cluster_name
        brokers = [status.broker_id for status in self.observer.cluster.brokers()]
        for phase, name, help_text in LATENCIES:
            family = pulsar_histogram(name, f"{help_text} (milliseconds, on the service's clock)")
            for broker, histogram in latencies.series(phase, brokers):
                family.add_metric([c, broker, "bundleUnloading"], histogram.cumulative(), histogram.total)
            yield family
        for phase, name, help_text in OUR_LATENCIES:
            ours = HistogramMetricFamily(name, f"{help_text} (seconds, on the service's clock)",
                                         labels=["cluster", "broker"])
            for broker, histogram in latencies.series(phase, brokers):
                ours.add_metric([c, broker], histogram.cumulative(1 / 1000), histogram.total / 1000)
            yield ours

    def _owned(self) -> Iterable[Metric]:
        owned = pulsar_gauge("pulsar_sunit_state_chn_owned_su_total", "Bundles each broker owns")
        for status in self.observer.cluster.brokers():
            owned.add_metric([self.cluster_name, status.broker_id, "sunitStateChn"], status.bundles)
        yield owned

    def _lookups(self) -> Iterable[Metric]:
        """Pulsar's ``NamespaceService`` lookup metrics: counters and a summary in milliseconds."""
        stats, c = self.lookups, self.cluster_name
        for outcome in ("answers", "failures", "redirects"):
            counter = pulsar_counter(f"pulsar_broker_lookup_{outcome}_total", f"Topic lookups: {outcome}")
            counter.add_metric([c], getattr(stats, outcome))
            yield counter
        summary = Metric("pulsar_broker_lookup", "Topic lookup latency (milliseconds, on the "
                         "service's clock; quantiles over the last minute)", "summary")
        pulsar_labels("pulsar_broker_lookup", "summary")  # listed in pulsar_names, labels: cluster
        for quantile, value in stats.quantiles(time.monotonic() * 1000.0):
            summary.add_sample("pulsar_broker_lookup", {"cluster": c, "quantile": str(quantile)}, value)
        summary.add_sample("pulsar_broker_lookup_count", {"cluster": c}, stats.count)
        summary.add_sample("pulsar_broker_lookup_sum", {"cluster": c}, stats.sum_ms)
        yield summary

    def _bundles(self) -> Iterable[Metric]:
        """Pulsar's per-bundle series: the latest stats of every owned bundle, by its owner."""
        cluster, c = self.observer.cluster, self.cluster_name
        stats = cluster.view.load.bundles
        rows = [(row.owner, stats[row.bundle].stats) for namespace in cluster.namespaces()
                for row in cluster.bundles(namespace) if row.owner and row.bundle in stats]
        for suffix, attr in BUNDLE_STATS:
            family = pulsar_gauge(f"pulsar_bundle_{suffix}", f"A bundle's {suffix.replace('_', ' ')} "
                                   "in its owner's latest load report")
            for owner, bundle in rows:
                family.add_metric([c, owner, bundle.bundle, "bundle"], getattr(bundle, attr))
            yield family

    # -- bb_*: ours ------------------------------------------------------------------------
    def _ours(self) -> Iterable[Metric]:
        observer, c = self.observer, self.cluster_name
        tally = observer.tally
        yield _counter("bb_events_appended", "Records in the log, by type", c, "type",
                       [e.TYPE for e in EVENTS], tally.appended)
        yield from self._folds()
        yield from balancer_families(observer.balancer, c)
        by_command: Counter[str] = Counter()
        by_code: Counter[str] = Counter()
        for (command, code), count in tally.rejected.items():
            by_command[command] += count
            by_code[code] += count
        yield _counter("bb_commands_rejected", "Commands the cluster refused (CommandRejected), by "
                       "command", c, "command", [m.TYPE for m in COMMANDS], by_command)
        yield _counter("bb_commands_rejected_by_code", "Commands the cluster refused, by the error "
                       "code of the refusal", c, "code", ERROR_CODES, by_code)
        yield _counter("bb_anomalies", "What the ownership fold refused or noticed, by kind", c,
                       "kind", list(ANOMALY_KINDS), observer.anomaly_counts)
        dead = CounterMetricFamily("bb_dead_letters", "Log records that could not be read",
                                   labels=["cluster"])
        dead.add_metric([c], observer.anomaly_counts.get("dead_letter", 0))
        yield dead
        leader = observer.cluster.leader()
        epoch = GaugeMetricFamily("bb_leader_epoch", "The newest leader epoch and its leader",
                                  labels=["cluster", "leader"])
        epoch.add_metric([c, leader.leader_id or "none"], leader.epoch)
        yield epoch
        yield from self._states()

    def _folds(self) -> Iterable[Metric]:
        observer, c = self.observer, self.cluster_name
        client = sum(observer.cluster.view.cursor.position.values())
        positions = {"client": client, **observer.actor_positions}
        position = GaugeMetricFamily("bb_fold_position", "Next log offset each actor will fold "
                                     "(summed over partitions)", labels=["cluster", "actor"])
        lag = GaugeMetricFamily("bb_fold_lag_records", "Records the web service's client has "
                                "folded and the actor not yet", labels=["cluster", "actor"])
        for actor, at in sorted(positions.items()):
            position.add_metric([c, actor], at)
            lag.add_metric([c, actor], max(0, client - at))
        yield from (position, lag)

    def _states(self) -> Iterable[Metric]:
        cluster, c = self.observer.cluster, self.cluster_name
        states = GaugeMetricFamily("bb_bundles", "Bundles by namespace and ownership state",
                                   labels=["cluster", "namespace", "state"])
        for namespace in cluster.namespaces():
            counts: dict[str, int] = {}
            for row in cluster.bundles(namespace):
                counts[row.state] = counts.get(row.state, 0) + 1
            for state, count in sorted(counts.items()):
                states.add_metric([c, namespace, state], count)
        brokers = GaugeMetricFamily("bb_brokers", "Registered brokers", labels=["cluster"])
        brokers.add_metric([c], len(cluster.view.brokers))
        yield from (states, brokers)


def _counter(name: str, help_text: str, c: str, label: str, known: list[str],
             found: Mapping[str, int]) -> Metric:
    """A counter with one label: every ``known`` value from 0, and any other value counted."""
    family = CounterMetricFamily(name, help_text, labels=["cluster", label])
    for value in sorted({*known, *found}):
        family.add_metric([c, value], found.get(value, 0))
    return family


def _keys(leaders: list[str], pulsars: Iterable[tuple[str, str]],
          seen: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Pulsar's (result, reason) keys for every leader, and any other key the log produced."""
    return sorted({*((leader, *key) for leader in leaders for key in pulsars), *seen})


def registry_for(observer: Observer, cluster_name: str, *, expose_bundles: bool = False,
                 lookups: LookupStats | None = None) -> CollectorRegistry:
    """A registry of this service's own holding one ``ClusterCollector``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(observer, cluster_name, expose_bundles=expose_bundles,
                                       lookups=lookups))
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
