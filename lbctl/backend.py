"""The seam between ``lbctl`` and a live cluster: the few calls the verbs and ``run`` need.

Two implementations: ``lbctl.inproc_backend.InProcBackend`` (the actor bodies in this process on
a virtual clock: ``--host inproc`` and the fast tests) and ``lbctl.ray_backend.RayBackend`` (the
``actors.api.Cluster`` on Ray). A verb never knows which one it talks to.

How a verb finds its cluster (``--state-dir``, default ``.lbctl`` or ``$LBCTL_STATE_DIR``):
``lbctl run --keep`` writes ``<state-dir>/cluster.json`` (``ClusterSpec``). For Ray it names the
log directory (``<state-dir>/log``, where ``actors.api.Cluster`` writes the Ray address) and the
Ray namespace of the cluster the still-running ``lbctl run`` keeps alive; for ``inproc`` the
event log in ``<state-dir>/log``, from which each verb restarts the recorded cluster in its own
process (every body rebuilds its state from the log), runs, and leaves.

Invariants:
- every cluster call raises the typed ``LoadBalancerError`` of the refusal (``InvalidInput``
  subclasses for bad input, which ``lbctl.main`` turns into one line and exit status 2);
- ``poll`` hands out each record once, in log order (inproc: from the start of the log; Ray:
  from when the backend attached); a verb drains it before its command, so what it then
  waits for was caused after the command;
- ``sleep`` lets ``ms`` of *cluster* time pass (virtual for inproc, real/compressed for Ray);
- ``using`` (tests, embedding) makes every verb of this process use the given backend.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from actors.effects import Receipt
from balancer.config import LoadBalancerConfig
from balancer.errors import MalformedInput, Unavailable
from events.log.port import Record
from projections.ownership import OwnershipProjection

DEFAULT_STATE_DIR = ".lbctl"
STATE_FILE = "cluster.json"
HOSTS = ("ray", "inproc")
FINDING_HELP = (
    "Finding the cluster: `lbctl run --keep [--state-dir DIR]` records it in DIR/cluster.json "
    "(DIR: --state-dir, else $LBCTL_STATE_DIR, else .lbctl). Ray: that `lbctl run` keeps the "
    "cluster alive until Ctrl-C/SIGTERM, and verbs attach to it. inproc: the event log stays "
    "in DIR/log and each verb restarts the cluster from it in its own process (every actor "
    "rebuilds its state from the log; the leader takes a new epoch), one process at a time.")


@runtime_checkable
class Backend(Protocol):
    """A live cluster, as ``lbctl`` uses it (the shape of contracts §3's ``Cluster``)."""

    kind: str
    config: LoadBalancerConfig
    virtual: bool
    """True when the cluster's clock moves only through ``sleep`` (inproc), False on a wall clock."""

    async def create_namespace(self, namespace: str, *, bundles: int | None = None) -> Receipt: ...

    async def lookup(self, topic: str) -> str | None: ...

    async def split_bundle(self, namespace: str, *, bundle: str, algorithm: str,
                           positions: list[int] | None = None, unload: bool = False) -> Receipt: ...

    async def unload(self, namespace: str, *, bundle: str | None = None,
                     destination: str | None = None) -> Receipt: ...

    async def set_anti_affinity_group(self, namespace: str, group: str | None) -> Receipt: ...

    async def set_failure_domain(self, domain: str, brokers: list[str]) -> Receipt: ...

    def ownership(self) -> OwnershipProjection: ...

    def brokers(self) -> Mapping[str, Mapping[str, Any]]:
        """Registered brokers -> their BrokerRegistered payload."""
        ...

    def load_report(self, broker: str) -> Mapping[str, Any] | None:
        """The broker's latest LoadReported payload, if it reported."""
        ...

    def leader(self) -> tuple[str | None, int]:
        """(leader id, epoch) of the newest election in the log."""
        ...

    def now_ms(self) -> int: ...

    def describe(self, spec: ClusterSpec) -> ClusterSpec:
        """``spec`` completed with what another process needs to find this cluster."""
        ...

    def poll(self) -> list[Record]: ...

    async def sleep(self, ms: int) -> None: ...

    async def close(self) -> None: ...


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


def state_dir(value: str | None) -> Path:
    return Path(value or os.environ.get("LBCTL_STATE_DIR") or DEFAULT_STATE_DIR)


def write_spec(directory: Path, spec: ClusterSpec) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / STATE_FILE
    path.write_text(spec.to_json() + "\n", encoding="utf-8")
    return path


def read_spec(directory: Path) -> ClusterSpec:
    path = directory / STATE_FILE
    if not path.is_file():
        raise MalformedInput(
            f"--state-dir {str(directory)!r}: no {STATE_FILE} there; start a cluster with "
            "`lbctl run --keep` (or pass the --state-dir it used)", value=str(directory))
    return ClusterSpec.from_json(path.read_text(encoding="utf-8"), str(path))


def load_config(conf: str | None) -> LoadBalancerConfig:
    """broker.conf at ``conf`` (Pulsar's defaults when None); misspelled keys are refused, keys of
    other broker components ignored and counted on one line of stderr, deprecated ones named."""
    if conf is None:
        return LoadBalancerConfig()
    try:
        text = Path(conf).read_text(encoding="utf-8")
    except OSError as exc:
        raise MalformedInput(f"--conf {conf!r}: cannot read it ({exc.strerror})", value=conf) from None
    config = LoadBalancerConfig.from_broker_conf(text)
    notice = config.notice()
    if notice is not None:
        print(f"lbctl: {conf}: {notice}", file=sys.stderr)
    return config


# -- which backend a verb uses -------------------------------------------------------------

_override: list[Backend] = []


@contextmanager
def using(backend: Backend) -> Iterator[Backend]:
    """Every verb run inside this block talks to ``backend`` (tests, embedding)."""
    _override.append(backend)
    try:
        yield backend
    finally:
        _override.pop()


async def connect(state: str | None, cluster: str | None = None) -> Backend:
    """The backend of the deployment ``--cluster`` names, else of the cluster recorded under
    ``--state-dir`` (or the ``using`` one)."""
    if _override:
        return _override[-1]
    if cluster is not None:
        from lbctl.ray_backend import RayBackend

        return await RayBackend.connect(ClusterSpec(host="ray", deployment=cluster))
    directory = state_dir(state)
    spec = read_spec(directory)
    if spec.host == "inproc":
        from lbctl.inproc_backend import InProcBackend

        return InProcBackend.resume(spec, directory)
    if spec.host == "ray":
        from lbctl.ray_backend import RayBackend

        return await RayBackend.connect(spec)
    raise MalformedInput(f"{directory / STATE_FILE}: host {spec.host!r}; accepted: {', '.join(HOSTS)}",
                         value=spec.host)


@asynccontextmanager
async def session(state: str | None, cluster: str | None = None) -> AsyncIterator[Backend]:
    """``connect``, and close the backend afterwards unless it came from ``using``."""
    backend = await connect(state, cluster)
    try:
        yield backend
    finally:
        if not _override or _override[-1] is not backend:
            await backend.close()


# -- waiting on the log --------------------------------------------------------------------


async def wait_for(backend: Backend, match: Callable[[Record], bool], *, max_ms: int,
                   step_ms: int = 100, what: str = "the cluster") -> Record:
    """The first record (from the next ``poll`` on) that ``match``es; ``match`` sees every record
    once, in order, so it may keep state. Gives up with ``Unavailable`` naming ``what`` after
    ``max_ms``: of cluster time on a virtual clock, of wall time on a real (maybe sped up) one."""
    def clock_ms() -> float:
        return backend.now_ms() if backend.virtual else time.monotonic() * 1000

    deadline = clock_ms() + max_ms
    while True:
        for record in backend.poll():
            if match(record):
                return record
        if clock_ms() >= deadline:
            clock = "cluster time" if backend.virtual else "wall time"
            raise Unavailable(f"{what}: not done after {max_ms / 1000:g} s of {clock} "
                              "(it was accepted; see `lbctl log tail`)")
        await backend.sleep(step_ms)
