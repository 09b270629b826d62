"""The ownership view: bundle -> (state, owner, src, dst, version); namespace -> ranges; topic -> owner.

Invariants:
- every ownership change goes through ``balancer.ownership.judge``: a record the state machine
  rejects is never applied; it is recorded as an anomaly with its offset;
- per log key, events are applied once and in ``seq`` order: a repeated or older ``seq`` is a
  ``duplicate`` (skipped), a jump is a ``gap`` (recorded, then applied: the missing events are
  gone, and refusing the rest would freeze the view); an event whose ``epoch`` is older than one
  already applied for its key is ``stale_epoch`` (skipped: it comes from a fenced leader);
- the view is a pure function of the events applied, so a snapshot + tail equals a full replay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.bundles import HashRange, NamespaceBundles, topic_hash
from balancer.errors import InvalidBundle, LoadBalancerError
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
from events.envelope import Envelope
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
    _rules: NextVersionRules = field(init=False, repr=False, compare=False)

    name = "ownership"

    # -- folding ------------------------------------------------------------------------
    def __post_init__(self) -> None:
        self._rules = NEXT_VERSION_RULES[self.mode]

    def apply(self, offset: int, envelope: Envelope) -> bool:
        """Apply one event at ``offset``; False if it was skipped (see the anomalies)."""
        # The common case (next seq, same epoch) inline; anything else takes the careful path.
        _, kind, _, key, seq, epoch, ts_ms, _, _, payload = envelope  # one unpack, not 6 reads
        tracker = self.tracker
        position = tracker.positions.get(key)
        if position is not None and seq == position[0] + 1 and epoch == position[1]:
            position[0] = seq
        elif not tracker.admit(offset, envelope):
            return False
        simple = _SIMPLE.get(kind)
        if simple is None:
            return self._apply_other(offset, envelope)
        try:
            state, dst_field, force_field = simple
            bundle = payload["bundle"]
            current = self.records.get(bundle)
            # The fold numbers versions itself, so accept()'s version checks always pass: the
            # table decides (a property test holds it equal to accept and judge).
            if current is None:
                version, rule = 1, self._rules[None].get(state)
            elif current[6] < VERSION_MAX:
                version, rule = current[6] + 1, self._rules[current[0]].get(state)
            else:
                version, rule = next_version(current[6]), self._rules[current[0]].get(state)
            dst = (payload[dst_field] if dst_field else None) or None
            src = payload.get("src") or None
            force = bool(payload.get(force_field)) if force_field else False
            incoming = _new_record(OwnershipRecord, (state, dst, src, _NO_CHILDREN, force, ts_ms, version))
        except (KeyError, TypeError, AttributeError) as exc:
            return self._bad_event(offset, envelope, exc)
        # "The same brokers" (half the transitions of any log) is checked here, not called.
        if (force or rule is True
                or (rule is same_brokers and dst == current[1] and src == current[2])  # type: ignore[index]
                or (rule is not None and rule is not same_brokers and rule(current, incoming))):  # type: ignore[arg-type]
            self.records[bundle] = incoming
            self.applied += 1
            return True
        tracker.record(offset, envelope, "invalid_transition",
                       f"{bundle}: {judge(current, incoming, self.mode).rule}")
        return False

    def _apply_other(self, offset: int, envelope: EnvelopeLike) -> bool:
        handler = _HANDLERS.get(envelope.type)
        if handler is None:
            # Other events of the key (CommandRejected, ...) took their seq all the same, or
            # the next folded event would look like a gap.
            return False
        try:
            problem = handler(self, envelope.payload, envelope.ts_ms)
        except (LoadBalancerError, KeyError, TypeError, ValueError, AttributeError) as exc:
            return self._bad_event(offset, envelope, exc)
        if problem is not None:
            self.tracker.record(offset, envelope, "invalid_transition", problem)
            return False
        self.applied += 1
        return True

    def _bad_event(self, offset: int, envelope: EnvelopeLike, exc: Exception) -> bool:
        # A malformed payload is an anomaly like any other: the view goes on without it.
        self.tracker.record(offset, envelope, "bad_event", f"{type(exc).__name__}: {exc}")
        return False

    @property
    def anomalies(self) -> list[Anomaly]:
        return self.tracker.anomalies

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
        return projection

    def state_equals(self, other: OwnershipProjection) -> bool:
        """Same view (records, layouts, policies), whatever the anomaly history."""
        return (self.records == other.records and self.failure_domains == other.failure_domains
                and _layouts(self) == _layouts(other))


def namespace_of_topic(topic: str) -> str:
    """``persistent://tenant/ns/t`` -> ``tenant/ns`` (V1 names keep their cluster segment)."""
    _, _, rest = topic.partition("://")
    parts = (rest or topic).split("/")
    if len(parts) < 3:
        raise InvalidBundle(f"{topic!r} is not a topic name (domain://tenant/namespace/topic)",
                            value=topic)
    return "/".join(parts[:-1])


def _layouts(p: OwnershipProjection) -> dict[str, tuple[Any, str | None, Any]]:
    # Runs are canonical (one per edge sequence): comparing them compares the boundaries
    # without materialising 65,537 of them per body per check (issue 23).
    return {n: (i.layout.runs, i.anti_affinity_group, i.isolation)
            for n, i in p.namespaces.items()}


def _record_to_list(record: OwnershipRecord) -> list[Any]:
    return [str(record.state), record.dst, record.src, dict(record.split_children),
            record.force, record.timestamp_ms, record.version]


def _record_from_list(raw: list[Any]) -> OwnershipRecord:
    return OwnershipRecord(BundleState(raw[0]), raw[1], raw[2], raw[3], raw[4], raw[5], raw[6])


# -- event handlers: each returns None when applied, else why it was rejected ----------------

Handler = Callable[[OwnershipProjection, Mapping[str, Any], int], "str | None"]


def _namespace_created(p: OwnershipProjection, e: Mapping[str, Any], ts: int) -> str | None:
    name = e["namespace"]
    if name in p.namespaces:
        return f"namespace {name} already exists"
    layout = NamespaceBundles.from_boundaries(name, e["boundaries"])
    p.namespaces[name] = NamespaceInfo(layout, e.get("anti_affinity_group"), e.get("isolation"))
    return None


def _policy_set(p: OwnershipProjection, e: Mapping[str, Any], ts: int) -> str | None:
    info = p.namespaces.get(e["namespace"])
    if info is None:
        return f"namespace {e['namespace']} does not exist"
    info.anti_affinity_group = e.get("anti_affinity_group")
    info.isolation = e.get("isolation")
    return None


def _domain_set(p: OwnershipProjection, e: Mapping[str, Any], ts: int) -> str | None:
    domain = e["domain"]
    for broker, known in list(p.failure_domains.items()):
        if known == domain:
            del p.failure_domains[broker]
    for broker in e["brokers"]:
        p.failure_domains[broker] = domain
    return None


def _split_completed(p: OwnershipProjection, e: Mapping[str, Any], ts: int) -> str | None:
    parent = e["parent"]
    namespace, _, range_name = parent.rpartition("/")
    info = p.namespaces.get(namespace)
    if info is None:
        return f"namespace {namespace} does not exist"
    problem = p._transition(parent, BundleState.DELETED, ts, None, e["owner"])
    if problem is not None:
        return problem
    info.layout = info.layout.split(HashRange.parse(range_name), e["boundaries"])
    for child in e["children"]:
        # Children start Owned by the parent's owner at version 1 (behaviour §6.2, split).
        p.records[child] = OwnershipRecord.trusted(BundleState.OWNED, e["owner"], None, ts, 1)
    return None


_HANDLERS: dict[str, Handler] = {
    "NamespaceCreated": _namespace_created,
    "NamespacePolicySet": _policy_set,
    "FailureDomainSet": _domain_set,
    "SplitCompleted": _split_completed,
}

_SIMPLE: dict[str, tuple[BundleState, str | None, str | None]] = {
    # event -> (state it moves the bundle to, payload field naming dst, payload field for force);
    # src is always the payload's ``src`` (None when absent).
    "BundleAssigned": (BundleState.ASSIGNING, "dst", "force"),
    "BundleOwned": (BundleState.OWNED, "owner", None),
    "UnloadRequested": (BundleState.RELEASING, None, None),
    "TransferPrepared": (BundleState.RELEASING, "dst", None),
    "BundleReleased": (BundleState.FREE, None, None),
    "SplitRequested": (BundleState.SPLITTING, None, None),
}
"""The events that are one ownership transition each (behaviour §6.2, ARCHITECTURE §3)."""
