"""``RayLink``: the cluster's bodies as named Ray actors, on the wall clock (sped up by ``speed``).

``start`` launches Ray (local unless an address is given), the log (an embedded directory or
Kafka), the paced clock when Ray runs on this machine (``actors.runtime.paced``: cluster time
stands still for a late actor) and one actor per body; ``connect`` attaches to a running cluster by its Ray namespace,
which a ``conf/cluster.yaml`` or the embedded log directory's ``ray.json`` names.

Invariants:
- a started link owns its actors (``fleet``), the Ray runtime it started and the temporary log
  directory it made, and releases all of them on ``close``; a connected one owns only its view;
- the view follows the log by its own subscription, in this event loop; commands go through
  ``RayTransport`` and carry the log position the client has folded (``after``), so a body
  answers only once it has folded at least as much;
- a refused Kafka role fails ``start`` before any actor runs (``check_roles``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from actors.client import ClientView
from actors.cluster.lock import lock_directory
from actors.cluster.options import broker_ids
from actors.cluster_conf import ClusterConf
from actors.deploy import (
    Fleet,
    Launch,
    check_roles,
    read_ray_file,
    remove_ray_file,
    write_ray_file,
)
from actors.runtime.paced import PaceReport
from actors.runtime.ray import (
    Handle,
    HostSpec,
    RayTransport,
    ensure_ray,
    gcs_address,
    lookup_actor,
    shutdown_ray,
)
from actors.settings import LEADER, ActorSettings, broker_body_name, namespace_body_name
from actors.workload import Capacity, Workload
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput, LoadBalancerError, Unavailable
from events.catalog import Command
from events.log.port import Record, dropped_note

MIN_SLEEP_S = 0.005
logger = logging.getLogger(__name__)


class RayLink:
    """A ``Link`` to bodies hosted as Ray actors."""

    kind = "ray"
    virtual = False

    def __init__(self, *, view: ClientView, transport: RayTransport, host: HostSpec,
                 config: LoadBalancerConfig, settings: ActorSettings, ray_namespace: str,
                 ray_started: bool, fleet: Fleet | None = None, lock_fd: int | None = None) -> None:
        self.view, self.transport, self.host = view, transport, host
        self.config, self.settings = config, settings
        self.ray_namespace, self._ray_started, self.fleet = ray_namespace, ray_started, fleet
        self._lock_fd = lock_fd
        self.reading = host.reading()
        """The cluster's time as the actors read it (the paced clock when there is one)."""

    # -- life ------------------------------------------------------------------------------
    @classmethod
    async def start(cls, launch: Launch) -> RayLink:
        # One cluster per log: an embedded log directory someone else writes is refused by name.
        embedded = launch.log_dir if launch.bootstrap is None else None
        lock = lock_directory(Path(embedded).resolve()) if embedded is not None else None
        try:
            launch = await launch.resolved()  # before Ray: a foreign log is refused at once
            ray_started = ensure_ray(launch.ray_address, namespace=launch.ray_namespace,
                                     num_cpus=launch.num_cpus)
        except BaseException:
            if lock is not None:
                os.close(lock)
            raise
        fleet = launch.fleet()
        link = cls(view=_view(launch.config, fleet.host, launch.poll_s),
                   transport=RayTransport(launch.ray_namespace), host=fleet.host,
                   config=launch.config, settings=launch.settings,
                   ray_namespace=launch.ray_namespace, ray_started=ray_started, fleet=fleet,
                   lock_fd=lock)
        try:
            await link.view.start()  # first: it creates the Kafka topic the actors share
            await check_roles(fleet.host.log)  # a refused role fails here, not as a silent actor
            await fleet.start()
            await link._wait_ready(launch.brokers, launch.ready_timeout_s)
        except BaseException:
            await link.close()
            raise
        return link

    async def _wait_ready(self, brokers: Sequence[str], timeout_s: float) -> None:
        def ready() -> bool:
            return self.view.leader_id is not None and all(b in self.view.brokers for b in brokers)

        if not await self.view.wait_for(ready, timeout_s):
            raise Unavailable(f"no leader or not every broker registered within {timeout_s}s: "
                              f"leader={self.view.leader_id}, brokers={sorted(self.view.brokers)}")
        if self.host.log.directory is not None:
            write_ray_file(self.host.log.directory, {
                "ray_address": gcs_address(), "ray_namespace": self.ray_namespace,
                "log": self.host.log.describe(), "pid": os.getpid()})

    @classmethod
    async def connect(cls, conf: ClusterConf | str | None = None, *, ray_address: str | None = None,
                      ray_namespace: str | None = None, log_dir: str | os.PathLike[str] | None = None,
                      timeout_s: float = 30.0) -> RayLink:
        security = None
        if conf is not None:
            deployment = conf if isinstance(conf, ClusterConf) else ClusterConf.load(conf)
            ray_address = ray_address or deployment.ray.address
            ray_namespace = ray_namespace or deployment.ray.namespace
            security = deployment.kafka.security
        if log_dir is not None and ray_namespace is None:
            info = read_ray_file(log_dir)
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
        link = cls(view=_view(config, host, host.poll_s),
                   transport=RayTransport(ray_namespace), host=host, config=config,
                   settings=described["settings"], ray_namespace=ray_namespace,
                   ray_started=ray_started)
        await link.view.start()
        return link

    async def close(self) -> None:
        try:
            # The view first: it reads the log, which the fleet's close may remove (a temporary one).
            await self.view.close()
            if self.fleet is not None:
                await self.fleet.close()
                if self.host.log.directory is not None:
                    remove_ray_file(self.host.log.directory)
            await self.transport.close()
        finally:
            if self._ray_started:
                shutdown_ray()
            if self._lock_fd is not None:
                os.close(self._lock_fd)  # releases the flock
                self._lock_fd = None

    # -- the link --------------------------------------------------------------------------
    async def call(self, target: str, command: Command,
                   timeout_s: float) -> tuple[object | None, LoadBalancerError | None]:
        return await self.transport.call(target, command, timeout_s=timeout_s,
                                         after=dict(self.view.cursor.seen))

    async def catch_up(self) -> None:
        await self.view.catch_up()

    async def open_for_commands(self) -> None:
        """Nothing: this cluster runs without this process."""

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        return await self.view.wait_for(predicate, timeout_s)

    def clock_s(self) -> float:
        return asyncio.get_running_loop().time()

    async def pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def sleep(self, ms: int) -> None:
        await asyncio.sleep(max(MIN_SLEEP_S, self.host.clock.wall_s(ms)))

    def now_ms(self) -> int:
        return self.reading.now_ms()

    def pace(self) -> PaceReport | None:
        """How long the paced clock stood still for late actors (None: no paced clock run by
        this process)."""
        return self.fleet.pacer.report() if self.fleet is not None and self.fleet.pacer else None

    def retry_s(self) -> float:
        return max(0.2, self.host.clock.wall_s(self.settings.lookup_retry_ms))

    async def history(self) -> list[Record]:
        result = await self.view.log.read()
        if result.dropped:  # explain/log_tail see what is left, and the caller's log says so
            logger.warning("the cluster's log: %s", dropped_note(result.dropped))
        return list(result.records)

    def describe(self) -> Mapping[str, Any]:
        return {"log_dir": self.host.log.directory, "ray_namespace": self.ray_namespace,
                "cluster_id": self.host.log.cluster_id}

    # -- the actors' life (actors.cluster.life) ---------------------------------------------
    def _names(self) -> list[str]:
        if self.fleet is not None:
            return sorted(self.fleet.handles)
        shards = [f"ns:{s}" for s in range(self.settings.namespace_shards)]
        return [*shards, LEADER, *(broker_body_name(b) for b in sorted(self.view.brokers))]

    async def _handle(self, name: str) -> Handle:
        if self.fleet is not None and name in self.fleet.handles:
            return self.fleet.handles[name]
        return await self.transport.handle(name)

    async def snapshots(self, target: Mapping[int, int], timeout_s: float) -> dict[str, dict[str, Any]]:
        """Each body's view once it has folded ``target`` (partition -> next offset)."""
        names = self._names()
        handles = [await self._handle(n) for n in names]
        snaps: list[dict[str, Any]] = await asyncio.wait_for(
            asyncio.gather(*(h.snapshot.remote(dict(target)) for h in handles)), timeout_s)
        return dict(zip(names, snaps, strict=True))

    async def statuses(self, timeout_s: float | None = None) -> dict[str, dict[str, Any]]:
        names = self._names()
        handles = [await self._handle(n) for n in names]
        found = await asyncio.gather(*(asyncio.wait_for(h.status.remote(), timeout_s) for h in handles),
                                     return_exceptions=True)
        return {n: s if isinstance(s, dict) else {"error": repr(s)}
                for n, s in zip(names, found, strict=True)}

    def cluster_s(self, ms: int) -> float:
        return self.host.clock.wall_s(ms)

    def _fleet(self) -> Fleet:
        if self.fleet is None:
            raise InvalidInput("only the process that started the cluster manages its actors")
        return self.fleet

    async def spawn_broker(self, broker_id: str | None, failure_domain: str | None,
                           capacity: Capacity | None, options: Mapping[str, Any] | None) -> str:
        fleet = self._fleet()
        broker_id = broker_id or fleet.new_broker_id()
        body = fleet.layout.broker(broker_id, failure_domain, capacity)
        fleet.spawn(body, options)
        await fleet.started([body.name])
        return broker_id

    def kill(self, name: str, *, broker_id: str | None = None, restart: bool) -> None:
        fleet = self._fleet()
        if broker_id is not None:
            fleet.broker(broker_id)  # an unknown broker is named
        fleet.kill(name, restart=restart)

    async def ask_broker(self, broker_id: str, method: str) -> None:
        await self._fleet().broker(broker_id).act.remote(method)

    async def retire(self, name: str) -> None:
        await self._fleet().retire(name)


def _view(config: LoadBalancerConfig, host: HostSpec, poll_s: float) -> ClientView:
    """The client's view of the cluster's log; over an embedded log it keeps snapshots beside
    the bodies' (``snapshots/client``), so a connect folds only the tail, and so that retention
    may drop records the view already holds."""
    retain = config.embedded_log_retention_enabled
    return ClientView(config, host.log.open(host.reading()), poll_s=poll_s,
                      snapshots=host.log.snapshots(retain=retain))


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


def launch(config: Any, settings: ActorSettings, brokers: int | Sequence[str], workload: Workload | None,
            clients: bool, domains: Mapping[str, str] | None, capacity: Capacity | None, seed: int,
            log_dir: str | os.PathLike[str] | None, ray_options: Mapping[str, Any]) -> Launch:
    """What ``Cluster.start`` on Ray was asked for; an option Ray does not take is named."""
    known = {f.name for f in dataclasses.fields(Launch)}
    unknown = sorted(set(ray_options) - known)
    if unknown:
        raise InvalidInput(f"Cluster.start: unknown option(s) {', '.join(unknown)}", value=unknown)
    options = dict(ray_options)
    options.setdefault("ray_namespace", f"bundle-balancer-{uuid.uuid4().hex[:10]}")
    options["actor_options"] = dict(options.get("actor_options") or {})
    return Launch(config, settings, broker_ids(brokers), workload, clients, dict(domains or {}),
                  capacity, seed=seed, log_dir=log_dir, **options)
