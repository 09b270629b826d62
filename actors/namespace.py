"""NamespaceBody: the single writer of its namespaces' events (ARCHITECTURE §3, behaviour §6).

Invariants:
- it writes only the namespace keys of its shard (``settings.namespace_shard``), plus, for a
  command whose key is not a namespace name, the shard's own rejection key ``_ns:<shard>``;
- it appends an ownership event only if ``balancer.ownership.judge`` accepts it over the current
  record, so every projection of the log applies every event it wrote (no invalid transition);
- every rejection is a typed error and a ``CommandRejected`` event, and nothing else is appended;
  a command past the admin input limits (``actors.limits``) is refused before anything else and
  nothing at all is appended for it;
- commands are idempotent by ``command_id``: the outcome of every command it handled is rebuilt
  from the log (events carry the command id as ``causation_id``), and a repeat returns it;
- a command whose epoch is older than the newest ``LeaderElected`` it has folded is refused
  (``StaleEpoch``); its appends carry the newest epoch it knows for the key, never an older one;
- every assignment and transfer it writes carries in its decision the newest ``_leader`` seq it
  had folded (``projections.drain.SEEN_LEADER_SEQ``): the drain audit proves from it whether this
  shard knew of a drain when it let the broker receive the bundle.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from actors.body import Follower
from actors.effects import Effects, Outcomes, Receipt, appending, rejection
from actors.limits import check_command
from actors.settings import namespace_body_name, namespace_shard
from balancer.bundles import BundleId, HashRange, NamespaceBundles, namespace_of, validate_namespace
from balancer.config import LoadBalancerConfig
from balancer.errors import (
    BundleNotOwned,
    InputTooLarge,
    InvalidBundle,
    InvalidInput,
    InvalidTransition,
    LoadBalancerError,
    MalformedInput,
    NamespaceExists,
    StaleEpoch,
    StateConflict,
    TransferToCurrentOwner,
    UnknownBroker,
    UnknownBundle,
    UnknownNamespace,
    UnsplittableBundle,
)
from balancer.ownership import BundleState, OwnershipRecord, judge, next_version
from balancer.split import SPECIFIED_POSITIONS_DIVIDE, check_algorithm
from events.catalog import (
    AssignBundle,
    BundleAssigned,
    BundleOwned,
    BundleReleased,
    Command,
    ConfirmOwnership,
    ConfirmRelease,
    ConfirmSplit,
    CreateNamespace,
    Event,
    LoadReported,
    Message,
    NamespaceCreated,
    NamespacePolicySet,
    SetNamespacePolicy,
    SplitBundle,
    SplitCompleted,
    SplitRequested,
    TransferPrepared,
    UnloadBundle,
    UnloadNamespace,
    UnloadRequested,
)
from events.log.port import Record
from projections.drain import SEEN_LEADER_SEQ, DrainFold
from projections.moves import REQUESTED_BY
from projections.ownership import NamespaceInfo

ASSIGN_REASONS = ("lookup", "transfer", "orphan", "admin")
AUTO_PREFIX = "auto:"
"""Command ids ``auto:<Reason>:...`` mark the leader's auto-split decisions: SplitBundle has no
reason field, so the split reason travels in the id and lands in ``SplitRequested.reason``."""


class NamespaceBody(Follower):
    """Handles the namespace commands of contracts §2 for the namespaces of one shard."""

    def __init__(self, config: LoadBalancerConfig, *, shard: int = 0, shards: int = 1,
                 outcomes_kept: int = 100_000) -> None:
        super().__init__(config)
        self.name = namespace_body_name(shard)
        self.shard, self.shards = shard, shards
        self.outcomes = Outcomes(outcomes_kept)
        self.written: dict[str, int] = {}
        """Newest epoch this shard wrote per key: later appends never go below it."""
        self.loads: dict[str, tuple[int, float]] = {}
        """Bundle -> (topics, in+out throughput) of its latest report (LARGEST and HOT)."""
        self.split_requests: dict[str, SplitRequested] = {}
        """Bundle -> the SplitRequested of its last split (does it unload the children?)."""
        self.drains = DrainFold()
        """The operator's drains: a drained broker is given no bundle, whoever asks."""

    SNAPSHOT_FIELDS = (*Follower.SNAPSHOT_FIELDS, "outcomes", "written", "loads", "split_requests", "drains")

    def owns(self, key: str) -> bool:
        return namespace_shard(key, self.shards) == self.shard

    def _writes(self, key: str) -> bool:
        # Namespace names always hold a "/"; broker ids and "_leader"-style keys never do.
        return key == self._reject_key or ("/" in key and self.owns(key))

    # -- folding ---------------------------------------------------------------------------
    def fold_more(self, record: Record, event: Message) -> None:
        envelope = record.envelope
        self.drains.fold(event)
        if isinstance(event, LoadReported):
            for raw in event.bundles or ():
                tput = float(raw.get("msg_throughput_in", 0.0)) + float(raw.get("msg_throughput_out", 0.0))
                self.loads[str(raw["bundle"])] = (int(raw.get("topics", 0)), tput)
            return
        if not self._writes(envelope.key):
            return
        if envelope.epoch <= self.epoch:  # an epoch no election established is no one's to copy
            self.written[envelope.key] = max(self.written.get(envelope.key, 0), envelope.epoch)
        if isinstance(event, SplitRequested):
            self.split_requests[event.bundle] = event
        self.outcomes.fold(event, envelope.causation_id)

    @property
    def _reject_key(self) -> str:
        return f"_ns:{self.shard}"

    # -- commands --------------------------------------------------------------------------
    def batch_scope(self, command: Command) -> frozenset[Hashable] | None:
        """What ``command``'s decision reads that another command's events may change, for a
        host's group commit (``actors.runtime.group_commit``); None: it is decided alone.

        An assignment and an ownership confirmation read the namespace's layout, the registered
        brokers, the epoch stamp of the key (none of which such commands write) and the one
        bundle's record; their outcome is kept under the command id. Deciding one changes
        nothing here (``on_command`` is pure: state changes only by folding the log)."""
        if isinstance(command, AssignBundle | ConfirmOwnership):
            return frozenset((("bundle", command.bundle), ("command", command.command_id)))
        return None

    def on_command(self, command: Command, now_ms: int) -> Effects:
        repeated = self.outcomes.repeat(command)
        if repeated is not None:
            return repeated
        try:
            check_command(command, self.config)
        except InputTooLarge as exc:
            return Effects(error=exc)  # nothing recorded: even its key may be too large to write
        key = command.default_key()
        if "/" in key and not self.owns(key):
            # Misrouted: this shard must not write the key, not even a rejection.
            return Effects(error=InvalidInput(f"{key!r} belongs to shard "
                                              f"{namespace_shard(key, self.shards)}, not {self.shard}"))
        try:
            validate_namespace(key)
        except InvalidBundle as exc:
            return rejection(command, exc, key=key, under=self._reject_key,
                             epoch=self._stamp(self._reject_key, 0))
        try:
            events = self._handle(command, now_ms)
        except LoadBalancerError as exc:
            return rejection(command, exc, key=key, epoch=self._stamp(key, 0))
        epoch = self._stamp(key, command.epoch)
        receipt = Receipt(command.command_id, tuple((e.TYPE, e.to_payload()) for e in events))
        return appending(key, events, epoch=epoch, causation_id=command.command_id, reply=receipt)

    def _stamp(self, key: str, command_epoch: int) -> int:
        return max(self.epoch, command_epoch, self.written.get(key, 0))

    def judge(self, command: Command, now_ms: int) -> list[Event]:
        """The events ``command`` causes now, or the typed error that refuses it (appends
        nothing: ``actors.precheck`` runs it on a client's fold)."""
        return self._handle(command, now_ms)

    def _handle(self, command: Command, now_ms: int) -> list[Event]:
        check_command(command, self.config)
        if command.epoch < self.epoch:
            raise StaleEpoch(
                f"{command.TYPE} {command.command_id} carries epoch {command.epoch}; "
                f"the newest leader epoch is {self.epoch}", epoch=command.epoch, newest=self.epoch)
        handler = _HANDLERS.get(type(command))
        if handler is None:
            raise InvalidInput(f"{command.TYPE} is not a namespace command", value=command.TYPE)
        return handler(self, command, now_ms)

    # -- lookups into the view ---------------------------------------------------------------
    def _namespace(self, namespace: str) -> NamespaceInfo:
        info = self.ownership.namespaces.get(namespace)
        if info is None:
            raise UnknownNamespace(f"namespace {namespace!r} does not exist", value=namespace)
        return info

    def _bundle(self, bundle: str) -> HashRange:
        info = self._namespace(namespace_of(bundle))
        parsed = BundleId.parse(bundle)
        if parsed.range not in info.layout:
            raise UnknownBundle(
                f"{bundle} is not a bundle of {parsed.namespace}; its bundles are "
                f"{', '.join(r.name for r in list(info.layout)[:8])}"
                f"{' ...' if len(info.layout) > 8 else ''}", value=bundle)
        return parsed.range

    def _broker(self, broker: str) -> str:
        if broker not in self.brokers:
            known = ", ".join(sorted(self.brokers)) or "none"
            raise UnknownBroker(f"broker {broker!r} is not registered; registered: {known}",
                                value=broker)
        return broker

    def _receiving(self, broker: str) -> str:
        """A registered broker no operator's drain holds: one that may be given a bundle."""
        drain = self.drains.drains.get(self._broker(broker))
        if drain is not None:
            raise InvalidInput(f"broker {broker!r} is drained (since {drain.since_ms} ms, by {drain.by}): "
                               "it takes no bundle until `lbctl brokers undrain`", value=broker)
        return broker

    def _stamped(self, decision: dict[str, Any] | None) -> dict[str, Any]:
        """A move's decision, stamped with the newest ``_leader`` seq folded here: the proof of
        which drains this shard knew of when it let a broker receive the bundle."""
        return {**(decision or {}), SEEN_LEADER_SEQ: self.leader_seq}

    def _record(self, bundle: str) -> OwnershipRecord | None:
        return self.ownership.records.get(bundle)

    def _owned(self, bundle: str, action: str) -> str:
        record = self._record(bundle)
        if record is None or record.state is not BundleState.OWNED or record.dst is None:
            state = BundleState.INIT if record is None else record.state
            if not state.in_flight:  # nothing in flight: the request itself is wrong (exit 2, 412)
                raise BundleNotOwned(f"{bundle} is {state}: no broker owns it, so it cannot be "
                                     f"{action}; the leader assigns it first", bundle=bundle, value=bundle)
            raise InvalidTransition(
                f"{bundle} is {state}; only an Owned bundle can be {action}", bundle=bundle)
        return record.dst

    def _check(self, bundle: str, state: BundleState, dst: str | None, src: str | None,
               now_ms: int, force: bool = False) -> None:
        """The state machine's verdict on the event about to be written (a safety net)."""
        current = self._record(bundle)
        version = 1 if current is None else next_version(current.version)
        incoming = OwnershipRecord(state, dst, src, force=force, timestamp_ms=now_ms, version=version)
        verdict = judge(current, incoming, self.ownership.mode)
        if not verdict:
            raise InvalidTransition(f"{bundle}: {verdict.rule}", bundle=bundle)

    # -- handlers (each returns the events to append, or raises a typed error) ---------------
    def _create(self, cmd: CreateNamespace, now_ms: int) -> list[Event]:
        validate_namespace(cmd.namespace)
        if cmd.namespace in self.ownership.namespaces:
            raise NamespaceExists(f"namespace {cmd.namespace!r} already exists", value=cmd.namespace)
        if cmd.boundaries is not None:
            layout = NamespaceBundles.from_boundaries(cmd.namespace, cmd.boundaries)
        else:
            count = cmd.bundles if cmd.bundles is not None else self.config.default_number_of_namespace_bundles
            layout = NamespaceBundles.initial(cmd.namespace, count)
        return [NamespaceCreated(namespace=cmd.namespace, boundaries=list(layout.boundaries()),
                                 anti_affinity_group=cmd.anti_affinity_group, isolation=cmd.isolation,
                                 by=cmd.by)]

    def _policy(self, cmd: SetNamespacePolicy, now_ms: int) -> list[Event]:
        self._namespace(cmd.namespace)
        return [NamespacePolicySet(namespace=cmd.namespace, anti_affinity_group=cmd.anti_affinity_group,
                                   isolation=cmd.isolation, by=cmd.by)]

    def _assign(self, cmd: AssignBundle, now_ms: int) -> list[Event]:
        self._bundle(cmd.bundle)
        if cmd.dst is None:
            raise InvalidInput("AssignBundle names its dst: a lookup (LookupBundle) goes to the leader",
                               value=cmd.bundle)
        if cmd.reason not in ASSIGN_REASONS:
            raise InvalidInput(f"assignment reason {cmd.reason!r}; accepted: {', '.join(ASSIGN_REASONS)}",
                               value=cmd.reason)
        self._receiving(cmd.dst)
        record = self._record(cmd.bundle)
        src: str | None = None
        if cmd.force and record is not None:
            if (record.state is BundleState.OWNED and record.dst in self.brokers and record.dst != cmd.dst
                    and not self.is_void(cmd.bundle, record)):
                # Behaviour §6.3: re-registration cancels the cleanup. A forced reassignment that
                # was sent while the owner was gone must not take a bundle its owner serves again;
                # a record of its departed session it never serves again, so that one may go.
                raise StateConflict(f"{cmd.bundle} is Owned by {record.dst}, which is registered: "
                                    "its cleanup was cancelled by the re-registration", bundle=cmd.bundle)
            src = record.dst if record.state is BundleState.OWNED else record.src
            src = None if src == cmd.dst else src
        elif record is not None and record.state not in (BundleState.INIT, BundleState.FREE):
            raise InvalidTransition(
                f"{cmd.bundle} is {record.state}; only an unowned bundle can be assigned", bundle=cmd.bundle)
        self._check(cmd.bundle, BundleState.ASSIGNING, cmd.dst, src, now_ms, force=cmd.force)
        return [BundleAssigned(bundle=cmd.bundle, dst=cmd.dst, src=src, reason=cmd.reason, force=cmd.force,
                               decision=self._stamped(cmd.decision))]

    def _confirm_ownership(self, cmd: ConfirmOwnership, now_ms: int) -> list[Event]:
        self._bundle(cmd.bundle)
        self._broker(cmd.owner)
        record = self._record(cmd.bundle)
        if record is not None and record.dst == cmd.owner:
            if record.state is BundleState.OWNED:
                return []  # a retried confirmation of what is already true
            if record.state is BundleState.ASSIGNING:
                self._check(cmd.bundle, BundleState.OWNED, cmd.owner, record.src, now_ms)
                return [BundleOwned(bundle=cmd.bundle, owner=cmd.owner, src=record.src)]
        raise InvalidTransition(f"{cmd.bundle} is not being assigned to {cmd.owner}", bundle=cmd.bundle)

    def _unload(self, cmd: UnloadBundle, now_ms: int) -> list[Event]:
        self._bundle(cmd.bundle)
        if cmd.dst is not None:
            self._receiving(cmd.dst)
        owner = self._owned(cmd.bundle, "unloaded")
        if cmd.dst is None:
            self._check(cmd.bundle, BundleState.RELEASING, None, owner, now_ms)
            return [UnloadRequested(bundle=cmd.bundle, src=owner, reason=cmd.reason,
                                    decision=dict(cmd.decision or {}))]
        if cmd.dst == owner:
            raise TransferToCurrentOwner(
                f"{cmd.bundle} is already owned by {owner}; choose another destination", value=owner)
        self._check(cmd.bundle, BundleState.RELEASING, cmd.dst, owner, now_ms)
        return [TransferPrepared(bundle=cmd.bundle, src=owner, dst=cmd.dst, reason=cmd.reason,
                                 decision=self._stamped(cmd.decision))]

    def _unload_namespace(self, cmd: UnloadNamespace, now_ms: int) -> list[Event]:
        info = self._namespace(cmd.namespace)
        events: list[Event] = []
        for hash_range in info.layout:
            bundle = f"{cmd.namespace}/{hash_range.name}"
            record = self._record(bundle)
            if record is not None and record.state is BundleState.OWNED and record.dst is not None:
                events.append(UnloadRequested(bundle=bundle, src=record.dst, reason="admin",
                                              decision={REQUESTED_BY: cmd.by} if cmd.by else {}))
        return events

    def _split(self, cmd: SplitBundle, now_ms: int) -> list[Event]:
        info = self._namespace(cmd.namespace)
        check_algorithm(cmd.algorithm, self.config)
        if cmd.algorithm == SPECIFIED_POSITIONS_DIVIDE and not cmd.positions:
            raise MalformedInput(f"{SPECIFIED_POSITIONS_DIVIDE} needs positions, got {cmd.positions!r}",
                                 value=cmd.positions)
        bundle = self._split_target(cmd, info)
        hash_range = self._bundle(bundle)
        if not hash_range.splittable:
            raise UnsplittableBundle(f"bundle {bundle} covers one hash and cannot be split", value=bundle)
        outside = [p for p in cmd.positions or () if not hash_range.lower < p < hash_range.upper]
        if outside:
            # Pulsar drops them; with none left the split would make the bundle its own child.
            raise InvalidInput(f"split position 0x{outside[0]:08x} is not inside {bundle} "
                               f"(0x{hash_range.lower:08x} to 0x{hash_range.upper:08x})", value=outside[0])
        owner = self._owned(bundle, "split")
        self._check(bundle, BundleState.SPLITTING, None, owner, now_ms)
        reason = "admin"
        if cmd.command_id.startswith(AUTO_PREFIX):
            reason = cmd.command_id[len(AUTO_PREFIX):].split(":", 1)[0] or "auto"
        return [SplitRequested(bundle=bundle, src=owner, algorithm=cmd.algorithm,
                               positions=list(cmd.positions) if cmd.positions else None,
                               reason=reason, unload_children=cmd.unload, by=cmd.by,
                               proposal=cmd.proposal)]

    def _split_target(self, cmd: SplitBundle, info: NamespaceInfo) -> str:
        if cmd.bundle in ("LARGEST", "HOT"):
            owned = [f"{cmd.namespace}/{r.name}" for r in info.layout]
            owned = [b for b in owned if (r := self._record(b)) is not None and r.state is BundleState.OWNED]
            if not owned:
                raise UnknownBundle(f"namespace {cmd.namespace} has no owned bundle to split",
                                    value=cmd.bundle)
            index = 0 if cmd.bundle == "LARGEST" else 1
            # Highest first; ties go to the lowest bundle id (the project's determinism rule).
            return min(owned, key=lambda b: (-self.loads.get(b, (0, 0.0))[index], b))
        if "/" in cmd.bundle:
            if namespace_of(cmd.bundle) != cmd.namespace:
                raise InvalidBundle(f"{cmd.bundle} is not a bundle of {cmd.namespace}", value=cmd.bundle)
            return cmd.bundle
        return f"{cmd.namespace}/{HashRange.parse(cmd.bundle).name}"

    def _confirm_release(self, cmd: ConfirmRelease, now_ms: int) -> list[Event]:
        self._bundle(cmd.bundle)
        record = self._record(cmd.bundle)
        if record is not None and record.src == cmd.src:
            if record.state is BundleState.FREE:
                return []  # a retried confirmation of what is already true
            if record.state is BundleState.RELEASING and record.dst is not None:
                self._check(cmd.bundle, BundleState.ASSIGNING, record.dst, cmd.src, now_ms)
                return [BundleAssigned(bundle=cmd.bundle, dst=record.dst, src=cmd.src, reason="transfer")]
            if record.state is BundleState.RELEASING:
                self._check(cmd.bundle, BundleState.FREE, None, cmd.src, now_ms)
                return [BundleReleased(bundle=cmd.bundle, src=cmd.src)]
        raise InvalidTransition(f"{cmd.bundle} is not being released by {cmd.src}", bundle=cmd.bundle)

    def _confirm_split(self, cmd: ConfirmSplit, now_ms: int) -> list[Event]:
        hash_range = self._bundle(cmd.parent)
        record = self._record(cmd.parent)
        if record is None or record.state is not BundleState.SPLITTING or record.src != cmd.owner:
            raise InvalidTransition(f"{cmd.parent} is not being split by {cmd.owner}", bundle=cmd.parent)
        namespace = namespace_of(cmd.parent)
        children = [f"{namespace}/{r.name}" for r in hash_range.split_at(list(cmd.boundaries))]
        if cmd.children and list(cmd.children) != children:
            raise InvalidInput(f"children {cmd.children} do not match boundaries {cmd.boundaries}",
                               value=list(cmd.children))
        self._check(cmd.parent, BundleState.DELETED, None, cmd.owner, now_ms)
        request = self.split_requests.get(cmd.parent)
        events: list[Event] = [SplitCompleted(parent=cmd.parent, children=children, owner=cmd.owner,
                                              boundaries=list(cmd.boundaries),
                                              by=request.by if request is not None else None)]
        if cmd.boundaries and request is not None and request.unload_children:
            # Children start Owned by the owner (version 1): each may go to Releasing at once.
            events += [UnloadRequested(bundle=c, src=cmd.owner, reason="split") for c in children]
        return events


Handler = Callable[[NamespaceBody, Any, int], list[Event]]
_HANDLERS: dict[type[Command], Handler] = {
    CreateNamespace: NamespaceBody._create,
    SetNamespacePolicy: NamespaceBody._policy,
    AssignBundle: NamespaceBody._assign,
    ConfirmOwnership: NamespaceBody._confirm_ownership,
    UnloadBundle: NamespaceBody._unload,
    UnloadNamespace: NamespaceBody._unload_namespace,
    SplitBundle: NamespaceBody._split,
    ConfirmRelease: NamespaceBody._confirm_release,
    ConfirmSplit: NamespaceBody._confirm_split,
}
