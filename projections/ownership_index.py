"""Broker -> the bundles whose ownership record names it, kept per event.

Invariants:
- ``involving(b)`` is exactly the set of bundles whose current record has ``dst == b`` or
  ``src == b`` (any state), as a scan of ``OwnershipProjection.records`` would find them;
- it is kept by ``touch(bundle, record)`` after every fold that may change that bundle's record
  (``touched`` names them for an event), so a query costs the broker's own bundles, never the
  whole cluster; ``rebuild`` derives it from the records alone (a restored or replaced view);
- an index made ``only`` for one broker answers ``involving`` for that broker alone;
- ``in_state(s)`` is exactly the set of bundles whose record is in state ``s``, for every state
  but Owned and Deleted (the settled ones, which would make it as large as the view);
- an index is an optimisation, never a rule: callers filter and sort what it returns exactly as
  they filtered and sorted the full scan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import cast

from balancer.ownership import BundleState, OwnershipRecord
from events.catalog import (
    BundleAssigned,
    BundleOwned,
    BundleReleased,
    Message,
    SplitCompleted,
    SplitRequested,
    TransferPrepared,
    UnloadRequested,
)

_EMPTY: frozenset[str] = frozenset()
_SETTLED = frozenset({BundleState.OWNED, BundleState.DELETED})


BundleEvent = BundleAssigned | BundleOwned | UnloadRequested | TransferPrepared | BundleReleased | SplitRequested
"""An event about one bundle's ownership record (its ``bundle``): one transition of it."""
BUNDLE_EVENTS: frozenset[type[Message]] = frozenset(
    (BundleAssigned, BundleOwned, UnloadRequested, TransferPrepared, BundleReleased, SplitRequested))
"""The classes of ``BundleEvent``: ``type(event) in BUNDLE_EVENTS`` is one set lookup."""


def touched(event: Message) -> tuple[str, ...]:
    """The bundles whose record an event may change (before or after folding it)."""
    if isinstance(event, SplitCompleted):
        return (str(event.parent), *(str(c) for c in event.children or ()))
    if type(event) in BUNDLE_EVENTS:
        return (str(cast(BundleEvent, event).bundle),)
    return ()


def owned_by(index: OwnershipIndex, records: Mapping[str, OwnershipRecord],
             broker: str) -> tuple[list[str], list[str]]:
    """The bundles ``broker`` owns at rest, and every bundle it still holds (moving ones too):
    read through the index, not a scan of every record."""
    at_rest: list[str] = []
    holding: list[str] = []
    for bundle in index.involving(broker):
        record = records.get(bundle)
        if record is None or record.dst != broker or not record.state.active:
            continue
        holding.append(bundle)
        if record.state is BundleState.OWNED:
            at_rest.append(bundle)
    return at_rest, holding


class OwnershipIndex:
    """Which bundles each broker appears in (as dst or src)."""

    __slots__ = ("_by_broker", "_by_state", "_names", "_only", "_states")

    def __init__(self, only: str | None = None) -> None:
        """``only``: keep just that broker's bundles (a broker asks about itself alone; a full
        index per broker would hold every bundle once per broker)."""
        self._only = only
        self._by_broker: dict[str, set[str]] = {}
        self._names: dict[str, tuple[str, ...]] = {}
        self._by_state: dict[BundleState, set[str]] = {}
        self._states: dict[str, BundleState] = {}

    @classmethod
    def rebuild(cls, records: Mapping[str, OwnershipRecord]) -> OwnershipIndex:
        index = cls()
        for bundle, record in records.items():
            index.touch(bundle, record)
        return index

    def touch(self, bundle: str, record: OwnershipRecord | None) -> None:
        """``bundle``'s record is now ``record`` (None: gone)."""
        # Hot: called once per folded event in every body; kept to one call.
        if self._only is not None:
            self._touch_only(bundle, record, self._only)
            return
        names: tuple[str, ...]
        if record is None:
            state, names = None, ()
        else:
            state, dst, src = record[0], record[1], record[2]
            if state in _SETTLED:
                state = None
            if dst is None:
                names = () if src is None else (src,)
            else:
                names = (dst,) if src is None or src == dst else (dst, src)
        old_state = self._states.get(bundle)
        if old_state is not state:
            if old_state is not None:
                self._by_state[old_state].discard(bundle)
                del self._states[bundle]
            if state is not None:
                self._by_state.setdefault(state, set()).add(bundle)
                self._states[bundle] = state
        old = self._names.get(bundle, ())
        if names == old:
            return
        for broker in old:
            held = self._by_broker.get(broker)
            if held is not None:
                held.discard(bundle)
                if not held:
                    del self._by_broker[broker]
        for broker in names:
            self._by_broker.setdefault(broker, set()).add(bundle)
        if names:
            self._names[bundle] = names
        else:
            self._names.pop(bundle, None)

    def _touch_only(self, bundle: str, record: OwnershipRecord | None, me: str) -> None:
        if record is not None and (record[1] == me or record[2] == me):
            self._by_broker.setdefault(me, set()).add(bundle)
        else:
            held = self._by_broker.get(me)
            if held is not None:
                held.discard(bundle)

    def in_state(self, state: BundleState) -> frozenset[str] | set[str]:
        """Bundles whose record is in ``state`` (not Owned or Deleted; do not mutate)."""
        if state in _SETTLED or self._only is not None:
            raise ValueError(f"{state} bundles are not indexed here")
        return self._by_state.get(state, _EMPTY)

    def brokers(self) -> list[str]:
        """Every broker some record names."""
        return list(self._by_broker)

    def touch_all(self, bundles: Iterable[str], records: Mapping[str, OwnershipRecord]) -> None:
        for bundle in bundles:
            self.touch(bundle, records.get(bundle))

    def involving(self, broker: str) -> frozenset[str] | set[str]:
        """Bundles whose record names ``broker`` (do not mutate)."""
        return self._by_broker.get(broker, _EMPTY)

