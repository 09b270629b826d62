"""The in-process clusters a client drives: the host one runs on, new or kept (``inproc_host``,
which ``open_kept`` resumes with too), and a new one's link (``start_inproc``).

Invariant: every in-process cluster a client drives runs on one shared fold of the log, under
the process's collector schedule (``HeapSettler``), its bodies made by ``build_cluster`` (the one
body builder).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from actors.cluster.inproc_link import InProcLink
from actors.cluster.link import Link
from actors.cluster.options import broker_ids
from actors.runtime import InProcessHost, build_cluster
from actors.runtime.heap import HeapSettler
from actors.settings import ActorSettings
from actors.workload import Capacity, Workload
from balancer.config import LoadBalancerConfig
from events.signing import Root


def inproc_host(brokers: int | Sequence[str], config: LoadBalancerConfig, *, seed: int,
                settings: ActorSettings | None = None, workload: Workload | None = None,
                clients: bool = False, domains: Mapping[str, str] | None = None,
                capacity: Capacity | None = None, start_ms: int | None = None,
                root: Root | None = None) -> InProcessHost:
    """The host of an in-process cluster (nothing runs until time advances)."""
    options: dict[str, Any] = {} if start_ms is None else {"start_ms": start_ms}
    return build_cluster(brokers, config=config, seed=seed, settings=settings, workload=workload,
                         clients=clients, domains=domains, capacity=capacity, shared_fold=True,
                         heap=HeapSettler(), root=root, **options)


def start_inproc(config: LoadBalancerConfig, settings: ActorSettings, brokers: int | Sequence[str],
                 workload: Workload | None, clients: bool, domains: Mapping[str, str] | None,
                 capacity: Capacity | None, seed: int, log_dir: str | os.PathLike[str] | None) -> Link:
    """A new in-process cluster's link, its log kept in ``log_dir`` when given; its writers sign
    with a fresh random root (a seed's root is for simulations only)."""
    made = inproc_host(list(broker_ids(brokers)), config, seed=seed, settings=settings,
                       workload=workload, clients=clients, domains=domains, capacity=capacity,
                       root=Root())
    return InProcLink.start(made, keep_in=Path(log_dir) if log_dir is not None else None)
