"""compose/docker-compose.yml: validated on every run; brought up where a Docker engine answers.

The validation checks what would otherwise fail only on a Docker host: the services and their
KRaft quorum, listeners and ports, the image the Ray and Spark nodes build (the Dockerfile and
every path it copies), and that compose/cluster.yaml names this deployment's Kafka, Ray and Spark.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import yaml

from actors.cluster_conf import ClusterConf

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose" / "docker-compose.yml"
KAFKA = ("kafka-1", "kafka-2", "kafka-3")
NODES = ("ray-head", "ray-worker-1", "ray-worker-2", "spark-master", "spark-worker")


def services() -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]
    return found


def test_the_services_are_all_there() -> None:
    assert set(KAFKA) | set(NODES) <= set(services())


def test_kafka_is_a_three_node_kraft_quorum_with_consistent_listeners() -> None:
    found = services()
    ids = {name: int(found[name]["environment"]["KAFKA_NODE_ID"]) for name in KAFKA}
    assert sorted(ids.values()) == [1, 2, 3]
    voters = {f"{ids[n]}@{n}:9093" for n in KAFKA}
    for name in KAFKA:
        env = found[name]["environment"]
        assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
        assert set(env["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")) == voters
        assert f"INTERNAL://{name}:19092" in env["KAFKA_ADVERTISED_LISTENERS"]
        external = re.search(r"EXTERNAL://localhost:(\d+)", env["KAFKA_ADVERTISED_LISTENERS"])
        assert external is not None and f"{external[1]}:{external[1]}" in host_ports(found[name])
        assert found[name]["image"].startswith("apache/kafka:")
    assert len({found[n]["environment"]["CLUSTER_ID"] for n in KAFKA}) == 1


def host_ports(service: dict[str, Any]) -> list[str]:
    """``HOST_PORT:CONTAINER_PORT`` of each published port (the bind address left out)."""
    return [":".join(str(p).rsplit(":", 2)[-2:]) for p in service.get("ports", [])]


def test_host_ports_are_unique() -> None:
    published = [p.split(":")[0] for s in services().values() for p in host_ports(s)]
    assert len(published) == len(set(published)), published


def test_every_port_is_published_on_loopback_unless_asked() -> None:
    """Ray's GCS and client port run code for whoever reaches them, Kafka takes any append:
    by default the host publishes them on 127.0.0.1 only (BB_PUBLISH_HOST widens it)."""
    ports = [str(p) for s in services().values() for p in s.get("ports", [])]
    assert ports and all(p.startswith("${BB_PUBLISH_HOST:-127.0.0.1}:") for p in ports), ports


def test_the_nodes_build_the_projects_image_and_the_dockerfile_copies_what_exists() -> None:
    found = services()
    for name in NODES:
        build = found[name]["build"]
        assert (COMPOSE.parent / build["context"] / build["dockerfile"]).resolve() == ROOT / "Dockerfile"
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), f"Dockerfile copies {source}, which is missing"
    workers = [found[n]["command"] for n in ("ray-worker-1", "ray-worker-2")]
    head_port = next(a for a in found["ray-head"]["command"] if a.startswith("--port=")).split("=")[1]
    assert all(f"--address=ray-head:{head_port}" in w for w in workers)


def test_compose_cluster_yaml_names_this_deployment() -> None:
    conf = ClusterConf.load(ROOT / "compose" / "cluster.yaml")
    assert conf.kafka.bootstrap_servers.split(",") == [f"{n}:19092" for n in KAFKA]
    assert conf.ray.address == "ray-head:6379" and conf.spark.master == "spark://spark-master:7077"
    assert conf.broker_conf is not None and Path(conf.broker_conf).is_file()
    assert services()["lbctl"]["entrypoint"][-1] == "/app/compose/cluster.yaml"


def docker_engine() -> str | None:
    """None when a Docker engine with compose answers, else why not."""
    if shutil.which("docker") is None:
        return "no docker command on PATH"
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    if info.returncode != 0:
        return f"no Docker engine answers ({info.stderr.strip().splitlines()[-1:]})"
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0:
        return "docker has no compose plugin"
    return None


def test_compose_up_where_a_docker_engine_answers() -> None:
    why_not = docker_engine()
    if why_not is not None:
        warnings.warn(f"compose/docker-compose.yml validated, not started: {why_not}", stacklevel=1)
        return
    up = ["docker", "compose", "-f", str(COMPOSE)]
    try:
        subprocess.run([*up, "up", "-d", "--build", "--wait"], check=True, timeout=1800)
        listed = subprocess.run([*up, "run", "--rm", "lbctl", "brokers", "list"], capture_output=True,
                                text=True, timeout=600)
        assert listed.returncode in (0, 2), listed.stderr  # 2: no actors started yet, said in one line
    finally:
        subprocess.run([*up, "down", "-v"], timeout=600)


def test_prometheus_scrapes_the_web_service_and_grafana_shows_the_dashboard() -> None:
    """bb-web serves /metrics on its container port, Prometheus scrapes it there,
    Grafana's provisioned data source is that Prometheus and its dashboard is mounted."""
    found = services()
    web_port = host_ports(found["bb-web"])[0].split(":")[1]
    assert f"--web-service-port {web_port}" in found["bb-web"]["entrypoint"][-1]
    assert "bindAddress=0.0.0.0" in found["bb-web"]["entrypoint"][-1]
    scrape = yaml.safe_load((COMPOSE.parent / "prometheus.yml").read_text())["scrape_configs"]
    assert scrape[0]["static_configs"][0]["targets"] == [f"bb-web:{web_port}"]
    assert "./prometheus.yml:/etc/prometheus/prometheus.yml:ro" in found["prometheus"]["volumes"]
    prometheus_port = host_ports(found["prometheus"])[0].split(":")[1]
    grafana = COMPOSE.parent / "grafana"
    source = yaml.safe_load((grafana / "provisioning/datasources/prometheus.yml").read_text())["datasources"][0]
    assert source["url"] == f"http://prometheus:{prometheus_port}"
    provider = yaml.safe_load((grafana / "provisioning/dashboards/bundle-balancer.yml").read_text())
    mounted = dict(v.split(":")[:2] for v in found["grafana"]["volumes"])
    assert mounted["./grafana/dashboards"] == provider["providers"][0]["options"]["path"]
    dashboard = json.loads((grafana / "dashboards" / "bundle-balancer.json").read_text())
    assert {t["datasource"]["uid"] for p in dashboard["panels"] for t in p["targets"]} == {source["uid"]}
