"""``InProcBackend``: the ``Backend`` seam over ``actors.runtime.InProcessHost`` (``--host inproc``).

The whole cluster (namespace shard, leader, brokers, the workload's clients) runs in this
process on the host's virtual clock; ``sleep`` advances that clock, so a simulated hour costs
seconds of CPU. Kept clusters live in an event-log directory: ``start(..., log_dir=)`` writes the
log there from the first event, ``resume`` restarts every body from it (a restarted body rebuilds
its state from the log, never from memory: the leader campaigns for a new epoch).

Invariants:
- the log is swapped for a ``LocalEventLog`` before anything has run (an empty log) or before
  any body has reacted (resume: the history is folded, then every body is restarted from it);
  its calls, like the memory log's, complete without waiting, which is all the host needs;
- a command to a namespace shard is delivered at once, before any timer due now fires: a
  refused command appends its ``CommandRejected`` and nothing else; a command for the leader
  (a failure domain) first waits for a leader, which a resumed cluster must elect;
- command ids are random (``lbctl-<hex>``): resumed processes never reuse one, so the
  idempotency of the bodies never answers a new command with an old outcome;
- one process at a time uses a kept log directory (an exclusive ``flock``); a second one gets
  ``Unavailable`` naming the directory.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from random import Random
from typing import Any

from actors.effects import Receipt
from actors.precheck import check_input
from actors.runtime import InProcessHost, Ticket, build_cluster, run_sync
from actors.settings import LEADER, route
from actors.workload import Workload
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidBundle, MalformedInput, Unavailable
from events.catalog import (
    Command,
    CreateNamespace,
    SetFailureDomain,
    SetNamespacePolicy,
    SplitBundle,
    UnloadBundle,
    UnloadNamespace,
    namespace_of,
)
from events.envelope import Stamper
from events.log.local import LocalEventLog
from events.log.port import Record
from events.report_parts import is_continuation
from lbctl.backend import ClusterSpec, load_config
from projections.ownership import OwnershipProjection

LOG_SUBDIR = "log"
LEADER_WAIT_MS = 30_000


def make_workload(spec: ClusterSpec) -> Workload:
    """The run's synthetic load: ``spec.topics`` Zipf topics in ``spec.namespace``."""
    return Workload.zipf(Random(spec.seed), [spec.namespace], topics_per_namespace=spec.topics,
                         total_msg_rate=spec.rate)


def build_host(spec: ClusterSpec, config: LoadBalancerConfig | None = None,
               start_ms: int | None = None) -> InProcessHost:
    options: dict[str, Any] = {} if start_ms is None else {"start_ms": start_ms}
    return build_cluster(spec.brokers, config=config or load_config(spec.conf), seed=spec.seed,
                         workload=make_workload(spec), clients=True, **options)


class InProcBackend:
    """A cluster in this process, driven on a virtual clock."""

    kind = "inproc"
    virtual = True

    def __init__(self, host: InProcessHost, *, lock_fd: int | None = None) -> None:
        self.host = host
        self.config = host.config
        self._cursor = 0
        self._lock_fd = lock_fd

    # -- construction --------------------------------------------------------------------
    @classmethod
    def start(cls, spec: ClusterSpec, *, config: LoadBalancerConfig | None = None,
              log_dir: Path | None = None) -> InProcBackend:
        """A fresh cluster; with ``log_dir`` its log is kept there (it must hold no log yet)."""
        host = build_host(spec, config)
        if log_dir is None:
            return cls(host)
        lock = _lock(log_dir)
        if _history(log_dir / LOG_SUBDIR):
            os.close(lock)
            raise MalformedInput(f"--state-dir {str(log_dir)!r} already holds a cluster log; "
                                 "remove it or choose another --state-dir", value=str(log_dir))
        _attach(host, log_dir / LOG_SUBDIR)
        return cls(host, lock_fd=lock)

    @classmethod
    def resume(cls, spec: ClusterSpec, directory: Path) -> InProcBackend:
        """Restart the cluster recorded in ``directory`` from its log."""
        lock = _lock(directory)
        history = _history(directory / LOG_SUBDIR)
        start_ms = max((r.envelope.ts_ms for r in history), default=0) + 1 if history else None
        host = build_host(spec, start_ms=start_ms)
        _attach(host, directory / LOG_SUBDIR)
        # The restarted leader takes a new epoch: commands are made after its election.
        host.run_until(lambda: _elected(host), LEADER_WAIT_MS)
        return cls(host, lock_fd=lock)

    # -- commands ------------------------------------------------------------------------
    def _id(self) -> str:
        return f"lbctl-{uuid.uuid4().hex[:16]}"

    def send(self, command: Command) -> Receipt:
        """Deliver ``command`` now; its receipt, or the typed error it was refused with."""
        check_input(self.host.client, command, self.host.now_ms)  # bad input appends nothing
        target = route(command, self.host.settings.namespace_shards)
        if target == LEADER:
            if not self.host.run_until(lambda: self.host.leader() is not None, LEADER_WAIT_MS):
                raise Unavailable(f"{command.TYPE}: no leader elected within {LEADER_WAIT_MS} ms")
            reply = self.host.call(command)
        else:
            ticket = Ticket(command, target)
            self.host.deliver(ticket)
            reply = ticket.result()
        if not isinstance(reply, Receipt):
            raise Unavailable(f"{command.TYPE}: unexpected reply {reply!r}")
        return reply

    async def create_namespace(self, namespace: str, *, bundles: int | None = None) -> Receipt:
        return self.send(CreateNamespace(command_id=self._id(), epoch=self.host.epoch,
                                         namespace=namespace, bundles=bundles))

    async def lookup(self, topic: str) -> str | None:
        return self.host.lookup(topic)

    async def split_bundle(self, namespace: str, *, bundle: str, algorithm: str,
                           positions: list[int] | None = None, unload: bool = False) -> Receipt:
        return self.send(SplitBundle(command_id=self._id(), epoch=self.host.epoch, namespace=namespace,
                                     bundle=bundle, algorithm=algorithm, positions=positions,
                                     unload=unload))

    async def unload(self, namespace: str, *, bundle: str | None = None,
                     destination: str | None = None) -> Receipt:
        if bundle is None:
            return self.send(UnloadNamespace(command_id=self._id(), epoch=self.host.epoch,
                                             namespace=namespace))
        full = bundle if "/" in bundle else f"{namespace}/{bundle}"
        if namespace_of(full) != namespace:
            raise InvalidBundle(f"{bundle} is not a bundle of {namespace}", value=bundle)
        return self.send(UnloadBundle(command_id=self._id(), epoch=self.host.epoch, bundle=full,
                                      dst=destination))

    async def set_anti_affinity_group(self, namespace: str, group: str | None) -> Receipt:
        info = self.host.view.namespaces.get(namespace)
        isolation = info.isolation if info is not None else None  # kept: only the group changes
        return self.send(SetNamespacePolicy(command_id=self._id(), epoch=self.host.epoch,
                                            namespace=namespace, anti_affinity_group=group,
                                            isolation=isolation))

    async def set_failure_domain(self, domain: str, brokers: list[str]) -> Receipt:
        return self.send(SetFailureDomain(command_id=self._id(), epoch=self.host.epoch,
                                          domain=domain, brokers=list(brokers)))

    # -- views ---------------------------------------------------------------------------
    def ownership(self) -> OwnershipProjection:
        return self.host.view

    def brokers(self) -> Mapping[str, Mapping[str, Any]]:
        return self.host.client.brokers

    def load_report(self, broker: str) -> Mapping[str, Any] | None:
        for record in reversed(self.host.records):
            if (record.envelope.type == "LoadReported" and record.envelope.key == broker
                    and not is_continuation(record.envelope.payload["broker_load"])):
                payload: Mapping[str, Any] = record.envelope.payload
                return payload
        return None

    def leader(self) -> tuple[str | None, int]:
        return self.host.client.leader_id, self.host.client.epoch

    def now_ms(self) -> int:
        return self.host.now_ms

    def describe(self, spec: ClusterSpec) -> ClusterSpec:
        return spec  # the log directory next to cluster.json is all a verb needs

    def poll(self) -> list[Record]:
        fresh = self.host.records[self._cursor:]
        self._cursor = len(self.host.records)
        return fresh

    async def sleep(self, ms: int) -> None:
        self.host.advance(ms)

    async def close(self) -> None:
        run_sync(self.host.log.close())
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None


def _lock(directory: Path) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / "lbctl.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Unavailable(f"the cluster in {str(directory)!r} is in use by another lbctl process; "
                          "wait for it to finish") from None
    return fd


def _history(log_dir: Path) -> list[Record]:
    if not log_dir.is_dir():
        return []
    log = LocalEventLog(log_dir, fsync=False)
    try:
        return run_sync(log.read()).records
    finally:
        run_sync(log.close())


def _attach(host: InProcessHost, log_dir: Path) -> None:
    """Swap the host's memory log for the one in ``log_dir`` and restart every body from it."""
    log = LocalEventLog(log_dir, fsync=False, stamper=Stamper(clock_ms=lambda: host.now_ms))
    history = run_sync(log.read()).records
    host.log = log  # type: ignore[assignment]  # same StoreLog API; nothing has run yet
    for record in history:
        host.records.append(record)
        host.client.fold(record)
    if history:
        for name in sorted(host.bodies):
            host.restart(name)


def _elected(host: InProcessHost) -> bool:
    """A leader leads and the client's view knows its epoch."""
    leader = host.leader()
    return leader is not None and host.epoch >= int(getattr(leader, "my_epoch", 0))
