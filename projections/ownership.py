"""The ownership view: bundle -> (state, owner, src, dst, version); namespace -> ranges; topic -> owner.

Invariants:
- every ownership change goes through ``balancer.ownership.judge``: a record the state machine
  rejects is never applied; it is recorded as an anomaly with its offset;
- per log key, events are applied once and in ``seq`` order: a repeated or older ``seq`` is a
  ``duplicate`` (skipped), a jump is a ``gap`` (recorded, then applied: the missing events are
  gone, and refusing the rest would freeze the view); an event whose ``epoch`` is older than one
  already applied for its key is ``stale_epoch`` (skipped: it comes from a fenced leader);
- one cluster per log: the first stamped record names the log's cluster; a record stamped by
  another cluster, or not stamped at all after it, is ``unauthorized``;
- authority: an event counts only when its writer was entitled to it. Namespace events only
  under their namespace's key, ``FailureDomainSet`` only under ``_cluster``, elections only
  under ``_leader``; once the log has an election, an event whose epoch no election before it
  established is refused (on a log of several partitions, ``ordered=False``: held, an
  ``unelected_epoch`` anomaly, until an election comes or its key goes on at a lower epoch);
  either way it raises no key's epoch. A ``force`` therefore counts only from the namespace key at an elected
  epoch. Anything else is an ``unauthorized`` anomaly with its offset and changes no view;
- who wrote it: in a signed log (``projections.authority``) a record must be the work of an
  identity the cluster's root certified (else ``forged``) whose role writes it there, then
  (``events.authority.may_write``; else ``unauthorized``), before anything else is decided;
- fencing by the newest election: a leader-written record (``events.authority``: ``_leader``,
  ``_cluster``, a ``BrokerLeft(expired)``) at an epoch below an election read before it, in one
  ordered stream, is a deposed leader's: ``stale_epoch``, whether or not the new leader has
  written that key yet; it takes no seq (a forged seq must not hide the real writer's);
- an owner must be a broker that registered (under its own key) before, once the log has any
  registration and is read as one ordered stream: a transition naming another as ``dst`` (or a
  split's ``owner``) is an ``unregistered_owner`` (an ``invalid_transition``) and changes nothing;
- the view is a pure function of the events applied, so a snapshot + tail equals a full replay;
- it reads typed events (``Envelope.typed``) and dispatches on their classes (``EVENT_TRANSITIONS``,
  ``_HANDLERS``); an envelope whose payload does not fit its class is a ``bad_event``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from balancer.bundles import HashRange, NamespaceBundles, topic_hash
from balancer.errors import DecodeError, InvalidBundle, LoadBalancerError
from balancer.ownership import (
    _NO_CHILDREN,
    NEXT_VERSION_RULES,
    VERSION_MAX,
    AcceptMode,
    BundleState,
    NextVersionRules,
    OwnershipRecord,
    accept,
    judge,
    next_version,
    owner_of,
    same_brokers,
)
from balancer.topics import namespace_of_topic
from events.authority import leader_written
from events.catalog import (
    CLUSTER_KEY,
    LEADER_KEY,
    SCHEMAS,
    BrokerLeft,
    BrokerRegistered,
    BundleAssigned,
    BundleOwned,
    BundleReleased,
    FailureDomainSet,
    LeaderElected,
    LoadReported,
    Message,
    NamespaceCreated,
    NamespacePolicySet,
    SplitCompleted,
    SplitRequested,
    TransferPrepared,
    UnloadRequested,
)
from events.codec import reason_of
from events.envelope import Envelope
from projections.authority import Trust
from projections.ownership_index import BundleEvent
from projections.tracking import Anomaly, EnvelopeLike, SequenceTracker

# Records are tuples underneath: a fold builds them with tuple.__new__, skipping validation of
# values it made itself (OwnershipRecord.trusted, without the call).
_new_record = tuple.__new__



@dataclass(frozen=True, slots=True)
class BundleRow:
    """One bundle of the view, as users see it."""

    bundle: str
    state: str
    owner: str | None
    src: str | None
    dst: str | None
    version: int
    updated_ms: int


@dataclass(slots=True)
class NamespaceInfo:
    layout: NamespaceBundles
    anti_affinity_group: str | None = None
    isolation: dict[str, Any] | None = None


@dataclass(slots=True)
class OwnershipProjection:
    """Folds namespace events into the ownership view."""

    mode: AcceptMode = AcceptMode.COMPACTED
    records: dict[str, OwnershipRecord] = field(default_factory=dict)
    namespaces: dict[str, NamespaceInfo] = field(default_factory=dict)
    failure_domains: dict[str, str] = field(default_factory=dict)
    tracker: SequenceTracker = field(default_factory=SequenceTracker)
    applied: int = 0
    degraded: dict[str, str] = field(default_factory=dict)
    """Ownership key -> the first unreadable record under it: that key's view may be wrong."""
    elected: int | None = None
    """The newest epoch a ``LeaderElected`` under ``_leader`` established (None: no election yet,
    a log of imports or tests; epochs are then not checked)."""
    cluster_id: str | None = None
    """The cluster of the first stamped record: a record stamped by another is an anomaly."""
    brokers: set[str] = field(default_factory=set)
    """Every broker that ever registered under its own key: an owner must be one of them."""
    leaders: dict[int, str] = field(default_factory=dict)
    """Epoch -> the leader its election named (a leader writes only at its own epochs)."""
    trust: Trust | None = None
    """Who really wrote each record of a signed log (``projections.authority``); None until the
    first signed record, unless the reader pinned the cluster's root key."""
    ordered: bool = True
    """The log is read as one ordered stream (one partition): an election read later was
    written later. False on several partitions (set by ProjectionRunner and the live host)."""
    _held: dict[str, list[tuple[int, Envelope]]] = field(default_factory=dict)
    _rules: NextVersionRules = field(init=False, repr=False, compare=False)

    name = "ownership"

    # -- folding ------------------------------------------------------------------------
    def __post_init__(self) -> None:
        self._rules = NEXT_VERSION_RULES[self.mode]

    def apply(self, offset: int, envelope: Envelope) -> bool:
        """Apply one event at ``offset``; False if it was skipped or is held (see the anomalies)."""
        # The common case (next seq, same epoch) inline; anything else takes the careful path.
        _, _, _, key, seq, epoch, ts_ms, _, _, _, cluster, sig = envelope  # one unpack, not 7 reads
        if cluster != self.cluster_id:
            if cluster is None:  # a stamped log: every writer of its cluster stamps
                return self._unauthorized(offset, envelope, "an unstamped record in the log of "
                                          f"cluster {self.cluster_id!r}")
            if self.cluster_id is not None:
                return self._unauthorized(offset, envelope, f"a record of cluster {cluster!r} in "
                                          f"the log of cluster {self.cluster_id!r}")
            self.cluster_id = cluster
        elected = self.elected
        trust = self.trust
        if trust is not None or sig is not None:
            if trust is None:
                trust = self.trust = Trust()
            verdict = trust.admit(envelope, elected, self.leaders)
            if verdict is not None:  # forged, or its writer's role does not write it
                return self._refuse(offset, envelope, *verdict)
        if elected is not None and epoch > elected and key != LEADER_KEY:
            # An epoch no election in the log has established. In one ordered stream that is
            # final; across partitions the election may be read later: held before the seq
            # tracker sees it (it raises no key's epoch), applied if an election comes.
            if self.ordered:
                return self._unauthorized(offset, envelope, f"epoch {epoch} was never elected "
                                          f"(newest election: {elected})")
            self._held.setdefault(key, []).append((offset, envelope))
            return False
        if (elected is not None and epoch < elected and self.ordered
                and leader_written(key, envelope[1], envelope[9])):
            # Only a leader writes it, and a newer one was elected before it: a deposed leader's
            # write, whether or not the new leader has written this key yet. It takes no seq.
            return self._refuse(offset, envelope, "stale_epoch", f"a deposed leader's write at "
                                f"epoch {epoch} (newest election: {elected})")
        if key in self._held:
            self._condemn(key, epoch)
        tracker = self.tracker
        position = tracker.positions.get(key)
        if position is not None and seq == position[0] + 1 and epoch == position[1]:
            position[0] = seq
        elif not tracker.admit(offset, envelope):
            return False
        if envelope[9] is None:
            return False  # skimmed (events.skim): a type whose payload this view never reads
        try:
            event = envelope.typed
        except DecodeError as exc:
            if reason_of(exc) == "unknown_type":
                return False  # not of the catalog: it took its seq all the same (_apply_other)
            return self._bad_event(offset, envelope, exc)
        step = EVENT_TRANSITIONS.get(type(event))
        if step is None:
            return self._apply_other(offset, envelope, event)
        moving: BundleEvent = event  # type: ignore[assignment]  # EVENT_TRANSITIONS keys are BundleEvents
        state, dst_field = step
        try:
            bundle = moving.bundle
            if bundle.rpartition("/")[0] != key:
                return self._unauthorized(offset, envelope, f"{bundle} is not of namespace key {key!r}")
            current = self.records.get(bundle)
            # The fold numbers versions itself, so accept()'s version checks always pass: the
            # table decides (a property test holds it equal to accept and judge).
            if current is None:
                version, rule = 1, self._rules[None].get(state)
            elif current[6] < VERSION_MAX:
                version, rule = current[6] + 1, self._rules[current[0]].get(state)
            else:
                version, rule = next_version(current[6]), self._rules[current[0]].get(state)
            # Blank names mean "no broker" (as OwnershipRecord normalises them).
            dst = (getattr(moving, dst_field) if dst_field else None) or None
            src = moving.src or None
            force = isinstance(moving, BundleAssigned) and bool(moving.force)
            incoming = _new_record(OwnershipRecord, (state, dst, src, _NO_CHILDREN, force, ts_ms, version))
        except (TypeError, AttributeError) as exc:
            return self._bad_event(offset, envelope, exc)
        if dst is not None and self.brokers and dst not in self.brokers and self.ordered:
            self.tracker.record(offset, envelope, "unregistered_owner",
                                f"{bundle}: {dst} never registered")
            return False
        # "The same brokers" (half the transitions of any log) is checked here, not called.
        if (force or rule is True
                or (rule is same_brokers and dst == current[1] and src == current[2])  # type: ignore[index]
                or (rule is not None and rule is not same_brokers and rule(current, incoming))):  # type: ignore[arg-type]
            self.records[bundle] = incoming
            self.applied += 1
            return True
        self.tracker.record(offset, envelope, "invalid_transition",
                            f"{bundle}: {judge(current, incoming, self.mode).rule}")
        return False

    def _apply_other(self, offset: int, envelope: Envelope, event: Message) -> bool:
        if isinstance(event, LeaderElected):
            return self._elected(offset, envelope, event)
        if isinstance(event, BrokerRegistered):
            if event.broker_id == envelope.key:  # only a broker's own key registers it
                self.brokers.add(event.broker_id)
            return False
        handler = _HANDLERS.get(type(event))
        if handler is None:
            # Other events of the key (CommandRejected, ...) took their seq all the same, or
            # the next folded event would look like a gap.
            return False
        try:
            owner_key = _owner_key(event)
        except (TypeError, AttributeError) as exc:
            return self._bad_event(offset, envelope, exc)
        if owner_key != envelope.key:
            return self._unauthorized(offset, envelope, f"belongs under key {owner_key!r}")
        try:
            problem = handler(self, event, envelope.ts_ms)
        except (LoadBalancerError, KeyError, TypeError, ValueError, AttributeError) as exc:
            return self._bad_event(offset, envelope, exc)
        if problem is not None:
            self.tracker.record(offset, envelope, "invalid_transition", problem)
            return False
        self.applied += 1
        return True

    def _elected(self, offset: int, envelope: Envelope, event: LeaderElected) -> bool:
        if envelope.key != LEADER_KEY:
            return self._unauthorized(offset, envelope, f"elections belong under {LEADER_KEY!r}")
        self.leaders[envelope.epoch] = event.leader_id
        self.elected = max(self.elected or 0, envelope.epoch)
        for key in list(self._held):
            queue = self._held.pop(key)
            for i, (held_at, held) in enumerate(queue):
                if held.epoch > self.elected:
                    self._held[key] = queue[i:]
                    break
                self.apply(held_at, held)
        return True

    def _condemn(self, key: str, epoch: int) -> None:
        """The key's writer went on at an elected ``epoch``: what it held above that was never
        its writer's (per key, epochs never fall), so no later election may let it in."""
        for offset, envelope in self._held.pop(key):
            self._unauthorized(offset, envelope, f"epoch {envelope.epoch} was never elected before "
                               f"the key went on at epoch {epoch}")

    def _unauthorized(self, offset: int, envelope: EnvelopeLike, why: str) -> bool:
        return self._refuse(offset, envelope, "unauthorized", f"{envelope.type}: {why}")

    def _refuse(self, offset: int, envelope: EnvelopeLike, kind: str, why: str) -> bool:
        """Name a record its writer was not entitled to, and mark it so that no body folds or
        reacts to it (``entitled``)."""
        self.tracker.record(offset, envelope, kind, why)
        marks = getattr(envelope, "__dict__", None)
        if marks is not None:
            marks[REFUSED] = why
        return False

    def apply_dead_letter(self, offset: int, key: str | None, why: str) -> None:
        """A record that could not be read: an anomaly, and its ownership key's view is degraded."""
        self.tracker.anomalies.append(Anomaly("dead_letter", offset, key or "", None, "?", why))
        if key is None or is_ownership_key(key):
            self.degraded.setdefault(key or "?", f"offset {offset}: {why}")

    def degraded_reason(self, namespace: str) -> str | None:
        """Why the view of ``namespace`` cannot be trusted (an unreadable record), or None."""
        return self.degraded.get(namespace) or self.degraded.get("?")

    def _bad_event(self, offset: int, envelope: EnvelopeLike, exc: Exception) -> bool:
        # A malformed payload is an anomaly like any other: the view goes on without it.
        self.tracker.record(offset, envelope, "bad_event", f"{type(exc).__name__}: {exc}")
        return False

    @property
    def anomalies(self) -> list[Anomaly]:
        if not self._held:
            return self.tracker.anomalies
        held = [Anomaly("unelected_epoch", offset, env.key, env.seq, env.type,
                        f"epoch {env.epoch} was never elected (newest election: {self.elected}); held")
                for queue in self._held.values() for offset, env in queue]
        return sorted(self.tracker.anomalies + held, key=lambda a: a.offset)

    def _transition(self, bundle: str, state: BundleState, ts_ms: int, dst: str | None,
                    src: str | None) -> str | None:
        """Apply one transition outside the hot path; why it was refused, or None."""
        current = self.records.get(bundle)
        version = 1 if current is None else next_version(current.version)
        # Blank names mean "no broker" (as OwnershipRecord normalises them).
        incoming = OwnershipRecord.trusted(state, dst or None, src or None, ts_ms, version)
        if accept(current, incoming, self.mode):
            self.records[bundle] = incoming
            return None
        return f"{bundle}: {judge(current, incoming, self.mode).rule}"

    # -- queries ------------------------------------------------------------------------
    def owner(self, bundle: str) -> str | None:
        return owner_of(self.records.get(bundle), bundle)

    def state(self, bundle: str) -> BundleState:
        record = self.records.get(bundle)
        return BundleState.INIT if record is None else record.state

    def bundle_of_topic(self, topic: str) -> str:
        """The bundle id serving ``persistent://tenant/ns/t`` (raises for an unknown namespace)."""
        namespace = namespace_of_topic(topic)
        info = self.namespaces.get(namespace)
        if info is None:
            raise InvalidBundle(f"namespace {namespace!r} of topic {topic!r} does not exist",
                                value=namespace)
        return f"{namespace}/{info.layout.find(topic_hash(topic)).name}"

    def lookup(self, topic: str) -> str | None:
        """Owner of the topic's bundle, or None when it is unowned or in flight."""
        record = self.records.get(self.bundle_of_topic(topic))
        if record is None or record.state is not BundleState.OWNED:
            return None
        return record.dst

    def bundles(self, namespace: str | None = None) -> Iterator[BundleRow]:
        """Every bundle of the current layouts (one namespace or all), in range order."""
        names = [namespace] if namespace is not None else sorted(self.namespaces)
        for name in names:
            info = self.namespaces[name]
            for hash_range in info.layout:
                yield self._row(f"{name}/{hash_range.name}")

    def _row(self, bundle: str) -> BundleRow:
        record = self.records.get(bundle)
        if record is None:
            return BundleRow(bundle, str(BundleState.INIT), None, None, None, 0, 0)
        owner = record.dst if record.state is BundleState.OWNED else None
        return BundleRow(bundle, str(record.state), owner, record.src, record.dst,
                         record.version, record.timestamp_ms)

    def owners(self) -> dict[str, str]:
        """bundle -> owner for every Owned bundle (what a routing table needs)."""
        return {b: r.dst for b, r in self.records.items()
                if r.state is BundleState.OWNED and r.dst is not None}

    # -- snapshots ----------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Plain data (msgpack-able) from which ``restore`` rebuilds an equal projection."""
        return {
            "mode": str(self.mode),
            "records": {b: _record_to_list(r) for b, r in self.records.items()},
            "namespaces": {
                n: [list(i.layout.boundaries()), i.anti_affinity_group, i.isolation]
                for n, i in self.namespaces.items()
            },
            "failure_domains": dict(self.failure_domains),
            "tracker": self.tracker.snapshot(),
            "applied": self.applied,
            "degraded": dict(self.degraded),
            "elected": self.elected,
            "cluster_id": self.cluster_id,
            "brokers": sorted(self.brokers),
            "leaders": {str(epoch): leader for epoch, leader in self.leaders.items()},
            "trust": None if self.trust is None else self.trust.snapshot(),
            "held": {k: [[o, list(e)] for o, e in q] for k, q in self._held.items()},
        }

    @classmethod
    def restore(cls, data: Mapping[str, Any]) -> OwnershipProjection:
        projection = cls(mode=AcceptMode(data["mode"]))
        projection.records = {b: _record_from_list(r) for b, r in data["records"].items()}
        projection.namespaces = {
            n: NamespaceInfo(NamespaceBundles.from_boundaries(n, v[0]), v[1], v[2])
            for n, v in data["namespaces"].items()
        }
        projection.failure_domains = dict(data["failure_domains"])
        projection.tracker = SequenceTracker.restore(data["tracker"])
        projection.applied = int(data["applied"])
        projection.degraded = dict(data.get("degraded", {}))
        projection.elected = data.get("elected")
        projection.cluster_id = data.get("cluster_id")
        projection.brokers = set(data.get("brokers", ()))
        projection.leaders = {int(e): str(leader) for e, leader in data.get("leaders", {}).items()}
        trust = data.get("trust")
        projection.trust = None if trust is None else Trust.restore(trust)
        projection._held = {k: [(int(o), Envelope(*e)) for o, e in q] for k, q in data.get("held", {}).items()}
        return projection

    def state_equals(self, other: OwnershipProjection) -> bool:
        """Same view (records, layouts, policies, brokers), whatever the anomaly history."""
        return (self.records == other.records and self.failure_domains == other.failure_domains
                and self.brokers == other.brokers and _layouts(self) == _layouts(other))


_BROKER_EVENTS = (BrokerRegistered, BrokerLeft, LoadReported)
HEADER_ONLY = frozenset({LoadReported.TYPE})
"""The types whose payload this view never reads (their seq, epoch, key and cluster are all it
folds): a reader may skim them (``events.skim``) and fold the same view."""


REFUSED = "refused"
"""The mark ``OwnershipProjection`` leaves in an envelope's instance dict when it refuses it for
its writer (a view folded it first: every view of one process folds one log the same way)."""


def entitled(envelope: Envelope, elected: int | None, cluster_id: str | None = None) -> bool:
    """Whether the writer of ``envelope`` may have written it (the fold's authority rules, for
    bodies that react to events, asked after the view folded it): a writer of this cluster
    (``cluster_id``: the log's), elections only under ``_leader``, a broker's events only under
    its key, namespace events only under their namespace, once the log has an election no epoch
    above the newest one, and nothing the view refused for its writer (``REFUSED``)."""
    if REFUSED in envelope.__dict__:
        return False
    if envelope.cluster_id != cluster_id:  # another cluster's, or unstamped in a stamped log
        return False
    key = envelope.key
    try:
        event = envelope.typed
    except DecodeError:
        return False  # nothing folds what it cannot read (the view named it an anomaly)
    if isinstance(event, LeaderElected):
        return key == LEADER_KEY
    if elected is not None and envelope.epoch > elected:
        return False
    if isinstance(event, _BROKER_EVENTS):
        return event.broker_id == key
    try:
        if type(event) in EVENT_TRANSITIONS:
            return str(cast(BundleEvent, event).bundle).rpartition("/")[0] == key
        return type(event) not in _HANDLERS or _owner_key(event) == key
    except (TypeError, AttributeError):
        return False


def is_ownership_key(key: str) -> bool:
    """Keys whose events decide who owns what: namespaces, the leader's, the cluster's."""
    return "/" in key or key in (LEADER_KEY, CLUSTER_KEY)


def _layouts(p: OwnershipProjection) -> dict[str, tuple[Any, str | None, Any]]:
    # Runs are canonical (one per edge sequence): comparing them compares the boundaries
    # without materialising 65,537 of them per body per check.
    return {n: (i.layout.runs, i.anti_affinity_group, i.isolation)
            for n, i in p.namespaces.items()}


def _record_to_list(record: OwnershipRecord) -> list[Any]:
    return [str(record.state), record.dst, record.src, dict(record.split_children),
            record.force, record.timestamp_ms, record.version]


def _record_from_list(raw: list[Any]) -> OwnershipRecord:
    return OwnershipRecord(BundleState(raw[0]), raw[1], raw[2], raw[3], raw[4], raw[5], raw[6])


# -- event handlers: each returns None when applied, else why it was rejected ----------------

Handler = Callable[[OwnershipProjection, Any, int], "str | None"]


def _namespace_created(p: OwnershipProjection, e: NamespaceCreated, ts: int) -> str | None:
    if e.namespace in p.namespaces:
        return f"namespace {e.namespace} already exists"
    layout = NamespaceBundles.from_boundaries(e.namespace, e.boundaries)
    p.namespaces[e.namespace] = NamespaceInfo(layout, e.anti_affinity_group, e.isolation)
    return None


def _policy_set(p: OwnershipProjection, e: NamespacePolicySet, ts: int) -> str | None:
    info = p.namespaces.get(e.namespace)
    if info is None:
        return f"namespace {e.namespace} does not exist"
    info.anti_affinity_group = e.anti_affinity_group
    info.isolation = e.isolation
    return None


def _domain_set(p: OwnershipProjection, e: FailureDomainSet, ts: int) -> str | None:
    for broker, known in list(p.failure_domains.items()):
        if known == e.domain:
            del p.failure_domains[broker]
    for broker in e.brokers:
        p.failure_domains[broker] = e.domain
    return None


def _split_completed(p: OwnershipProjection, e: SplitCompleted, ts: int) -> str | None:
    namespace, _, range_name = e.parent.rpartition("/")
    info = p.namespaces.get(namespace)
    if info is None:
        return f"namespace {namespace} does not exist"
    if p.brokers and e.owner not in p.brokers and p.ordered:
        return f"{e.parent}: its children's owner {e.owner} never registered"
    problem = p._transition(e.parent, BundleState.DELETED, ts, None, e.owner)
    if problem is not None:
        return problem
    info.layout = info.layout.split(HashRange.parse(range_name), e.boundaries)
    for child in e.children:
        # Children start Owned by the parent's owner at version 1 (behaviour §6.2, split).
        p.records[child] = OwnershipRecord.trusted(BundleState.OWNED, e.owner, None, ts, 1)
    return None


_HANDLERS: dict[type[Message], Handler] = {
    NamespaceCreated: _namespace_created,
    NamespacePolicySet: _policy_set,
    FailureDomainSet: _domain_set,
    SplitCompleted: _split_completed,
}


def _owner_key(event: Message) -> str:
    """The only key a handled event may be written under (ARCHITECTURE §2)."""
    if isinstance(event, SplitCompleted):
        return event.parent.rpartition("/")[0]
    if isinstance(event, FailureDomainSet):
        return CLUSTER_KEY
    assert isinstance(event, NamespaceCreated | NamespacePolicySet)
    return event.namespace


EVENT_TRANSITIONS: dict[type[Message], tuple[BundleState, str | None]] = {
    # event -> (the state it moves its bundle to, the field naming dst); src is always ``src``,
    # force only BundleAssigned's.
    BundleAssigned: (BundleState.ASSIGNING, "dst"),
    BundleOwned: (BundleState.OWNED, "owner"),
    UnloadRequested: (BundleState.RELEASING, None),
    TransferPrepared: (BundleState.RELEASING, "dst"),
    BundleReleased: (BundleState.FREE, None),
    SplitRequested: (BundleState.SPLITTING, None),
}
"""The events that are one ownership transition each (behaviour §6.2, ARCHITECTURE §3)."""
assert all(dst is None or dst in SCHEMAS[cls.TYPE].allowed for cls, (_, dst) in EVENT_TRANSITIONS.items())
