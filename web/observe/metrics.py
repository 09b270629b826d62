"""``/metrics``: the Prometheus text format, under Pulsar's load-balancer names and our own.

Three families (the full list with each Pulsar counterpart: docs/operations.md#metrics):
- ``brk_lb_*``: the extensible load manager's names and labels (``cluster``, ``broker``,
  ``metric``, and ``result``/``reason``/``feature``/``stat`` where Pulsar has them), and PIP-307's
  latency histograms;
- ``pulsar_lb_*``: what a Pulsar broker's ``/metrics`` shows for the modular load manager (its
  ``brk_`` names with the prefix Pulsar's exporter writes), so Pulsar's own Grafana panels work;
- ``bb_*``: what only this project has (the log, folds, anomalies, elections).

Invariants: a scrape reads the observer's tally and the client's views and asks no actor
anything; every sample is computed at scrape time from that state (a custom collector on a
registry of this service's own, not the process-global one, so two services in one process, as
in tests, never see each other's series); names pass ``promtool check metrics``: where
Pulsar's name breaks a Prometheus rule (camelCase, ``_ms``, a gauge named ``_total``) the
name is adapted and the docs say so.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from balancer.load import max_usage
from web.observe.balancer_metrics import balancer_families
from web.observe.observer import Observer
from web.observe.tally import ASSIGN_KEYS, SPLIT_KEYS, UNLOAD_KEYS

USAGES = (("cpu", "cpu"), ("memory", "memory"), ("direct_memory", "direct_memory"),
          ("bandwidth_in", "bandwidth_in"), ("bandwidth_out", "bandwidth_out"))
LATENCIES = (("unload", "brk_lb_unload_latency_seconds", "Total time of unload operations, "
              "from the unload (source broker) until the bundle is owned again or free"),
             ("assign", "brk_lb_assign_latency_seconds", "Time a transferred bundle spent in "
              "the Assigning state, on its destination broker"),
             ("release", "brk_lb_release_latency_seconds", "Time a bundle spent in the "
              "Releasing state, on its source broker"),
             ("bb_lookup", "bb_lookup_latency_seconds", "From the assignment of an unowned "
              "bundle (a lookup) until its owner confirmed it"),
             ("bb_transfer", "bb_transfer_latency_seconds", "From a move's decision until the "
              "bundle is owned by its new broker"))


class ClusterCollector(Collector):
    """Every family, built from the observer and the cluster's views at each scrape."""

    def __init__(self, observer: Observer, cluster_name: str) -> None:
        self.observer, self.cluster_name = observer, cluster_name

    def collect(self) -> Iterator[Metric]:
        yield from self._usage()
        yield from self._unloads()
        yield from self._splits_and_assigns()
        yield from self._latencies()
        yield from self._modular()
        yield from self._ours()

    # -- brk_lb_*: the extensible manager ---------------------------------------------------
    def _usage(self) -> Iterable[Metric]:
        c, loads = self.cluster_name, self.observer.cluster.view.load.broker_loads()
        labels = ["cluster", "broker", "metric"]
        for attr, name in USAGES:
            family = GaugeMetricFamily(f"brk_lb_{name}_usage", f"Broker {name} usage, percent "
                                       "of its limit, from its latest load report", labels=labels)
            for broker, load in loads.items():
                family.add_metric([c, broker, "loadBalancing"], getattr(load.report, attr).percent())
            yield family
        usage = GaugeMetricFamily("brk_lb_resource_usage", "Broker resource usage (fraction): "
                                  "feature=max_ema the weighted max EMA the shedder reads, max the "
                                  "max of CPU, direct memory and bandwidth", labels=[*labels, "feature"])
        for broker, load in loads.items():
            usage.add_metric([c, broker, "loadBalancing", "max_ema"], load.weighted_max_ema)
            usage.add_metric([c, broker, "loadBalancing", "max"], max_usage(load.report))
        yield usage
        emas = [load.weighted_max_ema for load in loads.values()]
        stats = GaugeMetricFamily("brk_lb_resource_usage_stats", "Average and standard deviation "
                                  "of the brokers' weighted max EMA", labels=[*labels, "feature", "stat"])
        if len(emas) > 1 and statistics.fmean(emas) > 0:
            leader = self.observer.tally.leader
            stats.add_metric([c, leader, "bundleUnloading", "max_ema", "avg"], statistics.fmean(emas))
            stats.add_metric([c, leader, "bundleUnloading", "max_ema", "std"], statistics.pstdev(emas))
        yield stats

    def _unloads(self) -> Iterable[Metric]:
        c, tally = self.cluster_name, self.observer.tally
        labels = ["cluster", "broker", "metric"]
        brokers = CounterMetricFamily("brk_lb_unload_broker", "Brokers unloaded by shedding "
                                      "(once per shedding run)", labels=labels)
        bundles = CounterMetricFamily("brk_lb_unload_bundle", "Bundles unloaded (shedding and "
                                      "admin)", labels=labels)
        for leader in tally.leaders():
            brokers.add_metric([c, leader, "bundleUnloading"], tally.unload_brokers[leader])
            bundles.add_metric([c, leader, "bundleUnloading"], tally.unload_bundles[leader])
        breakdown = CounterMetricFamily("brk_lb_unload_broker_breakdown", "Unload decisions by "
                                        "result (Success, Skip, Failure) and reason",
                                        labels=[*labels, "result", "reason"])
        for leader, result, reason in _keys(tally.leaders(), UNLOAD_KEYS, tally.unload_breakdown):
            breakdown.add_metric([c, leader, "bundleUnloading", result, reason],
                                 tally.unload_breakdown[leader, result, reason])
        yield from (brokers, bundles, breakdown)

    def _splits_and_assigns(self) -> Iterable[Metric]:
        c, tally = self.cluster_name, self.observer.tally
        labels = ["cluster", "broker", "metric"]
        total = CounterMetricFamily("brk_lb_bundles_split", "Bundles split", labels=labels)
        for leader in tally.leaders():
            total.add_metric([c, leader, "bundlesSplit"], tally.splits[leader])
        breakdown = CounterMetricFamily("brk_lb_bundles_split_breakdown", "Split decisions by "
                                        "result and reason", labels=[*labels, "result", "reason"])
        for leader, result, reason in _keys(tally.leaders(), SPLIT_KEYS, tally.split_breakdown):
            breakdown.add_metric([c, leader, "bundlesSplit", result, reason],
                                 tally.split_breakdown[leader, result, reason])
        assign = CounterMetricFamily("brk_lb_assign_broker_breakdown", "Assignments of unowned "
                                     "bundles by result", labels=[*labels, "result"])
        for leader in tally.leaders():
            for result in ASSIGN_KEYS:
                assign.add_metric([c, leader, "assign", result], tally.assign_breakdown[leader, result])
        yield from (total, breakdown, assign)

    def _latencies(self) -> Iterable[Metric]:
        latency = self.observer.tally.latency
        for key, name, help_text in LATENCIES:
            family = HistogramMetricFamily(name, f"{help_text} (cluster time, seconds)",
                                           labels=["cluster", "broker", "metric"])
            for (metric, broker), histogram in sorted(latency.items()):
                if metric == key:
                    family.add_metric([self.cluster_name, broker, "bundleUnloading"],
                                      histogram.cumulative(), histogram.total)
            yield family

    # -- pulsar_lb_*: the modular manager, as Pulsar's /metrics shows it -----------------------
    def _modular(self) -> Iterable[Metric]:
        c, tally = self.cluster_name, self.observer.tally
        loads = self.observer.cluster.view.load.broker_loads()
        for attr, name in USAGES:
            family = GaugeMetricFamily(f"pulsar_lb_{name}_usage", f"Broker {name} usage, percent",
                                       labels=["cluster", "broker", "metric"])
            for broker, load in loads.items():
                family.add_metric([c, broker, "loadBalancing"], getattr(load.report, attr).percent())
            yield family
        for name, count, metric in (
                ("pulsar_lb_unload_broker", sum(tally.unload_brokers.values()), "bundleUnloading"),
                ("pulsar_lb_unload_bundle", sum(tally.unload_bundles.values()), "bundleUnloading"),
                ("pulsar_lb_bundles_split", sum(tally.splits.values()), "bundlesSplit")):
            counter = CounterMetricFamily(name, f"{name[10:].replace('_', ' ')}, cluster-wide",
                                          labels=["cluster", "metric"])
            counter.add_metric([c, metric], count)
            yield counter

    # -- bb_*: ours ------------------------------------------------------------------------
    def _ours(self) -> Iterable[Metric]:
        observer, c = self.observer, self.cluster_name
        cluster, tally = observer.cluster, observer.tally
        appended = CounterMetricFamily("bb_events_appended", "Records in the log, by type",
                                       labels=["cluster", "type"])
        for kind, count in sorted(tally.appended.items()):
            appended.add_metric([c, kind], count)
        yield appended
        yield from self._folds()
        yield from balancer_families(observer.balancer, c)
        rejected = CounterMetricFamily("bb_commands_rejected", "Commands the cluster refused "
                                       "(CommandRejected), by command and error code",
                                       labels=["cluster", "command", "code"])
        for (command, code), count in sorted(tally.rejected.items()):
            rejected.add_metric([c, command, code], count)
        yield rejected
        anomalies = CounterMetricFamily("bb_anomalies", "What the ownership fold refused or "
                                        "noticed, by kind", labels=["cluster", "kind"])
        for kind, count in sorted(observer.anomaly_counts.items()):
            anomalies.add_metric([c, kind], count)
        yield anomalies
        dead = CounterMetricFamily("bb_dead_letters", "Log records that could not be read",
                                   labels=["cluster"])
        dead.add_metric([c], observer.anomaly_counts.get("dead_letter", 0))
        yield dead
        leader = cluster.leader()
        epoch = GaugeMetricFamily("bb_leader_epoch", "The newest leader epoch and its leader",
                                  labels=["cluster", "leader"])
        epoch.add_metric([c, leader.leader_id or "none"], leader.epoch)
        yield epoch
        yield from self._ownership()

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

    def _ownership(self) -> Iterable[Metric]:
        cluster, c = self.observer.cluster, self.cluster_name
        owned = GaugeMetricFamily("bb_owned_bundles", "Bundles each broker owns (Pulsar: "
                                  "brk_sunit_state_chn_owned_su_total)", labels=["cluster", "broker"])
        for status in cluster.brokers():
            owned.add_metric([c, status.broker_id], status.bundles)
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
        yield from (owned, states, brokers)


def _keys(leaders: list[str], pulsars: Iterable[tuple[str, str]],
          seen: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Pulsar's (result, reason) keys for every leader, and any other key the log produced."""
    return sorted({*((leader, *key) for leader in leaders for key in pulsars), *seen})


def registry_for(observer: Observer, cluster_name: str) -> CollectorRegistry:
    """A registry of this service's own holding one ``ClusterCollector``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(observer, cluster_name))
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
