"""Pulsar 4.0's load-balancer metric families, as a broker's ``/metrics`` exposes them.

Each ``PulsarFamily`` is one name and one label set, with where Pulsar 4.0.7 makes it: the
class of ``pulsar-broker-4.0.7.jar`` that holds the name as a string constant, and the line of
its source (``apache/pulsar`` tag v4.0.7, the line the class file's own line table gives for
that constant). ``tests/web/test_pulsar_metric_names.py`` reads the jar and checks every entry:
the name is in the class, at the cited line, with its label names.

How a name reaches ``/metrics`` in Pulsar: a load manager's ``Metrics`` objects carry ``brk_*``
names and their dimensions; ``PrometheusMetricsGenerator.parseMetricsToPrometheusMetrics``
(line 452) writes each with ``cluster`` first and ``writeNameReplacingBrkPrefix`` (line 488)
turns ``brk_`` into ``pulsar_``. PIP-307's latency histograms are Prometheus collectors of the
default registry (``UnloadManager.LatencyMetric``, unit ``ms``): they keep their ``brk_`` name
and get ``cluster`` from ``PrometheusMetricsGeneratorUtils.generateSystemMetrics`` (line 71), as
do ``NamespaceService``'s lookup counters and summary, named ``pulsar_*`` in the source.

Invariants: names and labels here are Pulsar's, letter for letter (``directMemory``, ``_ms``,
a gauge ending ``_total``), so Pulsar's dashboards and alerts find them; where one name has two
label sets (the modular and the extensible manager), both are listed and the exporter uses the
extensible one (a superset: a query of the modular's labels matches it).
"""

from __future__ import annotations

from dataclasses import dataclass

JAR = "pulsar-broker-4.0.7.jar"
SOURCE_ROOT = "pulsar-broker/src/main/java/"
EXTENSIONS = "org/apache/pulsar/broker/loadbalance/extensions/"
MODULAR = "org/apache/pulsar/broker/loadbalance/impl/ModularLoadManagerImpl"
LATENCY_BUCKETS_MS = (1.0, 10.0, 100.0, 200.0, 1000.0)
"""``UnloadManager.LatencyMetric.buildHistogram``'s buckets (UnloadManager.java:64)."""


@dataclass(frozen=True)
class PulsarFamily:
    """One metric family of a Pulsar 4.0 broker's ``/metrics``."""

    name: str
    """As ``/metrics`` shows it (``brk_`` already ``pulsar_`` where Pulsar renames it)."""
    kind: str
    """What this project exposes it as: gauge, counter (Pulsar writes its ``Metrics`` counters
    as gauges; the sample names are the same), histogram or summary."""
    labels: tuple[str, ...]
    """Its label names, ``cluster`` included."""
    constant: str
    """The string constant in the class (the ``brk_`` name; a histogram's name before its unit)."""
    cls: str
    """The class in ``JAR`` that holds ``constant`` (path without ``.class``)."""
    line: int
    """The source line of ``constant`` in that class's source file."""

    @property
    def source(self) -> str:
        """The cited source file and line, e.g. ``.../models/UnloadCounter.java:117``."""
        return f"{SOURCE_ROOT}{self.cls.split('$')[0]}.java:{self.line}"


def _family(name: str, kind: str, labels: str, cls: str, line: int, constant: str | None = None) -> PulsarFamily:
    brk = constant or "brk_" + name.removeprefix("pulsar_")
    return PulsarFamily(name, kind, ("cluster", *labels.split()), brk, cls, line)


def _lookup(name: str, kind: str, line: int) -> PulsarFamily:
    """One of ``NamespaceService``'s lookup metrics: a collector of the default registry named
    ``pulsar_*`` already (a counter's samples end ``_total``, as Prometheus's client writes them)."""
    return PulsarFamily(name, kind, ("cluster",), name.removesuffix("_total"), NAMESPACE_SERVICE, line)


_LOAD_DATA = EXTENSIONS + "data/BrokerLoadData"
_UNLOAD = EXTENSIONS + "models/UnloadCounter"
_SPLIT = EXTENSIONS + "models/SplitCounter"
_ASSIGN = EXTENSIONS + "models/AssignCounter"
_LATENCY = EXTENSIONS + "manager/UnloadManager$LatencyMetric"
_CHANNEL = EXTENSIONS + "channel/ServiceUnitStateChannelImpl"
NAMESPACE_SERVICE = "org/apache/pulsar/broker/namespace/NamespaceService"

USAGE = ("cpu", "memory", "directMemory", "bandwidth_in", "bandwidth_out")
"""The resources of ``pulsar_lb_<resource>_usage``, in Pulsar's spelling."""

FAMILIES: tuple[PulsarFamily, ...] = (
    # A broker's usage (percent of its limit): the extensible manager's and the modular's.
    *(_family(f"pulsar_lb_{r}_usage", "gauge", "broker metric", _LOAD_DATA, 252 + i)
      for i, r in enumerate(USAGE)),
    *(_family(f"pulsar_lb_{r}_usage", "gauge", "broker metric", MODULAR, 1072 + i)
      for i, r in enumerate(USAGE)),
    _family("pulsar_lb_resource_usage", "gauge", "broker metric feature", _LOAD_DATA, 263),
    _family("pulsar_lb_resource_usage_stats", "gauge", "broker metric feature stat", _UNLOAD, 142),
    # Unloads, splits and assignments (the extensible manager's counters; the modular's lack broker).
    _family("pulsar_lb_unload_broker_total", "counter", "broker metric", _UNLOAD, 117),
    _family("pulsar_lb_unload_bundle_total", "counter", "broker metric", _UNLOAD, 118),
    _family("pulsar_lb_unload_broker_total", "counter", "metric", MODULAR, 690),
    _family("pulsar_lb_unload_bundle_total", "counter", "metric", MODULAR, 691),
    _family("pulsar_lb_unload_broker_breakdown_total", "counter", "broker metric result reason", _UNLOAD, 130),
    _family("pulsar_lb_bundles_split_total", "counter", "broker metric", _SPLIT, 81),
    _family("pulsar_lb_bundles_split_total", "counter", "metric", MODULAR, 805),
    _family("pulsar_lb_bundles_split_breakdown_total", "counter", "broker metric result reason", _SPLIT, 95),
    _family("pulsar_lb_assign_broker_breakdown_total", "counter", "broker metric result", _ASSIGN, 77),
    # PIP-307's latencies: histograms of the default registry, in milliseconds.
    _family("brk_lb_unload_latency_ms", "histogram", "broker metric", _LATENCY, 52, "brk_lb_unload_latency"),
    _family("brk_lb_assign_latency_ms", "histogram", "broker metric", _LATENCY, 54, "brk_lb_assign_latency"),
    _family("brk_lb_release_latency_ms", "histogram", "broker metric", _LATENCY, 57, "brk_lb_release_latency"),
    # The ownership channel's count of the bundles a broker owns.
    _family("pulsar_sunit_state_chn_owned_su_total", "gauge", "broker metric", _CHANNEL, 1952),
    # Topic lookups (both managers): NamespaceService's counters and summary (milliseconds).
    _lookup("pulsar_broker_lookup_redirects_total", "counter", 176),
    _lookup("pulsar_broker_lookup_failures_total", "counter", 179),
    _lookup("pulsar_broker_lookup_answers_total", "counter", 182),
    _lookup("pulsar_broker_lookup", "summary", 185),
    # Per bundle, behind exposeBundlesMetricsInPrometheus (the modular manager's).
    *(_family(f"pulsar_bundle_{n}", "gauge", "broker bundle metric", MODULAR, 1047 + i)
      for i, n in enumerate(("msg_rate_in", "msg_rate_out", "topics_count", "consumer_count",
                             "producer_count", "msg_throughput_in", "msg_throughput_out"))),
)

METRIC_LABEL = {
    "loadBalancing": (_LOAD_DATA, 248), "bundleUnloading": (_UNLOAD, 114),
    "bundlesSplit": (_SPLIT, 78), "assign": (_ASSIGN, 68), "sunitStateChn": (_CHANNEL, 1839),
    "bundle": (MODULAR, 1045),
}
"""The value of the ``metric`` label of each family group, and where Pulsar sets it; the
latency histograms' is ``bundleUnloading`` too (UnloadManager.java:90)."""

NOT_EXPORTED = {
    "brk_lb_disconnect_latency_ms": "no client connections to close",
    "pulsar_lb_ignored_ack_total": "no ownership-channel acks to ignore",
    "pulsar_lb_ignored_send_total": "no ownership-channel sends to ignore",
    "pulsar_sunit_state_chn_owner_lookup_total": "lookups are log records, not channel reads",
    "pulsar_sunit_state_chn_event_publish_ops_total": "the log's appends: bb_events_appended_total",
    "pulsar_sunit_state_chn_subscribe_ops_total": "no channel subscriptions",
    "pulsar_sunit_state_chn_cleanup_ops_total": "orphans are reassigned by the leader: no clean-up job",
}
"""Pulsar families of the load managers this project has no counterpart for, and why."""


def family_names() -> list[str]:
    """Every exported Pulsar name, once, in the order above."""
    return list(dict.fromkeys(f.name for f in FAMILIES))


def labels_of(name: str) -> list[tuple[str, ...]]:
    """Pulsar's label sets of ``name`` (one per load manager that exports it)."""
    return [f.labels for f in FAMILIES if f.name == name]
