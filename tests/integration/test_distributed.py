"""The deployment path without Docker: the real pieces as separate processes.

Kafka from jars (the session's), a Ray head and a worker node started with ``ray start`` on
loopback, and ``lbctl --cluster cluster.yaml`` driving them exactly as it drives the compose
deployment: the actors start with a workload (``run --keep``), a namespace is created and its
bundles assigned; the worker node is killed, the bundles of the broker that ran there are owned
elsewhere, and Spark audits the whole log, read from Kafka: clean.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.ray_nodes import ray_cluster
from tests.integration.deployment_story import deployment_story
from tests.integration.ray_scenarios import read_until_kept, unique
from tests.support.patience import patient

pytestmark = [pytest.mark.ray, pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
LBCTL = str(Path(sys.executable).parent / "lbctl")
HEAD = {"zone-a": 100.0}
WORKER = {"zone-b": 100.0}


def lbctl(deployment: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LBCTL, "--cluster", str(deployment), *argv], capture_output=True,
                          text=True, timeout=patient(timeout), cwd=ROOT)


def write_deployment(path: Path, kafka: Any, ray_address: str) -> Path:
    on_a = {"zone-a": 1}
    path.write_text(yaml.safe_dump({
        "name": unique("dist"),
        "broker_conf": str(ROOT / "conf" / "broker.conf"),
        "kafka": {"bootstrap_servers": kafka.bootstrap_servers, "partitions": 3,
                  "replication_factor": 1},
        "ray": {"address": ray_address, "namespace": unique("dist"),
                "actor_resources": {"leader": on_a, "ns:0": on_a, "clients": on_a,
                                    "broker:broker-1": on_a, "broker:broker-2": on_a,
                                    "broker:broker-3": {"zone-b": 1}}},
    }))
    return path


def bundles(deployment: Path) -> list[dict[str, Any]]:
    shown = lbctl(deployment, "namespaces", "bundles", "public/default", "--json")
    assert shown.returncode == 0, shown.stderr
    rows: list[dict[str, Any]] = json.loads(shown.stdout)["bundles"]
    return rows


def wait_until(check: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + patient(timeout_s)
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(1.0)
    raise AssertionError(f"{what}: not within {timeout_s}s")


def keys_written(deployment: Path, kafka: Any) -> str:
    """The brokers' own records (offset, type, seq, epoch): who wrote a repeated seq."""
    name = yaml.safe_load(deployment.read_text())["name"]
    tail = lbctl(deployment, "log", "tail", "--bootstrap", kafka.bootstrap_servers, "--cluster", name)
    return "\n".join(line for line in tail.stdout.splitlines() if "\tkey=broker-" in line)[-6000:]


def test_a_deployment_of_separate_processes_survives_the_loss_of_a_worker_node(
        tmp_path: Path, kafka: Any) -> None:
    with ray_cluster({"worker": WORKER}, HEAD, timeout_s=patient(90)) as nodes:
        deployment = write_deployment(tmp_path / "cluster.yaml", kafka, nodes.address)
        run = subprocess.Popen([LBCTL, "--cluster", str(deployment), "run", "--minutes", "5",
                                "--topics", "200", "--bundles", "8", "--keep", "--plain",
                                "--state-dir", str(tmp_path / "state")],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        try:
            out = read_until_kept(run)
            assert "summary: 3 brokers on ray" in out, out
            wait_until(lambda: bundles(deployment) and all(
                b["state"] == "Owned" for b in bundles(deployment)), 150, "every bundle owned")
            held = [b["range"] for b in bundles(deployment) if b["owner"] == "broker-3"]
            if not held:  # make sure the worker node's broker serves something
                row = bundles(deployment)[0]
                moved = lbctl(deployment, "namespaces", "unload", "public/default", "-b",
                              row["range"], "-d", "broker-3", "--timeout", str(patient(30)))
                assert moved.returncode == 0, moved.stderr
                held = [row["range"]]
            nodes.kill("worker", patient(30))

            def reowned() -> bool:
                rows = {b["range"]: b for b in bundles(deployment)}
                return all(rows[b]["state"] == "Owned" and rows[b]["owner"] not in (None, "broker-3")
                           for b in held if b in rows)

            try:
                wait_until(reowned, 60, "the lost broker's bundles owned elsewhere")
            except AssertionError as late:
                rows = [b for b in bundles(deployment) if b["range"] in held]
                raise AssertionError(f"{late}\nheld: {rows}{deployment_story(deployment, held[0])}\n"
                                     f"{keys_written(deployment, kafka)}") from None
            listed = lbctl(deployment, "brokers", "list")
            assert listed.returncode == 0 and "broker-3" not in listed.stdout, listed.stdout
            topic = f"{yaml.safe_load(deployment.read_text())['name']}-events"
            audited = lbctl(deployment, "replay", "audit", f"kafka://{kafka.bootstrap_servers}",
                            "--topic", topic, timeout=300)
            assert audited.returncode == 0 and "0 violation(s)" in audited.stdout, (
                audited.stdout[-3000:] + audited.stderr[-2000:] + keys_written(deployment, kafka))
        finally:
            run.send_signal(signal.SIGTERM)
            run.wait(timeout=patient(60))
