"""The one body builder: ``BodySpec`` names a body (its kind, shard or broker, settings) and
``build`` makes it, for every host (Ray actors, the in-process host, the simulator).

Invariants: a spec is frozen and picklable (it is shipped to Ray actors) and holds no secret;
every host builds a kind of body with the same arguments from the same settings (a namespace
shard keeps ``settings.outcomes_kept`` command outcomes on every host); only the leader's
tie-break randomness differs by host, passed in as ``rng`` (a seeded one on a virtual clock).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from random import Random
from typing import Literal

from actors.body import Body
from actors.broker import BrokerBody
from actors.leader import LeaderBody
from actors.namespace import NamespaceBody
from actors.settings import LEADER, ActorSettings, broker_body_name, namespace_body_name
from actors.workload import Capacity, ClientsBody, Workload
from balancer.config import LoadBalancerConfig
from events.authority import identity_name, shard_instance

BodyKind = Literal["namespace", "leader", "broker", "clients"]


@dataclass(frozen=True, slots=True)
class BodySpec:
    """Everything needed to build one body, in any process (picklable)."""

    kind: BodyKind
    config: LoadBalancerConfig
    settings: ActorSettings = field(default_factory=ActorSettings)
    broker_id: str | None = None
    failure_domain: str | None = None
    capacity: Capacity | None = None
    workload: Workload | None = None
    shard: int = 0
    seed: int = 0

    @property
    def name(self) -> str:
        if self.kind == "namespace":
            return namespace_body_name(self.shard)
        if self.kind == "broker":
            assert self.broker_id is not None
            return broker_body_name(self.broker_id)
        return LEADER if self.kind == "leader" else "clients"

    @property
    def identity(self) -> str | None:
        """The identity this body signs its appends as (None: it writes nothing)."""
        if self.kind == "namespace":
            return identity_name("namespace", shard_instance(self.shard, self.settings.namespace_shards))
        if self.kind == "broker":
            return identity_name("broker", self.broker_id)
        return identity_name("leader", LEADER) if self.kind == "leader" else None

    @property
    def transactional(self) -> bool:
        """Whether this body writes through a transactional id (Kafka): every writer of
        ownership keys (the leader, namespace shards, brokers), its id its role, so Kafka itself
        fences a zombie incarnation (a paused process, a body Ray restarted elsewhere) and the
        host then sends nothing more (``_apply``). The client view writes nothing. Costs: an
        append takes a commit, and a body killed mid-transaction holds read_committed readers
        of its partition until its next incarnation starts (which aborts it) or the
        transaction times out."""
        return self.kind in ("leader", "namespace", "broker")

    def build(self, rng: Random | None = None) -> Body:
        """A fresh body (a restart builds a new one: nothing survives but the log); ``rng``: the
        leader's tie-breaks (None: each incarnation draws its own)."""
        config, settings = self.config, self.settings
        workload = self.workload or Workload([])
        if self.kind == "namespace":
            return NamespaceBody(config, shard=self.shard, shards=settings.namespace_shards,
                                 outcomes_kept=settings.outcomes_kept)
        if self.kind == "leader":
            rng = rng or Random(f"{self.seed}:{LEADER}:{os.getpid()}:{time.time_ns()}")
            return LeaderBody(config, rng=rng, settings=settings)
        if self.kind == "broker":
            assert self.broker_id is not None
            return BrokerBody(self.broker_id, config, workload, settings=settings,
                              capacity=self.capacity, failure_domain=self.failure_domain)
        return ClientsBody(config, workload, settings)
