"""What the real Pulsar test cluster is told, checked without starting it.

The cluster itself runs in tests/pulsar/test_cluster.py (marker `pulsar`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pulsar_conf import LOAD_MANAGERS, BrokerPorts, bookie_conf, broker_conf, write_props
from tests.pulsar_server import PulsarCluster, PulsarStartError, pulsar_server_libs


def test_without_the_jars_the_cluster_names_the_make_target(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULSAR_SERVER_LIBS", str(tmp_path))
    with pytest.raises(PulsarStartError, match=r"run `make pulsar-server-jars`"):
        pulsar_server_libs()
    with pytest.raises(PulsarStartError, match=r"make pulsar-server-jars"):
        PulsarCluster()


def test_a_broker_binds_loopback_and_decides_no_move_of_its_own() -> None:
    conf = broker_conf("c1", "zk:127.0.0.1:2181", BrokerPorts(web=8081, service=6651), 8000)
    assert (conf["bindAddress"], conf["advertisedAddress"]) == ("127.0.0.1", "127.0.0.1")
    assert (conf["webServicePort"], conf["brokerServicePort"]) == (8081, 6651)
    assert BrokerPorts(web=8081, service=6651).broker_id == "127.0.0.1:8081"
    assert conf["loadBalancerSheddingEnabled"] is False
    assert conf["loadBalancerAutoBundleSplitEnabled"] is False
    assert conf["metadataStoreSessionTimeoutMillis"] == 8000
    weights = [conf[f"loadBalancer{r}ResourceWeight"] for r in ("CPU", "Memory", "DirectMemory")]
    assert weights == [0, 0, 0]


def test_both_load_managers_name_pulsars_classes() -> None:
    assert LOAD_MANAGERS["extensible"]["loadManagerClassName"].endswith(
        "extensions.ExtensibleLoadManagerImpl")
    assert LOAD_MANAGERS["extensible"]["loadBalancerLoadSheddingStrategy"].endswith(
        "scheduler.TransferShedder")
    assert LOAD_MANAGERS["modular"]["loadManagerClassName"].endswith("ModularLoadManagerImpl")


def test_properties_files_write_booleans_as_java_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "bookie.conf"
    write_props(path, bookie_conf(3181, 2181, tmp_path))
    lines = path.read_text().splitlines()
    assert "allowLoopback=true" in lines and "httpServerEnabled=false" in lines
    assert "metadataServiceUri=zk://127.0.0.1:2181/ledgers" in lines
