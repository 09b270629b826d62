"""How a cluster is laid out (``Layout``), the actors a started one owns (``Fleet``), and the
file that lets other processes attach.

Invariants:
- a ``Layout`` is plain, immutable data (picklable): the config, the actor settings, the broker
  ids and domains, the workload, the log and the clock; every actor of a cluster is built from
  the same one, so all of them agree on timers, shards and time;
- the bodies of a layout are the namespace shards, one leader and the brokers (plus the
  workload's clients when asked), named as ``actors.settings`` names them;
- a ``Fleet`` holds a handle on every actor it spawned, by body name, until the actor is retired
  or killed for good; placed ``spread``, each broker without Ray options of its own starts on
  the alive node that holds the fewest of the fleet's brokers (ties: the first in node id
  order), so N brokers over k nodes differ by at most one per node, and stays there; the other
  bodies go where Ray's scheduler puts them, so that Ray restarts the leader and the shards on
  any node; ``close`` ends every one of them (their logs closed first when they answer)
  and removes the temporary log directory the fleet was given;
- an embedded cluster writes ``ray.json`` into its log directory (Ray address, Ray namespace)
  so another process can attach with nothing but the directory, and removes it on close. Its
  name is its own: ``cluster.json`` is the state directory's record of a kept cluster
  (``actors.cluster.kept``); a log directory written before the two had names of their own
  holds ``cluster.json``, which is still read there.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import orjson

from actors.cluster_conf import PLACEMENTS
from actors.runtime.bodies import BodyKind, BodySpec
from actors.runtime.paced import Pacer
from actors.runtime.ray import (
    Handle,
    HostSpec,
    alive_nodes,
    is_loopback,
    kill,
    pinned_to,
    spawn,
    stop_and_kill,
)
from actors.runtime.specs import Clock, LogSpec, default_snapshot_root
from actors.settings import ActorSettings, broker_body_name
from actors.workload import Capacity, Workload
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput, Unavailable, UnknownBroker
from events.envelope import new_cluster_id
from events.log.kafka_client import ROLES, KafkaSecurity
from events.log.kafka_topics import ensure_topic
from events.signing import issue_file

RAY_FILE = "ray.json"
"""In an embedded log's directory: how to reach the Ray cluster that runs on it."""
OLD_RAY_FILE = "cluster.json"
"""Its name before it had one of its own (read, never written)."""
SIGNING_SUBDIR = "keys"


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

    def body(self, kind: BodyKind, *, broker_id: str | None = None, shard: int = 0,
             failure_domain: str | None = None, capacity: Capacity | None = None) -> BodySpec:
        # Only brokers and clients play the workload: the others are not sent it (at 196,608
        # topics it is 19 MB to ship and seconds to unpickle in the busiest actors).
        workload = self.workload if kind in ("broker", "clients") else None
        return BodySpec(kind, self.config, self.settings, broker_id=broker_id,
                        failure_domain=failure_domain, capacity=capacity or self.capacity,
                        workload=workload, shard=shard, seed=self.seed)

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


@dataclass
class Fleet:
    """The actors of a started cluster: spawned from one layout, each by its body's name."""

    layout: Layout
    host: HostSpec
    namespace: str
    max_restarts: int = -1
    detached: bool = False
    actor_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    temp_dir: str | None = None
    handles: dict[str, Handle] = field(default_factory=dict)
    pacer: Pacer | None = None
    """The paced clock's coordinator (``HostSpec.pacing``), run by this process."""
    ready_timeout_s: float = 90.0
    """How long an actor may take to start and recover (``Launch.ready_timeout_s``)."""
    placement: str = "scheduler"
    """``spread`` or ``scheduler`` (``Launch.placement``)."""
    nodes: dict[str, str] = field(default_factory=dict)
    """Body name -> the node it was pinned to, for the brokers placed ``spread``."""

    def spawn(self, body: BodySpec, options: Mapping[str, Any] | None = None) -> Handle:
        if body.name in self.handles:
            raise InvalidInput(f"{body.name!r} is already hosted", value=body.name)
        signing, identity = self.layout.log.signing_dir, body.identity
        if signing is not None and identity is not None:
            issue_file(Path(signing), identity)  # the founder's root certifies each writer once
        extra = self._placed(body, {**self.actor_options.get(body.name, {}), **(options or {})})
        handle = spawn(self.host, body, namespace=self.namespace, max_restarts=self.max_restarts,
                       detached=self.detached, options=extra)
        self.handles[body.name] = handle
        return handle

    def _placed(self, body: BodySpec, options: dict[str, Any]) -> dict[str, Any]:
        """``options``, pinned to the next node when the fleet spreads, the body is a broker
        and they place it nowhere."""
        if (self.placement != "spread" or body.kind != "broker" or "resources" in options
                or "scheduling_strategy" in options):
            return options
        nodes = alive_nodes()
        if not nodes:
            return options
        held = Counter(self.nodes.values())
        node = min(nodes, key=lambda n: (held[n], nodes.index(n)))
        self.nodes[body.name] = node
        return {**options, **pinned_to(node)}

    async def start(self) -> None:
        """Spawn every body of the layout and wait until each actor has recovered."""
        for body in self.layout.bodies():
            self.spawn(body)
        await self.started(list(self.handles))

    async def started(self, names: Sequence[str]) -> None:
        """Return once each named actor has recovered (its first answer): a process start is
        slow on a busy machine, so waits that judge a body's behaviour count from here."""
        try:
            await asyncio.wait_for(asyncio.gather(
                *(self.handles[n].status.remote() for n in names)), self.ready_timeout_s)
        except Exception as exc:
            raise Unavailable(f"actors {list(names)} did not start within {self.ready_timeout_s}s: "
                              f"{exc!r}") from exc

    def new_broker_id(self) -> str:
        return next(f"broker-{i}" for i in itertools.count(1)
                    if broker_body_name(f"broker-{i}") not in self.handles)

    def broker(self, broker_id: str) -> Handle:
        handle = self.handles.get(broker_body_name(broker_id))
        if handle is None:
            raise UnknownBroker(f"broker {broker_id!r} is not hosted by this cluster; hosted: "
                                f"{', '.join(sorted(self.handles))}", value=broker_id)
        return handle

    def kill(self, name: str, *, restart: bool = False) -> None:
        """Hard-kill (a crash); ``restart``: Ray starts it again, rebuilt from the log."""
        handle = self.handles[name] if restart else self.handles.pop(name)
        if not restart:
            self.nodes.pop(name, None)
        kill(handle, restart=restart)

    async def retire(self, name: str) -> None:
        """Close the actor's log, then end it for good."""
        self.nodes.pop(name, None)
        await stop_and_kill(self.handles.pop(name))

    async def close(self) -> None:
        handles, self.handles = list(self.handles.values()), {}
        await asyncio.gather(*(stop_and_kill(h) for h in handles))
        if self.pacer is not None:
            await asyncio.to_thread(self.pacer.close)
            self.pacer = None
        if self.temp_dir is not None:
            await asyncio.to_thread(shutil.rmtree, self.temp_dir, True)


class Closable(Protocol):
    async def close(self) -> None: ...


T = TypeVar("T", bound=Closable)


@dataclass(frozen=True)
class Launch:
    """What ``Cluster.start`` was asked for (see its docstring for each option)."""

    config: LoadBalancerConfig
    settings: ActorSettings
    brokers: tuple[str, ...]
    workload: Workload | None = None
    clients: bool = False
    domains: Mapping[str, str] = field(default_factory=dict)
    capacity: Capacity | None = None
    speed: float = 1.0
    tick_s: float = 0.1
    poll_s: float = 0.01
    seed: int = 0
    log_dir: str | os.PathLike[str] | None = None
    bootstrap: str | None = None
    cluster_name: str = "lb"
    partitions: int = 3
    transactional: bool = True
    fsync: bool = True
    segment_bytes: int = 64 * 1024 * 1024
    ray_address: str | None = None
    ray_namespace: str = "bundle-balancer"
    num_cpus: int | None = None
    max_restarts: int = -1
    detached: bool = False
    actor_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    placement: str = "scheduler"
    """``spread``: each broker without ``actor_options`` of its own starts on the alive Ray node
    holding the fewest of the cluster's brokers, and stays there (``Fleet``); ``scheduler``:
    where Ray's scheduler puts it (every node of a local Ray is this machine)."""
    ready_timeout_s: float = 90.0
    replication_factor: int | None = None
    retention_ms: int | None = None
    security: KafkaSecurity | None = None
    cluster_id: str | None = None
    """The cluster's id (None: the log's own, else a new one; ``RayLink.start`` resolves it)."""
    snapshot_dir: str | None = None
    """Kafka: the root of the bodies' snapshots on each node (``LogSpec.snapshot_dir``)."""
    signing_dir: str | None = None
    """The keyring the writers sign with (``LogSpec.signing_dir``); None: ``keys/`` in an
    embedded log's directory, else ``keys/<cluster>-<cluster id>`` under the snapshot root."""
    paced: bool | None = None
    """Cluster time from one paced clock that stands still for a late actor instead of letting
    the leader expire it (``actors.runtime.paced``); None: when Ray runs on this machine (no
    address, or a loopback one), where every actor can read it, unless the actors are detached
    (they outlive this process, which runs the clock)."""

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise InvalidInput(f"placement {self.placement!r}: expected {' or '.join(PLACEMENTS)}",
                               value=self.placement)

    def pacing(self) -> bool:
        if self.paced is not None:
            return self.paced
        return not self.detached and (self.ray_address is None or is_loopback(self.ray_address))

    def _log(self) -> tuple[LogSpec, str | None]:
        log, temp_dir = log_spec(self.log_dir, self.bootstrap, cluster=self.cluster_name,
                                 partitions=self.partitions, transactional=self.transactional,
                                 fsync=self.fsync, replication_factor=self.replication_factor,
                                 retention_ms=self.retention_ms, security=self.security,
                                 snapshot_dir=self.snapshot_dir)
        if log.directory is not None:
            log = dataclasses.replace(log, segment_bytes=self.segment_bytes)
        return dataclasses.replace(log, cluster_id=self.cluster_id), temp_dir

    async def resolved(self) -> Launch:
        """This launch with its cluster id settled: given, the log's own, or new."""
        if self.log_dir is None and self.bootstrap is None:  # a fresh temporary directory
            return dataclasses.replace(self, cluster_id=self.cluster_id or new_cluster_id())
        log = await self._log()[0].resolve_cluster(Clock.starting_now(self.speed))
        return dataclasses.replace(self, cluster_id=log.cluster_id)

    def fleet(self) -> Fleet:
        """The layout and its (not yet spawned) fleet; makes the temporary log directory."""
        log, temp_dir = self._log()
        log = dataclasses.replace(log, signing_dir=self.signing_dir or default_signing_dir(log))
        layout = Layout(self.config, self.settings, self.brokers, log, Clock.starting_now(self.speed),
                        self.workload, self.clients, dict(self.domains), self.capacity, self.seed)
        pacer = (Pacer.make(self.settings.session_timeout_ms, layout.clock.origin_ms, self.speed)
                 if self.pacing() else None)
        host = HostSpec(log, layout.clock, self.tick_s, self.poll_s, self.settings.namespace_shards,
                        pacing=pacer.spec if pacer is not None else None)
        return Fleet(layout, host, self.ray_namespace, self.max_restarts, self.detached,
                     dict(self.actor_options), temp_dir, pacer=pacer,
                     ready_timeout_s=self.ready_timeout_s, placement=self.placement)


def log_spec(log_dir: str | os.PathLike[str] | None, bootstrap: str | None, *, cluster: str,
             partitions: int, transactional: bool, fsync: bool,
             replication_factor: int | None = None, retention_ms: int | None = None,
             security: KafkaSecurity | None = None,
             snapshot_dir: str | os.PathLike[str] | None = None) -> tuple[LogSpec, str | None]:
    """The log (Kafka if ``bootstrap``, else a directory) and the temp dir made for it, if any."""
    if bootstrap is not None and log_dir is not None:
        raise InvalidInput("pass log_dir= (embedded log) or bootstrap= (Kafka), not both")
    if bootstrap is None and snapshot_dir is not None:
        raise InvalidInput(f"snapshot_dir={str(snapshot_dir)!r} applies to a Kafka log (bootstrap=); "
                           "an embedded log keeps its snapshots in its own directory", value=str(snapshot_dir))
    if bootstrap is not None:
        return LogSpec(bootstrap=bootstrap, cluster=cluster, partitions=partitions,
                       transactional=transactional, replication_factor=replication_factor,
                       retention_ms=retention_ms, security=security,
                       snapshot_dir=None if snapshot_dir is None else str(snapshot_dir)), None
    made = None if log_dir is not None else tempfile.mkdtemp(prefix="bundle-balancer-")
    directory = str(Path(log_dir if log_dir is not None else str(made)).resolve())
    Path(directory).mkdir(parents=True, exist_ok=True)
    return LogSpec(directory=directory, fsync=fsync), made


def default_signing_dir(log: LogSpec) -> str:
    """Where a cluster's keyring is kept unless told: beside an embedded log's records (it
    resumes with its log), else on this node under the snapshot root, per topic and cluster."""
    if log.directory is not None:
        return str(Path(log.directory) / SIGNING_SUBDIR)
    root = os.path.expanduser(log.snapshot_dir) if log.snapshot_dir else default_snapshot_root()
    return os.path.join(root, SIGNING_SUBDIR, f"{log.cluster}-{log.cluster_id}")


def write_ray_file(directory: str, info: Mapping[str, Any]) -> None:
    path = Path(directory) / RAY_FILE
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(orjson.dumps(dict(info), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    os.replace(tmp, path)


def read_ray_file(directory: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(directory) / RAY_FILE
    if not path.is_file() and (Path(directory) / OLD_RAY_FILE).is_file():
        path = Path(directory) / OLD_RAY_FILE
    try:
        info: dict[str, Any] = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise InvalidInput(f"{str(path)!r} not found: no running cluster uses the log directory "
                           f"{str(directory)!r} (pass ray_address= and ray_namespace=)",
                           value=str(directory)) from None
    return info


def remove_ray_file(directory: str) -> None:
    (Path(directory) / RAY_FILE).unlink(missing_ok=True)


async def check_roles(log: LogSpec) -> None:
    """Each actor role with Kafka credentials of its own can log in and see the events topic:
    a wrong password or a missing ACL is one ``KafkaRefused`` now, before any actor starts."""
    if log.bootstrap is None or log.security is None:
        return
    topic = f"{log.cluster}-events"
    bootstrap = log.bootstrap
    await asyncio.gather(*(
        ensure_topic(bootstrap, topic, partitions=log.partitions, create=False,
                     security=log.security.for_role(role))
        for role in ROLES if role in dict(log.security.roles)))
