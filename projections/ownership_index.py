"""Broker -> the bundles whose ownership record names it, kept per event (issue 23).

Invariants:
- ``involving(b)`` is exactly the set of bundles whose current record has ``dst == b`` or
  ``src == b`` (any state), as a scan of ``OwnershipProjection.records`` would find them;
- it is kept by ``touch(bundle, record)`` after every fold that may change that bundle's record
  (``touched`` names them for an event), so a query costs the broker's own bundles, never the
  whole cluster; ``rebuild`` derives it from the records alone (a restored or replaced view);
- ``in_state(s)`` is exactly the set of bundles whose record is in state ``s``, for every state
  but Owned and Deleted (the settled ones, which would make it as large as the view);
- an index is an optimisation, never a rule: callers filter and sort what it returns exactly as
  they filtered and sorted the full scan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from balancer.ownership import BundleState, OwnershipRecord

_EMPTY: frozenset[str] = frozenset()
_SETTLED = frozenset({BundleState.OWNED, BundleState.DELETED})


def touched(kind: str, payload: Mapping[str, Any]) -> tuple[str, ...]:
    """The bundles whose record an event may change (before or after folding it)."""
    if kind == "SplitCompleted":
        return (str(payload.get("parent")), *(str(c) for c in payload.get("children") or ()))
    bundle = payload.get("bundle") if isinstance(payload, Mapping) else None
    return () if bundle is None else (str(bundle),)


class OwnershipIndex:
    """Which bundles each broker appears in (as dst or src)."""

    __slots__ = ("_by_broker", "_by_state", "_names", "_states")

    def __init__(self) -> None:
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
        self._state(bundle, None if record is None or record.state in _SETTLED else record.state)
        names = _names(record)
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

    def _state(self, bundle: str, state: BundleState | None) -> None:
        old = self._states.get(bundle)
        if old is state:
            return
        if old is not None:
            self._by_state[old].discard(bundle)
            del self._states[bundle]
        if state is not None:
            self._by_state.setdefault(state, set()).add(bundle)
            self._states[bundle] = state

    def in_state(self, state: BundleState) -> frozenset[str] | set[str]:
        """Bundles whose record is in ``state`` (not Owned or Deleted; do not mutate)."""
        if state in _SETTLED:
            raise ValueError(f"{state} bundles are not indexed")
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


def _names(record: OwnershipRecord | None) -> tuple[str, ...]:
    if record is None:
        return ()
    dst, src = record.dst, record.src
    if dst is None:
        return () if src is None else (src,)
    if src is None or src == dst:
        return (dst,)
    return (dst, src)
