"""A real Pulsar 4.0.7 broker's ``/metrics`` carries the names and label sets that
``web.observe.pulsar_names`` lists (and this project's ``/metrics`` exports), and answers the
probes the project's web service imitates.

The session's extensible cluster (2 brokers) moves one bundle with a destination, so that the
unload latencies have samples; then every broker's ``/metrics/`` is read as text (Pulsar writes
every load-manager family as a gauge: the text is read line by line, not by type).
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest

from tests.pulsar.test_cluster import move_topic_elsewhere
from tests.pulsar_server import PulsarCluster
from web.observe.pulsar_names import FAMILIES, MODULAR

pytestmark = [pytest.mark.pulsar, pytest.mark.timeout(300)]

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"')
ALWAYS = ("pulsar_lb_cpu_usage", "pulsar_lb_directMemory_usage", "pulsar_lb_resource_usage",
          "pulsar_lb_assign_broker_breakdown_total", "pulsar_sunit_state_chn_owned_su_total",
          "brk_lb_unload_latency_ms", "brk_lb_release_latency_ms", "brk_lb_assign_latency_ms",
          "pulsar_broker_lookup", "pulsar_broker_lookup_answers_total")
"""What every broker of the extensible cluster shows once one bundle has been transferred (the
test's lookups are answered by ``NamespaceService``, which counts and times them)."""


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def label_sets(text: str) -> dict[str, set[tuple[str, ...]]]:
    """Sample name -> its label-name sets (``le`` and ``quantile`` left out)."""
    out: dict[str, set[tuple[str, ...]]] = {}
    for line in text.splitlines():
        found = SAMPLE.match(line)
        if found and not line.startswith("#"):
            names = {n for n in LABEL.findall(found.group(2) or "")} - {"le", "quantile"}
            out.setdefault(found.group(1), set()).add(tuple(sorted(names)))
    return out


def test_a_real_brokers_metrics_have_the_listed_names_and_labels(
        pulsar_cluster: PulsarCluster, new_namespace: Callable[[PulsarCluster, int], str]) -> None:
    c = pulsar_cluster
    namespace = new_namespace(c, 4)
    move_topic_elsewhere(c, namespace, f"{namespace}/metrics")  # the load manager's counters move
    seen: dict[str, set[tuple[str, ...]]] = {}
    for url in c.web_urls:
        status, text = get(url + "/metrics/")
        assert status == 200
        for name, sets in label_sets(text).items():
            seen.setdefault(name, set()).update(sets)
    listed = [f for f in FAMILIES if f.cls != MODULAR]
    for family in listed:
        sample = family.name + ("_count" if family.kind == "histogram" else "")
        if sample in seen:
            assert seen[sample] == {tuple(sorted(family.labels))}, (family.name, seen[sample])
    missing = [n for n in ALWAYS if (n + "_count" if n.endswith("_ms") else n) not in seen]
    assert not missing, f"not on a real broker's /metrics: {missing}"


def test_a_real_broker_answers_the_probes(pulsar_cluster: PulsarCluster) -> None:
    url = pulsar_cluster.web_urls[0]
    assert get(url + "/admin/v2/brokers/health") == (200, "ok")
    assert get(url + "/admin/v2/brokers/ready") == (200, "ok")
    assert get(url + "/status.html")[0] == 404  # Pulsar without a statusFilePath (see operations.md)
