"""The Ray host: each actor body in its own named Ray actor (ARCHITECTURE §4).

Invariants:
- one Ray actor per body, named by the body's name (``ns:0``, ``leader``, ``broker:broker-1``,
  ``clients``) in the Ray namespace of its cluster; it needs no CPU (``num_cpus=0``);
- the actor is async, but its body is touched one call at a time (``LiveHost``'s lock); its
  ``__init__`` builds a fresh body and recovers it from its newest snapshot and the log after it
  (``LiveHost.start``) before the actor takes any call, so a restart (``max_restarts``, default
  -1 = always) rebuilds from the log, never from memory;
- a command's answer is a value ``(reply, error)``: typed errors travel as ``balancer.errors``
  objects and are raised by the caller (``call``), never wrapped in Ray's exception types; a Ray
  failure (actor dead, restarting, unreachable) becomes ``Unavailable`` (retriable);
- commands between actors are fire-and-forget, as in the in-process host: the sender never waits
  on another actor while it holds its body, so no cycle of actors can deadlock; the sends of
  ``GATHER_S`` (5 ms) to one actor travel as one Ray call (``commands``, at most
  ``MAX_BATCH`` each; a lookup storm is thousands of sends a second, and a Ray call
  costs far more than a command), in send order, and each is delivered exactly as alone
  (``LiveHost.command``, which may group them); ``LEADER`` is the
  actor named ``leader`` (one leader actor, restarted by Ray; each restart campaigns for a new
  epoch and fences the old one);
- handles are looked up by name off the event loop (``ray.get_actor`` blocks) and cached; a
  handle whose actor died for good is dropped and looked up again next time;
- an actor reads the cluster's paced clock when ``HostSpec.pacing`` names one its machine holds
  (``actors.runtime.paced``), else ``HostSpec.clock``; once recovered it beats from its event
  loop, so a late loop stops cluster time for all, and leaves the clock on ``stop``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import ray
from ray.actor import ActorHandle
from ray.exceptions import RayError

from actors.runtime.admission import InFlight
from actors.runtime.bodies import BodySpec
from actors.runtime.heap import HeapSettler
from actors.runtime.paced import Heartbeat, PacedClock, PacingSpec, readable
from actors.runtime.realtime import Answer, LiveHost
from actors.runtime.sampler import from_env as sampler_from_env
from actors.runtime.specs import Clock, ClockReading, LogSpec
from balancer.errors import Busy, InvalidInput, Unavailable
from events.catalog import Command
from events.log.port import Offsets

logger = logging.getLogger(__name__)

Handle: TypeAlias = "ActorHandle[Any]"
"""A handle on a ``BodyActor``."""

RAY_FAILURES: tuple[type[BaseException], ...] = (RayError, ValueError, TimeoutError)
"""What a call to an actor may raise instead of answering (``ValueError``: no such name)."""


@dataclass(frozen=True, slots=True)
class HostSpec:
    """What every actor of one cluster shares: the log, the clock and the loop periods."""

    log: LogSpec
    clock: Clock
    tick_s: float = 0.1
    """Wall seconds between two ticks of every body (at most 1 s)."""
    poll_s: float = 0.01
    """Wall seconds between two looks at the embedded log for news (Kafka pushes)."""
    namespace_shards: int = 1
    pacing: PacingSpec | None = None
    """The cluster's paced clock (``actors.runtime.paced``), read by every process that runs on
    its machine; None: each process reads ``clock``."""

    def __post_init__(self) -> None:
        if not 0 < self.tick_s <= 1.0:
            raise InvalidInput(f"tick_s={self.tick_s}: ticks come every (0, 1] s", value=self.tick_s)
        if not 0 < self.poll_s <= 1.0:
            raise InvalidInput(f"poll_s={self.poll_s}: must be in (0, 1] s", value=self.poll_s)

    def reading(self) -> ClockReading:
        """The cluster's time as this process reads it: the paced clock when it can, else
        ``clock`` (named in the log: the two may disagree by the time the paced one stood still)."""
        if readable(self.pacing):
            assert self.pacing is not None
            return PacedClock(self.pacing, self.clock.speed, self.clock.origin_ms)
        if self.pacing is not None:
            logger.warning("no paced clock at %s on this machine: reading the wall clock",
                           self.pacing.directory)
        return self.clock


class BodyActor:
    """One body as a Ray actor (wrapped by ``ray.remote`` in ``spawn``)."""

    async def __init__(self, spec: HostSpec, body: BodySpec, namespace: str) -> None:  # type: ignore[misc]
        # ``namespace`` is the actor's own: the runtime context names the creating job's.
        logging.basicConfig(level=logging.WARNING)
        self.sampler = sampler_from_env(body.name)  # off unless a benchmark asks for it
        self.spec, self.body_spec = spec, body
        writer = body.name if body.transactional else None
        clock = spec.reading()
        log = spec.log.open(clock, writer=writer, role=body.kind, identity=body.identity)
        self.host = LiveHost(body.build(), log, clock, RayTransport(namespace), shards=spec.namespace_shards,
                             tick_s=spec.tick_s, poll_s=spec.poll_s, rebuild=body.build,
                             snapshots=spec.log.snapshots(retain=body.config.embedded_log_retention_enabled))
        await self.host.start()
        # Waited for by the paced clock once it answers: a recovery never holds the cluster's time.
        self.heartbeat = Heartbeat(spec.pacing, body.name) if isinstance(clock, PacedClock) and spec.pacing else None
        if self.heartbeat is not None:
            self.heartbeat.start()
        # Everything alive now (Ray, aiokafka, the replayed history) lives as long as the actor,
        # and so does most of what a storm adds: frozen, a full collection no longer walks it
        # (one took ~40 ms here, a stall that every lookup and transfer passing through this
        # actor at that moment would wait out; in a storm, 28% of a shard's CPU).
        self.heap = HeapSettler()
        self.heap.start()

    async def command(self, command: Command, after: Offsets | None = None) -> Answer:
        return await self.host.command(command, after)

    async def commands(self, batch: list[tuple[Command, Offsets | None]]) -> list[Answer]:
        """Deliver each command of ``batch`` as ``command`` does, in order (``LiveHost.commands``:
        admission first, then the furthest log position of the batch reached once)."""
        return await self.host.commands(batch)

    async def act(self, method: str) -> None:
        """Run a body-specific action (``shutdown`` of a broker)."""
        await self.host.act(method)

    async def ping(self) -> int:
        """Nothing: one round trip (benchmarks, liveness)."""
        return 0

    async def status(self) -> dict[str, Any]:
        return {**self.host.status(), "node_id": ray.get_runtime_context().get_node_id(),
                "heap": self.heap.status()}

    async def snapshot(self, target: Mapping[int, int] | None = None) -> dict[str, Any]:
        return await self.host.snapshot(target)

    async def describe(self) -> dict[str, Any]:
        """How this cluster is built (what ``Cluster.connect`` needs to attach)."""
        return {"host": self.spec, "config": self.body_spec.config,
                "settings": self.body_spec.settings, "pid": os.getpid()}

    async def stop(self) -> None:
        """Close the log cleanly (before the actor is killed); no longer waited for."""
        if self.heartbeat is not None:
            await self.heartbeat.stop()
        if self.sampler is not None:
            self.sampler.stop()
        await self.host.close()

    async def stall(self, seconds: float) -> None:
        """A fault: block this actor's event loop for ``seconds`` of wall time, as a process the
        machine does not run for a while (tests, demonstrations of the paced clock)."""
        time.sleep(seconds)  # blocking the loop is the point


_RemoteBodyActor = ray.remote(BodyActor)


def spawn(spec: HostSpec, body: BodySpec, *, namespace: str, max_restarts: int = -1,
          detached: bool = False, options: Mapping[str, Any] | None = None) -> Handle:
    """Create the named actor hosting ``body`` (it is ready once ``status`` answers)."""
    opts: dict[str, Any] = {"name": body.name, "namespace": namespace, "num_cpus": 0,
                            "max_restarts": max_restarts}
    if detached:
        opts["lifetime"] = "detached"
    opts.update(options or {})
    handle: Handle = _RemoteBodyActor.options(**opts).remote(spec, body, namespace)  # type: ignore[assignment]
    return handle


def alive_nodes() -> list[str]:
    """The ids of the Ray cluster's alive nodes, in a stable order."""
    return sorted(str(node["NodeID"]) for node in ray.nodes() if node.get("Alive"))  # type: ignore[no-untyped-call]


def pinned_to(node_id: str) -> dict[str, Any]:
    """Actor options that start an actor on ``node_id``, and restart it only there: a soft
    affinity was measured to be no placement at all (10 actors asked alternately for two
    ``ray start`` nodes landed 6 of 10 on the other one), so a pinned actor is lost with its
    node, as a process is with its machine."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}


async def lookup_actor(name: str, namespace: str) -> Handle:
    """The handle of the named actor (``ValueError`` if there is none)."""
    handle: Handle = await asyncio.to_thread(ray.get_actor, name, namespace=namespace)
    return handle


async def call(handle: Handle, command: Command, timeout_s: float = 30.0,
               after: Offsets | None = None) -> Answer:
    """Deliver ``command`` (folded after ``after``, the caller's log position) and wait for the
    answer; a Ray failure raises (see ``RAY_FAILURES``)."""
    answer: Answer = await asyncio.wait_for(handle.command.remote(command, after), timeout_s)
    return answer


def kill(handle: Handle, *, restart: bool = False) -> None:
    """Hard-kill an actor (``restart``: let Ray start it again, rebuilt from the log)."""
    with contextlib.suppress(*RAY_FAILURES):
        ray.kill(handle, no_restart=not restart)


async def stop_and_kill(handle: Handle, timeout_s: float = 2.0) -> None:
    """Close the actor's log, then kill it for good (a dead or hung actor is just killed)."""
    with contextlib.suppress(*RAY_FAILURES, asyncio.TimeoutError):
        await asyncio.wait_for(handle.stop.remote(), timeout_s)
    kill(handle)


MAX_BATCH = 1_000
"""Commands per Ray call of ``RayTransport.send`` at most."""
GATHER_S = 0.005
"""How long a send waits for others to the same actor to share its Ray call."""

Outgoing: TypeAlias = "list[tuple[Command, Offsets | None]]"


class RayTransport:
    """Fire-and-forget delivery of commands to named actors of one Ray namespace: the sends
    of one loop turn to one actor go as one Ray call."""

    def __init__(self, namespace: str, call_timeout_s: float = 30.0) -> None:
        self.namespace, self.call_timeout_s = namespace, call_timeout_s
        self._handles: dict[str, Handle] = {}
        self._inflight: set[asyncio.Task[None]] = set()
        self._outbox: dict[str, Outgoing] = {}
        self.failed_sends = 0
        """Fire-and-forget commands that found no live actor (normal while one restarts)."""
        self.batches = 0
        """Ray calls that carried the sends (at most one per target and ``GATHER_S``)."""
        self.inflight = InFlight()
        """Retried commands on their way: a retry of one still queued is not sent again, one a
        busy target refused goes again when its retry-after ends."""
        self._wake: asyncio.TimerHandle | None = None
        self._wake_at = 0.0

    def send(self, target: str, command: Command, after: Offsets | None = None) -> None:
        if not self.inflight.admit(target, command, time.monotonic(), after):
            self._wake_for_due()
            return
        outgoing = self._outbox.get(target)
        if outgoing is None:
            outgoing = self._outbox[target] = []
            # After GATHER_S: a body decides one command a loop turn, and a Ray call costs far
            # more than a command (a storm's leader spent 39 % of its time submitting calls of
            # a few commands each), so the sends of a few milliseconds go as one call.
            asyncio.get_running_loop().call_later(GATHER_S, self._flush, target)
        outgoing.append((command, after))
        if len(outgoing) >= MAX_BATCH:
            self._flush(target)

    def _wake_for_due(self) -> None:
        """Have ``_send_due`` run when the earliest send kept back for a busy target may go."""
        due = self.inflight.next_due()
        if due is None or (self._wake is not None and self._wake_at <= due):
            return
        if self._wake is not None:
            self._wake.cancel()
        self._wake_at = due
        self._wake = asyncio.get_running_loop().call_later(max(0.0, due - time.monotonic()), self._send_due)

    def _send_due(self) -> None:
        self._wake = None
        for target, command, after in self.inflight.due(time.monotonic()):
            self.send(target, command, after if isinstance(after, dict) else None)
        self._wake_for_due()

    def _flush(self, target: str) -> None:
        batch = self._outbox.pop(target, None)
        if not batch:
            return
        self.batches += 1
        task = asyncio.get_running_loop().create_task(self._deliver_batch(target, batch))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def handle(self, target: str) -> Handle:
        handle = self._handles.get(target)
        if handle is None:
            handle = self._handles[target] = await lookup_actor(target, self.namespace)
        return handle

    def forget(self, target: str) -> None:
        self._handles.pop(target, None)

    async def call(self, target: str, command: Command, timeout_s: float = 30.0,
                   after: Offsets | None = None) -> Answer:
        """Deliver and wait; a missing, dead, restarting or silent actor is ``Unavailable``."""
        try:
            return await call(await self.handle(target), command, timeout_s, after)
        except RAY_FAILURES as exc:
            self.forget(target)  # looked up again next time (it may have been replaced)
            return None, Unavailable(f"{command.TYPE} {command.command_id}: actor {target!r} "
                                     f"unreachable: {type(exc).__name__}: {exc}")

    async def _deliver_batch(self, target: str, batch: Outgoing) -> None:
        try:
            handle = await self.handle(target)
            answers: list[Answer] = await asyncio.wait_for(handle.commands.remote(batch), self.call_timeout_s)
        except RAY_FAILURES as exc:
            self.forget(target)  # looked up again next time (it may have been replaced)
            self.failed_sends += len(batch)
            logger.debug("%d commands to %s: actor unreachable: %s: %s", len(batch), target,
                         type(exc).__name__, exc)
            self._over(target, batch, None)
            return
        except asyncio.CancelledError:
            self._over(target, batch, None)
            raise
        self._over(target, batch, answers)
        for (command, _), (_, error) in zip(batch, answers, strict=True):
            if error is not None and not isinstance(error, Busy):
                self.failed_sends += isinstance(error, Unavailable)
                logger.debug("%s %s to %s: %s", command.TYPE, command.command_id, target, error.message)

    def _over(self, target: str, batch: Outgoing, answers: list[Answer] | None) -> None:
        """The tries of ``batch`` are over: their keys are free again (or held, if busy)."""
        now = time.monotonic()
        for index, (command, _) in enumerate(batch):
            self.inflight.answered(target, command, None if answers is None else answers[index][1], now)

    async def close(self) -> None:
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        self._outbox.clear()
        for task in list(self._inflight):
            task.cancel()
        await asyncio.gather(*self._inflight, return_exceptions=True)
        self._inflight.clear()
        self._handles.clear()


def ensure_ray(address: str | None = None, *, namespace: str, num_cpus: int | None = None) -> bool:
    """Connect to Ray (``address``) or start it locally; True if this call started it."""
    if ray.is_initialized():
        return False
    cluster_errors_to_stderr()
    options: dict[str, Any] = {"namespace": namespace, "logging_level": logging.WARNING,
                               "log_to_driver": False}
    if address is None:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        cores = os.cpu_count() or 2
        options.update(num_cpus=num_cpus or max(4, cores), include_dashboard=False)
        # "local": a new Ray of our own, never a cluster some `ray start` left on this machine.
        with loopback_only():
            ray.init(address="local", **options)
        return True
    if is_loopback(address):
        # A local Ray listens on 127.0.0.1 only, and Ray would rewrite a loopback address into
        # the machine's (where nothing listens) unless the single-node switch is set here too.
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        with loopback_only():
            ray.init(address=address, **options)
        return True
    ray.init(address=address, **options)
    return True


def cluster_errors_to_stderr() -> None:
    """Ray's driver prints the errors the cluster pushes to it (a node marked dead, a worker
    killed for memory) on stdout, even with ``log_to_driver`` off, where a verb's output goes
    (``--json`` read by a script): they are diagnostics, so they go to stderr."""
    from ray._private import worker  # Ray names no public switch for it

    printer = getattr(worker, "print_to_stdstream", None)
    if printer is None or getattr(printer, "to_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        printer({**data, "is_err": True}, ignore_prefix)

    to_stderr.to_stderr = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_stderr


def is_loopback(address: str) -> bool:
    """``127.x.y.z:port``, ``localhost:port`` or ``[::1]:port`` (a ``ray://`` scheme allowed)."""
    host = address.partition("://")[2] if "://" in address else address
    host = host.rpartition(":")[0].strip("[]") if ":" in host else host
    return host in ("localhost", "::1") or host.startswith("127.")


LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch for a single-node Ray: when false its node address is 127.0.0.1, and its GCS,
raylet and worker servers listen on 127.0.0.1 only (otherwise on the machine's address)."""


@contextlib.contextmanager
def loopback_only() -> Iterator[None]:
    """A local Ray started inside is closed to the network: every port on 127.0.0.1. Set for
    the processes Ray starts (they inherit it) and for this driver only while it starts them,
    so a later ``ray.init`` of this process can still join a cluster on the network."""
    from ray._private import ray_constants

    before_env, before_flag = os.environ.get(LOOPBACK_ENV), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[LOOPBACK_ENV] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before_flag
        if before_env is None:
            os.environ.pop(LOOPBACK_ENV, None)
        else:
            os.environ[LOOPBACK_ENV] = before_env


def gcs_address() -> str | None:
    """The address other drivers pass to ``ray.init`` to join this Ray cluster."""
    with contextlib.suppress(Exception):
        return str(ray.get_runtime_context().gcs_address)
    return None


def shutdown_ray() -> None:
    ray.shutdown()
