"""Logs written as the mirror of a real Pulsar cluster writes them (the project's own events,
Pulsar's own moves with reason ``pulsar``), on an in-memory log with a clock the test sets."""

from __future__ import annotations

from typing import Any

from balancer.bundles import NamespaceBundles
from events.catalog import (
    LEADER_KEY,
    BrokerRegistered,
    BundleAssigned,
    BundleOwned,
    LeaderElected,
    LoadReported,
    Message,
    NamespaceCreated,
    SplitCompleted,
    SplitRequested,
    TransferPrepared,
)
from events.envelope import Stamper, counting_ids
from events.log.memory import MemoryEventLog, MemoryStore

MB = 1024 * 1024
EXTENSIBLE = ("loadManagerClassName=ExtensibleLoadManagerImpl\n"
              "loadBalancerLoadSheddingStrategy=TransferShedder\n"
              "loadBalancerCPUResourceWeight=0\nloadBalancerMemoryResourceWeight=0\n"
              "loadBalancerDirectMemoryResourceWeight=0\n"
              "loadBalancerSheddingConditionHitCountThreshold=0\n"
              "attachDecisionIntervalSeconds=60\n")


class Clock:
    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> int:
        self.now_ms += ms
        return self.now_ms


class Mirrored:
    """A log and the writes of a mirror: brokers, a namespace, reports and Pulsar's moves."""

    def __init__(self, store: MemoryStore | None = None, clock: Clock | None = None) -> None:
        self.store = store or MemoryStore()
        self.clock = clock or Clock()
        self.log = MemoryEventLog(store=self.store, stamper=Stamper(self.clock, counting_ids()))
        self.message = 0

    def reopen(self) -> MemoryEventLog:
        """The same log, opened again (a restarted attach)."""
        self.log = MemoryEventLog(store=self.store, stamper=Stamper(self.clock, counting_ids("00000000-0000-4000-9000-")))
        return self.log

    async def put(self, key: str, *events: Message, epoch: int = 1) -> None:
        self.message += 1
        await self.log.append(key, list(events), epoch=epoch,
                              causation_id=f"pulsar:loadbalancer-service-unit-state@{self.message}:0:-1")

    async def cluster(self, brokers: list[str], namespace: str = "public/default", bundles: int = 4,
                      owners: dict[int, str] | None = None) -> list[str]:
        """Leader, brokers, a namespace of ``bundles`` Owned round-robin (or as ``owners``)."""
        await self.put(LEADER_KEY, LeaderElected(leader_id=brokers[0], epoch=1))
        for broker in brokers:
            await self.put(broker, BrokerRegistered(broker_id=broker, url=f"http://{broker}"))
        layout = NamespaceBundles.initial(namespace, bundles)
        await self.put(namespace, NamespaceCreated(namespace=namespace, boundaries=list(layout.boundaries())))
        names = [f"{namespace}/{r.name}" for r in layout]
        for i, bundle in enumerate(names):
            await self.own(bundle, (owners or {}).get(i, brokers[i % len(brokers)]))
        return names

    async def own(self, bundle: str, broker: str) -> None:
        namespace = bundle.rpartition("/")[0]
        await self.put(namespace, BundleAssigned(bundle=bundle, dst=broker, reason="lookup"))
        await self.put(namespace, BundleOwned(bundle=bundle, owner=broker))

    async def report(self, broker: str, bundles: dict[str, float], *, limit_mb: float = 100.0,
                     pulsar: dict[str, float] | None = None) -> None:
        """A load report: each bundle's inbound throughput in MB/s, the broker's bandwidth
        (``pulsar``: the extensible manager's own figures, as the mirror keeps them)."""
        total = sum(bundles.values())
        load: dict[str, Any] = {
            "cpu": {"usage": 0.0, "limit": 100.0}, "memory": {"usage": 0.0, "limit": 100.0},
            "direct_memory": {"usage": 0.0, "limit": 100.0},
            "bandwidth_in": {"usage": total * 1024, "limit": limit_mb * 1024},
            "bandwidth_out": {"usage": 0.0, "limit": limit_mb * 1024},
            "msg_rate_in": total * 100, "msg_rate_out": 0.0,
            "msg_throughput_in": total * MB, "msg_throughput_out": 0.0,
            "topics": 4 * len(bundles), "bundles": len(bundles), "producers": 1, "consumers": 0}
        if pulsar is not None:
            load["pulsar"] = dict(pulsar)
        stats = [{"bundle": b, "msg_rate_in": v * 100, "msg_rate_out": 0.0, "msg_throughput_in": v * MB,
                  "msg_throughput_out": 0.0, "topics": 4, "producers": 1, "consumers": 0}
                 for b, v in sorted(bundles.items())]
        await self.log.append(broker, [LoadReported(broker_id=broker, broker_load=load, bundles=stats)],
                              epoch=1)

    async def pulsar_transfer(self, bundle: str, src: str, dst: str, *, land: bool = True) -> None:
        """Pulsar moves a bundle (its shedder, or an execution of ours): Releasing, Assigning,
        then Owned at ``dst`` (``land=False``: stops at Assigning)."""
        namespace = bundle.rpartition("/")[0]
        await self.put(namespace, TransferPrepared(bundle=bundle, src=src, dst=dst, reason="pulsar"))
        await self.put(namespace, BundleAssigned(bundle=bundle, dst=dst, src=src, reason="transfer"))
        if land:
            await self.land(bundle, dst, src)

    async def land(self, bundle: str, dst: str, src: str | None = None) -> None:
        await self.put(bundle.rpartition("/")[0], BundleOwned(bundle=bundle, owner=dst, src=src))

    async def pulsar_split(self, bundle: str, owner: str, boundary: int) -> list[str]:
        namespace, _, name = bundle.rpartition("/")
        low, high = (int(x, 16) for x in name.split("_"))
        children = [f"{namespace}/0x{low:08x}_0x{boundary:08x}", f"{namespace}/0x{boundary:08x}_0x{high:08x}"]
        await self.put(namespace, SplitRequested(bundle=bundle, src=owner, algorithm="range_equally_divide",
                                                 reason="pulsar"))
        await self.put(namespace, SplitCompleted(parent=bundle, children=children, owner=owner,
                                                 boundaries=[low, boundary, high]))
        return children
