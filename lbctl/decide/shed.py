"""``lbctl decide shed``: cycles of load reports, one shedding run each, state carried over.

Invariants (behaviour §4.0, contracts §5): per cycle the reports are applied (averages, EMAs, load
time ``now_ms``), the input's ``recentlyUnloaded`` merged, the grace period purged and the strategy
run without choosing destinations beyond what the strategy itself plans. A broker record's
``reportAgeMs`` (default 0) dates its report that long before ``now_ms`` (the extensible manager's
load-data TTL and cool-down read the report's time).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from balancer.decisions import ShedResult
from balancer.errors import MalformedInput
from balancer.load import LoadModel
from balancer.shedding.base import ClusterView, create_strategy
from balancer.shedding.run import SheddingRun
from lbctl.decide.inputs import (
    broker_report,
    bundle_record,
    config_from,
    count,
    failure_domains,
    integer,
    known_keys,
    mapping,
    namespace_policies,
)

TOP_KEYS = ("strategy", "config", "cycles")
CYCLE_KEYS = ("now_ms", "brokers", "bundles", "namespaces", "failureDomains", "recentlyUnloaded")


def run(document: dict[str, Any]) -> dict[str, Any]:
    known_keys(document, TOP_KEYS, "")
    config = config_from(document)
    strategy_name = document.get("strategy") or config.load_balancer_load_shedding_strategy
    if not isinstance(strategy_name, str):
        raise MalformedInput(f"strategy: expected a name, got {strategy_name!r}")
    shedding = SheddingRun(config, create_strategy(strategy_name, config))
    model = LoadModel(config)
    cycles = document.get("cycles")
    if not isinstance(cycles, list) or not cycles:
        raise MalformedInput("cycles: expected a non-empty list of report rounds")
    outputs = [_one_cycle(i, c, model, shedding).to_output() for i, c in enumerate(cycles)]
    return {"cycles": outputs}


def _one_cycle(index: int, raw: Any, model: LoadModel, shedding: SheddingRun) -> ShedResult:
    where = f"cycles[{index}]"
    cycle = mapping(raw, where, CYCLE_KEYS)
    now_ms = integer(cycle.get("now_ms"), f"{where}.now_ms")
    reports = {b: broker_report(b, r) for b, r in mapping(cycle.get("brokers", {}), "brokers").items()}
    bundles = {b: bundle_record(b, r) for b, r in mapping(cycle.get("bundles", {}), "bundles").items()}
    model.apply_round(now_ms, reports, bundles)
    for broker_id, raw_report in cycle.get("brokers", {}).items():
        # a report published reportAgeMs before now_ms: the extensible manager's TTL and cool-down see it so
        age = count(raw_report.get("reportAgeMs", 0), f"{where}.brokers.{broker_id}.reportAgeMs")
        model.brokers[broker_id].updated_ms = now_ms - age
    view = ClusterView(
        now_ms=now_ms,
        config=model.config,
        brokers=dict(model.brokers),
        bundles=dict(model.bundles),
        namespaces=namespace_policies(cycle.get("namespaces")),
        failure_domains=failure_domains(reports, cycle.get("failureDomains")),
        recently_unloaded=_recently_unloaded(cycle.get("recentlyUnloaded"), where),
    )
    return shedding.run(view)


def _recently_unloaded(raw: Any, where: str) -> dict[str, int]:
    record: Mapping[str, Any] = mapping(raw or {}, f"{where}.recentlyUnloaded")
    return {b: integer(t, f"{where}.recentlyUnloaded.{b}") for b, t in record.items()}
