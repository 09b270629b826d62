"""Building an in-process cluster: the namespace shards, one leader, the brokers and the clients
on an ``InProcessHost`` (``build_cluster``), each made by the one body builder (``BodySpec``, as
Ray's actors make theirs), and waiting until it is ready (``wait_ready``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actors.body import Body
from actors.runtime.bodies import BodyKind, BodySpec
from actors.runtime.inproc import InProcessHost
from actors.settings import LEADER, ActorSettings
from actors.workload import Capacity, Workload
from balancer.config import LoadBalancerConfig


def build_cluster(brokers: int | Sequence[str] = 3, *, config: LoadBalancerConfig | None = None,
                  seed: int = 0, settings: ActorSettings | None = None, workload: Workload | None = None,
                  clients: bool = False, domains: Mapping[str, str] | None = None,
                  capacity: Capacity | None = None, **host_options: Any) -> InProcessHost:
    """A host with the namespace shards, one leader, the brokers and (optionally) the clients.

    ``brokers`` is a count (ids ``broker-1``...) or the ids; ``domains`` maps broker -> failure
    domain given at registration. Nothing runs until time advances (``wait_ready``).
    """
    config = config or LoadBalancerConfig()
    settings = settings or ActorSettings()
    host = InProcessHost(config, seed=seed, settings=settings, **host_options)
    load = workload or Workload([])

    def spec(kind: BodyKind, **fields: Any) -> BodySpec:
        return BodySpec(kind, config, settings, workload=load, seed=seed, **fields)

    for shard in range(settings.namespace_shards):
        host.add(spec("namespace", shard=shard).build)
    leader = spec("leader")
    host.add(lambda: leader.build(rng=host.rng_for(LEADER)))  # seeded per incarnation
    ids = [f"broker-{i}" for i in range(1, brokers + 1)] if isinstance(brokers, int) else list(brokers)

    def new_broker(broker_id: str, domain: str | None, own: Capacity | None) -> Body:
        return spec("broker", broker_id=broker_id, failure_domain=domain, capacity=own or capacity).build()

    host.new_broker = new_broker
    for broker_id in ids:
        host.add_broker(broker_id, (domains or {}).get(broker_id))
    if clients:
        host.add(spec("clients").build)
    return host


def wait_ready(host: InProcessHost, brokers: int, *, max_ms: int = 30_000) -> bool:
    """Run until a leader is elected and ``brokers`` brokers are registered."""
    return host.run_until(lambda: host.leader() is not None and len(host.client.brokers) >= brokers, max_ms)
