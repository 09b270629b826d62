"""How a cluster is laid out: its options, its bodies, and the files that let others attach.

Invariants:
- a ``Layout`` is plain, immutable data (picklable): the config, the actor settings, the broker
  ids and domains, the workload, the log and the clock; every actor of a cluster is built from
  the same one, so all of them agree on timers, shards and time;
- the bodies of a layout are the namespace shards, one leader and the brokers (plus the
  workload's clients when asked), named as ``actors.settings`` names them;
- an embedded cluster writes ``cluster.json`` into its log directory (Ray address, Ray namespace)
  so another process can attach with nothing but the directory, and removes it on close.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from actors.runtime.live import BodySpec, Clock, LogSpec
from actors.settings import ActorSettings
from actors.workload import Capacity, Workload
from balancer.config import LoadBalancerConfig
from balancer.errors import ConfigError, InvalidInput

ConfSource = str | os.PathLike[str] | LoadBalancerConfig | None
CLUSTER_FILE = "cluster.json"


def load_config(conf: ConfSource, overrides: Mapping[str, Any] | None = None) -> LoadBalancerConfig:
    """A config from a broker.conf path or object (defaults when None), with Pulsar-key overrides."""
    if isinstance(conf, LoadBalancerConfig):
        config = conf
    elif conf is None:
        config = LoadBalancerConfig()
    else:
        path = Path(conf)
        if not path.is_file():
            raise ConfigError(f"broker.conf {str(path)!r} does not exist", value=str(path))
        config = LoadBalancerConfig.from_broker_conf(path.read_text())
    return config.with_overrides(overrides) if overrides else config


def broker_ids(brokers: int | Sequence[str]) -> tuple[str, ...]:
    """``3`` -> broker-1..broker-3; a list of ids is kept as given (no duplicates)."""
    if isinstance(brokers, int):
        if brokers < 0:
            raise InvalidInput(f"brokers={brokers}: a count must be >= 0", value=brokers)
        return tuple(f"broker-{i}" for i in range(1, brokers + 1))
    ids = tuple(str(b) for b in brokers)
    if len(set(ids)) != len(ids) or any(not b or "/" in b for b in ids):
        raise InvalidInput(f"broker ids {list(ids)}: must be distinct, non-empty, without '/'",
                           value=list(ids))
    return ids


@dataclass(frozen=True)
class Layout:
    """Everything that makes one cluster."""

    config: LoadBalancerConfig
    settings: ActorSettings
    brokers: tuple[str, ...]
    log: LogSpec
    clock: Clock
    workload: Workload | None = None
    clients: bool = False
    domains: Mapping[str, str] = field(default_factory=dict)
    capacity: Capacity | None = None
    seed: int = 0

    def body(self, kind: str, *, broker_id: str | None = None, shard: int = 0,
             failure_domain: str | None = None, capacity: Capacity | None = None) -> BodySpec:
        return BodySpec(kind, self.config, self.settings, broker_id=broker_id,  # type: ignore[arg-type]
                        failure_domain=failure_domain, capacity=capacity or self.capacity,
                        workload=self.workload, shard=shard, seed=self.seed)

    def broker(self, broker_id: str, failure_domain: str | None = None,
               capacity: Capacity | None = None) -> BodySpec:
        domain = failure_domain if failure_domain is not None else self.domains.get(broker_id)
        return self.body("broker", broker_id=broker_id, failure_domain=domain, capacity=capacity)

    def bodies(self) -> list[BodySpec]:
        """Namespace shards, the leader, the brokers, then (if asked) the clients."""
        specs = [self.body("namespace", shard=s) for s in range(self.settings.namespace_shards)]
        specs.append(self.body("leader"))
        specs += [self.broker(b) for b in self.brokers]
        if self.clients:
            specs.append(self.body("clients"))
        return specs


def log_spec(log_dir: str | os.PathLike[str] | None, bootstrap: str | None, *, cluster: str,
             partitions: int, transactional: bool, fsync: bool) -> tuple[LogSpec, str | None]:
    """The log (Kafka if ``bootstrap``, else a directory) and the temp dir made for it, if any."""
    if bootstrap is not None and log_dir is not None:
        raise InvalidInput("pass log_dir= (embedded log) or bootstrap= (Kafka), not both")
    if bootstrap is not None:
        return LogSpec(bootstrap=bootstrap, cluster=cluster, partitions=partitions,
                       transactional=transactional), None
    made = None if log_dir is not None else tempfile.mkdtemp(prefix="bundle-balancer-")
    directory = str(Path(log_dir if log_dir is not None else str(made)).resolve())
    Path(directory).mkdir(parents=True, exist_ok=True)
    return LogSpec(directory=directory, fsync=fsync), made


def write_cluster_file(directory: str, info: Mapping[str, Any]) -> None:
    path = Path(directory) / CLUSTER_FILE
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(orjson.dumps(dict(info), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    os.replace(tmp, path)


def read_cluster_file(directory: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(directory) / CLUSTER_FILE
    try:
        info: dict[str, Any] = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise InvalidInput(f"{str(path)!r} not found: no running cluster uses the log directory "
                           f"{str(directory)!r} (pass ray_address= and ray_namespace=)",
                           value=str(directory)) from None
    return info


def remove_cluster_file(directory: str) -> None:
    (Path(directory) / CLUSTER_FILE).unlink(missing_ok=True)
