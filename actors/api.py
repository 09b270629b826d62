"""``Cluster``: the programmatic API of the live system (contracts §3), over the Ray host.

    async with Cluster.start(conf="conf/broker.conf", brokers=3) as cluster:  # local Ray + embedded log
        await cluster.create_namespace("public/default", bundles=16)
        owner = await cluster.lookup("persistent://public/default/orders")
    cluster = await Cluster.connect(log_dir=...)  # or ray_address= + ray_namespace=

Invariants:
- the client keeps its own projection of the log (``ClientView``): the lookup of an owned bundle
  is answered from it without any round trip; an unowned one asks the leader to place the bundle
  and waits until the view shows it Owned;
- every verb is one command with a fresh command id and the newest leader epoch the client has
  folded; a retriable error (an actor restarting, no leader yet) is retried with the same id
  (commands are idempotent), a stale epoch once with a new id after catching up; any other error
  is raised as its ``balancer.errors`` type, and the cluster appended at most its CommandRejected;
- a verb returns once its events are in the log and in the client's view; with ``wait`` (default)
  once the bundles it moved have settled (no longer in flight);
- a started cluster owns its actors, the Ray runtime it started and the temporary log directory
  it made, and releases all of them on ``close``; a connected one owns nothing but its view.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import uuid
from collections.abc import (
    AsyncGenerator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from actors.client import BrokerStatus, ClientView, LeaderStatus
from actors.cluster_conf import ClusterConf
from actors.deploy import (
    ConfSource,
    Fleet,
    Launch,
    Starting,
    broker_ids,
    check_roles,
    load_config,
    read_cluster_file,
    remove_cluster_file,
    write_cluster_file,
)
from actors.effects import Receipt
from actors.precheck import check_input
from actors.runtime.ray import (
    Handle,
    HostSpec,
    RayTransport,
    ensure_ray,
    gcs_address,
    lookup_actor,
    shutdown_ray,
)
from actors.settings import LEADER, ActorSettings, broker_body_name, namespace_body_name, route
from actors.workload import Capacity, Workload
from balancer.bundles import HashRange
from balancer.config import LoadBalancerConfig
from balancer.errors import (
    InvalidInput,
    StaleEpoch,
    Unavailable,
    UnknownBundle,
    UnknownNamespace,
)
from balancer.ownership import BundleState
from events.catalog import (
    AssignBundle,
    Command,
    CreateNamespace,
    SetFailureDomain,
    SetNamespacePolicy,
    SplitBundle,
    UnloadBundle,
    UnloadNamespace,
)
from events.log.kafka_client import KafkaSecurity
from events.log.port import Offsets, Record
from projections.explain import MoveRecord, moves_of
from projections.ownership import BundleRow, OwnershipProjection, namespace_of_topic

C = TypeVar("C", bound=Command)
TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class ActorView:
    """A body's live ownership view and the log position (partition -> next offset) it folded."""

    view: OwnershipProjection
    position: Offsets


class Cluster:
    """A live cluster: verbs (contracts §3), views, and the actors' life (for tests and runs)."""

    def __init__(self, *, view: ClientView, transport: RayTransport, host: HostSpec,
                 config: LoadBalancerConfig, settings: ActorSettings, ray_namespace: str,
                 ray_started: bool, fleet: Fleet | None = None) -> None:
        self.view, self.transport, self.host = view, transport, host
        self.config, self.settings = config, settings
        self.ray_namespace, self._ray_started, self.fleet = ray_namespace, ray_started, fleet
        self._prefix = f"client-{uuid.uuid4().hex[:8]}"
        self._ids = itertools.count(1)
        self._closed = False

    # -- life ------------------------------------------------------------------------------
    @classmethod
    def start(cls, conf: ConfSource = None, brokers: int | Sequence[str] = 3, *,
              overrides: Mapping[str, Any] | None = None, settings: ActorSettings | None = None,
              workload: Workload | None = None, clients: bool = False,
              domains: Mapping[str, str] | None = None, capacity: Capacity | None = None,
              speed: float = 1.0, tick_s: float = 0.1, poll_s: float = 0.01, seed: int = 0,
              log_dir: str | os.PathLike[str] | None = None, bootstrap: str | None = None,
              cluster_name: str = "lb", partitions: int = 3, transactional: bool = True,
              replication_factor: int | None = None, retention_ms: int | None = None,
              fsync: bool = True, ray_address: str | None = None, ray_namespace: str | None = None,
              num_cpus: int | None = None, max_restarts: int = -1, detached: bool = False,
              actor_options: Mapping[str, Mapping[str, Any]] | None = None,
              ready_timeout_s: float = 90.0,
              security: KafkaSecurity | None = None) -> Starting[Cluster]:
        """Start a cluster: Ray (local unless ``ray_address``), the log (a directory, a temporary
        one by default, or Kafka at ``bootstrap``), and one actor per body.

        ``conf`` is a broker.conf path or a ``LoadBalancerConfig`` (``overrides``: Pulsar keys);
        ``brokers`` a count or ids; ``domains`` broker -> failure domain at registration;
        ``speed`` compresses time (60: a simulated hour in a minute; timers are cluster time);
        ``actor_options`` body name -> extra Ray actor options (``resources`` to pin a node);
        ``security`` how to reach Kafka (TLS, SASL; each kind of actor with its role's user).
        """
        launch = Launch(
            load_config(conf, overrides), settings or ActorSettings(), broker_ids(brokers),
            workload, clients, dict(domains or {}), capacity, speed, tick_s, poll_s, seed, log_dir,
            bootstrap, cluster_name, partitions, transactional, fsync, ray_address,
            ray_namespace or f"bundle-balancer-{uuid.uuid4().hex[:10]}", num_cpus, max_restarts,
            detached, dict(actor_options or {}), ready_timeout_s, replication_factor, retention_ms,
            security=security)
        return Starting(lambda: cls._open(launch))

    @classmethod
    def deploy(cls, deployment: ClusterConf | str | os.PathLike[str], brokers: int | Sequence[str] = 3,
               **options: Any) -> Starting[Cluster]:
        """``start`` on the Kafka and the Ray cluster that ``conf/cluster.yaml`` names (its
        ``broker_conf`` unless ``conf=`` is given); ``options`` as for ``start``."""
        found = deployment if isinstance(deployment, ClusterConf) else ClusterConf.load(deployment)
        options.setdefault("conf", found.broker_conf)
        options.setdefault("actor_options", found.ray.actor_options())
        return cls.start(brokers=brokers, bootstrap=found.kafka.bootstrap_servers,
                         cluster_name=found.name, partitions=found.kafka.partitions,
                         transactional=found.kafka.transactional,
                         replication_factor=found.kafka.replication_factor,
                         retention_ms=found.kafka.retention_ms, security=found.kafka.security,
                         ray_address=found.ray.address,
                         ray_namespace=found.ray.namespace, **options)

    @classmethod
    async def _open(cls, launch: Launch) -> Cluster:
        ray_started = ensure_ray(launch.ray_address, namespace=launch.ray_namespace,
                                 num_cpus=launch.num_cpus)
        fleet = launch.fleet()
        cluster = cls(view=ClientView(launch.config, fleet.host.log.open(fleet.host.clock),
                                      poll_s=launch.poll_s),
                      transport=RayTransport(launch.ray_namespace), host=fleet.host,
                      config=launch.config, settings=launch.settings,
                      ray_namespace=launch.ray_namespace, ray_started=ray_started, fleet=fleet)
        try:
            await cluster.view.start()  # first: it creates the Kafka topic the actors share
            await check_roles(fleet.host.log)  # a refused role fails here, not as a silent actor
            await fleet.start(launch.ready_timeout_s)
            await cluster._wait_ready(launch.brokers, launch.ready_timeout_s)
        except BaseException:
            await cluster.close()
            raise
        return cluster

    async def _wait_ready(self, brokers: Sequence[str], timeout_s: float) -> None:
        def ready() -> bool:
            return self.view.leader_id is not None and all(b in self.view.brokers for b in brokers)

        if not await self.view.wait_for(ready, timeout_s):
            raise Unavailable(f"no leader or not every broker registered within {timeout_s}s: "
                              f"leader={self.view.leader_id}, brokers={sorted(self.view.brokers)}")
        if self.host.log.directory is not None:
            write_cluster_file(self.host.log.directory, {
                "ray_address": gcs_address(), "ray_namespace": self.ray_namespace,
                "log": self.host.log.describe(), "pid": os.getpid()})

    @classmethod
    async def connect(cls, conf: str | None = None, *, ray_address: str | None = None,
                      ray_namespace: str | None = None, log_dir: str | os.PathLike[str] | None = None,
                      timeout_s: float = TIMEOUT_S) -> Cluster:
        """Attach to a running cluster: by ``conf/cluster.yaml`` (``conf``: its Ray address and
        namespace), by its log directory (embedded: ``cluster.json`` there names Ray), or by Ray
        address + namespace. The log and the config are the actors' own."""
        security = None
        if conf is not None:
            deployment = ClusterConf.load(conf)
            ray_address = ray_address or deployment.ray.address
            ray_namespace = ray_namespace or deployment.ray.namespace
            security = deployment.kafka.security
        if log_dir is not None and ray_namespace is None:
            info = read_cluster_file(log_dir)
            ray_address = ray_address or info.get("ray_address")
            ray_namespace = str(info["ray_namespace"])
        if ray_namespace is None:
            raise InvalidInput("connect needs log_dir= or ray_namespace= (and ray_address=)")
        ray_started = ensure_ray(ray_address or "auto", namespace=ray_namespace)
        try:
            described = await _describe(ray_namespace, timeout_s)
        except BaseException:
            if ray_started:
                shutdown_ray()
            raise
        host: HostSpec = described["host"]
        if security is not None and host.log.bootstrap is not None:
            # Our own user, not the actors': their spec names their roles' credentials.
            host = dataclasses.replace(host, log=dataclasses.replace(host.log, security=security))
        config: LoadBalancerConfig = described["config"]
        cluster = cls(view=ClientView(config, host.log.open(host.clock), poll_s=host.poll_s),
                      transport=RayTransport(ray_namespace), host=host, config=config,
                      settings=described["settings"], ray_namespace=ray_namespace,
                      ray_started=ray_started)
        await cluster.view.start()
        return cluster

    async def close(self) -> None:
        """Stop what this client owns: its view; for a started cluster, every actor too."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.fleet is not None:
                await self.fleet.close()
                if self.host.log.directory is not None:
                    remove_cluster_file(self.host.log.directory)
            await self.view.close()
            await self.transport.close()
        finally:
            if self._ray_started:
                shutdown_ray()

    async def __aenter__(self) -> Cluster:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    # -- commands ----------------------------------------------------------------------------
    def _command_id(self, kind: str = "admin") -> str:
        return f"{self._prefix}:{kind}:{next(self._ids)}"

    async def _issue(self, cls: type[C], *, timeout_s: float = TIMEOUT_S, **fields: Any) -> Receipt:
        """Send one command (after catching up, so it carries the newest epoch) and wait."""
        await self.view.catch_up()
        command = cls(command_id=self._command_id(), epoch=self.view.epoch, **fields)
        check_input(self.view, command, self.now_ms())  # bad input appends nothing
        receipt = await self._deliver(command, timeout_s)
        await self.view.catch_up()
        return receipt

    async def _deliver(self, command: Command, timeout_s: float) -> Receipt:
        loop = asyncio.get_running_loop()
        deadline, pause, renewed = loop.time() + timeout_s, 0.05, False
        target = route(command, self.settings.namespace_shards)
        while True:
            remaining = max(0.1, deadline - loop.time())
            reply, error = await self.transport.call(target, command, timeout_s=remaining,
                                                     after=dict(self.view.cursor.seen))
            if error is None:
                assert isinstance(reply, Receipt), reply
                return reply
            if isinstance(error, StaleEpoch) and not renewed:
                await self.view.catch_up()  # the client lagged behind an election: once more
                command = dataclasses.replace(command, command_id=self._command_id(),
                                              epoch=self.view.epoch)
                renewed = True
                continue
            if not error.retriable or loop.time() + pause > deadline:
                raise error
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)

    # -- lookups -----------------------------------------------------------------------------
    async def lookup(self, topic: str, *, timeout_s: float = TIMEOUT_S) -> str:
        """The broker serving ``topic``: a read of the local view if its bundle is owned; else
        the leader places the bundle and this waits until the view shows its owner."""
        owner = self.owner_of(topic)
        if owner is not None:
            return owner
        return await self._place(topic, timeout_s)

    def owner_of(self, topic: str) -> str | None:
        """The owner in the local view, None if the bundle is unowned or in flight."""
        view = self.view.view
        namespace = namespace_of_topic(topic)
        if namespace not in view.namespaces:
            raise UnknownNamespace(f"namespace {namespace!r} of {topic!r} does not exist",
                                   value=namespace)
        return view.lookup(topic)

    async def _place(self, topic: str, timeout_s: float) -> str:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        retry_s = max(0.2, self.host.clock.wall_s(self.settings.lookup_retry_ms))
        lagged = False
        while loop.time() < deadline:
            command = AssignBundle(command_id=self._command_id("lookup"), epoch=self.view.epoch,
                                   bundle=self.view.view.bundle_of_topic(topic), reason="lookup")
            _, error = await self.transport.call(LEADER, command, timeout_s=timeout_s,
                                                 after=dict(self.view.cursor.seen))
            if isinstance(error, StaleEpoch | UnknownBundle) and not lagged:
                # The view lagged behind an election or a split: catch up, ask again (once).
                await self.view.catch_up()
                lagged = isinstance(error, UnknownBundle)
                continue
            if error is not None and not error.retriable:
                raise error
            step = min(retry_s, max(0.0, deadline - loop.time()))
            if await self.view.wait_for(lambda: self.view.view.lookup(topic) is not None, step):
                return str(self.view.view.lookup(topic))
        raise Unavailable(f"lookup of {topic}: still no owner after {timeout_s}s", value=topic)

    # -- admin verbs -------------------------------------------------------------------------
    async def create_namespace(self, namespace: str, bundles: int | None = None, *,
                               boundaries: Sequence[int] | None = None,
                               anti_affinity_group: str | None = None,
                               isolation: Mapping[str, Any] | None = None) -> Receipt:
        return await self._issue(CreateNamespace, namespace=namespace, bundles=bundles,
                                 boundaries=list(boundaries) if boundaries is not None else None,
                                 anti_affinity_group=anti_affinity_group,
                                 isolation=dict(isolation) if isolation else None)

    async def split_bundle(self, namespace: str, bundle: str = "LARGEST",
                           algorithm: str | None = None, positions: Sequence[int] | None = None,
                           unload: bool = False, *, wait: bool = True,
                           timeout_s: float = TIMEOUT_S) -> Receipt:
        """Split a bundle (a range, a full id, ``LARGEST`` or ``HOT``); ``unload`` (-u) unloads
        the children. With ``wait``, returns once the split (and the unloads) settled."""
        receipt = await self._issue(
            SplitBundle, namespace=namespace, bundle=bundle, timeout_s=timeout_s,
            algorithm=algorithm or self.config.default_namespace_bundle_split_algorithm,
            positions=list(positions) if positions else None, unload=unload)
        requested = receipt.first("SplitRequested")
        if wait and requested is not None:
            await self._settle_namespace(namespace, str(requested["bundle"]), timeout_s)
        return receipt

    async def unload(self, namespace: str, bundle: str | None = None,
                     destination: str | None = None, *, wait: bool = True,
                     timeout_s: float = TIMEOUT_S) -> Receipt:
        """Unload one bundle (to ``destination``: a graceful transfer) or, without ``bundle``,
        every owned bundle of the namespace. With ``wait``, returns once they settled."""
        if bundle is None:
            if destination is not None:
                raise InvalidInput("a destination needs a bundle (-b)", value=destination)
            receipt = await self._issue(UnloadNamespace, namespace=namespace, timeout_s=timeout_s)
        else:
            receipt = await self._issue(UnloadBundle, bundle=self._bundle_id(namespace, bundle),
                                        dst=destination, timeout_s=timeout_s)
        moved = [str(p["bundle"]) for kind, p in receipt.events
                 if kind in ("UnloadRequested", "TransferPrepared")]
        if wait:
            await self._settle(moved, timeout_s)
        return receipt

    async def set_anti_affinity_group(self, namespace: str, group: str | None) -> Receipt:
        await self.view.catch_up()
        info = self.view.view.namespaces.get(namespace)
        return await self._issue(SetNamespacePolicy, namespace=namespace, anti_affinity_group=group,
                                 isolation=info.isolation if info is not None else None)

    async def set_failure_domain(self, domain: str, brokers: Sequence[str]) -> Receipt:
        return await self._issue(SetFailureDomain, domain=domain, brokers=list(brokers))

    @staticmethod
    def _bundle_id(namespace: str, bundle: str) -> str:
        if bundle.startswith(f"{namespace}/"):
            return bundle
        return f"{namespace}/{HashRange.parse(bundle).name}"

    async def _settle(self, bundles: Sequence[str], timeout_s: float) -> None:
        def settled() -> bool:
            return not any(self.view.view.state(b).in_flight for b in bundles)

        if not await self.view.wait_for(settled, timeout_s):
            raise Unavailable(f"{', '.join(bundles)} still in flight after {timeout_s}s",
                              value=list(bundles))

    async def _settle_namespace(self, namespace: str, parent: str, timeout_s: float) -> None:
        def settled() -> bool:
            view = self.view.view
            if view.state(parent) is BundleState.SPLITTING:
                return False
            return not any(BundleState(row.state).in_flight for row in view.bundles(namespace))

        if not await self.view.wait_for(settled, timeout_s):
            raise Unavailable(f"the split of {parent} did not settle within {timeout_s}s", value=parent)

    # -- views -------------------------------------------------------------------------------
    def ownership(self) -> OwnershipProjection:
        """The client's ownership view (bundles, states, owners), current as of its last fold."""
        return self.view.view

    def namespaces(self) -> list[str]:
        return sorted(self.view.view.namespaces)

    def bundles(self, namespace: str) -> list[BundleRow]:
        """The bundles of ``namespace`` in range order (``UnknownNamespace`` if there is none)."""
        return self.view.bundle_rows(namespace)

    def brokers(self) -> list[BrokerStatus]:
        return self.view.broker_statuses()

    def load_report(self, broker: str) -> dict[str, Any]:
        """The broker's latest LoadReported (``ts_ms`` and payload; none yet: ``None``s)."""
        return self.view.load_report(broker)

    def leader(self) -> LeaderStatus:
        return LeaderStatus(self.view.leader_id, self.view.epoch)

    def now_ms(self) -> int:
        """Cluster time (sped up by the time-compression factor)."""
        return self.host.clock.now_ms()

    def events(self, *types: str, from_start: bool = False) -> AsyncGenerator[Record, None]:
        """Every record folded from now on (``from_start``: the whole log first), of ``types``."""
        return self.view.records(*types, from_start=from_start)

    async def replay(self) -> OwnershipProjection:
        """A fresh fold of the whole log, read back from the log itself."""
        return await self.view.replay()

    async def actor_views(self, timeout_s: float = TIMEOUT_S) -> dict[str, ActorView]:
        """Each hosted body's live ownership view, once it has folded at least what the client
        has, with the log position it is a fold of (compare it with a replay up to there)."""
        await self.view.catch_up()
        target = dict(self.view.cursor.position)
        names = self._names()
        handles = [await self._handle(n) for n in names]
        snaps: list[dict[str, Any]] = await asyncio.wait_for(
            asyncio.gather(*(h.snapshot.remote(target) for h in handles)), timeout_s)
        return {n: ActorView(OwnershipProjection.restore(s["view"]), dict(s["position"]))
                for n, s in zip(names, snaps, strict=True)}

    async def statuses(self) -> dict[str, dict[str, Any]]:
        names = self._names()
        handles = [await self._handle(n) for n in names]
        found = await asyncio.gather(*(h.status.remote() for h in handles), return_exceptions=True)
        return {n: s if isinstance(s, dict) else {"error": repr(s)}
                for n, s in zip(names, found, strict=True)}

    def _names(self) -> list[str]:
        if self.fleet is not None:
            return sorted(self.fleet.handles)
        shards = [f"ns:{s}" for s in range(self.settings.namespace_shards)]
        return [*shards, LEADER, *(broker_body_name(b) for b in sorted(self.view.brokers))]

    async def _handle(self, name: str) -> Handle:
        if self.fleet is not None and name in self.fleet.handles:
            return self.fleet.handles[name]
        return await self.transport.handle(name)

    # -- the actors' life (tests, ``lbctl run``) ------------------------------------------------
    def _fleet(self) -> Fleet:
        if self.fleet is None:
            raise InvalidInput("only the process that started the cluster manages its actors")
        return self.fleet

    async def add_broker(self, broker_id: str | None = None, *, failure_domain: str | None = None,
                         capacity: Capacity | None = None, options: Mapping[str, Any] | None = None,
                         timeout_s: float = TIMEOUT_S) -> str:
        """Start one more broker (``broker-N``, the first N free); its id once it is registered."""
        fleet = self._fleet()
        broker_id = broker_id or fleet.new_broker_id()
        fleet.spawn(fleet.layout.broker(broker_id, failure_domain, capacity), options)
        if not await self.view.wait_for(lambda: broker_id in self.view.brokers, timeout_s):
            raise Unavailable(f"broker {broker_id} did not register within {timeout_s}s")
        return broker_id

    async def kill_broker(self, broker_id: str, *, restart: bool = False) -> None:
        """Hard-kill a broker's actor (a crash); ``restart``: Ray starts it again from the log."""
        fleet = self._fleet()
        fleet.broker(broker_id)
        fleet.kill(broker_body_name(broker_id), restart=restart)

    async def shutdown_broker(self, broker_id: str, *, timeout_s: float | None = None) -> None:
        """Graceful shutdown: the broker's bundles are transferred, it leaves, its actor ends."""
        fleet = self._fleet()
        await fleet.broker(broker_id).act.remote("shutdown")
        drain_s = self.host.clock.wall_s(self.settings.drain_timeout_ms) + 10.0
        if not await self.view.wait_for(lambda: broker_id not in self.view.brokers,
                                        drain_s if timeout_s is None else timeout_s):
            raise Unavailable(f"broker {broker_id} did not leave in time")
        await fleet.retire(broker_body_name(broker_id))

    async def kill_leader(self, *, restart: bool = True) -> None:
        """Hard-kill the leader's actor; Ray restarts it and it campaigns for a new epoch."""
        self._fleet().kill(LEADER, restart=restart)

    async def explain(self, bundle: str) -> list[MoveRecord]:
        """Every move of ``bundle`` in the log, with the decision (inputs, scores) behind it."""
        return moves_of(bundle, (await self.view.log.read()).records)


async def _describe(ray_namespace: str, timeout_s: float) -> dict[str, Any]:
    """How the cluster in ``ray_namespace`` is built, from the first actor that answers."""
    failures = []
    for name in (LEADER, namespace_body_name(0)):  # the leader may be restarting
        try:
            handle = await lookup_actor(name, ray_namespace)
            described: dict[str, Any] = await asyncio.wait_for(handle.describe.remote(), timeout_s)
            return described
        except Exception as exc:
            failures.append(f"{name}: {exc!r}")
    raise Unavailable(f"no cluster in Ray namespace {ray_namespace!r}: {'; '.join(failures)}",
                      value=ray_namespace)
