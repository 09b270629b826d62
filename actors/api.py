"""``Cluster``: the one client of a live cluster (contracts §3), on any host.

    async with Cluster.start(conf="conf/broker.conf", brokers=3) as cluster:  # local Ray + embedded log
        await cluster.create_namespace("public/default", bundles=16)
        owner = await cluster.lookup("persistent://public/default/orders")
    async with Cluster.start(brokers=3, host="inproc") as cluster: ...        # one process, virtual clock
    cluster = await Cluster.connect(log_dir=...)  # a running Ray cluster; or conf=, ray_namespace=
    cluster = await Cluster.connect(state_dir=".lbctl")  # what `lbctl run --keep` recorded

``lbctl``, the benchmarks and the tests use this class and nothing else to talk to a cluster;
what differs between hosts is its ``Link`` (``actors.cluster``): Ray actors on the wall clock, or
every body in this process on a virtual clock.

Invariants:
- the client keeps its own projection of the log (``ClientView``): the lookup of an owned bundle
  is answered from it without any round trip; an unowned one asks the leader to place the bundle
  and waits until the view shows it Owned;
- every verb is one command with a fresh command id and the newest leader epoch the client has
  folded; a retriable error (an actor restarting, no leader yet) is retried with the same id
  (commands are idempotent), a stale epoch once with a new id after catching up; any other error
  is raised as its ``balancer.errors`` type, and the cluster appended at most its CommandRejected;
- a verb returns once its events are in the log and in the client's view; with ``wait`` (default)
  once the bundles it moved have settled (no longer in flight); timeouts are seconds of the
  link's clock (wall time on Ray, cluster time in process);
- ``poll`` hands out every record the view folded since the last ``poll`` (from when the client
  was made), once, in fold order;
- a started cluster owns its actors and its log and releases them on ``close``; a connected one
  owns nothing but its view.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import uuid
from collections.abc import AsyncGenerator, Awaitable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from actors.client import BrokerStatus, ClientView, LeaderStatus
from actors.cluster.draining import DrainVerbs
from actors.cluster.kept import ClusterSpec, open_kept
from actors.cluster.life import TIMEOUT_S, ActorLife
from actors.cluster.link import Link, LinkClock, LinkFleet, LinkTransport
from actors.cluster.options import Starting
from actors.cluster.waiting import Waiting
from actors.cluster_conf import ClusterConf
from actors.conf import ConfSource, Settings, load_settings
from actors.effects import Receipt
from actors.precheck import check_input
from actors.settings import LEADER, ActorSettings, route
from actors.workload import Capacity, Workload
from balancer.bundles import HashRange
from balancer.control import pause_duration_ms
from balancer.errors import (
    Busy,
    InvalidInput,
    MalformedInput,
    ProposalClosed,
    StaleEpoch,
    Unavailable,
    UnknownBundle,
    UnknownFailureDomain,
    UnknownNamespace,
)
from balancer.proposals import VERDICTS, verdict_refusal
from balancer.topics import namespace_of_topic
from events.catalog import (
    Command,
    CreateNamespace,
    LookupBundle,
    PauseBalancer,
    ResumeBalancer,
    ReviewProposal,
    SetFailureDomain,
    SetNamespacePolicy,
    SplitBundle,
    UnloadBundle,
    UnloadNamespace,
)
from events.log.port import Record
from projections.explain import moves_of
from projections.moves import REQUESTED_BY, Move
from projections.ownership import BundleRow, OwnershipProjection
from projections.proposals import ProposalBook, proposal_book

C = TypeVar("C", bound=Command)


class Cluster(ActorLife, Waiting, DrainVerbs):
    """A live cluster: verbs (contracts §3), views, and the actors' life (for tests and runs)."""

    def __init__(self, link: Link) -> None:
        self.link = link
        # The link's three parts, each verb using the one it needs (``actors.cluster.link``).
        self.transport: LinkTransport = link
        self.clock: LinkClock = link
        self.fleet: LinkFleet = link
        self.view: ClientView = link.view
        self.config, self.settings = link.config, link.settings
        self._prefix = f"client-{uuid.uuid4().hex[:8]}"
        self._ids = itertools.count(1)
        self._polled: asyncio.Queue[Record] = self.view.listen()
        self._closed = False

    @property
    def virtual(self) -> bool:
        """True when cluster time moves only when this client lets it (in process)."""
        return self.clock.virtual

    # -- life ------------------------------------------------------------------------------
    @classmethod
    def start(cls, conf: ConfSource | Settings = None, brokers: int | Sequence[str] = 3, *, host: str = "ray",
              overrides: Mapping[str, Any] | None = None, settings: ActorSettings | None = None,
              workload: Workload | None = None, clients: bool = False,
              domains: Mapping[str, str] | None = None, capacity: Capacity | None = None,
              seed: int = 0, log_dir: str | os.PathLike[str] | None = None,
              **ray_options: Any) -> Starting[Cluster]:
        """Start a cluster: the log and one body per namespace shard, leader and broker.

        ``host`` is ``ray`` (Ray, local unless ``ray_address``; the log a directory, a temporary
        one by default, or Kafka at ``bootstrap``) or ``inproc`` (this process, a virtual clock;
        ``log_dir`` keeps the log there). ``conf`` is a broker.conf path, a
        ``LoadBalancerConfig`` or the process's ``Settings`` (``actors.conf``; ``overrides``: keys
        as broker.conf names them; ``settings``: the actors' timers instead of the file's);
        ``brokers`` a count or ids;
        ``domains`` broker -> failure domain at registration. Ray only (``ray_options``):
        ``speed`` compresses time (60: a simulated hour in a minute), ``tick_s``, ``poll_s``,
        ``bootstrap``, ``cluster_name``, ``partitions``, ``transactional``, ``fsync``, ``segment_bytes``,
        ``ray_address``, ``ray_namespace``, ``num_cpus``, ``max_restarts``, ``detached``,
        ``actor_options`` (body name -> extra Ray actor options), ``placement`` (``spread``: each
        broker without actor options of its own on the alive Ray node holding the fewest of the
        cluster's brokers, and only there; ``scheduler``, the default: where Ray puts it), ``ready_timeout_s``,
        ``replication_factor``, ``retention_ms``, ``security`` (Kafka TLS/SASL), ``snapshot_dir``
        (Kafka: the root of the bodies' snapshots on each node's disk; default
        ``~/.local/state/bundle-balancer``, a folder per topic prefix and cluster id under it),
        ``signing_dir`` (the keyring every writer signs its appends with, docs/design/authority.md;
        default ``keys/`` in an embedded log's directory, else ``keys/<cluster>-<id>`` under the
        snapshot root), ``paced`` (one cluster time that stands still for a late actor instead
        of letting the leader expire it, ``actors.runtime.paced``; default: when Ray runs on this
        machine).
        """
        loaded = load_settings(conf, overrides=overrides)
        config, settings = loaded.balancer, settings or loaded.actors
        if host == "inproc":
            if ray_options:
                raise InvalidInput(f"host 'inproc' runs in this process on a virtual clock; "
                                   f"{', '.join(sorted(ray_options))} apply to Ray only",
                                   value=sorted(ray_options))
            return Starting(lambda: cls._in_process(config, settings, brokers, workload, clients,
                                                    domains, capacity, seed, log_dir))
        if host != "ray":
            raise InvalidInput(f"host {host!r}: expected ray or inproc", value=host)
        from actors.cluster.ray_link import RayLink, launch

        spec = launch(config, settings, brokers, workload, clients, domains, capacity, seed, log_dir,
                      ray_options)
        return Starting(lambda: cls._from(RayLink.start(spec)))

    @classmethod
    def deploy(cls, deployment: ClusterConf | str | os.PathLike[str], brokers: int | Sequence[str] = 3,
               **options: Any) -> Starting[Cluster]:
        """``start`` on the Kafka and the Ray cluster that ``conf/cluster.yaml`` names (its
        ``broker_conf`` unless ``conf=`` is given); ``options`` as for ``start``."""
        found = deployment if isinstance(deployment, ClusterConf) else ClusterConf.load(deployment)
        options.setdefault("conf", found.broker_conf)
        options.setdefault("actor_options", found.ray.actor_options())
        options.setdefault("snapshot_dir", found.ray.snapshot_dir)
        options.setdefault("placement", found.ray.placement)
        return cls.start(brokers=brokers, bootstrap=found.kafka.bootstrap_servers,
                         cluster_name=found.name, partitions=found.kafka.partitions,
                         transactional=found.kafka.transactional,
                         replication_factor=found.kafka.replication_factor,
                         retention_ms=found.kafka.retention_ms, security=found.kafka.security,
                         ray_address=found.ray.address,
                         ray_namespace=found.ray.namespace, **options)

    @classmethod
    async def _from(cls, link: Awaitable[Link]) -> Cluster:
        return cls(await link)

    @classmethod
    async def _in_process(cls, config: Any, settings: ActorSettings, brokers: int | Sequence[str],
                          workload: Workload | None, clients: bool, domains: Mapping[str, str] | None,
                          capacity: Capacity | None, seed: int,
                          log_dir: str | os.PathLike[str] | None) -> Cluster:
        from actors.cluster.hosts import start_inproc

        return cls(start_inproc(config, settings, brokers, workload, clients, domains, capacity, seed,
                                log_dir))

    @classmethod
    async def connect(cls, conf: ClusterConf | str | None = None, *, state_dir: str | os.PathLike[str] | None = None,
                      ray_address: str | None = None, ray_namespace: str | None = None,
                      log_dir: str | os.PathLike[str] | None = None, timeout_s: float = TIMEOUT_S) -> Cluster:
        """Attach to a running cluster: by ``conf/cluster.yaml`` (``conf``: its Ray cluster), by
        its embedded log directory (``ray.json`` there names Ray), by Ray address +
        namespace, or by the state directory ``lbctl run --keep`` recorded (``state_dir``: an
        in-process cluster is folded from its log in this process, and its bodies restart from
        it when a command needs them). The log and the config are
        the actors' own."""
        if state_dir is not None:
            return cls(await open_kept(Path(state_dir)))
        from actors.cluster.ray_link import RayLink

        return cls(await RayLink.connect(conf, ray_address=ray_address, ray_namespace=ray_namespace,
                                         log_dir=log_dir, timeout_s=timeout_s))

    def describe(self, spec: ClusterSpec) -> ClusterSpec:
        """``spec`` completed with what another process needs to find this cluster."""
        return dataclasses.replace(spec, **self.transport.describe())

    async def close(self) -> None:
        """Stop what this client owns: its view; for a started cluster, every body too."""
        if self._closed:
            return
        self._closed = True
        self.view.unlisten(self._polled)
        await self.transport.close()

    async def __aenter__(self) -> Cluster:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    # -- commands ----------------------------------------------------------------------------
    def _command_id(self, kind: str = "admin") -> str:
        return f"{self._prefix}:{kind}:{next(self._ids)}"

    async def _issue(self, cls: type[C], *, timeout_s: float = TIMEOUT_S, **fields: Any) -> Receipt:
        """Send one command (after catching up, so it carries the newest epoch) and wait."""
        await self.transport.open_for_commands()
        await self.transport.catch_up()
        command = cls(command_id=self._command_id(), epoch=self.view.epoch, **fields)
        check_input(self.view, command, self.now_ms())  # bad input appends nothing
        receipt = await self._deliver(command, timeout_s)
        await self.transport.catch_up()
        return receipt

    async def _deliver(self, command: Command, timeout_s: float) -> Receipt:
        clock = self.clock.clock_s
        deadline, pause, renewed = clock() + timeout_s, 0.05, False
        target = route(command, self.settings.namespace_shards)
        while True:
            reply, error = await self.transport.call(target, command, max(0.1, deadline - clock()))
            if error is None:
                assert isinstance(reply, Receipt), reply
                return reply
            if isinstance(error, StaleEpoch) and not renewed:
                await self.transport.catch_up()  # the client lagged behind an election: once more
                command = dataclasses.replace(command, command_id=self._command_id(),
                                              epoch=self.view.epoch)
                renewed = True
                continue
            if not error.retriable or clock() + pause > deadline:
                raise error
            await self.clock.pause(pause)
            pause = min(pause * 2, 1.0)

    # -- lookups -----------------------------------------------------------------------------
    async def lookup(self, topic: str, *, timeout_s: float = TIMEOUT_S) -> str:
        """The broker serving ``topic``: a read of the local view if its bundle is owned; else
        the leader places the bundle and this waits until the view shows its owner."""
        if namespace_of_topic(topic) not in self.view.ownership.namespaces:
            await self.transport.catch_up()  # a namespace created moments ago: read the log once
        owner = self.owner_of(topic)
        if owner is not None:
            return owner
        return await self._place(topic, timeout_s)

    def owner_of(self, topic: str) -> str | None:
        """The owner in the local view, None if the bundle is unowned or in flight."""
        view = self.view.ownership
        namespace = namespace_of_topic(topic)
        if namespace not in view.namespaces:
            raise UnknownNamespace(f"namespace {namespace!r} of {topic!r} does not exist",
                                   value=namespace)
        return view.lookup(topic)

    async def _place(self, topic: str, timeout_s: float) -> str:
        await self.transport.open_for_commands()
        clock = self.clock.clock_s
        deadline, retry_s, lagged = clock() + timeout_s, self.clock.retry_s(), False
        while clock() < deadline:
            command = LookupBundle(command_id=self._command_id("lookup"), epoch=self.view.epoch,
                                   bundle=self.view.ownership.bundle_of_topic(topic))
            _, error = await self.transport.call(LEADER, command, timeout_s)
            if isinstance(error, StaleEpoch | UnknownBundle) and not lagged:
                # The view lagged behind an election or a split: catch up, ask again (once).
                await self.transport.catch_up()
                lagged = isinstance(error, UnknownBundle)
                continue
            if error is not None and not error.retriable:
                raise error
            # A busy leader took nothing: it is asked again after the time it named, not sooner.
            wait_s = max(retry_s, error.retry_after_ms / 1000) if isinstance(error, Busy) else retry_s
            step = min(wait_s, max(0.0, deadline - clock()))
            if await self.clock.wait_for(lambda: self.view.ownership.lookup(topic) is not None, step):
                return str(self.view.ownership.lookup(topic))
        raise Unavailable(f"lookup of {topic}: still no owner after {timeout_s}s", value=topic)

    # -- admin verbs -------------------------------------------------------------------------
    async def create_namespace(self, namespace: str, bundles: int | None = None, *,
                               boundaries: Sequence[int] | None = None,
                               anti_affinity_group: str | None = None,
                               isolation: Mapping[str, Any] | None = None, by: str | None = None) -> Receipt:
        """Create ``namespace`` (``bundles`` even ones, or ``boundaries``); ``by``: the principal
        who asked (a token's role, ``lbctl:<user>``), kept in ``NamespaceCreated``."""
        receipt = await self._issue(CreateNamespace, namespace=namespace, bundles=bundles,
                                    boundaries=list(boundaries) if boundaries is not None else None,
                                    anti_affinity_group=anti_affinity_group,
                                    isolation=dict(isolation) if isolation else None, by=by)
        await self._shown(lambda: namespace in self.view.ownership.namespaces, f"namespace {namespace}")
        return receipt

    async def split_bundle(self, namespace: str, bundle: str = "LARGEST",
                           algorithm: str | None = None, positions: Sequence[int] | None = None,
                           unload: bool = False, *, wait: bool = True,
                           timeout_s: float = TIMEOUT_S, by: str | None = None) -> Receipt:
        """Split a bundle (a range, a full id, ``LARGEST`` or ``HOT``); ``unload`` (-u) unloads
        the children. With ``wait``, returns once the split (and the unloads) settled. ``by``:
        the principal who asked, kept in ``SplitRequested`` and ``SplitCompleted``."""
        receipt = await self._issue(
            SplitBundle, namespace=namespace, bundle=bundle, timeout_s=timeout_s,
            algorithm=algorithm or self.config.default_namespace_bundle_split_algorithm,
            positions=list(positions) if positions else None, unload=unload, by=by)
        requested = receipt.first("SplitRequested")
        if wait and requested is not None:
            await self._settle_namespace(namespace, str(requested["bundle"]), timeout_s)
        return receipt

    async def unload(self, namespace: str, bundle: str | None = None,
                     destination: str | None = None, *, wait: bool = True,
                     timeout_s: float = TIMEOUT_S, by: str | None = None) -> Receipt:
        """Unload one bundle (to ``destination``: a graceful transfer) or, without ``bundle``,
        every owned bundle of the namespace. With ``wait``, returns once they settled. ``by``:
        the principal who asked (a token's role, ``lbctl:<user>``), kept in each move's decision
        as ``requested_by`` (``explain`` shows it)."""
        if bundle is None:
            if destination is not None:
                raise InvalidInput("a destination needs a bundle (-b)", value=destination)
            receipt = await self._issue(UnloadNamespace, namespace=namespace, timeout_s=timeout_s, by=by)
        else:
            receipt = await self._issue(UnloadBundle, bundle=self._bundle_id(namespace, bundle),
                                        dst=destination, timeout_s=timeout_s,
                                        decision={REQUESTED_BY: by} if by else None)
        moved = [str(p["bundle"]) for kind, p in receipt.events
                 if kind in ("UnloadRequested", "TransferPrepared")]
        if wait:
            await self._settle(moved, timeout_s)
        return receipt

    async def set_anti_affinity_group(self, namespace: str, group: str | None, *,
                                      by: str | None = None) -> Receipt:
        """Set (None: remove) the namespace's anti-affinity group; ``by``: the principal who
        asked, kept in ``NamespacePolicySet``."""
        await self.transport.catch_up()
        info = self.view.ownership.namespaces.get(namespace)
        receipt = await self._issue(SetNamespacePolicy, namespace=namespace, anti_affinity_group=group,
                                    isolation=info.isolation if info is not None else None, by=by)
        await self._shown(lambda: self.view.ownership.namespaces[namespace].anti_affinity_group == group,
                          f"the anti-affinity group of {namespace}")
        return receipt

    async def set_failure_domain(self, domain: str, brokers: Sequence[str], *,
                                 by: str | None = None) -> Receipt:
        """Create or replace a failure domain (``BrokerInOtherDomain`` if another holds one);
        ``by``: the principal who asked, kept in ``FailureDomainSet``."""
        receipt = await self._issue(SetFailureDomain, domain=domain, brokers=list(brokers), by=by)
        await self._shown(lambda: sorted(self.failure_domains().get(domain, [])) == sorted(brokers),
                          f"failure domain {domain}")
        return receipt

    async def delete_failure_domain(self, domain: str, *, by: str | None = None) -> Receipt:
        """Dissolve a failure domain: its brokers belong to none (an empty FailureDomainSet, with
        ``by``, the principal who asked)."""
        await self.transport.catch_up()
        known = self.failure_domains()
        if domain not in known:
            raise UnknownFailureDomain(f"failure domain {domain!r} does not exist; domains: "
                                       f"{', '.join(sorted(known)) or 'none'}", value=domain)
        receipt = await self._issue(SetFailureDomain, domain=domain, brokers=[], by=by)
        await self._shown(lambda: domain not in self.failure_domains(), f"failure domain {domain}")
        return receipt

    # -- the operator's hold on the balancer (docs/control.md) -----------------------------------
    async def pause_balancer(self, duration_ms: float, reason: str, by: str) -> Receipt:
        """Pause shedding and splitting for ``duration_ms`` of the leader's time (placements of
        unowned bundles go on); refused, appending nothing, beyond ``loadBalancerMaxPauseMinutes``."""
        duration = pause_duration_ms(duration_ms, self.config.load_balancer_max_pause_minutes * 60_000)
        if not reason.strip():
            raise MalformedInput(f"--reason {reason!r}: say why the balancer is paused", value=reason)
        receipt = await self._issue(PauseBalancer, duration_ms=duration, reason=reason, by=by)
        return receipt

    async def resume_balancer(self, by: str) -> Receipt:
        """End the pause now (a receipt without events: there was none)."""
        return await self._issue(ResumeBalancer, by=by)

    async def proposals(self) -> ProposalBook:
        """The leader's proposals and what became of them, folded from the log read back."""
        return proposal_book(await self.transport.history())

    async def review_proposal(self, proposal_id: str, verdict: str, by: str, note: str = "") -> Receipt:
        """Approve, reject or cancel a proposal; a verdict it cannot take is refused naming it,
        appending nothing. An approval the leader finds stale records the staleness instead
        (``ProposalClosed`` naming why)."""
        if verdict not in VERDICTS:
            raise MalformedInput(f"verdict {verdict!r}: expected one of {', '.join(VERDICTS)}", value=verdict)
        book = await self.proposals()
        refusal = verdict_refusal(proposal_id, book.entry(proposal_id).state, verdict)  # unknown: named
        if refusal is not None:
            raise ProposalClosed(refusal, value=proposal_id)
        receipt = await self._issue(ReviewProposal, proposal_id=proposal_id, verdict=verdict, by=by, note=note)
        stale = receipt.first("ProposalStale")
        if stale is not None:
            raise ProposalClosed(f"proposal {proposal_id!r} is stale: {stale['reason']}", value=proposal_id)
        return receipt

    async def balancer_status(self, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
        """idle, executing, paused or stalled, with the figures (``actors.control_status``)."""
        from actors.control_status import leader_of, mirrored_status, status_document

        await self.transport.catch_up()
        statuses = await self.fleet.statuses(timeout_s)
        if self.transport.kind == "pulsar" and not statuses:  # a mirror that nothing here steers
            return mirrored_status(str(self.transport.describe()["pulsar_url"]))
        return status_document(self.config, leader_of(statuses), dict(self.view.cursor.position),
                               sorted(self.view.brokers))

    @staticmethod
    def _bundle_id(namespace: str, bundle: str) -> str:
        if bundle.startswith(f"{namespace}/"):
            return bundle
        return f"{namespace}/{HashRange.parse(bundle).name}"

    # -- views -------------------------------------------------------------------------------
    def ownership(self) -> OwnershipProjection:
        """The client's ownership view (bundles, states, owners), current as of its last fold."""
        return self.view.ownership

    def namespaces(self) -> list[str]:
        return sorted(self.view.ownership.namespaces)

    def bundles(self, namespace: str) -> list[BundleRow]:
        """The bundles of ``namespace`` in range order (``UnknownNamespace`` if there is none)."""
        return self.view.bundle_rows(namespace)

    def brokers(self) -> list[BrokerStatus]:
        return self.view.broker_statuses()

    def failure_domains(self) -> dict[str, list[str]]:
        """Each failure domain the admin set (FailureDomainSet) -> its brokers, sorted."""
        domains: dict[str, list[str]] = {}
        for broker, domain in sorted(self.view.ownership.failure_domains.items()):
            domains.setdefault(domain, []).append(broker)
        return domains

    def anti_affinity_group(self, namespace: str) -> str | None:
        """The namespace's anti-affinity group (None: none); ``UnknownNamespace`` if absent."""
        self.bundles(namespace)  # names an unknown namespace
        return self.view.ownership.namespaces[namespace].anti_affinity_group

    def load_report(self, broker: str) -> dict[str, Any]:
        """The broker's latest LoadReported (``ts_ms`` and payload; none yet: ``None``s)."""
        return self.view.load_report(broker)

    def leader(self) -> LeaderStatus:
        return LeaderStatus(self.view.leader_id, self.view.epoch)

    def now_ms(self) -> int:
        """Cluster time (sped up by the time-compression factor on Ray; virtual in process)."""
        return self.clock.now_ms()

    def events(self, *types: str, from_start: bool = False) -> AsyncGenerator[Record, None]:
        """Every record folded from now on (``from_start``: the whole log first), of ``types``."""
        return self.view.records(*types, from_start=from_start)

    async def replay(self) -> OwnershipProjection:
        """A fresh fold of the whole log, read back from the log itself (on a retained embedded
        log: of what is left, with a ``retained`` anomaly naming the first offset held)."""
        return await self.view.replay()

    async def explain(self, bundle: str) -> list[Move]:
        """Every move of ``bundle`` in the log, with the decision (inputs, scores) behind it."""
        return moves_of(bundle, await self.transport.history())

    async def log_tail(self, limit: int) -> list[Record]:
        """The last ``limit`` records of the log, read back from the log, in log order."""
        return (await self.transport.history())[-limit:] if limit > 0 else []


