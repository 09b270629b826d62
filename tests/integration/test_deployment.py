"""A deployment named by conf/cluster.yaml: the actors run on a Ray cluster they did
not start, over Kafka, and ``lbctl --cluster FILE`` verbs from other processes attach to them.

The session's Ray cluster and Kafka stand in for a deployment's: ``lbctl --cluster FILE run
--keep`` is a second Ray driver that starts the actors there and keeps them until SIGTERM.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.deployment_story import deployment_story
from tests.integration.ray_scenarios import read_until_kept, unique
from tests.support.patience import patient

pytestmark = [pytest.mark.ray, pytest.mark.kafka, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
LBCTL = str(Path(sys.executable).parent / "lbctl")


def lbctl(deployment: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LBCTL, "--cluster", str(deployment), *argv], capture_output=True,
                          text=True, timeout=patient(120), cwd=ROOT)


def deployment_file(tmp_path: Path, kafka: Any, ray_session: Any) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({
        "name": unique("deploy"),
        "broker_conf": str(ROOT / "conf" / "broker.conf"),
        "kafka": {"bootstrap_servers": kafka.bootstrap_servers, "partitions": 3,
                  "replication_factor": 1},
        "ray": {"address": ray_session.address, "namespace": unique("deploy")},
    }))
    return path


def move_an_owned_bundle(deployment: Path, out: str) -> tuple[Any, str, subprocess.CompletedProcess[str]]:
    """An Owned bundle, another broker, and the unload that moves it there. Read again when the
    bundle changed hands in between (on a crowded machine a late broker is expired and its
    bundles taken over, as Pulsar's would be): the destination chosen may then own it already."""
    for _ in range(3):
        shown = lbctl(deployment, "namespaces", "bundles", "public/default", "--json")
        assert shown.returncode == 0, shown.stderr
        owned = next((b for b in json.loads(shown.stdout)["bundles"] if b["state"] == "Owned"), None)
        assert owned is not None, out + shown.stdout
        dst = next(b for b in ("broker-1", "broker-2", "broker-3") if b != owned["owner"])
        moved = lbctl(deployment, "namespaces", "unload", "public/default", "-b", owned["range"],
                      "-d", dst, "--timeout", str(patient(30)))
        if "is already owned by" not in moved.stderr:
            break
    return owned, dst, moved


def test_lbctl_runs_and_drives_a_deployment_through_cluster_yaml(
        tmp_path: Path, kafka: Any, ray_session: Any) -> None:
    deployment = deployment_file(tmp_path, kafka, ray_session)
    # No shedding or splitting: the bundle the test moves must not move on its own in between.
    quiet = tmp_path / "broker.conf"
    quiet.write_text((ROOT / "conf" / "broker.conf").read_text()
                     + "loadBalancerSheddingEnabled=false\nloadBalancerAutoBundleSplitEnabled=false\n")
    settings = yaml.safe_load(deployment.read_text())
    deployment.write_text(yaml.safe_dump({**settings, "broker_conf": str(quiet)}))
    run = subprocess.Popen([LBCTL, "--cluster", str(deployment), "run", "--minutes", "2",
                            "--topics", "200", "--bundles", "4", "--keep", "--plain",
                            "--state-dir", str(tmp_path / "state")],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    try:
        out = read_until_kept(run)
        assert "kept:" in out and f"lbctl --cluster {deployment}" in out, out
        owned, dst, moved = move_an_owned_bundle(deployment, out)
        assert moved.returncode == 0, moved.stderr + deployment_story(deployment, owned["range"])
        assert moved.stdout.strip().endswith(f"from {owned['owner']} to {dst}")
        listed = lbctl(deployment, "brokers", "list")
        assert listed.returncode == 0 and all(f"broker-{i}" in listed.stdout for i in (1, 2, 3))
        bad = lbctl(deployment, "namespaces", "unload", "public/default", "-b", owned["range"],
                    "-d", "broker-9")
        assert bad.returncode == 2 and "broker-9" in bad.stderr
    finally:
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=patient(60)) == 0
