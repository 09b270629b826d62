"""The modular manager's placement pipeline (behaviour §5.1), with its preallocations.

Invariants, in pipeline order:
1. an explicit unload destination is returned as given (Pulsar 3.x bundle affinity, nothing is
   preallocated); a preallocated bundle returns its broker;
2. the bundle's data is the leader's (the view's), else Pulsar's defaults;
3. isolation (``isolation_candidates``) gives the base set every later fallback returns to;
4. topic cap with undo; 5. anti-affinity with failure domains (counts include preallocations);
6. even spread (``loadBalancerDistributeBundlesEvenlyEnabled``, always for ``pulsar/system``):
   keep the brokers with the fewest bundles of the namespace, owned or preallocated;
7. load-manager class and version filters: an error or an empty set restores the isolation set;
8. the strategy picks (round-robin for ``loadBalancerSheddingExcludedNamespaces``, PIP-380);
9. if the pick's weighted max usage exceeds the overload threshold, the configured strategy picks
   again over the isolation set, which then is the reported candidate set;
10. the pick is preallocated: it counts for later placements until the broker's report shows the
    bundle (or the broker leaves), which ``release_reported`` notices at the next placement.
Every filter keeps ascending id order; a ``Placement`` carries the trail of all steps.
A view with an index (``balancer.placement.index``, a live leader's) is answered from it and from
the preallocations kept per broker, with the same answers as the plain walk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.errors import BrokerFilterError
from balancer.load import BundleData
from balancer.placement.anti_affinity import filter_by_counts, modular_counts
from balancer.placement.avg import HasPlan
from balancer.placement.base import (
    SYSTEM_NAMESPACE,
    Placement,
    PlacementContext,
    PlacementStrategy,
    Step,
    bundles_by_broker_namespace,
    default_bundle_data,
    modular_usage,
)
from balancer.placement.filters import (
    filter_load_manager_class,
    filter_topic_cap_modular,
    filter_versions,
)
from balancer.placement.index import BundleIndex, Preallocations
from balancer.placement.isolation import isolation_candidates
from balancer.placement.pinned import pinned_owner
from balancer.placement.round_robin import RoundRobin
from balancer.placement.strategies import create_placement_strategy

if TYPE_CHECKING:
    from random import Random

    from balancer.shedding.base import ClusterView


_NO_BUNDLES: frozenset[str] = frozenset()

class ModularPlacement:
    """Places bundles for the modular manager and remembers what it preallocated."""

    def __init__(
        self,
        config: LoadBalancerConfig,
        strategy: PlacementStrategy | None = None,
        *,
        avg_plan: HasPlan | None = None,
        rate_from_report: bool = False,
    ) -> None:
        self.config = config
        self.strategy = strategy or create_placement_strategy(
            config.load_balancer_load_placement_strategy, config, avg_plan=avg_plan
        )
        self.round_robin = RoundRobin(config)
        self.rate_from_report = rate_from_report
        self.preallocated: dict[str, str] = {}
        self.preallocated_data: dict[str, BundleData] = {}
        self._kept = Preallocations()
        self._kept_ns: dict[str, dict[str, set[str]]] = {}
        self._kept_topics: dict[str, int] = {}
        self._unchecked: set[str] = set()
        """Preallocated since the last release check (an indexed view reports only changes)."""
        self._held: dict[str, bool] = {}
        """Preallocated bundle -> its broker already holds it in the placing index."""
        self._extra: dict[str, dict[str, int]] = {}
        """Namespace -> broker -> its preallocated bundles it does not hold (``_held``), so a
        namespace count is a sum, not an intersection (a burst of placements made
        each count cost the broker's bundles)."""
        self._held_in: BundleIndex | None = None
        """The placing index ``_held`` was read from."""
        self._refreshed_in: BundleIndex | None = None
        """The placing index whose re-puts ``_follow_refreshed`` drains."""

    def preallocations(self, view: ClusterView | None = None) -> Mapping[str, Mapping[str, BundleData]]:
        """Broker -> bundle id -> data of the bundles placed on it and not yet reported."""
        if view is not None and view.index is not None:
            self._follow_refreshed(view.index)
            return self._kept
        out: dict[str, dict[str, BundleData]] = {}
        for bundle, broker in sorted(self.preallocated.items()):
            out.setdefault(broker, {})[bundle] = self.preallocated_data[bundle]
        return out

    def release_reported(self, view: ClusterView) -> list[str]:
        """Forget preallocations their broker now reports, or whose broker is gone."""
        changes: Iterable[str] = ()
        if view.index is None:
            suspects: Iterable[str] = self.preallocated
        else:
            available = set(view.available)
            gone = [b for b in self._kept_ns if b not in available]
            changes = view.index.take_changes()
            suspects = {*changes, *self._unchecked, *(x for b in gone for x in self._kept.bundles(b))}
        self._unchecked.clear()
        released = sorted(
            bundle
            for bundle in suspects
            if (broker := self.preallocated.get(bundle)) is not None
            and (broker not in view.available
                 or (bundle in view.bundles and view.bundles[bundle].owner == broker))
        )
        for bundle in released:
            self._forget(bundle)
        if view.index is not None:
            self._recheck_held(view.index, changes)
        return released

    def _recheck_held(self, index: BundleIndex, changes: Iterable[str]) -> None:
        """Keep ``_held`` and ``_both`` true to ``index`` for the bundles whose owner changed."""
        if index is not self._held_in:  # another index (a rebuilt one): read every flag again
            self._held_in, changes = index, list(self.preallocated)
        for bundle in changes:
            broker = self.preallocated.get(bundle)
            if broker is None:
                continue
            namespace = namespace_of(bundle)
            held = bundle in index.namespace_bundles(broker).get(namespace, _NO_BUNDLES)
            if held != self._held.get(bundle, False):
                self._held[bundle] = held
                self._count_extra(broker, namespace, -1 if held else 1)

    def _follow_refreshed(self, index: BundleIndex) -> None:
        """A preallocation's data is the view's copy and shares its averages, which a report
        updates in place: read again only the preallocated bundles reported since
        (re-summing every broker per report was quadratic in pending preallocations)."""
        if index is not self._refreshed_in:
            self._refreshed_in = index
            index.take_refreshed()
            self._kept.refresh_all()
            return
        for bundle in index.take_refreshed():
            broker = self.preallocated.get(bundle)
            if broker is not None:
                self._kept.refresh(broker, bundle)

    def _count_extra(self, broker: str, namespace: str, step: int) -> None:
        brokers = self._extra.setdefault(namespace, {})
        brokers[broker] = brokers.get(broker, 0) + step
        if not brokers[broker]:
            del brokers[broker]
            if not brokers:
                del self._extra[namespace]

    def _preallocate(self, bundle: str, broker: str, data: BundleData) -> None:
        self.preallocated[bundle], self.preallocated_data[bundle] = broker, data
        self._kept.add(broker, bundle, data)
        self._kept_ns.setdefault(broker, {}).setdefault(namespace_of(bundle), set()).add(bundle)
        self._kept_topics[broker] = self._kept_topics.get(broker, 0) + data.stats.topics
        self._unchecked.add(bundle)
        index, namespace = self._held_in, namespace_of(bundle)
        if index is not None and bundle in index.namespace_bundles(broker).get(namespace, _NO_BUNDLES):
            self._held[bundle] = True
        else:
            self._count_extra(broker, namespace, 1)

    def _forget(self, bundle: str) -> None:
        broker = self.preallocated.pop(bundle)
        data = self.preallocated_data.pop(bundle)
        if not self._held.pop(bundle, False):
            self._count_extra(broker, namespace_of(bundle), -1)
        self._kept.remove(broker, bundle)
        spaces = self._kept_ns[broker]
        spaces[namespace_of(bundle)].discard(bundle)
        if not spaces[namespace_of(bundle)]:
            del spaces[namespace_of(bundle)]
        if not spaces:
            del self._kept_ns[broker]
        self._kept_topics[broker] -= data.stats.topics
        if broker not in self._kept_ns:
            del self._kept_topics[broker]

    def place(
        self, view: ClusterView, bundle: str, rng: Random, *, destination: str | None = None
    ) -> Placement:
        """Choose a broker for ``bundle`` (None when no broker is available)."""
        self.release_reported(view)
        name = self.strategy.name
        if destination is not None:
            return Placement(
                bundle, destination, (destination,), strategy=name, source="destination"
            )
        if bundle in self.preallocated:
            broker = self.preallocated[bundle]
            return Placement(bundle, broker, (broker,), strategy=name, source="preallocated")
        pin = pinned_owner(namespace_of(bundle), view.available)
        if pin is not None:  # heartbeat / SLA-monitor namespaces: their own broker, no strategy
            return Placement(bundle, pin.broker, tuple(filter(None, (pin.broker,))), strategy=name,
                             source=pin.reason)
        data = view.bundles.get(bundle) or default_bundle_data(bundle)
        isolation, candidates, steps = self._candidates(view, bundle)
        placement = self._select(view, data, rng, isolation, candidates, steps)
        if placement.broker is not None:
            if bundle in self.preallocated:  # cannot happen (answered above); kept exact anyway
                self._forget(bundle)
            self._preallocate(bundle, placement.broker, data)
        return placement

    def _candidates(
        self, view: ClusterView, bundle: str
    ) -> tuple[list[str], list[str], list[Step]]:
        namespace = namespace_of(bundle)
        isolation = isolation_candidates(view, namespace)
        steps = [Step("isolation", tuple(isolation))]
        kept = filter_topic_cap_modular(view, isolation, self._preallocated_topics(view))
        steps.append(Step("topic-cap", tuple(kept)))
        kept = filter_by_counts(view, kept, modular_counts(view, namespace, self.preallocated))
        steps.append(Step("anti-affinity", tuple(kept)))
        if (
            self.config.load_balancer_distribute_bundles_evenly_enabled
            or namespace == SYSTEM_NAMESPACE
        ):
            kept = self._fewest_namespace_bundles(view, namespace, kept)
            steps.append(Step("even-spread", tuple(kept)))
        try:
            kept = filter_versions(view, filter_load_manager_class(view, kept))
            steps.append(Step("filters", tuple(kept)))
        except BrokerFilterError as exc:
            kept = list(isolation)
            steps.append(Step("filters", tuple(kept), f"{exc.message}; back to the isolation set"))
        if not kept:
            kept = list(isolation)
            steps.append(Step("restore", tuple(kept), "no broker left; back to the isolation set"))
        return isolation, kept, steps

    def _preallocated_topics(self, view: ClusterView) -> Mapping[str, int]:
        if view.index is not None:
            return self._kept_topics  # index copies never change their stats in place
        topics: dict[str, int] = {}
        for bundle, broker in self.preallocated.items():
            topics[broker] = topics.get(broker, 0) + self.preallocated_data[bundle].stats.topics
        return topics

    def _fewest_namespace_bundles(
        self, view: ClusterView, namespace: str, candidates: list[str]
    ) -> list[str]:
        if not candidates:
            return candidates
        if view.index is None:
            index = bundles_by_broker_namespace(view, self.preallocated)
            counts = {b: len(index.get(b, {}).get(namespace, ())) for b in candidates}
        else:
            counts = self._namespace_counts(view, candidates, namespace)
        least = min(counts.values())
        return [b for b in candidates if counts[b] == least]

    def _namespace_counts(self, view: ClusterView, brokers: Sequence[str], namespace: str) -> dict[str, int]:
        """Per broker, the bundles of ``namespace`` it owns or has preallocated, each counted
        once (the size of Pulsar's ``brokerToNamespaceToBundleRange`` entry). One pass over the
        brokers: it runs for every candidate of every placement."""
        assert view.index is not None and view.index is self._held_in  # release_reported read it
        held_of, extra, none = view.index.namespace_bundles, self._extra.get(namespace, {}), _NO_BUNDLES
        return {b: len(held_of(b).get(namespace, none)) + extra.get(b, 0) for b in brokers}

    def _select(
        self,
        view: ClusterView,
        data: BundleData,
        rng: Random,
        isolation: list[str],
        candidates: list[str],
        steps: list[Step],
    ) -> Placement:
        excluded = (
            namespace_of(data.bundle) in self.config.load_balancer_shedding_excluded_namespaces
        )
        strategy = self.round_robin if excluded else self.strategy
        context = PlacementContext(view, data, rng, self.preallocations(view), self.rate_from_report)
        chosen = strategy.select(candidates, context)
        first = Placement(
            data.bundle,
            chosen.broker,
            tuple(candidates),
            chosen.scores,
            chosen.best,
            strategy.name,
            tuple(steps),
            "strategy" if chosen.broker is not None else "none",
        )
        if chosen.broker is None:
            return first
        return self._recheck(context, first, isolation, steps)

    def _recheck(
        self, context: PlacementContext, first: Placement, isolation: list[str], steps: list[Step]
    ) -> Placement:
        """Step 9: an overloaded pick makes the configured strategy choose again over the
        isolation set (even after round-robin, as in Pulsar)."""
        usage = None if first.broker is None else modular_usage(context.view, first.broker)
        if usage is None or usage <= self.config.overload_threshold:
            return first
        again = self.strategy.select(isolation, context)
        note = f"{first.broker} usage {usage:.4f} above the overload threshold"
        trail = (*steps, Step("recheck", tuple(isolation), note))
        if again.broker is None:
            return replace(first, steps=trail)
        return Placement(
            first.bundle,
            again.broker,
            tuple(isolation),
            again.scores,
            again.best,
            self.strategy.name,
            trail,
            "recheck",
        )
