"""Where a Kafka-hosted body keeps its snapshots: a node-local folder per topic prefix and cluster id.

The snapshots of one cluster are never restored by another: the folder names both, and the
header of every snapshot names the topic and the cluster id it was folded from (a file copied
into another cluster's folder is refused by name). The setting reaches the log from
``Cluster.start``/``conf/cluster.yaml``/``lbctl run``; a bad use is one line.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from actors.cluster_conf import ClusterConf
from actors.deploy import log_spec
from actors.runtime.specs import LogSpec, default_snapshot_root
from actors.snapshots import BodySnapshot, DirectorySnapshots
from balancer.errors import InvalidInput
from lbctl.main import main


def _kafka(cluster: str = "lb", cluster_id: str | None = "c1", snapshot_dir: str | None = None) -> LogSpec:
    return LogSpec(bootstrap="127.0.0.1:1", cluster=cluster, cluster_id=cluster_id, snapshot_dir=snapshot_dir)


def test_the_default_folder_is_per_user_and_names_the_topic_prefix_and_the_cluster_id(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_snapshot_root() == str(tmp_path / ".local" / "state" / "bundle-balancer")
    assert _kafka("prod", "a1b2").snapshot_folder() == str(tmp_path / ".local/state/bundle-balancer/prod-a1b2")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert _kafka().snapshot_folder() == str(tmp_path / "xdg" / "bundle-balancer" / "lb-c1")
    assert _kafka(snapshot_dir="/srv/bb").snapshot_folder() == os.path.join("/srv/bb", "lb-c1")


def test_two_clusters_never_share_a_folder_and_an_unresolved_cluster_keeps_none() -> None:
    folders = {_kafka(c, i, "/s").snapshot_folder() for c in ("lb", "lb2") for i in ("c1", "c2")}
    assert len(folders) == 4
    assert _kafka(cluster_id=None).snapshots() is None


def test_a_snapshot_copied_into_another_clusters_folder_is_refused_by_name(tmp_path: Path) -> None:
    ours, theirs = _kafka("lb", "c1", str(tmp_path)).snapshots(), _kafka("lb", "c2", str(tmp_path)).snapshots()
    assert ours is not None and theirs is not None
    ours.save(BodySnapshot("ns:0", "id", {0: 5}, 5, {"x": 1}))
    copied = DirectorySnapshots(theirs.directory, scope=theirs.scope)
    copied.directory.mkdir(parents=True)
    os.replace(ours.directory / "ns_0", copied.directory / "ns_0")
    assert copied.newest("ns:0", "id") is None
    assert "Kafka topic lb-events of cluster c1" in copied.notes[0]
    assert "of cluster c2" in copied.notes[0]


def test_the_setting_is_for_kafka_logs_only() -> None:
    with pytest.raises(InvalidInput, match="snapshot_dir '/x'"):
        LogSpec(directory="/tmp/log", snapshot_dir="/x")
    with pytest.raises(InvalidInput, match="applies to a Kafka log"):
        log_spec(None, None, cluster="lb", partitions=1, transactional=True, fsync=False, snapshot_dir="/x")
    spec, _ = log_spec(None, "k:1", cluster="lb", partitions=1, transactional=True, fsync=False,
                       snapshot_dir="/x")
    assert spec.snapshot_dir == "/x"


def test_cluster_yaml_names_it_under_ray() -> None:
    found = ClusterConf.from_mapping({"kafka": {"bootstrap_servers": "k:1"}, "ray": {"snapshot_dir": "/srv/bb"}})
    assert found.ray.snapshot_dir == "/srv/bb"
    assert ClusterConf.from_mapping({"kafka": {"bootstrap_servers": "k:1"}}).ray.snapshot_dir is None


def test_lbctl_run_snapshot_dir_without_kafka_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--host", "inproc", "--snapshot-dir", "/x", "--minutes", "1"])
    captured = capsys.readouterr()
    assert code == 2 and len(captured.err.splitlines()) == 1 and "--snapshot-dir /x" in captured.err
