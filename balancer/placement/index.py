"""Incremental indexes for placement: what a placement reads, kept per event.

A plain ``ClusterView`` makes every placement walk every bundle (who owns what, how many bundles
of a namespace a broker holds, a broker's long-term rate). These indexes keep those answers and
are updated per change, so one placement costs the brokers, not the bundles.

Invariants (an index is an optimisation, never a rule):
- ``BundleIndex.bundles`` is exactly the dict a placing view would hold; ``bundles_of(b)`` is
  ``ClusterView.bundles_of(b)`` (ascending ids); ``namespace_bundles(b, ns)`` the ids of ``ns``
  that ``b`` holds;
- ``long_term_rate(b)`` equals ``exact_sum(d.long_term.msg_rate for d in bundles_of(b))`` bit
  for bit: kept per change as an exact sum (``balancer.exact_sum``), so no change re-sums;
  data changed in place (a report) is read again by ``put`` (the index) or ``refresh`` (a
  preallocation, told by ``take_refreshed``);
- ``Preallocations`` maps broker -> {bundle -> data} in ascending bundle ids, like the plain
  ``ModularPlacement.preallocations()``, with the same exact sum for ``long_term_rate``;
- pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.exact_sum import ExactSum
from balancer.load import BrokerReport, BundleData


class _RateSum:
    """One broker's bundles, in ascending ids on demand, with the exact sum of their long-term
    rates kept per change (``balancer.exact_sum``: no order to keep, no re-sum)."""

    __slots__ = ("_added", "_sorted", "_sum", "items")

    def __init__(self) -> None:
        self.items: dict[str, BundleData] = {}
        self._added: dict[str, float] = {}
        """Bundle -> the rate it added to ``_sum`` (its data may change in place later)."""
        self._sorted: tuple[BundleData, ...] | None = ()
        self._sum = ExactSum()

    def put(self, bundle: str, data: BundleData) -> None:
        if self.items.get(bundle) is not data:
            self._sorted = None  # a new bundle, or a new data object the ordered tuple lacks
        self.items[bundle] = data
        self.refresh(bundle)

    def refresh(self, bundle: str) -> None:
        """``bundle``'s data changed in place: its rate in the sum is read again."""
        old = self._added.get(bundle)
        rate = self.items[bundle].long_term.msg_rate
        if old is not None:
            if old == rate or (old != old and rate != rate):
                return
            self._sum.remove(old)
        self._sum.add(rate)
        self._added[bundle] = rate

    def remove(self, bundle: str) -> None:
        if self.items.pop(bundle, None) is not None:
            self._sum.remove(self._added.pop(bundle))
            self._sorted = None

    def ordered(self) -> tuple[BundleData, ...]:
        if self._sorted is None:
            self._sorted = tuple(self.items[b] for b in sorted(self.items))
        return self._sorted

    def rate(self) -> float:
        return self._sum.value()


class BundleIndex:
    """The bundles a placing view holds, grouped by owner and by (owner, namespace)."""

    def __init__(self) -> None:
        self.bundles: dict[str, BundleData] = {}
        self._owners: dict[str, _RateSum] = {}
        self._namespaces: dict[str, dict[str, set[str]]] = {}
        self.changed: set[str] = set()
        """Bundles whose owner changed (or that no owner holds now) since the last
        ``take_changes`` (preallocation release, the namespace counts of placement)."""
        self.refreshed: set[str] = set()
        """Bundles whose load data changed in place (a report, held or not) since the last
        ``take_refreshed``: a preallocation may share that data."""
        self._usage: dict[int, tuple[BrokerReport, LoadBalancerConfig, float]] = {}

    def usage(self, report: BrokerReport, config: LoadBalancerConfig,
              compute: Callable[[BrokerReport, LoadBalancerConfig], float]) -> float:
        """``compute(report, config)``, remembered for that very report and config (a report
        is immutable; a broker's next report is a new object)."""
        known = self._usage.get(id(report))
        if known is not None and known[0] is report and known[1] is config:
            return known[2]
        value = compute(report, config)
        if len(self._usage) > 4096:
            self._usage.clear()
        self._usage[id(report)] = (report, config, value)
        return value

    def put(self, bundle: str, data: BundleData | None) -> None:
        """``bundle`` is now held as ``data`` (its ``owner`` set), or not held (None)."""
        old = self.bundles.get(bundle)
        if old is not None and (data is None or old.owner != data.owner):
            self._drop(bundle, old)
        if data is None or data.owner is None:
            if self.bundles.pop(bundle, None) is not None:
                self.changed.add(bundle)  # no owner holds it now
            return
        self.bundles[bundle] = data
        owner = data.owner
        if old is None or old.owner != owner:
            self.changed.add(bundle)
            self._namespaces.setdefault(owner, {}).setdefault(namespace_of(bundle), set()).add(bundle)
        owned = self._owners.get(owner)
        if owned is None:
            owned = self._owners[owner] = _RateSum()
        owned.put(bundle, data)

    def _drop(self, bundle: str, old: BundleData) -> None:
        assert old.owner is not None
        owned = self._owners.get(old.owner)
        if owned is not None:
            owned.remove(bundle)
            if not owned.items:
                del self._owners[old.owner]
        spaces = self._namespaces.get(old.owner, {})
        held = spaces.get(namespace_of(bundle))
        if held is not None:
            held.discard(bundle)
            if not held:
                del spaces[namespace_of(bundle)]
        if not spaces:
            self._namespaces.pop(old.owner, None)

    def take_changes(self) -> set[str]:
        changed, self.changed = self.changed, set()
        return changed

    def refresh(self, bundle: str) -> None:
        """``bundle``'s load data changed in place (``BundleData.add_sample``)."""
        self.refreshed.add(bundle)

    def take_refreshed(self) -> set[str]:
        refreshed, self.refreshed = self.refreshed, set()
        return refreshed

    # -- queries ----------------------------------------------------------------------------
    def owners(self) -> list[str]:
        return sorted(self._owners)

    def bundles_of(self, owner: str) -> tuple[BundleData, ...]:
        owned = self._owners.get(owner)
        return () if owned is None else owned.ordered()

    def long_term_rate(self, owner: str) -> float:
        owned = self._owners.get(owner)
        return 0 if owned is None else owned.rate()

    def namespace_bundles(self, owner: str) -> Mapping[str, set[str]]:
        """Namespace -> bundle ids ``owner`` holds (do not mutate)."""
        return self._namespaces.get(owner, {})


class Preallocations(Mapping[str, Mapping[str, BundleData]]):
    """Broker -> {bundle -> data} placed on it and not yet in the view, kept per change."""

    def __init__(self) -> None:
        self._brokers: dict[str, _RateSum] = {}

    def refresh(self, broker: str, bundle: str) -> None:
        """``bundle``'s data, preallocated on ``broker``, changed in place (it is the view's,
        which a report updates): its rate is read again."""
        held = self._brokers.get(broker)
        if held is not None and bundle in held.items:
            held.refresh(bundle)

    def refresh_all(self) -> None:
        for held in self._brokers.values():
            for bundle in held.items:
                held.refresh(bundle)

    def add(self, broker: str, bundle: str, data: BundleData) -> None:
        held = self._brokers.get(broker)
        if held is None:
            held = self._brokers[broker] = _RateSum()
        held.put(bundle, data)

    def remove(self, broker: str, bundle: str) -> None:
        held = self._brokers.get(broker)
        if held is not None:
            held.remove(bundle)
            if not held.items:
                del self._brokers[broker]

    def long_term_rate(self, broker: str) -> float:
        held = self._brokers.get(broker)
        return 0 if held is None else held.rate()

    def bundles(self, broker: str) -> Mapping[str, BundleData]:
        held = self._brokers.get(broker)
        return {} if held is None else held.items

    def __getitem__(self, broker: str) -> Mapping[str, BundleData]:
        held = self._brokers[broker]
        return {d.bundle: d for d in held.ordered()}

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._brokers))

    def __len__(self) -> int:
        return len(self._brokers)
