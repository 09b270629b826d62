"""Synthetic load: topics with Zipf-distributed rates, their clients, and a broker capacity model.

Invariants:
- a ``Workload`` is a pure function of its topics (and of the spikes set on it): equal seeds give
  equal workloads, so every process of a deployment can build the same one;
- a bundle's stats are the sums over the topics whose hash lies in its range (behaviour §1), so
  the children of a split together report exactly what the parent did;
- a broker's resource usage follows the bundles it owns through ``Capacity``: CPU grows with the
  message rate, bandwidth with the throughput, memory with the topics; nothing else moves it;
- a ``Workload`` pickles as columns (names, packed numbers and hashes) and unpickles equal to
  itself, spikes included (the stats cache is rebuilt lazily): every actor of a deployment is
  sent one, and a 196,608-topic workload pickled topic by topic took 27 s of the driver's CPU
  per actor on a busy machine, one actor after another;
- ``ClientsBody`` writes nothing: like reconnecting producers and consumers, it looks up (asks
  the leader to place) every unowned bundle that has clients, again until it is owned.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from random import Random
from typing import Any

from actors.body import Follower
from actors.effects import NOTHING, Effects
from actors.settings import ActorSettings
from balancer.bundles import HASH_MAX, BundleId, namespace_of, topic_hash
from balancer.config import LoadBalancerConfig
from balancer.errors import LoadBalancerError
from balancer.load import BrokerReport, BundleStats, ResourceUsage
from balancer.ownership import BundleState
from balancer.split import TopicLoad
from balancer.topics import namespace_of_topic
from events.catalog import LoadReported, LookupBundle, Message, NamespaceCreated, SplitCompleted
from events.log.port import Record
from events.skim import Skim
from projections.ownership_index import touched


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """One topic: its rates (msg/s), throughputs (bytes/s) and clients."""

    name: str
    msg_rate_in: float
    msg_rate_out: float
    msg_throughput_in: float
    msg_throughput_out: float
    producers: int = 1
    consumers: int = 1

    @property
    def hash(self) -> int:
        return topic_hash(self.name)

    @property
    def namespace(self) -> str:
        return namespace_of_topic(self.name)


@dataclass(frozen=True, slots=True)
class Capacity:
    """A broker's machine: what its resources can take and what load costs them."""

    cores: int = 8
    nic_mbps: float = 1000.0
    memory_mb: float = 8192.0
    direct_memory_mb: float = 4096.0
    base_cpu_percent: float = 5.0
    cpu_percent_per_msg: float = 0.004
    memory_mb_per_topic: float = 0.5
    direct_mb_per_mib: float = 4.0

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Capacity:
        return cls(**{k: v for k, v in data.items() if k in cls.__slots__})


def broker_report(broker_id: str, stats: Sequence[BundleStats], capacity: Capacity) -> BrokerReport:
    """The report of a broker serving ``stats``: usage derived from its bundles only."""
    rate_in = sum(s.msg_rate_in for s in stats)
    rate_out = sum(s.msg_rate_out for s in stats)
    tput_in = sum(s.msg_throughput_in for s in stats)
    tput_out = sum(s.msg_throughput_out for s in stats)
    topics = sum(s.topics for s in stats)
    cpu = capacity.base_cpu_percent + capacity.cpu_percent_per_msg * (rate_in + rate_out)
    mib = (tput_in + tput_out) / (1 << 20)
    return BrokerReport(
        broker_id,
        cpu=ResourceUsage(cpu, 100.0 * capacity.cores),
        memory=ResourceUsage(256.0 + capacity.memory_mb_per_topic * topics, capacity.memory_mb),
        direct_memory=ResourceUsage(64.0 + capacity.direct_mb_per_mib * mib, capacity.direct_memory_mb),
        # Bandwidth in kbit/s of the NIC, as Pulsar reports it.
        bandwidth_in=ResourceUsage(tput_in * 8 / 1000, capacity.nic_mbps * 1000),
        bandwidth_out=ResourceUsage(tput_out * 8 / 1000, capacity.nic_mbps * 1000),
        msg_rate_in=rate_in, msg_rate_out=rate_out,
        msg_throughput_in=tput_in, msg_throughput_out=tput_out,
        topics=topics, bundles=len(stats),
        producers=sum(s.producers for s in stats), consumers=sum(s.consumers for s in stats),
    )


class Workload:
    """Topics grouped by namespace, sorted by hash, with optional rate multipliers (spikes)."""

    def __init__(self, topics: Iterable[TopicSpec]) -> None:
        grouped: dict[str, list[tuple[int, TopicSpec]]] = {}
        for topic in topics:
            grouped.setdefault(topic.namespace, []).append((topic.hash, topic))
        self._topics = {ns: sorted(items, key=lambda item: (item[0], item[1].name))
                        for ns, items in grouped.items()}
        self._hashes = {ns: [h for h, _ in items] for ns, items in self._topics.items()}
        self.multipliers: dict[str, float] = {}
        """Namespace or topic name -> factor on its rates (load spikes)."""
        self._stats: dict[str, BundleStats] = {}
        self._stats_under: dict[str, float] = {}
        """Bundle stats computed under these multipliers (a spike changes them: recompute)."""
        self._columns: dict[str, Columns] | None = None
        """The topics as ``__reduce__`` sends them, once worked out."""

    def __reduce__(self) -> tuple[Any, ...]:
        if self._columns is None:  # the topics never change: worked out once, sent to every actor
            self._columns = {namespace: _columns([t for _, t in items], self._hashes[namespace])
                             for namespace, items in self._topics.items()}
        return (_unpickled, (self._columns, dict(self.multipliers)))

    @classmethod
    def zipf(cls, rng: Random, namespaces: Sequence[str], *, topics_per_namespace: int = 100,
             total_msg_rate: float = 20_000.0, exponent: float = 1.1, msg_size: int = 1024,
             max_producers: int = 3, max_consumers: int = 3) -> Workload:
        """Topics whose rates follow Zipf(``exponent``) over a seeded random ranking."""
        count = len(namespaces) * topics_per_namespace
        ranks = list(range(1, count + 1))
        rng.shuffle(ranks)
        norm = sum(1.0 / r**exponent for r in range(1, count + 1)) or 1.0
        topics: list[TopicSpec] = []
        for index, rank in enumerate(ranks):
            namespace = namespaces[index // topics_per_namespace]
            rate = total_msg_rate * (1.0 / rank**exponent) / norm
            producers, consumers = rng.randint(1, max_producers), rng.randint(1, max_consumers)
            topics.append(TopicSpec(
                f"persistent://{namespace}/topic-{index % topics_per_namespace:05d}",
                rate, rate * consumers, rate * msg_size, rate * consumers * msg_size,
                producers, consumers))
        return cls(topics)

    def topics(self, namespace: str | None = None) -> list[TopicSpec]:
        names = [namespace] if namespace is not None else sorted(self._topics)
        return [t for ns in names for _, t in self._topics.get(ns, [])]

    def topics_in(self, bundle: str) -> list[TopicSpec]:
        parsed = BundleId.parse(bundle)
        hashes = self._hashes.get(parsed.namespace)
        if not hashes:
            return []
        low = bisect_left(hashes, parsed.range.lower)
        # The last range is closed: 0xffffffff belongs to it.
        high = (bisect_right if parsed.range.upper == HASH_MAX else bisect_left)(hashes, parsed.range.upper)
        return [t for _, t in self._topics[parsed.namespace][low:high]]

    def factor(self, topic: TopicSpec) -> float:
        return self.multipliers.get(topic.name, 1.0) * self.multipliers.get(topic.namespace, 1.0)

    def bundle_stats(self, bundle: str) -> BundleStats:
        """A bundle's rates and clients (cached until the multipliers change)."""
        if self.multipliers != self._stats_under:
            self._stats, self._stats_under = {}, dict(self.multipliers)
        stats = self._stats.get(bundle)
        if stats is None:
            stats = self._stats[bundle] = self._bundle_stats(bundle)
        return stats

    def _bundle_stats(self, bundle: str) -> BundleStats:
        topics = self.topics_in(bundle)
        factors = [self.factor(t) for t in topics]
        return BundleStats(
            bundle,
            msg_rate_in=sum(t.msg_rate_in * f for t, f in zip(topics, factors, strict=True)),
            msg_rate_out=sum(t.msg_rate_out * f for t, f in zip(topics, factors, strict=True)),
            msg_throughput_in=sum(t.msg_throughput_in * f for t, f in zip(topics, factors, strict=True)),
            msg_throughput_out=sum(t.msg_throughput_out * f for t, f in zip(topics, factors, strict=True)),
            topics=len(topics),
            producers=sum(t.producers for t in topics),
            consumers=sum(t.consumers for t in topics),
        )

    def topic_loads(self, bundle: str) -> list[TopicLoad]:
        """The split algorithms' view of a bundle's topics (in+out rates)."""
        return [TopicLoad(t.hash, (t.msg_rate_in + t.msg_rate_out) * self.factor(t),
                          (t.msg_throughput_in + t.msg_throughput_out) * self.factor(t), True, t.name)
                for t in self.topics_in(bundle)]

    def has_clients(self, bundle: str) -> bool:
        stats = self.bundle_stats(bundle)  # cached; the counts are never negative
        return stats.producers + stats.consumers > 0


Columns = tuple[str | list[str], bytes, bytes, bytes]
"""One namespace's topics in hash order: names (joined by NUL when none holds one), hashes,
the four rates of each and its producers and consumers, packed."""


def _columns(topics: list[TopicSpec], hashes: list[int]) -> Columns:
    names = [t.name for t in topics]
    joined = "\0".join(names) if not any("\0" in n for n in names) else names
    return (joined, array("Q", hashes).tobytes(),
            array("d", [v for t in topics for v in (t.msg_rate_in, t.msg_rate_out, t.msg_throughput_in,
                                                     t.msg_throughput_out)]).tobytes(),
            array("q", [v for t in topics for v in (t.producers, t.consumers)]).tobytes())


def _unpickled(columns: dict[str, Columns], multipliers: dict[str, float]) -> Workload:
    """``Workload.__reduce__``'s columns, a workload again (no name parsed or hashed again)."""
    workload = Workload([])
    for namespace, (joined, hashes, rates, clients) in columns.items():
        names = joined.split("\0") if isinstance(joined, str) else joined
        hashed, rate, count = array("Q", hashes).tolist(), array("d", rates), array("q", clients)
        workload._topics[namespace] = [
            (hashed[i], TopicSpec(name, rate[4 * i], rate[4 * i + 1], rate[4 * i + 2], rate[4 * i + 3],
                                  count[2 * i], count[2 * i + 1]))
            for i, name in enumerate(names)]
        workload._hashes[namespace] = hashed
    workload.multipliers = dict(multipliers)
    return workload


class ClientsBody(Follower):
    """The workload's producers and consumers: they look up unowned bundles they use."""

    def __init__(self, config: LoadBalancerConfig, workload: Workload,
                 settings: ActorSettings | None = None, *, name: str = "clients") -> None:
        super().__init__(config)
        self.name = name
        self.workload = workload
        self.settings = settings or ActorSettings()
        self._next_ms = 0
        self.skim = Skim(LoadReported.TYPE)  # it reads ownership only, no report
        self._unowned: dict[str, set[str]] = {}
        """Namespace -> bundles of its layout that are Init or Free, kept per fold (a
        tick looks at what may need a lookup, not at every bundle)."""
        self._asked: dict[str, tuple[int, int, int]] = {}
        """Bundle -> (record version, when it may be asked again, lookups before) while it stays
        unowned: a lookup is repeated after ``lookup_retry_ms``, then twice as long each time up
        to ``retry_backoff_max_ms``, as a Pulsar client backs off (every unowned bundle
        asked again every second was most of a 65,536-bundle storm's commands). Soft state."""

    SNAPSHOT_FIELDS = (*Follower.SNAPSHOT_FIELDS, "_unowned")

    def fold_more(self, record: Record, event: Message) -> None:
        if isinstance(event, NamespaceCreated):
            self._layout(event.namespace)
            return
        if isinstance(event, SplitCompleted):
            self._layout(namespace_of(event.parent))
            return
        for bundle in touched(event):
            self._recheck(bundle)

    def _layout(self, namespace: str) -> None:
        info = self.ownership.namespaces.get(namespace)
        bundles = [] if info is None else [f"{namespace}/{r.name}" for r in info.layout]
        self._unowned[namespace] = {b for b in bundles if self._waits(b)}

    def _waits(self, bundle: str) -> bool:
        record = self.ownership.records.get(bundle)
        return record is None or record.state in (BundleState.INIT, BundleState.FREE)

    def _recheck(self, bundle: str) -> None:
        namespace = namespace_of(bundle)
        waiting = self._unowned.get(namespace)
        if waiting is None:
            return
        if not self._waits(bundle):
            waiting.discard(bundle)
            self._asked.pop(bundle, None)
            return
        info = self.ownership.namespaces[namespace]
        try:
            if BundleId.parse(bundle).range in info.layout:
                waiting.add(bundle)
        except LoadBalancerError:
            return

    def on_tick(self, now_ms: int) -> Effects:
        if now_ms < self._next_ms:
            return NOTHING
        self._next_ms = now_ms + self.settings.lookup_retry_ms
        lookups: list[LookupBundle] = []
        records = self.ownership.records
        for namespace in sorted(self._unowned):
            # Range order: the names are fixed-width hex, so id order within a namespace.
            for bundle in sorted(self._unowned[namespace]):
                record = records.get(bundle)
                version = 0 if record is None else record.version
                # The backoff first: it is a dict read, the workload's answer a bundle parse.
                if self._due(bundle, version, now_ms) and self.workload.has_clients(bundle):
                    self._asking(bundle, version, now_ms)
                    lookups.append(LookupBundle(
                        command_id=f"{self.name}:lookup:{bundle}:v{version}:{now_ms}",
                        epoch=self.epoch, bundle=bundle))
        return Effects(send=tuple(lookups))

    def _due(self, bundle: str, version: int, now_ms: int) -> bool:
        """``bundle`` at ``version`` may be looked up now (never asked, or its backoff passed)."""
        asked = self._asked.get(bundle)
        return asked is None or asked[0] != version or now_ms >= asked[1]

    def _asking(self, bundle: str, version: int, now_ms: int) -> None:
        """Note a lookup of ``bundle`` at ``version`` and when it may be repeated."""
        asked = self._asked.get(bundle)
        tries = asked[2] + 1 if asked is not None and asked[0] == version else 0
        base, cap = self.settings.lookup_retry_ms, max(self.settings.lookup_retry_ms, self.settings.retry_backoff_max_ms)
        self._asked[bundle] = (version, now_ms + min(base << min(tries, 30), cap), tries)
