"""Spark fixtures: ONE local[2] session for the whole test run, and a recorded live run.

Invariants:
- ``spark`` is session-scoped and lazy: only tests that ask for it start a JVM; it runs
  local[2] with the driver at 1 GiB, 2 shuffle partitions, no UI, workers on this interpreter;
- ``recorded`` is the log of one in-process run of the live system (leader, namespace shards,
  three brokers and clients on a virtual clock) that sheds load: every bundle starts on
  broker-1, the ThresholdShedder moves them; it is computed once and copied by each test.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from events.log.port import Record


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from spark_replay.session import session

    spark = session("local[2]", driver_memory="1g", shuffle_partitions=2)
    try:
        yield spark
    finally:
        spark.stop()


@pytest.fixture(scope="session")
def recorded() -> list[Record]:
    from balancer.config import LoadBalancerConfig
    from events.catalog import AssignBundle
    from tests.support.cluster_scenarios import RATE, bundles, call, make_host

    config = LoadBalancerConfig.from_mapping({"loadBalancerAutoBundleSplitEnabled": False})
    host = make_host(config, rate=RATE, clients=True)
    for bundle in bundles(host):
        call(host, AssignBundle, bundle=bundle, dst="broker-1", reason="admin")
    host.advance(20 * 60_000)
    assert host.events("UnloadRequested") or host.events("TransferPrepared")
    return list(host.records)
