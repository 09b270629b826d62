"""A kept cluster: what ``lbctl run --keep`` records so that other processes find the cluster.

``<state-dir>/cluster.json`` (``ClusterSpec``) names the host. For ``pulsar`` (``lbctl attach``)
the log in ``<state-dir>/log`` is a mirror of a real Pulsar cluster, and every process opens it
read-only (``actors.cluster.mirror_link.MirrorLink``: the verbs read it; commands go to Pulsar's admin). For Ray it names the log
directory (``<state-dir>/log``, where ``ray.json`` holds the Ray address) and the Ray namespace
of the cluster the still-running ``lbctl run --keep`` keeps alive; for ``inproc`` the log in
``<state-dir>/log``, which each process folds for its reads and from which a process that sends
a command restarts the recorded cluster (every body rebuilds its state from the log), runs, and
leaves.

Invariants: a spec round-trips through JSON unchanged; a file that is not a spec, or a missing
one, is ``MalformedInput`` naming the path and how to make one; ``write_spec`` replaces the file
atomically (a crash leaves the old one or the new one); an in-process cluster's spec is written
before its first record (``lbctl run --keep``), so a run killed at any moment leaves a cluster
the verbs and ``run`` reopen; the state directory is ``--state-dir``, else ``$LBCTL_STATE_DIR``,
else ``.lbctl``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from random import Random
from typing import Any

from actors.cluster.link import Link
from actors.conf import Settings, load_settings
from actors.workload import Workload
from balancer.errors import InvalidInput, MalformedInput
from events.log._segment import fsync_dir

DEFAULT_STATE_DIR = ".lbctl"
STATE_FILE = "cluster.json"
LOG_SUBDIR = "log"
HOSTS = ("ray", "inproc")
FINDING_HELP = (
    "Finding the cluster: `lbctl run --keep [--state-dir DIR]` records it in DIR/cluster.json "
    "(DIR: --state-dir, else $LBCTL_STATE_DIR, else .lbctl). Ray: that `lbctl run` keeps the "
    "cluster alive until Ctrl-C/SIGTERM, and verbs attach to it. inproc: the event log stays "
    "in DIR/log; a read verb answers from it, and a verb that sends a command restarts the "
    "cluster from it in its own process (every actor rebuilds its state from the log; the "
    "leader takes a new epoch), one process at a time.")


@dataclass
class ClusterSpec:
    """What ``cluster.json`` records: enough to rebuild (inproc) or reach (Ray) the cluster."""

    host: str
    brokers: int = 3
    conf: str | None = None
    seed: int = 0
    namespace: str = "public/default"
    topics: int = 2000
    rate: float = 120_000.0
    speed: float = 60.0
    ray_address: str | None = None
    ray_namespace: str | None = None
    log_dir: str | None = None
    deployment: str | None = None
    """A conf/cluster.yaml: the actors run on its Ray cluster over its Kafka."""
    cluster_id: str | None = None
    """Stamped on every record of the cluster's log; a log of another cluster is refused."""
    web_service_url: str | None = None
    """The admin REST service the keeping process serves (``lbctl run --web-service-port``)."""
    pulsar_url: str | None = None
    """Host ``pulsar``: the web service URL of the real Pulsar cluster ``lbctl attach`` mirrors."""
    pulsar_cluster: str | None = None
    """Host ``pulsar``: that cluster's name."""
    pulsar_manager: str | None = None
    """Host ``pulsar``: its load manager, ``extensible`` or ``modular``."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, where: str) -> ClusterSpec:
        try:
            data = json.loads(text)
            return cls(**data)
        except (json.JSONDecodeError, TypeError) as exc:
            raise MalformedInput(f"{where}: not a cluster file written by `lbctl run --keep` ({exc})",
                                 value=where) from None

    def workload(self) -> Workload:
        """The run's synthetic load: ``topics`` Zipf topics in ``namespace``."""
        return Workload.zipf(Random(self.seed), [self.namespace], topics_per_namespace=self.topics,
                             total_msg_rate=self.rate)


def state_dir(value: str | os.PathLike[str] | None) -> Path:
    return Path(value or os.environ.get("LBCTL_STATE_DIR") or DEFAULT_STATE_DIR)


def write_spec(directory: Path, spec: ClusterSpec) -> Path:
    """Write ``cluster.json`` whole or not at all (a temporary file renamed over it, both
    fsynced): a process killed at any moment leaves the old file or the new one."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / STATE_FILE
    tmp = directory / f".{STATE_FILE}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, (spec.to_json() + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(directory)
    return path


def read_spec(directory: Path) -> ClusterSpec:
    path = directory / STATE_FILE
    if not path.is_file():
        raise MalformedInput(
            f"--state-dir {str(directory)!r}: no {STATE_FILE} there; start a cluster with "
            "`lbctl run --keep` (or pass the --state-dir it used)", value=str(directory))
    return ClusterSpec.from_json(path.read_text(encoding="utf-8"), str(path))


async def open_kept(directory: Path, settings: Settings | None = None) -> Link:
    """The link to the cluster recorded under ``directory``: an in-process one is folded from its
    log here (its bodies restart from it when a command needs them), with ``settings`` when the
    process has read its broker.conf already, else with the settings of the recorded broker.conf
    (read here, once); a Ray one is attached to (by its deployment file or its log directory)."""
    spec = read_spec(state_dir(directory))
    if spec.host == "inproc":
        from actors.cluster.hosts import inproc_host
        from actors.cluster.inproc_link import InProcLink

        loaded = settings if settings is not None else load_settings(spec.conf)

        def build(start_ms: int | None) -> Any:
            return inproc_host(spec.brokers, loaded.balancer, seed=spec.seed, settings=loaded.actors,
                               workload=spec.workload(), clients=True, start_ms=start_ms)

        return InProcLink.resume(build, state_dir(directory) / LOG_SUBDIR, spec.cluster_id)
    if spec.host == "ray":
        from actors.cluster.ray_link import RayLink

        if spec.deployment is None and spec.log_dir is None:
            raise InvalidInput("the cluster file names no log directory; was it written by "
                               "`lbctl run --host ray --keep`?", value=spec.host)
        return await RayLink.connect(spec.deployment, log_dir=spec.log_dir)
    if spec.host == "pulsar":
        from actors.cluster.mirror_link import MirrorLink

        return await MirrorLink.open(state_dir(directory) / LOG_SUBDIR, spec.pulsar_url)
    raise InvalidInput(f"{directory}: host {spec.host!r}; accepted: {', '.join((*HOSTS, 'pulsar'))}",
                       value=spec.host)
