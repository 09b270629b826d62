"""``RayBackend``: the ``Backend`` seam over ``actors.api.Cluster`` (``--host ray``, the default).

``start`` launches a local Ray, the embedded log and one actor per body (``Cluster.start`` with
the run's workload, its clients and the time-compression factor); ``connect`` attaches to the
cluster a still-running ``lbctl run --keep`` recorded (by its log directory, whose
``cluster.json`` names the Ray address and namespace).

Invariants:
- every verb is the ``Cluster``'s own (one command, a fresh id, the newest epoch; typed errors
  raised as they come), called with ``wait=False``: ``lbctl`` waits for completion on the log
  like with every backend (``lbctl.backend.wait_for``);
- ``poll`` drains a listener queue registered on the client's view when the backend is made:
  every record the view folds from then on, once, in fold order;
- ``sleep(ms)`` waits the wall time ``ms`` of cluster time takes (``ms / speed``, at least 5 ms);
- Ray runs on the wall clock: ``--speed 0`` (as fast as possible) is refused as bad input.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from actors.api import Cluster
from actors.effects import Receipt
from balancer.config import LoadBalancerConfig
from balancer.errors import MalformedInput
from events.log.port import Record
from lbctl.backend import ClusterSpec
from lbctl.inproc_backend import LOG_SUBDIR, lock_directory, make_workload
from projections.ownership import OwnershipProjection

MIN_SLEEP_S = 0.005


class RayBackend:
    """A cluster of Ray actors, through the ``Cluster`` API."""

    kind = "ray"
    virtual = False

    def __init__(self, cluster: Cluster, *, log_dir: str | None = None, lock_fd: int | None = None) -> None:
        self.cluster = cluster
        self._lock_fd = lock_fd  # the kept log directory's flock, as the inproc host takes it
        self.config: LoadBalancerConfig = cluster.config
        self.log_dir = log_dir
        self._queue: asyncio.Queue[Record] = cluster.view.listen()

    @classmethod
    async def start(cls, spec: ClusterSpec, *, config: LoadBalancerConfig,
                    keep_in: Path | None = None) -> RayBackend:
        if spec.speed <= 0:
            raise MalformedInput(f"--speed {spec.speed:g}: Ray runs on the wall clock; give a "
                                 "factor above 0, or use --host inproc for 'as fast as possible'",
                                 value=spec.speed)
        options: dict[str, Any] = {"workload": make_workload(spec), "clients": True,
                                   "speed": spec.speed, "seed": spec.seed}
        if spec.deployment is not None:  # its Kafka and its Ray cluster
            cluster = await Cluster.deploy(spec.deployment, spec.brokers, conf=config, **options)
            return cls(cluster)
        log_dir = str((keep_in / LOG_SUBDIR).resolve()) if keep_in is not None else None
        # One cluster per log: a second `lbctl run --keep` on this directory is refused by name.
        lock = lock_directory(Path(log_dir)) if log_dir is not None else None
        try:
            cluster = await Cluster.start(config, spec.brokers, log_dir=log_dir, **options)
        except BaseException:
            if lock is not None:
                os.close(lock)
            raise
        return cls(cluster, log_dir=cluster.host.log.directory, lock_fd=lock)

    @classmethod
    async def connect(cls, spec: ClusterSpec) -> RayBackend:
        if spec.deployment is not None:
            return cls(await Cluster.connect(conf=spec.deployment))
        if spec.log_dir is None:
            raise MalformedInput("the cluster file names no log directory; was it written by "
                                 "`lbctl run --host ray --keep`?", value=spec.host)
        return cls(await Cluster.connect(log_dir=spec.log_dir), log_dir=spec.log_dir)

    def describe(self, spec: ClusterSpec) -> ClusterSpec:
        """``spec`` completed with what another process needs to attach."""
        return dataclasses.replace(spec, log_dir=self.log_dir, ray_namespace=self.cluster.ray_namespace)

    # -- verbs ---------------------------------------------------------------------------
    async def create_namespace(self, namespace: str, *, bundles: int | None = None) -> Receipt:
        return await self.cluster.create_namespace(namespace, bundles)

    async def lookup(self, topic: str) -> str | None:
        return await self.cluster.lookup(topic)

    async def split_bundle(self, namespace: str, *, bundle: str, algorithm: str,
                           positions: list[int] | None = None, unload: bool = False) -> Receipt:
        return await self.cluster.split_bundle(namespace, bundle, algorithm, positions, unload, wait=False)

    async def unload(self, namespace: str, *, bundle: str | None = None,
                     destination: str | None = None) -> Receipt:
        return await self.cluster.unload(namespace, bundle, destination, wait=False)

    async def set_anti_affinity_group(self, namespace: str, group: str | None) -> Receipt:
        return await self.cluster.set_anti_affinity_group(namespace, group)

    async def set_failure_domain(self, domain: str, brokers: list[str]) -> Receipt:
        return await self.cluster.set_failure_domain(domain, brokers)

    # -- views ---------------------------------------------------------------------------
    def ownership(self) -> OwnershipProjection:
        return self.cluster.ownership()

    def brokers(self) -> Mapping[str, Mapping[str, Any]]:
        return self.cluster.view.brokers

    def load_report(self, broker: str) -> Mapping[str, Any] | None:
        found = self.cluster.view.reports.get(broker)
        return None if found is None else found[1]

    def leader(self) -> tuple[str | None, int]:
        status = self.cluster.leader()
        return status.leader_id, status.epoch

    def now_ms(self) -> int:
        return self.cluster.now_ms()

    def poll(self) -> list[Record]:
        out: list[Record] = []
        while not self._queue.empty():
            out.append(self._queue.get_nowait())
        return out

    async def sleep(self, ms: int) -> None:
        # At least a few wall milliseconds: waiting loops must not spin at high compression.
        await asyncio.sleep(max(MIN_SLEEP_S, self.cluster.host.clock.wall_s(ms)))

    async def close(self) -> None:
        self.cluster.view.unlisten(self._queue)
        await self.cluster.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None
