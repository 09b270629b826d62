"""One settings value per process: broker.conf (the load balancer's keys and the actors' timers)
and cluster.yaml, read once by ``load_settings``; what an operator sees when a value is bad."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from actors.conf import Settings, load_settings, render_broker_conf, settings_from_text
from actors.settings import ActorSettings
from balancer.actor_keys import ACTOR_KEYS
from balancer.config import LoadBalancerConfig
from balancer.errors import ConfigError
from web.settings import WebSettings

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_broker_conf_lists_every_actor_key_with_its_default() -> None:
    shipped = (ROOT / "conf" / "broker.conf").read_text()
    assert shipped == render_broker_conf()
    loaded = load_settings(ROOT / "conf" / "broker.conf")
    assert loaded == Settings()
    assert loaded.notice() is None  # the actors' keys are applied, not "ignored"


def test_every_actor_setting_has_one_key() -> None:
    attrs = [key.attr for key in ACTOR_KEYS]
    assert attrs == [f.name for f in dataclasses.fields(ActorSettings)]
    assert len({key.name for key in ACTOR_KEYS}) == len(ACTOR_KEYS)


def test_the_actors_timers_are_set_from_broker_conf() -> None:
    settings = settings_from_text("metadataStoreSessionTimeoutMillis=45000\n"
                                  "bundleBalancerHeartbeatMillis=5000\n"
                                  "bundleBalancerNamespaceShards=4\n"
                                  "loadBalancerSheddingIntervalMinutes=2\n")
    assert settings.actors == ActorSettings(session_timeout_ms=45_000, heartbeat_ms=5_000, namespace_shards=4)
    assert settings.balancer == LoadBalancerConfig(load_balancer_shedding_interval_minutes=2)


@pytest.mark.parametrize(("text", "named"), [
    ("bundleBalancerRetryMillis=soon\n", "line 1: bundleBalancerRetryMillis"),
    ("# timers\nbundleBalancerNamespaceShards=0\n", "line 2: bundleBalancerNamespaceShards"),
    ("bundleBalancerHeartbeatMillis=30000\n", "line 1: bundleBalancerHeartbeatMillis"),
    ("metadataStoreSessionTimeoutMillis=9000\n", "line 1: metadataStoreSessionTimeoutMillis"),
    ("bundleBalancerHeartbeatMilis=1\n", "did you mean 'bundleBalancerHeartbeatMillis'"),
])
def test_a_bad_actor_value_is_one_error_naming_its_key(text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        settings_from_text(text)


def test_a_deployment_brings_its_broker_conf_and_the_web_keys_come_from_the_same_read(tmp_path: Path) -> None:
    (tmp_path / "broker.conf").write_text("webServicePort=9090\nbundleBalancerSweepMillis=500\n")
    (tmp_path / "cluster.yaml").write_text("name: c1\nbroker_conf: broker.conf\n"
                                           "kafka: {bootstrap_servers: 'localhost:9092'}\n")
    settings = load_settings(deployment=tmp_path / "cluster.yaml")
    assert settings.deployment is not None and settings.deployment.name == "c1"
    assert settings.actors.sweep_ms == 500
    assert WebSettings.from_pairs(settings.pairs).port == 9090
    assert settings.balancer_pairs == {"webServicePort": "9090"}


def test_overrides_reach_either_part_and_a_missing_file_is_named(tmp_path: Path) -> None:
    settings = load_settings(overrides={"bundleBalancerLookupRetryMillis": 250,
                                        "loadBalancerNamespaceMaximumBundles": 256})
    assert settings.actors.lookup_retry_ms == 250
    assert settings.balancer.load_balancer_namespace_maximum_bundles == 256
    with pytest.raises(ConfigError, match=r"nope\.conf"):
        load_settings(tmp_path / "nope.conf")


async def test_a_cluster_started_from_broker_conf_runs_on_its_timers_and_shards(tmp_path: Path) -> None:
    from actors.api import Cluster

    conf = tmp_path / "broker.conf"
    conf.write_text("metadataStoreSessionTimeoutMillis=45000\nbundleBalancerNamespaceShards=2\n")
    async with Cluster.start(str(conf), 2, host="inproc") as cluster:
        assert cluster.settings.session_timeout_ms == 45_000
        assert {"ns:0", "ns:1"} <= set(cluster.link.host.bodies)  # type: ignore[attr-defined]
        await cluster.wait_ready(2, 60)
        await cluster.create_namespace("public/default", bundles=4)
        assert len(list(cluster.view.ownership.bundles("public/default"))) == 4
