"""conf/cluster.yaml: the shipped file loads; a bad file is refused naming the bad key or value."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.cluster_conf import ClusterConf
from balancer.errors import ConfigError
from lbctl.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_cluster_yaml_loads_with_broker_conf_beside_it() -> None:
    found = ClusterConf.load(ROOT / "conf" / "cluster.yaml")
    assert found.kafka.bootstrap_servers == "localhost:9092" and found.kafka.partitions == 6
    assert found.ray.namespace == "bundle-balancer" and found.spark.master == "local[2]"
    assert found.broker_conf == str((ROOT / "conf" / "broker.conf").resolve())


def test_defaults_fill_everything_but_the_bootstrap_servers() -> None:
    found = ClusterConf.from_mapping({"kafka": {"bootstrap_servers": "k:9092"}})
    assert (found.name, found.ray.address, found.kafka.retention_ms) == ("lb", "auto", -1)
    with pytest.raises(ConfigError, match=r"kafka\.bootstrap_servers is required"):
        ClusterConf.from_mapping({"ray": {"address": "auto"}})


@pytest.mark.parametrize(("data", "named"), [
    ({"kafka": {"bootstrap_servers": "k:1", "partition": 3}}, "'kafka.partition'; did you mean 'partitions'"),
    ({"kafka": {"bootstrap_servers": "k:1"}, "rey": {}}, "'rey'; did you mean 'ray'"),
    ({"kafka": {"bootstrap_servers": "k:1", "partitions": 0}}, "kafka.partitions = 0"),
    ({"kafka": {"bootstrap_servers": "k:1", "transactional": "yes"}}, "kafka.transactional = 'yes'"),
    ({"kafka": {"bootstrap_servers": "k:1"}, "ray": {"namespace": ""}}, "ray.namespace = ''"),
    ({"kafka": ["k:1"]}, "kafka must be a mapping"),
    ({"kafka": {"bootstrap_servers": "k:1"}, "ray": {"placement": "even"}},
     "ray.placement = 'even': expected spread or scheduler"),
])
def test_a_bad_key_or_value_is_named(data: object, named: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ClusterConf.from_mapping(data)
    assert named in raised.value.message


def test_lbctl_with_a_bad_cluster_file_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "cluster.yaml"
    bad.write_text("kafka:\n  bootstrap_servers: k:1\n  partitons: 3\n")
    code = main(["--cluster", str(bad), "run", "--minutes", "1"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert len(captured.err.splitlines()) == 1 and "partitons" in captured.err
    code = main(["--cluster", str(tmp_path / "missing.yaml"), "namespaces", "bundles", "public/a"])
    captured = capsys.readouterr()
    assert code == 2 and "missing.yaml" in captured.err and len(captured.err.splitlines()) == 1


def test_actor_resources_pin_bodies_to_nodes() -> None:
    found = ClusterConf.from_mapping({"kafka": {"bootstrap_servers": "k:1"},
                                      "ray": {"actor_resources": {"broker:broker-3": {"zone-b": 1}}}})
    assert found.ray.actor_options() == {"broker:broker-3": {"resources": {"zone-b": 1.0}}}
    with pytest.raises(ConfigError, match=r"ray\.actor_resources"):
        ClusterConf.from_mapping({"kafka": {"bootstrap_servers": "k:1"},
                                  "ray": {"actor_resources": {"leader": {"zone-a": -1}}}})


def test_a_deployment_spreads_its_actors_unless_told_otherwise() -> None:
    found = ClusterConf.from_mapping({"kafka": {"bootstrap_servers": "k:1"}})
    assert found.ray.placement == "spread"
    assert ClusterConf.load(ROOT / "conf" / "cluster.yaml").ray.placement == "spread"
    chosen = ClusterConf.from_mapping({"kafka": {"bootstrap_servers": "k:1"}, "ray": {"placement": "scheduler"}})
    assert chosen.ray.placement == "scheduler"


def test_a_placement_that_does_not_exist_is_named() -> None:
    from actors.api import Cluster
    from balancer.errors import InvalidInput

    with pytest.raises(InvalidInput, match="placement 'even': expected spread or scheduler"):
        Cluster.start(brokers=2, placement="even")


def test_a_deployment_starts_its_brokers_with_the_files_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    from actors.api import Cluster

    asked: dict[str, object] = {}
    monkeypatch.setattr(Cluster, "start", classmethod(lambda cls, **options: asked.update(options)))
    Cluster.deploy(ClusterConf.from_mapping({"kafka": {"bootstrap_servers": "k:1"}}), 3)
    assert asked["placement"] == "spread" and asked["ray_address"] == "auto"
    Cluster.deploy(ClusterConf.from_mapping({"kafka": {"bootstrap_servers": "k:1"},
                                             "ray": {"placement": "scheduler"}}), 3)
    assert asked["placement"] == "scheduler"
