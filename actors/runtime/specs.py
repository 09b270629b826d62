"""What a live cluster is built from: its clock and its log (each body: ``actors.runtime.bodies``).

``LogSpec`` opens the cluster's log (an embedded directory or Kafka) with the cluster's id
stamped on every append; ``Clock`` is the cluster's time. Hosts (``actors.runtime.realtime``,
Ray) only run what these and ``BodySpec`` make.

Invariants: every spec is frozen and picklable (it is shipped to Ray actors) and holds where
secrets are, never a secret.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from actors.retention import SNAPSHOT_DIR, RetainingSnapshots
from actors.snapshots import (
    DirectorySnapshots,
)
from balancer.errors import (
    ForeignCluster,
    InvalidInput,
)
from events.envelope import Stamper, new_cluster_id
from events.log.kafka import KafkaEventLog
from events.log.kafka_client import KafkaSecurity
from events.log.local import LocalEventLog
from events.log.port import EventLog, cluster_of
from events.signing import load_identity


def default_snapshot_root() -> str:
    """Where a Kafka-hosted body keeps its snapshots unless told: per user, on the node it runs
    on (``$XDG_STATE_HOME/bundle-balancer``, else ``~/.local/state/bundle-balancer``)."""
    state_home = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state_home, "bundle-balancer")


class ClockReading(Protocol):
    """What a host reads of the cluster's time: ``Clock``, or a cluster's shared paced clock
    (``actors.runtime.paced``)."""

    def now_ms(self) -> int: ...

    def wall_s(self, virtual_ms: float) -> float: ...


@dataclass(frozen=True, slots=True)
class Clock:
    """The cluster's time: ``origin_ms`` + (wall - origin) x ``speed`` (1.0 = real time)."""

    origin_ms: int
    speed: float = 1.0

    @classmethod
    def starting_now(cls, speed: float = 1.0) -> Clock:
        if speed <= 0:
            raise InvalidInput(f"time compression factor {speed} must be > 0", value=speed)
        return cls(int(time.time() * 1000), speed)

    def now_ms(self) -> int:
        wall = time.time() * 1000
        return int(self.origin_ms + (wall - self.origin_ms) * self.speed)

    def wall_s(self, virtual_ms: float) -> float:
        """How long ``virtual_ms`` of cluster time takes on the wall clock, in seconds."""
        return virtual_ms / 1000.0 / self.speed


@dataclass(frozen=True, slots=True)
class LogSpec:
    """Where the cluster's log lives: an embedded directory or a Kafka cluster."""

    directory: str | None = None
    bootstrap: str | None = None
    cluster: str = "lb"
    """Kafka topic prefix (``{cluster}-events``)."""
    partitions: int = 3
    transactional: bool = True
    """Kafka: the leader writes through a transactional id, so a restarted leader fences the
    producer of its zombie (``BodySpec.transactional``); every other body writes idempotently."""
    fsync: bool = True
    replication_factor: int | None = None
    """Kafka: of the topic it creates (None: min(3, Kafka brokers))."""
    retention_ms: int | None = None
    """Kafka: of the topic it creates (None: forever)."""
    security: KafkaSecurity | None = None
    """Kafka: TLS/SASL settings; ``open(role=...)`` uses that role's credentials. Holds where
    the passwords are (a variable's name, a file), never a password: it is shipped to Ray."""
    cluster_id: str | None = None
    """Stamped on every envelope; a log founded by another cluster is refused (``ForeignCluster``)."""
    segment_bytes: int = 64 * 1024 * 1024
    """Embedded log: a segment is sealed past this size (retention drops whole sealed ones)."""
    snapshot_dir: str | None = None
    """Kafka: the root under which the bodies keep their snapshots on the disk of the node each
    runs on, in ``<root>/<cluster>-<cluster id>/`` (None: ``default_snapshot_root()``, resolved
    on that node). A cache, like a Kafka Streams state directory: a body that finds none folds
    the whole topic."""
    signing_dir: str | None = None
    """The keyring directory (``events.signing``): each writer's identity file, from which the
    body that opens the log with ``identity=`` signs its appends (None: appends are not
    signed). It names where the keys are, never a key; on several nodes it must be on each."""

    def __post_init__(self) -> None:
        if (self.directory is None) == (self.bootstrap is None):
            raise InvalidInput("a log is either a directory or Kafka bootstrap servers, not "
                               f"{'both' if self.directory else 'neither'}")
        if self.snapshot_dir is not None and (self.directory is not None or not self.snapshot_dir.strip()):
            raise InvalidInput(f"snapshot_dir {self.snapshot_dir!r}: a directory for the snapshots of a "
                               "Kafka log (an embedded log keeps them in its own directory)",
                               value=self.snapshot_dir)

    @property
    def kind(self) -> str:
        return "local" if self.directory is not None else "kafka"

    def open(self, clock: ClockReading, *, writer: str | None = None, role: str | None = None,
             identity: str | None = None) -> EventLog:
        """A handle on the log; ``writer`` names a transactional writer (Kafka), ``role`` the
        kind of actor whose Kafka credentials it uses (None: the process's own), ``identity``
        the signing identity its appends are signed as (with ``signing_dir``)."""
        signer = (load_identity(Path(self.signing_dir), identity)
                  if self.signing_dir is not None and identity is not None else None)
        stamper = Stamper(clock_ms=clock.now_ms, cluster_id=self.cluster_id, signer=signer)
        if self.directory is not None:
            return LocalEventLog(self.directory, fsync=self.fsync, stamper=stamper,
                                 segment_bytes=self.segment_bytes)
        assert self.bootstrap is not None
        writer_id = writer.replace(":", "-") if writer and self.transactional else None
        return KafkaEventLog(self.bootstrap, cluster=self.cluster, partitions=self.partitions,
                             replication_factor=self.replication_factor,
                             retention_ms=self.retention_ms, writer_id=writer_id, stamper=stamper,
                             security=self.security.for_role(role) if self.security else None)

    async def resolve_cluster(self, clock: Clock) -> LogSpec:
        """This spec with its cluster id: the given one, else the log's own (a cluster that
        resumes on it), else a new one (a new cluster founds the log)."""
        log = dataclasses.replace(self, cluster_id=None).open(clock)
        try:
            await log.start()
            founding = await cluster_of(log)
        finally:
            await log.close()
        if self.cluster_id is not None and founding not in (None, self.cluster_id):
            raise ForeignCluster(f"{self.describe()} belongs to cluster {founding!r}, not to cluster "
                                 f"{self.cluster_id!r}: refusing to use it", value=founding)
        return dataclasses.replace(self, cluster_id=self.cluster_id or founding or new_cluster_id())

    def snapshots(self, *, retain: bool = False) -> DirectorySnapshots | None:
        """Where the readers of this log keep their snapshots: ``snapshots/`` of an embedded
        log's directory (``retain``: each snapshot written then drops what no reader needs,
        ``actors.retention``); for Kafka (a body's view outgrows a Kafka record) the node-local
        ``snapshot_folder()``, its snapshots scoped to the topic and the cluster id. None for a
        Kafka log whose cluster id is not resolved yet (a snapshot must name its cluster)."""
        if self.directory is not None:
            if retain:
                return RetainingSnapshots(self.directory)
            return DirectorySnapshots(os.path.join(self.directory, SNAPSHOT_DIR))
        folder = self.snapshot_folder()
        if folder is None:
            return None
        return DirectorySnapshots(folder, scope=f"Kafka topic {self.cluster}-events of cluster {self.cluster_id}")

    def snapshot_folder(self) -> str | None:
        """Kafka: ``<snapshot_dir>/<cluster>-<cluster id>`` on this node (None: no cluster id)."""
        if self.directory is not None or self.cluster_id is None:
            return None
        root = os.path.expanduser(self.snapshot_dir) if self.snapshot_dir else default_snapshot_root()
        return os.path.join(root, f"{self.cluster}-{self.cluster_id}")

    def describe(self) -> str:
        if self.directory is not None:
            return f"embedded log {self.directory}"
        return f"Kafka {self.bootstrap} topic {self.cluster}-events"
