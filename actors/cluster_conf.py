"""``conf/cluster.yaml``: where a deployment's Kafka, Ray and Spark are (ARCHITECTURE §6).

The one file an operator edits to move from one machine to a cluster: ``Cluster.start(
cluster_conf=...)`` / ``lbctl run --cluster FILE`` start the actors on the named Ray cluster over
the named Kafka; ``Cluster.connect(conf=FILE)`` / ``lbctl --cluster FILE VERB`` attach to them.

Invariants:
- every key has a default except ``kafka.bootstrap_servers``; an unknown key (at any level) is
  a ``ConfigError`` naming it, its section and the closest valid key; a bad value names the key,
  the value and what is accepted; nothing is read lazily, so a bad file fails at load;
- ``broker_conf`` is resolved against the file's own folder, so the file can be used from
  anywhere.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from actors.cluster_security import parse_security
from balancer.errors import ConfigError
from events.log.kafka_client import KafkaSecurity


@dataclass(frozen=True, slots=True)
class KafkaConf:
    bootstrap_servers: str
    partitions: int = 6
    """Per topic; fixed up front (a change remaps keys and breaks per-key order)."""
    replication_factor: int | None = None
    """None: min(3, brokers in the Kafka cluster)."""
    transactional: bool = True
    retention_ms: int = -1
    """Of the ``{name}-events`` topic; -1: forever (audits and replays read the whole history)."""
    security: KafkaSecurity = field(default_factory=KafkaSecurity)
    """``kafka.security``: TLS, SASL, whose credentials (``actors.cluster_security``)."""


PLACEMENTS = ("spread", "scheduler")
"""Where a cluster's actors start on a Ray cluster of several nodes (``RayConf.placement``)."""


@dataclass(frozen=True, slots=True)
class RayConf:
    address: str = "auto"
    """What ``ray.init(address=...)`` takes: ``auto``, ``host:6379`` or ``ray://host:10001``."""
    namespace: str = "bundle-balancer"
    """The Ray namespace of the actors; one deployment per namespace."""
    actor_resources: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Actor name (``leader``, ``ns:0``, ``broker:broker-1``, ``clients``) -> the custom Ray
    resources it needs: pins it to the nodes started with them (``ray start --resources``)."""

    placement: str = "spread"
    """``spread``: each broker not pinned by ``actor_resources`` starts on the alive node holding
    the fewest of the cluster's brokers and stays there (lost with its node: the leader expires
    it and places its bundles elsewhere); ``scheduler``: wherever Ray's scheduler puts it
    (actors take no CPU, so it may crowd one node). The leader, the namespace shards and the
    clients go where Ray's scheduler puts them, which restarts them on any node."""

    snapshot_dir: str | None = None
    """On each Ray node: the root of the actors' snapshots (a cache; None: per user,
    ``~/.local/state/bundle-balancer``); ``LogSpec.snapshot_dir``."""

    def actor_options(self) -> dict[str, dict[str, Any]]:
        return {name: {"resources": dict(needs)} for name, needs in self.actor_resources.items()}


@dataclass(frozen=True, slots=True)
class SparkConf:
    master: str = "local[2]"
    driver_memory: str = "1g"


@dataclass(frozen=True, slots=True)
class ClusterConf:
    """A deployment: the cluster name (Kafka topic prefix), the balancer config and the engines."""

    kafka: KafkaConf
    name: str = "lb"
    broker_conf: str | None = None
    ray: RayConf = field(default_factory=RayConf)
    spark: SparkConf = field(default_factory=SparkConf)
    source: str | None = None
    """The file it was read from (messages name it)."""

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ClusterConf:
        file = Path(path)
        try:
            data = yaml.safe_load(file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cluster file {str(file)!r}: cannot read it ({exc.strerror})",
                              value=str(file)) from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"cluster file {str(file)!r} is not YAML: {exc}", value=str(file)) from None
        return cls.from_mapping(data, source=str(file), base=file.resolve().parent)

    @classmethod
    def from_mapping(cls, data: object, *, source: str = "<cluster.yaml>",
                     base: Path | None = None) -> ClusterConf:
        top = _section(data, "", source, ("name", "broker_conf", "kafka", "ray", "spark"))
        kafka = _section(top.get("kafka"), "kafka", source, KafkaConf.__dataclass_fields__)
        if "bootstrap_servers" not in kafka:
            raise ConfigError(f"{source}: kafka.bootstrap_servers is required (host:port[,host:port])",
                              value="kafka.bootstrap_servers")
        broker_conf = top.get("broker_conf")
        if broker_conf is not None and base is not None:
            broker_conf = str((base / str(broker_conf)).resolve())
        name = _text(top.get("name", "lb"), "name", source)
        security = parse_security(kafka.pop("security", None), source=source, cluster=name, base=base)
        return cls(
            kafka=KafkaConf(**_typed(kafka, KafkaConf, "kafka", source), security=security),
            name=name,
            broker_conf=broker_conf,
            ray=_ray(top.get("ray"), source),
            spark=SparkConf(**_typed(_section(top.get("spark"), "spark", source,
                                              SparkConf.__dataclass_fields__), SparkConf, "spark", source)),
            source=source)


def _ray(data: object, source: str) -> RayConf:
    found = RayConf(**_typed(_section(data, "ray", source, RayConf.__dataclass_fields__), RayConf, "ray", source))
    if found.placement not in PLACEMENTS:
        raise ConfigError(f"{source}: ray.placement = {found.placement!r}: expected "
                          f"{' or '.join(PLACEMENTS)}", value=found.placement)
    return found


def _section(data: object, where: str, source: str, keys: Any) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: {where or 'the file'} must be a mapping, got {data!r}",
                          value=where or source)
    valid = list(keys)
    for key in data:
        if key not in valid:
            close = difflib.get_close_matches(str(key), valid, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; valid: {', '.join(valid)}"
            name = f"{where}.{key}" if where else str(key)
            raise ConfigError(f"{source}: unknown key {name!r}{hint}", value=name)
    return dict(data)


def _typed(values: Mapping[str, Any], kind: type, where: str, source: str) -> dict[str, Any]:
    """Each value checked against its field's type (from the dataclass annotations)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        annotation = str(next(f.type for f in dataclasses.fields(kind) if f.name == key))
        accepts_none = "None" in annotation
        if value is None and accepts_none:
            out[key] = None
        elif annotation.startswith("int"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{source}: {where}.{key} = {value!r}: a whole number is needed",
                                  value=value)
            if key in ("partitions", "replication_factor") and value < 1:
                raise ConfigError(f"{source}: {where}.{key} = {value}: must be at least 1", value=value)
            out[key] = value
        elif annotation.startswith("Mapping"):
            out[key] = _resources(value, f"{where}.{key}", source)
        elif annotation == "bool":
            if not isinstance(value, bool):
                raise ConfigError(f"{source}: {where}.{key} = {value!r}: true or false", value=value)
            out[key] = value
        else:
            out[key] = _text(value, f"{where}.{key}", source)
    return out


def _text(value: object, key: str, source: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{source}: {key} = {value!r}: a non-empty string is needed", value=value)
    return value


def _resources(value: object, key: str, source: str) -> dict[str, dict[str, float]]:
    if not isinstance(value, Mapping) or not all(
            isinstance(needs, Mapping) and all(isinstance(n, int | float) and not isinstance(n, bool)
                                               and 0 < n < math.inf for n in needs.values())
            for needs in value.values()):
        raise ConfigError(f"{source}: {key} = {value!r}: actor name -> {{resource: amount > 0}}",
                          value=key)
    return {str(name): {str(r): float(n) for r, n in needs.items()} for name, needs in value.items()}
