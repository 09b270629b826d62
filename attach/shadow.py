"""What the project's ownership fold holds for each bundle, and the events that take it elsewhere.

A mirror translates another system's ownership records into the catalog's events; the events
are only worth writing if the ownership fold (``projections.ownership``) accepts them, in order.
``Shadow`` keeps, per bundle, the record that fold holds (state, dst, src, version) and each
namespace's layout, applying events the way the fold does; ``path_to`` finds the events that
take a bundle's record to a wanted (state, dst, src).

Invariants:
- ``Shadow.apply`` accepts exactly what the fold accepts and leaves the same record (a property
  test holds the two together): ``balancer.ownership.accept`` decides, versions are numbered by
  the fold's rule (the held version + 1, 1 for a first record);
- ``path_to`` returns the cheapest sequence of events (an unforced step costs 1, a forced
  assignment 5) whose every step the fold accepts and after which the record has the wanted
  state, dst and src; it tries the candidates in a fixed order, so the same inputs give the
  same events; None if no sequence of at most ``MAX_STEPS`` does;
- pure: no I/O, no clock.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from balancer.bundles import HashRange, NamespaceBundles
from balancer.ownership import AcceptMode, BundleState, OwnershipRecord, accept, next_version
from events.catalog import (
    BundleAssigned,
    BundleOwned,
    BundleReleased,
    Event,
    NamespaceCreated,
    SplitCompleted,
    SplitRequested,
    TransferPrepared,
    UnloadRequested,
)
from projections.ownership import EVENT_TRANSITIONS

MAX_STEPS = 8
FORCED_COST = 5
SPLIT_ALGORITHM = "specified_positions_divide"
"""A split mirrored from Pulsar names its children, so its positions are given."""

_MOVES = EVENT_TRANSITIONS  # the fold's own table: event -> the state it moves to, the dst field


class Want(NamedTuple):
    """A record to reach: its state and brokers (None: no broker)."""

    state: BundleState
    dst: str | None
    src: str | None


@dataclass
class Shadow:
    """The fold's ownership records and layouts, as far as a translator needs them."""

    mode: AcceptMode = AcceptMode.COMPACTED
    records: dict[str, OwnershipRecord] = field(default_factory=dict)
    layouts: dict[str, NamespaceBundles] = field(default_factory=dict)
    splits: dict[str, list[int]] = field(default_factory=dict)
    """Bundle -> the positions of the split it is in (its SplitRequested), until it completes."""

    def record(self, bundle: str) -> OwnershipRecord | None:
        return self.records.get(bundle)

    def apply(self, event: Event) -> bool:
        """Apply ``event`` as the fold would; False if the fold would refuse it."""
        if isinstance(event, NamespaceCreated):
            if event.namespace in self.layouts:
                return False
            self.layouts[event.namespace] = NamespaceBundles.from_boundaries(event.namespace, event.boundaries)
            return True
        if isinstance(event, SplitCompleted):
            return self._split_completed(event)
        move = _MOVES.get(type(event))
        if move is None:
            return False
        bundle = event.bundle  # type: ignore[attr-defined]
        incoming = self.after(bundle, event)
        if incoming is None:
            return False
        self.records[bundle] = incoming
        if isinstance(event, SplitRequested):
            self.splits[bundle] = list(event.positions or [])
        else:
            self.splits.pop(bundle, None)
        return True

    def after(self, bundle: str, event: Event) -> OwnershipRecord | None:
        """The bundle's record once the fold took ``event``, or None if it would refuse it."""
        state, dst_field = _MOVES[type(event)]
        current = self.records.get(bundle)
        dst = (getattr(event, dst_field) if dst_field else None) or None
        src = getattr(event, "src", None) or None
        force = isinstance(event, BundleAssigned) and bool(event.force)
        version = 1 if current is None else next_version(current.version)
        incoming = OwnershipRecord.trusted(state, dst, src, 0, version, force)
        return incoming if accept(current, incoming, self.mode) else None

    def _split_completed(self, event: SplitCompleted) -> bool:
        namespace, _, name = event.parent.rpartition("/")
        layout = self.layouts.get(namespace)
        current = self.records.get(event.parent)
        if layout is None:
            return False
        version = 1 if current is None else next_version(current.version)
        deleted = OwnershipRecord.trusted(BundleState.DELETED, None, event.owner or None, 0, version)
        if not accept(current, deleted, self.mode):
            return False
        self.records[event.parent] = deleted
        self.splits.pop(event.parent, None)
        self.layouts[namespace] = layout.split(HashRange.parse(name), event.boundaries)
        for child in event.children:
            self.records[child] = OwnershipRecord.trusted(BundleState.OWNED, event.owner, None, 0, 1)
        return True

    # -- paths -----------------------------------------------------------------------------
    def path_to(self, bundle: str, want: Want, *, reason: str = "pulsar") -> list[Event] | None:
        """The cheapest events taking ``bundle`` from its record to ``want`` (``[]``: there)."""
        start = self.records.get(bundle)
        if _reached(start, want):
            return []
        brokers = _brokers(start, want)
        saved = self.records.get(bundle)
        counter = itertools.count()
        queue: list[tuple[int, int, OwnershipRecord | None, list[Event]]] = [(0, next(counter), start, [])]
        best: dict[tuple[BundleState, str | None, str | None] | None, int] = {_node(start): 0}
        try:
            while queue:
                cost, _, record, steps = heapq.heappop(queue)
                if _reached(record, want):
                    return steps
                if len(steps) >= MAX_STEPS:
                    continue
                for event, step_cost in _candidates(bundle, brokers, reason):
                    self.set_record(bundle, record)
                    after = self.after(bundle, event)
                    if after is None or best.get(_node(after), cost + step_cost + 1) <= cost + step_cost:
                        continue
                    best[_node(after)] = cost + step_cost
                    heapq.heappush(queue, (cost + step_cost, next(counter), after, [*steps, event]))
            return None
        finally:
            self.set_record(bundle, saved)

    def set_record(self, bundle: str, record: OwnershipRecord | None) -> None:
        """Put ``record`` back as the bundle's (None: no record): undoing a trial, never a fold."""
        if record is None:
            self.records.pop(bundle, None)
        else:
            self.records[bundle] = record


def _node(record: OwnershipRecord | None) -> tuple[BundleState, str | None, str | None] | None:
    return None if record is None else (record.state, record.dst, record.src)


def _reached(record: OwnershipRecord | None, want: Want) -> bool:
    if record is None:
        return False
    return (record.state, record.dst, record.src) == (want.state, want.dst, want.src)


def _brokers(record: OwnershipRecord | None, want: Want) -> list[str | None]:
    names = {want.dst, want.src}
    if record is not None:
        names |= {record.dst, record.src}
    return [None, *sorted(name for name in names if name is not None)]


def _candidates(bundle: str, brokers: list[str | None], reason: str) -> Iterator[tuple[Event, int]]:
    """Every event a step may take, in a fixed order, with its cost."""
    named = [b for b in brokers if b is not None]
    for dst in named:
        for src in brokers:
            if src == dst:
                continue
            yield BundleOwned(bundle=bundle, owner=dst, src=src), 1
            yield BundleAssigned(bundle=bundle, dst=dst, src=src, reason=reason), 1
            yield TransferPrepared(bundle=bundle, src=dst, dst=src, reason=reason) if src else \
                UnloadRequested(bundle=bundle, src=dst, reason=reason), 1
    for src in brokers:
        yield BundleReleased(bundle=bundle, src=src or ""), 1
    for src in named:
        yield SplitRequested(bundle=bundle, src=src, algorithm=SPLIT_ALGORITHM, reason=reason), 1
    for dst in named:
        for src in brokers:
            if src != dst:
                yield BundleAssigned(bundle=bundle, dst=dst, src=src, reason=reason, force=True), FORCED_COST
