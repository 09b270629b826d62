"""``lbctl decide place``: where each bundle of ``assign`` goes, in order (behaviour §5.7).

Invariants (contracts §5):
- ``config.loadManagerClassName`` selects the modular pipeline (§5.1, with ``strategy``) or the
  extensible assignment (§5.2, always LeastResourceUsageWithWeight on ``weightedMaxEMA``);
- a broker's long-term rate is its reported msgRateIn+Out; its topic count is the sum over the
  bundles it owns in ``bundles``; a bundle of ``assign`` takes its load from ``bundles`` (where
  its owner must be null) or Pulsar's defaults;
- each placement counts for the next: preallocated (modular) or owned (extensible);
- every random pick draws from one ``random.Random(seed)``, so a seed fixes the output;
- ``candidates`` is the set handed to the strategy for the final pick, ascending ids.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

from balancer.bundles import BundleId
from balancer.config import LoadBalancerConfig
from balancer.errors import MalformedInput, UnknownBroker
from balancer.load import BrokerReport, BundleStats, LoadModel
from balancer.placement.base import Placement
from balancer.placement.extensible import ExtensiblePlacement
from balancer.placement.modular import ModularPlacement
from balancer.placement.strategies import create_placement_strategy
from balancer.shedding.base import ClusterView, NamespacePolicy
from lbctl.decide.inputs import (
    broker_report,
    bundle_record,
    config_from,
    failure_domains,
    integer,
    known_keys,
    mapping,
    namespace_policies,
)

Bundles = dict[str, tuple[str | None, BundleStats]]


@dataclasses.dataclass
class _Inputs:
    config: LoadBalancerConfig
    strategy: str
    seed: int
    reports: dict[str, BrokerReport]
    bundles: Bundles
    namespaces: dict[str, NamespacePolicy]
    domains: dict[str, str]
    assign: list[str]


def run(document: dict[str, Any]) -> dict[str, Any]:
    inputs = _parse(document)
    rng = random.Random(inputs.seed)
    if inputs.config.extensible:
        placements = _place_extensible(inputs, rng)
    else:
        placements = _place_modular(inputs, rng)
    return {"assignments": {p.bundle: p.to_output() for p in placements}}


def _place_modular(inputs: _Inputs, rng: random.Random) -> list[Placement]:
    strategy = create_placement_strategy(inputs.strategy, inputs.config)
    placement = ModularPlacement(inputs.config, strategy, rate_from_report=True)
    view = _view(inputs, inputs.bundles)
    return [placement.place(view, bundle, rng) for bundle in inputs.assign]


def _place_extensible(inputs: _Inputs, rng: random.Random) -> list[Placement]:
    create_placement_strategy(inputs.strategy, inputs.config)  # validates the name only
    placement = ExtensiblePlacement(inputs.config)
    bundles = dict(inputs.bundles)
    out: list[Placement] = []
    for bundle in inputs.assign:
        result = placement.place(_view(inputs, bundles), bundle, rng)
        out.append(result)
        if result.broker is not None:
            stats = bundles[bundle][1] if bundle in bundles else BundleStats(bundle)
            bundles[bundle] = (result.broker, stats)
    return out


def _view(inputs: _Inputs, bundles: Bundles) -> ClusterView:
    """One report round: topics of each broker summed over the bundles it owns."""
    topics: dict[str, int] = {}
    for owner, stats in bundles.values():
        if owner is not None:
            topics[owner] = topics.get(owner, 0) + stats.topics
    reports = {
        b: dataclasses.replace(r, topics=topics.get(b, 0)) for b, r in inputs.reports.items()
    }
    model = LoadModel(inputs.config)
    model.apply_round(0, reports, bundles)
    return ClusterView(
        now_ms=0,
        config=inputs.config,
        brokers=dict(model.brokers),
        bundles=dict(model.bundles),
        namespaces=inputs.namespaces,
        failure_domains=inputs.domains,
        available=tuple(sorted(reports)),
    )


TOP_KEYS = ("strategy", "config", "seed", "brokers", "bundles", "namespaces", "failureDomains", "assign")


def _parse(document: Mapping[str, Any]) -> _Inputs:
    known_keys(document, TOP_KEYS, "")
    config = config_from(document)
    strategy = document.get("strategy") or config.load_balancer_load_placement_strategy
    if not isinstance(strategy, str):
        raise MalformedInput(f"strategy: expected a name, got {strategy!r}", value=strategy)
    seed = integer(document.get("seed", 0), "seed")
    raw_brokers = mapping(document.get("brokers") or {}, "brokers")
    reports = {str(b): broker_report(str(b), r) for b, r in raw_brokers.items()}
    raw_bundles = mapping(document.get("bundles") or {}, "bundles")
    bundles = {str(b): bundle_record(str(b), r) for b, r in raw_bundles.items()}
    for bundle_id, (owner, _) in bundles.items():
        if owner is not None and owner not in reports:
            raise UnknownBroker(
                f"bundles.{bundle_id}.owner: unknown broker {owner!r}; "
                f"accepted: {', '.join(sorted(reports)) or 'none (no brokers given)'}",
                value=owner,
            )
    return _Inputs(
        config=config,
        strategy=strategy,
        seed=seed,
        reports=reports,
        bundles=bundles,
        namespaces=namespace_policies(document.get("namespaces")),
        domains=failure_domains(reports, document.get("failureDomains")),
        assign=_assign(document.get("assign"), bundles),
    )


def _assign(raw: Any, bundles: Bundles) -> list[str]:
    if not isinstance(raw, list):
        raise MalformedInput(f"assign: expected a list of bundle ids, got {raw!r}", value="assign")
    seen: set[str] = set()
    for index, bundle in enumerate(raw):
        where = f"assign[{index}]"
        if not isinstance(bundle, str):
            raise MalformedInput(f"{where}: expected a bundle id, got {bundle!r}", value=where)
        BundleId.parse(bundle)
        if bundle in seen:
            raise MalformedInput(f"{where}: {bundle} is listed twice", value=bundle)
        owner = bundles.get(bundle, (None, None))[0]
        if owner is not None:
            raise MalformedInput(
                f"{where}: {bundle} is already owned by {owner!r}; only unowned bundles "
                "(owner null in bundles) can be placed",
                value=bundle,
            )
        seen.add(bundle)
    return list(raw)
