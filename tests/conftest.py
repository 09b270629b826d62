"""Shared pytest fixtures for the whole suite.

Sections: Kafka (below), Ray, Pulsar; Spark fixtures go in their own section, each session-scoped
and started lazily (only when a test requests it), so the tests of one package (`make unit`) never start a JVM or Ray.

Invariants:
- At most one Kafka per test session (`kafka`), stopped at session end; its source is chosen by
  `tests.kafka_server.kafka_bootstrap` (env KAFKA_BOOTSTRAP_SERVERS > Docker > jars).
- At most one Ray per test session (`ray_session`): a local Ray cluster (head node; tests may
  add and remove nodes) with this process connected as its driver, shut down at session end.
  Tests give every cluster they start its own Ray namespace and kill its actors in teardown.
- At most one real Pulsar cluster of each kind per test session: `pulsar_cluster` (2 brokers,
  extensible load manager, Pulsar's shedding off) and `pulsar_modular_cluster` (1 broker, modular
  load manager), each started on first use and SIGKILLed at session end. Tests on them create
  their own namespaces (`new_namespace`) and never stop a broker they did not start.
- Tests never share topics: each one creates its own, named by `new_topic_name`.
- Tests needing `kafka.restart()` must skip when `kafka.restartable` is false.
- A test's hang guard (`pytest.mark.timeout(S)`) is S seconds of a quiet machine: stretched by
  the machine's load when the test starts (`tests.support.patience`), as every wait of a test on
  something outside its process is (`patient(S)`).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import settings

from tests.kafka_server import KafkaHandle, create_topics, kafka_bootstrap
from tests.pulsar_server import PulsarCluster
from tests.support.patience import patient

pytest_plugins = ["tests.support.interrupt"]

# Hypothesis's per-example deadline is a wall-clock limit: on a shared 2-core machine it fails
# properties that hold. Performance is measured in bench/, never asserted here.
settings.register_profile("bundle-balancer", deadline=None)
settings.load_profile("bundle-balancer")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Stretch the test's hang guard by the machine's load now (pytest-timeout reads the
    closest marker after this)."""
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        seconds = marker.args[0] if marker.args else marker.kwargs.get("timeout")
        if isinstance(seconds, int | float) and seconds > 0:
            rest = {k: v for k, v in marker.kwargs.items() if k != "timeout"}
            item.add_marker(pytest.mark.timeout(patient(seconds), *marker.args[1:], **rest), append=False)
    yield

# --- Kafka ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaHandle]:
    """A running Kafka for the session: `.bootstrap_servers`, `.restartable`, `.restart()`."""
    with kafka_bootstrap() as handle:
        yield handle


@pytest.fixture
def new_topic_name() -> Callable[[str], str]:
    """`new_topic_name(prefix)` -> a topic name unique to this run, e.g. `lb-events-3f9a1c2b7d0e`."""

    def make(prefix: str = "test") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:12]}"

    return make


@pytest.fixture
def make_topic(
    kafka: KafkaHandle, new_topic_name: Callable[[str], str]
) -> Callable[..., Awaitable[str]]:
    """`await make_topic(prefix, partitions=1)` creates a fresh topic and returns its name."""

    async def make(prefix: str = "test", partitions: int = 1) -> str:
        name = new_topic_name(prefix)
        await create_topics(kafka.bootstrap_servers, [name], partitions=partitions)
        return name

    return make


# --- Ray -----------------------------------------------------------------------------------

RAY_HEAD_RESOURCE = "bb-head"
"""A custom resource only the session's head node has: pins an actor to it (multi-node tests)."""


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """The session's local Ray cluster (``ray.cluster_utils.Cluster``), this process its driver.

    The head node has logical CPUs to spare (actors take none) and no dashboard; tests that need
    several nodes ``add_node``/``remove_node`` on the yielded cluster.
    """
    import ray
    from ray.cluster_utils import Cluster as RayNodes

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    nodes = RayNodes(initialize_head=True, head_node_args={
        "num_cpus": 4, "include_dashboard": False, "resources": {RAY_HEAD_RESOURCE: 1000}})
    ray.init(address=nodes.address, namespace=f"tests-{uuid.uuid4().hex[:8]}",
             logging_level=logging.ERROR, log_to_driver=False)
    try:
        yield nodes
    finally:
        ray.shutdown()
        nodes.shutdown()  # type: ignore[no-untyped-call]


# --- Pulsar --------------------------------------------------------------------------------

_PULSAR_STARTS: list[tuple[str, PulsarCluster]] = []
"""Every real Pulsar cluster this session started, for the start times in the summary."""


@contextmanager
def _session_pulsar(label: str, cluster: PulsarCluster) -> Iterator[PulsarCluster]:
    _PULSAR_STARTS.append((label, cluster))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def pulsar_cluster() -> Iterator[PulsarCluster]:
    """A real Pulsar 4.0.7 cluster for the session: ZooKeeper, one bookie, 2 brokers with the
    extensible load manager (TransferShedder), Pulsar's own shedding and splitting off, so tests
    and the project's drive mode decide every move. See tests/pulsar_server.py for its API.
    Fails (never skips) without the jars of `make pulsar-server-jars`."""
    with _session_pulsar("extensible, 2 brokers",
                         PulsarCluster(brokers=2, load_manager="extensible", shedding=False)) as c:
        yield c


@pytest.fixture(scope="session")
def pulsar_modular_cluster() -> Iterator[PulsarCluster]:
    """A second, small real Pulsar cluster: 1 broker with the modular load manager
    (ModularLoadManagerImpl), shedding off; started only when a test asks for it."""
    with _session_pulsar("modular, 1 broker",
                         PulsarCluster(brokers=1, load_manager="modular", shedding=False,
                                       cluster_name="test-modular")) as c:
        yield c


@pytest.fixture
def new_namespace() -> Callable[[PulsarCluster, int], str]:
    """`new_namespace(cluster, bundles=4)` creates `public/<unique>` and returns its name."""

    def make(cluster: PulsarCluster, bundles: int = 4) -> str:
        name = f"public/ns-{uuid.uuid4().hex[:10]}"
        status, body = cluster.admin("PUT", f"/admin/v2/namespaces/{name}",
                                     {"bundles": {"numBundles": bundles}})
        assert status == 204, f"creating {name}: HTTP {status} {body}"
        return name

    return make


def pytest_terminal_summary(terminalreporter: Any) -> None:
    # How long each real Pulsar cluster took to start: a figure of docs/benchmarks.md (P4).
    for label, cluster in _PULSAR_STARTS:
        phases = ", ".join(f"{k} {v:.1f} s" for k, v in cluster.timings.items() if k != "total")
        started = (f"started in {cluster.start_seconds:.1f} s ({phases})" if cluster.start_seconds
                   else "did not start")
        terminalreporter.write_line(f"real Pulsar test cluster ({label}): {started}")
