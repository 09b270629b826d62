"""The shedding run of behaviour §4.0: grace period, strategy, modular checks, bookkeeping.

Invariants:
- bundles shed in a run are exempt from shedding for the grace period (``recently_unloaded``);
- the extensible manager also remembers each source broker (``recently_unloaded_brokers``) for
  TransferShedder's cool-down;
- under the modular manager a selection is dropped when isolation leaves no other broker or the
  anti-affinity check says no; if that drops everything the run skips with ``NoBundles``;
- with fewer than two brokers nothing is shed (``NoBrokers``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.decisions import Decision, Reason, ShedResult
from balancer.placement.anti_affinity import may_leave_broker
from balancer.placement.isolation import isolation_candidates
from balancer.shedding.base import ClusterView, SheddingStrategy, create_strategy


@dataclass
class SheddingMemory:
    """What a run remembers across runs: recently shed bundles and sources (epoch ms)."""

    recently_unloaded: dict[str, int] = field(default_factory=dict)
    recently_unloaded_brokers: dict[str, int] = field(default_factory=dict)

    def merge(self, recently_unloaded: Mapping[str, int]) -> None:
        for bundle, when in recently_unloaded.items():
            self.recently_unloaded[bundle] = max(when, self.recently_unloaded.get(bundle, when))

    def purge(self, now_ms: int, grace_ms: int) -> None:
        expired = [b for b, when in self.recently_unloaded.items() if when < now_ms - grace_ms]
        for bundle in expired:
            del self.recently_unloaded[bundle]


class SheddingRun:
    """Drives one strategy run after run, carrying its memory and the strategy's state."""

    def __init__(self, config: LoadBalancerConfig, strategy: SheddingStrategy | None = None):
        self.config = config
        self.strategy = strategy or create_strategy(
            config.load_balancer_load_shedding_strategy, config
        )
        self.memory = SheddingMemory()

    def run(self, view: ClusterView) -> ShedResult:
        """One run over ``view``; the view's memory fields are replaced by the run's memory."""
        self.memory.merge(view.recently_unloaded)
        self.memory.purge(view.now_ms, self.config.grace_period_ms)
        view.recently_unloaded = self.memory.recently_unloaded
        view.recently_unloaded_brokers = self.memory.recently_unloaded_brokers
        if len(view.available) < 2:
            return ShedResult.skipped(Reason.NO_BROKERS, brokers=len(view.available))
        result = self.strategy.shed(view)
        if not self.strategy.extensible and result.decisions:
            result = self._modular_checks(view, result)
        self._remember(view.now_ms, result.decisions)
        return result

    def _modular_checks(self, view: ClusterView, result: ShedResult) -> ShedResult:
        kept: list[Decision] = []
        for decision in result.decisions:
            if self._allowed(view, decision):
                kept.append(decision)
        if not kept:
            return replace(result, decisions=(), skip=Reason.NO_BUNDLES)
        return replace(result, decisions=tuple(kept))

    @staticmethod
    def _allowed(view: ClusterView, decision: Decision) -> bool:
        namespace = namespace_of(decision.bundle)
        source = decision.source or ""
        # Pulsar's shouldNamespacePoliciesUnload: some broker other than the source must qualify.
        if not any(b != source for b in isolation_candidates(view, namespace)):
            return False
        return may_leave_broker(view, decision.bundle, source)

    def _remember(self, now_ms: int, decisions: tuple[Decision, ...]) -> None:
        for decision in decisions:
            self.memory.recently_unloaded[decision.bundle] = now_ms
            if self.strategy.extensible and decision.source is not None:
                self.memory.recently_unloaded_brokers[decision.source] = now_ms
