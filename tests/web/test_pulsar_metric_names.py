"""The metric names ``/metrics`` exports as Pulsar's are Pulsar 4.0.7's own, read from its jar.

``web.observe.pulsar_names`` cites, for every family, the class of ``pulsar-broker-4.0.7.jar``
and the source line that make it; these tests read the class files (``tests.classfile``, no
Java) and check that each name is a constant loaded at that line, with its label names and its
``metric`` label value, and that Pulsar's exporter adds ``cluster`` and renames ``brk_`` to
``pulsar_`` where the list says so. The jars come from ``make pulsar-server-jars`` (``make
test`` fetches them). The exported families are compared with this list over a real service in
``tests/web/test_pulsar_metrics.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.classfile import ClassFile, read_class
from tests.pulsar_server import pulsar_server_libs
from web.observe.lookups import QUANTILES
from web.observe.pulsar_names import (
    FAMILIES,
    JAR,
    LATENCY_BUCKETS_MS,
    METRIC_LABEL,
    NAMESPACE_SERVICE,
    NOT_EXPORTED,
    PulsarFamily,
)

GENERATOR = "org/apache/pulsar/broker/stats/prometheus/PrometheusMetricsGenerator"
GENERATOR_UTILS = "org/apache/pulsar/broker/stats/prometheus/PrometheusMetricsGeneratorUtils"
_CLASSES: dict[tuple[str, str], ClassFile] = {}


def jar(name: str = JAR) -> Path:
    return pulsar_server_libs() / name


def pulsar_class(name: str, jar_name: str = JAR) -> ClassFile:
    if (jar_name, name) not in _CLASSES:
        _CLASSES[jar_name, name] = read_class(jar(jar_name), name)
    return _CLASSES[jar_name, name]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f"{f.name}@{f.cls.rsplit('/', 1)[1]}")
def test_each_name_is_pulsars_constant_at_the_cited_line(family: PulsarFamily) -> None:
    found = pulsar_class(family.cls)
    assert family.line in found.loads.get(family.constant, set()), (
        f"{family.constant} is not loaded at {family.source} (it is at {found.loads.get(family.constant)})")
    missing = [label for label in family.labels if label != "cluster" and label not in found.strings]
    assert not missing, f"{family.name}: labels {missing} are not constants of {family.cls}"


def test_the_exporter_adds_cluster_and_renames_brk_to_pulsar() -> None:
    generator = pulsar_class(GENERATOR)
    assert 452 in generator.loads['{cluster="']
    assert 489 in generator.loads["pulsar_"] and 488 in generator.loads["brk_"]
    utils = pulsar_class(GENERATOR_UTILS, JAR.replace("broker", "broker-common"))
    assert 71 in utils.loads['cluster="']  # the default registry's histograms get it too
    renamed = [f for f in FAMILIES if f.constant.startswith("brk_") and f.kind != "histogram"]
    assert all(f.name == "pulsar_" + f.constant.removeprefix("brk_") for f in renamed)
    registry = [f for f in FAMILIES if not f.constant.startswith("brk_")]  # NamespaceService's
    assert {f.name for f in registry} == {"pulsar_broker_lookup", *(f"pulsar_broker_lookup_{o}_total"
                                          for o in ("answers", "failures", "redirects"))}
    assert all(f.name == f.constant + ("_total" if f.kind == "counter" else "") for f in registry)


def test_the_metric_label_values_are_pulsars() -> None:
    for value, (cls, line) in METRIC_LABEL.items():
        assert line in pulsar_class(cls).loads[value], f"metric={value} at {cls}:{line}"


def test_the_latency_histograms_are_in_milliseconds_with_pulsars_buckets() -> None:
    latency = pulsar_class("org/apache/pulsar/broker/loadbalance/extensions/manager/UnloadManager$LatencyMetric")
    assert 64 in latency.loads["ms"]  # Histogram.build(name, help).unit("ms")
    assert 90 in latency.loads["bundleUnloading"]  # .labels(brokerId, "bundleUnloading")
    assert set(LATENCY_BUCKETS_MS) - {1.0} <= latency.doubles  # 1.0 is the JVM's dconst_1
    histograms = [f for f in FAMILIES if f.kind == "histogram"]
    assert all(f.name == f.constant + "_ms" for f in histograms)


def test_the_lookup_summary_has_pulsars_quantiles() -> None:
    assert {0.5, 0.99, 0.999} <= pulsar_class(NAMESPACE_SERVICE).doubles  # and 1.0: dconst_1
    assert QUANTILES == (0.5, 0.99, 0.999, 1.0)


def test_what_is_not_exported_is_pulsars_too() -> None:
    """The families named as having no counterpart here are real Pulsar names as well."""
    constants = set().union(*(pulsar_class(f.cls).strings for f in FAMILIES))
    constants |= pulsar_class("org/apache/pulsar/broker/loadbalance/extensions/ExtensibleLoadManagerImpl").strings
    for name in NOT_EXPORTED:
        brk = "brk_" + name.removeprefix("pulsar_").removeprefix("brk_").removesuffix("_ms")
        assert brk in constants, name
