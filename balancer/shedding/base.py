"""What a shedding strategy sees and promises: the cluster view, the strategy port, the registry.

Invariants:
- ``ClusterView`` is the whole input of one run; strategies read it and may only mutate
  ``recently_unloaded_brokers`` (TransferShedder forgets expired cool-downs, behaviour §4.4);
- brokers iterate in ascending id order and bundles in ascending id order (behaviour's
  determinism rule), so equal inputs give equal decisions;
- a strategy keeps its own cross-cycle state (EMAs, hit counts) and prunes the state of brokers
  that left the round (behaviour §8, project choice).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar, Protocol

from balancer.bundles import namespace_of
from balancer.config import SHEDDING_STRATEGIES, LoadBalancerConfig, resolve_class_name
from balancer.decisions import ShedResult
from balancer.errors import UnknownStrategy
from balancer.load import BrokerLoadData, BundleData

if TYPE_CHECKING:
    from balancer.placement.index import BundleIndex

_HEARTBEAT_V1 = re.compile(r"^pulsar/[^/]+/[^/]+:\d+$")
_HEARTBEAT_V2 = re.compile(r"^pulsar/[^/]+:\d+$")
_SLA_MONITOR = re.compile(r"^sla-monitor/[^/]+/[^/]+:\d+$")


def is_system_namespace(namespace: str) -> bool:
    """Pulsar's system, heartbeat and SLA-monitor namespaces, which are never shed."""
    return (
        namespace == "pulsar/system"
        or bool(_HEARTBEAT_V1.match(namespace))
        or bool(_HEARTBEAT_V2.match(namespace))
        or bool(_SLA_MONITOR.match(namespace))
    )


@dataclass(frozen=True, slots=True)
class IsolationPolicy:
    """Namespace isolation: primary and secondary broker regexes, and the primary minimum."""

    primary: tuple[str, ...] = ()
    secondary: tuple[str, ...] = ()
    min_limit: int = 1


@dataclass(frozen=True, slots=True)
class NamespacePolicy:
    namespace: str
    anti_affinity_group: str | None = None
    isolation: IsolationPolicy | None = None

    @property
    def has_policies(self) -> bool:
        return self.anti_affinity_group is not None or self.isolation is not None


@dataclass
class ClusterView:
    """Everything one shedding (or placement) run may look at.

    ``brokers`` holds the available brokers that have load data, keyed in ascending id order;
    ``available`` lists every available broker (some may lack data).
    """

    now_ms: int
    config: LoadBalancerConfig
    brokers: dict[str, BrokerLoadData]
    bundles: dict[str, BundleData]
    namespaces: dict[str, NamespacePolicy] = field(default_factory=dict)
    failure_domains: dict[str, str] = field(default_factory=dict)
    recently_unloaded: dict[str, int] = field(default_factory=dict)
    recently_unloaded_brokers: dict[str, int] = field(default_factory=dict)
    available: tuple[str, ...] = ()
    index: BundleIndex | None = None
    """Kept per event by a live leader (``balancer.placement.index``): ``bundles`` is then its
    dict, and per-owner questions are answered from it instead of a walk over every bundle."""

    def __post_init__(self) -> None:
        if not self.available:
            self.available = tuple(sorted(self.brokers))

    @cached_property
    def bundles_by_owner(self) -> Mapping[str, tuple[BundleData, ...]]:
        """Owner -> its bundles in ascending id order (computed once per view)."""
        grouped: dict[str, list[BundleData]] = {}
        for bundle_id in sorted(self.bundles):
            data = self.bundles[bundle_id]
            if data.owner is not None:
                grouped.setdefault(data.owner, []).append(data)
        return {owner: tuple(items) for owner, items in grouped.items()}

    def bundles_of(self, broker: str) -> tuple[BundleData, ...]:
        if self.index is not None:
            return self.index.bundles_of(broker)
        return self.bundles_by_owner.get(broker, ())

    def bundle_count(self, broker: str) -> int:
        """How many bundles the broker owns: those with load data, or its report's count if higher.

        Pulsar's "more than one bundle" checks count the broker's own bundle list
        (``LocalBrokerData.getBundles()``), load data or not.
        """
        owned = len(self.bundles_of(broker))
        data = self.brokers.get(broker)
        return owned if data is None else max(owned, data.report.bundles)

    def policy(self, namespace: str) -> NamespacePolicy:
        return self.namespaces.get(namespace) or NamespacePolicy(namespace)

    def domain_of(self, broker: str) -> str:
        """Failure domain of a broker; unmapped brokers are in domain ``default``."""
        return self.failure_domains.get(broker, "default")

    def is_recently_unloaded(self, bundle: str) -> bool:
        return bundle in self.recently_unloaded

    def is_sheddable(self, bundle: str) -> bool:
        """Not recently unloaded and not of a system namespace (behaviour §4.0 step 2)."""
        return bundle not in self.recently_unloaded and not is_system_namespace(
            namespace_of(bundle)
        )


class SheddingStrategy(Protocol):
    """A shedding strategy: one run over a view, returning decisions in the order made."""

    name: ClassVar[str]
    extensible: ClassVar[bool]

    def shed(self, view: ClusterView) -> ShedResult: ...


STRATEGY_MODULES: dict[str, str] = {
    "ThresholdShedder": "balancer.shedding.threshold",
    "OverloadShedder": "balancer.shedding.overload",
    "UniformLoadShedder": "balancer.shedding.uniform",
    "AvgShedder": "balancer.shedding.avg",
    "TransferShedder": "balancer.shedding.transfer",
    "PlannedTransferShedder": "balancer.shedding.planned_transfer",
}


def register_strategy(short_name: str, module: str, class_name: str | None = None) -> None:
    """Make a project strategy selectable by config and ``lbctl decide``."""
    STRATEGY_MODULES[short_name] = module
    SHEDDING_STRATEGIES.setdefault(short_name, class_name or f"bundle_balancer.{short_name}")


def resolve_strategy_name(name: str) -> str:
    try:
        return resolve_class_name(
            name, SHEDDING_STRATEGIES, "shedding strategy", "loadBalancerLoadSheddingStrategy"
        )
    except Exception:
        raise UnknownStrategy(
            f"unknown shedding strategy {name!r}; accepted: {', '.join(sorted(STRATEGY_MODULES))}",
            value=name,
        ) from None


def create_strategy(name: str, config: LoadBalancerConfig) -> SheddingStrategy:
    """Instantiate a strategy by short or Pulsar class name; each module has ``STRATEGY``."""
    short = resolve_strategy_name(name)
    module = importlib.import_module(STRATEGY_MODULES[short])
    factory = module.STRATEGY
    strategy: SheddingStrategy = factory(config)
    return strategy
