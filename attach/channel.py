"""Pulsar's ownership channel -> the project's ownership events (the extensible load manager).

Pulsar 4.0's ``ExtensibleLoadManagerImpl`` writes every ownership transition of every bundle to
``persistent://pulsar/system/loadbalancer-service-unit-state``, keyed by the bundle
(``tenant/ns/0xLLLLLLLL_0xUUUUUUUU``), the value a ``ServiceUnitStateData`` as JSON:
``state``, ``dstBroker``, ``sourceBroker``, ``splitServiceUnitToDestBroker`` (child range ->
broker or null, on a Splitting record), ``force``, ``timestamp``, ``versionId``; a null value
(tombstone) deletes the bundle's record.

    translator = ChannelTranslator()
    for record in log_records: translator.observe(record.envelope.typed)   # after a restart
    missing = translator.missing_namespaces(batch)        # the shell asks Pulsar's REST for them
    appends = [translator.add_namespace(ns, boundaries_now, batch, ts_ms=.., causation_id=..)]
    for message in batch: appends += translator.translate(message)

How records become events (each message's events are one ``Append`` under its namespace's
key, stamped with Pulsar's time: the value's ``timestamp``, else the publish time):
- Assigning -> ``BundleAssigned`` (reason ``transfer`` when it names a source, ``orphan`` when
  forced, else ``lookup``); Owned -> ``BundleOwned``, and a forced Owned (an orphan taken over)
  ``BundleAssigned(force=True, reason="orphan")`` first; Releasing -> ``TransferPrepared``
  (reason ``pulsar``) with a destination, ``UnloadRequested`` without; Free ->
  ``BundleReleased``; Splitting -> ``SplitRequested`` with the children's positions; Deleted ->
  ``SplitCompleted`` (children from the Splitting record); a tombstone of a Free or Deleted
  bundle adds nothing, of any other the events that end in Free;
- a record Pulsar's own channel skips (its table view takes a record only as
  ``balancer.ownership.judge`` does: two brokers racing to assign one bundle both write, every
  broker keeps the first) is skipped too, and named;
- a record the fold would refuse as the direct event (a compacted channel skips states; Pulsar
  forces overrides) is reached by the cheapest accepted path (``Shadow.path_to``), so every
  event the mirror writes is one the fold takes, and the fold ends on the channel's record;
- a split's children appear in the channel (Owned at version 1) before the parent's Deleted:
  they are held until the Deleted, then follow the ``SplitCompleted``;
- a namespace first seen gets ``NamespaceCreated`` (``add_namespace``, appended before the
  batch), with the layout Pulsar's REST gives now, less the splits the batch still holds (so the
  splits the channel replays re-split it);
- a message that cannot be translated (not JSON, an unknown state, a key that is not a bundle, a
  bundle outside the mirrored layout) becomes ``SourceMessageRejected`` under ``_mirror`` and the
  translator goes on.

Invariants: pure (no I/O, no clock); every event returned has already been applied to
``shadow`` (the shell commits it or stops); ``translate(..., replay=True)`` (messages the log
already holds, re-read after a restart) returns nothing and only rebuilds what is held for
splits in flight.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from attach.positions import Position, topic_causation
from attach.shadow import SPLIT_ALGORITHM, Shadow, Want
from balancer.bundles import HashRange, NamespaceBundles
from balancer.errors import InvalidBundle, InvalidInput, LoadBalancerError, MalformedInput
from balancer.ownership import BundleState, OwnershipRecord, judge
from events.catalog import (
    MIRROR_KEY,
    BundleAssigned,
    BundleOwned,
    BundleReleased,
    Event,
    NamespaceCreated,
    SourceMessageRejected,
    SplitCompleted,
    SplitRequested,
    TransferPrepared,
    UnloadRequested,
)

CHANNEL_TOPIC = "persistent://pulsar/system/loadbalancer-service-unit-state"
VALUE_PREFIX = 300
"""How much of an untranslatable value a SourceMessageRejected keeps."""


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """One message read from a Pulsar topic (the shell's reader makes these)."""

    topic: str
    position: Position
    key: str
    value: bytes | None
    """None: a tombstone (a null value)."""
    publish_ms: int


@dataclass(frozen=True, slots=True)
class Append:
    """Events to append under one key, stamped ``ts_ms``, each with its causation id."""

    key: str
    events: tuple[Event, ...]
    ts_ms: int
    causation_ids: tuple[str, ...]
    correlation_id: str | None = None


@dataclass(frozen=True, slots=True)
class UnitState:
    """One ``ServiceUnitStateData``."""

    state: BundleState
    dst: str | None
    src: str | None
    force: bool
    timestamp: int
    version: int
    children: tuple[str, ...] = ()
    """A Splitting record's child ranges (``0xLLLLLLLL_0xUUUUUUUU``), sorted."""


def parse_value(raw: bytes) -> UnitState:
    """The record of a channel message; ``MalformedInput`` naming what is wrong."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise MalformedInput(f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise MalformedInput(f"not a ServiceUnitStateData object: {type(doc).__name__}")
    try:
        state = BundleState(str(doc.get("state")))
    except ValueError:
        raise MalformedInput(f"unknown state {doc.get('state')!r}") from None
    children = doc.get("splitServiceUnitToDestBroker") or {}
    if not isinstance(children, dict):
        raise MalformedInput(f"splitServiceUnitToDestBroker is not an object: {children!r}")
    dst, src = _normal(state, _broker(doc.get("dstBroker")), _broker(doc.get("sourceBroker")))
    return UnitState(state, dst, src,
                     bool(doc.get("force", False)), _int(doc, "timestamp"), _int(doc, "versionId"),
                     tuple(sorted(str(c) for c in children)))


def _normal(state: BundleState, dst: str | None, src: str | None) -> tuple[str | None, str | None]:
    """Pulsar names no source when it equals the destination (its overrides), and neither does
    the fold; a release (or split) naming its source as destination is one without destination."""
    if dst is None or dst != src:
        return dst, src
    return (dst, None) if state in (BundleState.OWNED, BundleState.ASSIGNING) else (None, src)


def _broker(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _int(doc: dict[str, Any], name: str) -> int:
    value = doc.get(name, 0)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedInput(f"{name} is not a number: {value!r}")
    return int(value)


def rejected(message: SourceMessage, error: str) -> Append:
    """The SourceMessageRejected of an untranslatable message."""
    value = "" if message.value is None else message.value[:VALUE_PREFIX].decode("utf-8", "replace")
    event = SourceMessageRejected(source=message.topic, message_id=str(message.position),
                                  key=message.key, value=value, error=error)
    return Append(MIRROR_KEY, (event,), message.publish_ms,
                  (topic_causation(message.topic, message.position),))


def split_parents(messages: Iterable[SourceMessage], namespace: str) -> list[HashRange]:
    """The ranges of ``namespace`` the messages show splitting or deleted (parents of splits)."""
    out: list[HashRange] = []
    for message in messages:
        ns, _, name = message.key.rpartition("/")
        value = message.value
        if ns != namespace or value is None or (b"Splitting" not in value and b"Deleted" not in value):
            continue
        try:
            if parse_value(value).state in (BundleState.SPLITTING, BundleState.DELETED):
                out.append(HashRange.parse(name))
        except (LoadBalancerError, ValueError):
            continue
    return out


def unsplit(boundaries: Sequence[int], parents: Iterable[HashRange]) -> list[int]:
    """``boundaries`` (every edge, both ends included) without the edges inside any parent."""
    cut = [p for p in parents]
    return [b for b in boundaries if not any(p.lower < b < p.upper for p in cut)]


@dataclass
class _Held:
    """A split in flight: the children the parent's Splitting record named, and the records of
    its children read before the parent's Deleted."""

    children: list[str] = field(default_factory=list)
    records: dict[str, tuple[SourceMessage, UnitState | None]] = field(default_factory=dict)


class ChannelTranslator:
    """Channel messages -> appends, keeping what the fold holds (``shadow``)."""

    def __init__(self, shadow: Shadow | None = None) -> None:
        self.shadow = shadow or Shadow()
        self.pulsar: dict[str, OwnershipRecord] = {}
        """Bundle -> the record Pulsar's own channel holds (the last one its rules accepted)."""
        self.now_layouts: dict[str, NamespaceBundles] = {}
        """Namespace -> the layout Pulsar's REST gave when the namespace was first seen."""
        self._held: dict[str, _Held] = {}

    # -- state from the log ----------------------------------------------------------------
    def observe(self, event: Event, pulsar_version: int | None = None) -> None:
        """Fold one event of the log (after a restart, every ownership event in log order);
        ``pulsar_version``: the version of the Pulsar record it came from (its correlation id),
        so Pulsar's record is known again: the fold's brokers and state at that version."""
        self.shadow.apply(event)
        bundle = getattr(event, "bundle", None)
        if pulsar_version is not None and bundle is not None:
            held = self.shadow.record(bundle)
            if held is not None:
                self.pulsar[bundle] = OwnershipRecord.trusted(held.state, held.dst, held.src, 0, pulsar_version)

    def knows(self, namespace: str) -> bool:
        return namespace in self.shadow.layouts

    def missing_namespaces(self, messages: Iterable[SourceMessage]) -> list[str]:
        """The namespaces of ``messages`` that the log does not hold yet, in first-seen order."""
        out: dict[str, None] = {}
        for message in messages:
            namespace = message.key.rpartition("/")[0]
            if namespace and not self.knows(namespace):
                out.setdefault(namespace)
        return list(out)

    def add_namespace(self, namespace: str, boundaries: Sequence[int],
                      pending: Iterable[SourceMessage] = (), *, ts_ms: int = 0,
                      causation_id: str = "") -> Append:
        """The NamespaceCreated of a namespace first seen (applied to the shadow; the shell
        appends it before the batch): Pulsar's layout now (``boundaries``, every edge) less the
        splits ``pending`` still replays, so those splits re-split it."""
        self.now_layouts[namespace] = NamespaceBundles.from_boundaries(namespace, boundaries)
        event = NamespaceCreated(namespace=namespace,
                                 boundaries=unsplit(boundaries, split_parents(pending, namespace)))
        self.shadow.apply(event)
        return Append(namespace, (event,), ts_ms, (causation_id,))

    # -- translation -----------------------------------------------------------------------
    def translate(self, message: SourceMessage, *, replay: bool = False) -> list[Append]:
        """The appends of one channel message (``replay``: already mirrored; nothing returned)."""
        namespace, _, name = message.key.rpartition("/")
        try:
            hash_range = HashRange.parse(name)
            value = None if message.value is None else parse_value(message.value)
        except (InvalidInput, InvalidBundle) as exc:
            return [] if replay else [rejected(message, exc.message)]
        refused = self._pulsar_refuses(message.key, value, replay)
        if refused is not None:
            return [] if replay else [rejected(message, refused)]
        if namespace not in self.shadow.layouts:
            return [] if replay else [rejected(message, f"namespace {namespace!r} is not mirrored "
                                               "(Pulsar's REST did not list its bundles)")]
        if hash_range not in self.shadow.layouts[namespace]:
            parent = self._splitting_parent(namespace, hash_range)
            if parent is not None:
                self._held.setdefault(parent, _Held()).records[message.key] = (message, value)
                return []
            gone = self.shadow.record(message.key)
            if replay or (value is None and gone is not None and gone.state is BundleState.DELETED):
                return []  # Pulsar's tombstone of a split's parent: the log has its end already
            return [rejected(message, f"{message.key} is not a bundle of {namespace} as mirrored "
                                      "(no split in flight covers it)")]
        if replay:
            return []
        events = self._events(message.key, value)
        if events is None:
            state = "tombstone" if value is None else value.state
            return [rejected(message, f"no transition the ownership fold accepts leads from "
                                      f"{self.shadow.record(message.key)} to {state}")]
        if not events:
            return []
        ts_ms = value.timestamp if value is not None and value.timestamp > 0 else message.publish_ms
        cause = topic_causation(message.topic, message.position)
        version = None if value is None else f"pulsar-version:{value.version}"
        return [Append(namespace, tuple(events), ts_ms, (cause,) * len(events), version)]

    def _pulsar_refuses(self, bundle: str, value: UnitState | None, replay: bool) -> str | None:
        """Why Pulsar's own channel skips this record (its table view applies the same rules as
        ``balancer.ownership.judge``: version, force, transition, brokers), or None if it takes it.
        Two brokers racing to assign one bundle both write; every broker keeps the first."""
        mirrored = replay and (bundle in self.shadow.records or bundle in self.pulsar)
        current = self.pulsar.get(bundle)
        incoming = None if value is None else OwnershipRecord.trusted(
            value.state, value.dst, value.src, value.timestamp, value.version, value.force)
        if current is not None and incoming is not None and current.state in (
                BundleState.FREE, BundleState.DELETED) and incoming.version < current.version:
            current = None  # Pulsar tombstoned it (a Free or Deleted record): versions start again
        if mirrored:
            return None  # the log holds it: Pulsar's record was read back from there
        verdict = judge(current, incoming)
        if not verdict:
            return f"Pulsar's channel skips it as every broker does ({verdict.rule})"
        if incoming is None:
            self.pulsar.pop(bundle, None)
        else:
            self.pulsar[bundle] = incoming
        return None

    def _splitting_parent(self, namespace: str, child: HashRange) -> str | None:
        for parent in self.shadow.splits:
            ns, _, name = parent.rpartition("/")
            if ns == namespace:
                span = HashRange.parse(name)
                if span.lower <= child.lower and child.upper <= span.upper:
                    return parent
        return None

    def _events(self, bundle: str, value: UnitState | None) -> list[Event] | None:
        """The events (already applied to the shadow) that take ``bundle`` to ``value``."""
        if value is None:
            return self._tombstone(bundle)
        record = self.shadow.record(bundle)
        if value.state is BundleState.FREE and value.src is None and record is not None:
            # Pulsar frees with no broker named; the fold's Free keeps who released it.
            value = dataclasses.replace(value, src=record.dst or record.src)
        if value.state is BundleState.DELETED:
            return self._deleted(bundle, value)
        events = _direct(bundle, value)
        if events is None or not self._apply_all(events):
            want = _want(value)
            events = None if want is None else \
                self.shadow.path_to(bundle, want, reason="orphan" if value.force else "pulsar")
            if events is None or not self._apply_all(events):
                return None
        if value.state is BundleState.SPLITTING:  # its children are held until its Deleted
            self._held[bundle] = _Held(children=[f"{bundle.rpartition('/')[0]}/{c}" for c in value.children])
        else:
            self._held.pop(bundle, None)  # a split given up (an override): nothing to hold
        return events

    def _apply_all(self, events: Sequence[Event]) -> bool:
        """Apply ``events`` to the shadow if it takes each in turn; else change nothing."""
        bundle = events[0].bundle if events else None  # type: ignore[attr-defined]
        saved = self.shadow.record(bundle) if bundle is not None else None
        splits = dict(self.shadow.splits)
        for event in events:
            if not self.shadow.apply(event):
                if bundle is not None:
                    self.shadow.set_record(bundle, saved)
                self.shadow.splits = splits
                return False
        return True

    def _tombstone(self, bundle: str) -> list[Event] | None:
        record = self.shadow.record(bundle)
        if record is None or record.state in (BundleState.FREE, BundleState.DELETED):
            return []
        owner = record.dst if record.state is not BundleState.SPLITTING else record.src
        path = self.shadow.path_to(bundle, Want(BundleState.FREE, None, owner or record.src))
        if path is None or not self._apply_all(path):
            return None
        return path

    def _deleted(self, bundle: str, value: UnitState) -> list[Event] | None:
        record = self.shadow.record(bundle)
        if record is not None and record.state is BundleState.DELETED:
            return []
        namespace, _, name = bundle.rpartition("/")
        owner = value.src or (record.src if record is not None else None) or \
            (record.dst if record is not None else None)
        if owner is None:
            return None
        held = self._held.pop(bundle, _Held())
        children = self._children(bundle, held)
        if children is None:
            return None
        events: list[Event] = []
        if record is None or (record.state, record.dst, record.src) != (BundleState.SPLITTING, None, owner):
            path = self.shadow.path_to(bundle, Want(BundleState.SPLITTING, None, owner))
            if path is None or not self._apply_all(path):
                return None
            events.extend(path)
        span = HashRange.parse(name)
        ranges = sorted((HashRange.parse(c.rpartition("/")[2]) for c in children), key=lambda r: r.lower)
        completed = SplitCompleted(parent=bundle, children=[f"{namespace}/{r.name}" for r in ranges],
                                   owner=owner, boundaries=[r.lower for r in ranges[1:]])
        if span.lower != ranges[0].lower or not self.shadow.apply(completed):
            return None
        events.append(completed)
        for child, (_, child_value) in sorted(held.records.items()):
            more = self._events(child, child_value) if child_value is not None else self._tombstone(child)
            events.extend(more or [])
        return events

    def _children(self, parent: str, held: _Held) -> list[str] | None:
        """The children of a split: as its Splitting record named them, else as the channel
        showed them, else as Pulsar's layout now has them."""
        namespace, _, name = parent.rpartition("/")
        if held.children:
            return held.children
        if held.records:
            return sorted(held.records)
        positions = self.shadow.splits.get(parent)
        span = HashRange.parse(name)
        if positions:
            edges = [span.lower, *positions, span.upper]
            return [f"{namespace}/{HashRange(a, b).name}" for a, b in itertools.pairwise(edges)]
        now = self.now_layouts.get(namespace)
        if now is None:
            return None
        inside = [r for r in now if span.lower <= r.lower and r.upper <= span.upper]
        return [f"{namespace}/{r.name}" for r in inside] if len(inside) > 1 else None


def _direct(bundle: str, value: UnitState) -> list[Event] | None:
    """The events that tell ``value`` as it is (the fold may still refuse them)."""
    state, dst, src = value.state, value.dst, value.src
    if state is BundleState.ASSIGNING and dst is not None:
        reason = "orphan" if value.force else "transfer" if src else "lookup"
        return [BundleAssigned(bundle=bundle, dst=dst, src=src, reason=reason, force=value.force)]
    if state is BundleState.OWNED and dst is not None:
        owned = BundleOwned(bundle=bundle, owner=dst, src=src)
        if value.force:
            return [BundleAssigned(bundle=bundle, dst=dst, src=src, reason="orphan", force=True), owned]
        return [owned]
    if state is BundleState.RELEASING and src is not None:
        # No "strategy": the move is Pulsar's, not one of a strategy the what-if could replay.
        decision = {"label": "pulsar", "reason": "Pulsar's own move",
                    "kind": "transfer" if dst else "unload",
                    "inputs": {"pulsar_version": value.version, "force": value.force}}
        if dst is not None:
            return [TransferPrepared(bundle=bundle, src=src, dst=dst, reason="pulsar", decision=decision)]
        return [UnloadRequested(bundle=bundle, src=src, reason="pulsar", decision=decision)]
    if state is BundleState.FREE:
        return [BundleReleased(bundle=bundle, src=src or "")]
    if state is BundleState.SPLITTING and src is not None:
        span = HashRange.parse(bundle.rpartition("/")[2])
        lowers = sorted(HashRange.parse(c).lower for c in value.children if _is_range(c))
        positions = [p for p in lowers if span.lower < p < span.upper]
        return [SplitRequested(bundle=bundle, src=src, algorithm=SPLIT_ALGORITHM,
                               positions=positions or None, reason="pulsar")]
    return None


def _want(value: UnitState) -> Want | None:
    state = value.state
    if state is BundleState.SPLITTING:
        return Want(state, None, value.src) if value.src else None
    if state is BundleState.FREE:
        return Want(state, None, value.src)
    if state is BundleState.RELEASING:
        return Want(state, value.dst, value.src) if value.src else None
    if state in (BundleState.OWNED, BundleState.ASSIGNING):
        return Want(state, value.dst, value.src) if value.dst else None
    return None


def _is_range(text: str) -> bool:
    try:
        HashRange.parse(text)
    except InvalidBundle:
        return False
    return True
