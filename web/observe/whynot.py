"""Why nothing moves: each shedding strategy's last skips, with the load and the threshold.

``WhyNot.take`` folds the log's ``SheddingSkipped`` records (one per shedding run that moved
nothing, its strategy and reason) and the moves a shedding run made; ``explain`` turns one
strategy's skips into what the dashboard's "why not" panel shows: the reason, how many runs in a
row, since when, each broker's usage at the last skip and the rule it did not meet, with the
broker.conf key and value of its threshold.

Invariants:
- a strategy's streak counts its consecutive skipped runs with one reason; a move its run made,
  or another reason, starts a new streak; totals by reason cover the whole log;
- the usages are the brokers' latest reports when the skip was logged (the max over CPU, memory,
  direct memory and bandwidth, in percent): the dashboard's figures, which the strategies smooth
  (an EMA, resource weights) before comparing; the panel says so;
- the running strategy's own figures (its smoothed averages, spread, thresholds) come from the
  balancer's status (the leader's last cycle, ``panel(config, status)``), for the skip they match;
- ``threshold_line`` is the usage above which the strategy calls a broker overloaded (None where
  its rule is not a usage level: rates, scores), for the charts' threshold line;
- pure: no clock, no I/O; memory is one entry per strategy.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.config import LoadBalancerConfig

MOVES = ("UnloadRequested", "TransferPrepared")


@dataclass
class Skips:
    """One strategy's skipped runs."""

    reason: str = ""
    runs: int = 0
    since_ms: int = 0
    last_ms: int = 0
    usage: dict[str, float] = field(default_factory=dict)
    last_move_ms: int | None = None
    totals: Counter[str] = field(default_factory=Counter)


class WhyNot:
    """The skips of every strategy the log names (see the module docstring)."""

    def __init__(self) -> None:
        self.strategies: dict[str, Skips] = {}

    def take(self, kind: str, payload: Mapping[str, Any], ts_ms: int, usage: Mapping[str, float]) -> None:
        """Fold one record's type and payload; ``usage``: broker -> its latest max usage %."""
        if kind == "SheddingSkipped":
            skips = self.strategies.setdefault(str(payload.get("strategy") or "?"), Skips())
            reason = str(payload.get("reason") or "Unknown")
            if reason != skips.reason or skips.runs == 0:
                skips.reason, skips.runs, skips.since_ms = reason, 0, ts_ms
            skips.runs += 1
            skips.last_ms = ts_ms
            skips.usage = dict(usage)
            skips.totals[reason] += 1
        elif kind in MOVES:
            decision = payload.get("decision") or {}
            strategy = decision.get("strategy")
            if strategy and decision.get("run_ms") is not None:  # a shedding run's move, not an admin's
                skips = self.strategies.setdefault(str(strategy), Skips())
                skips.runs, skips.reason, skips.last_move_ms = 0, "", ts_ms

    def panel(self, config: LoadBalancerConfig,
              status: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """One entry per strategy that skipped, the configured one first; ``status``: the
        balancer's (``Cluster.balancer_status``), whose last cycle carries the running
        strategy's own figures of its last run."""
        configured = config.load_balancer_load_shedding_strategy
        order = sorted(self.strategies, key=lambda name: (name != configured, name))
        entries = [explain(name, self.strategies[name], config) for name in order
                   if self.strategies[name].runs]
        last = (status or {}).get("lastCycle") or {}
        for entry in entries:
            if entry["strategy"] == configured and last.get("outcome") == entry["reason"] \
                    and int(last.get("atMs") or 0) >= entry["since_ms"] and last.get("inputs"):
                entry["shedder"] = figures_text(last["inputs"])
        return entries


MEANINGS = {
    "Balanced": "no broker met the rule below",
    "HitCount": "the rule below held for too few runs in a row (loadBalancerSheddingConditionHitCountThreshold)",
    "NoBundles": "a broker met the rule below but had no bundle worth moving (minimum throughput or rate)",
    "CoolDown": "a broker lost bundles too recently (loadBalanceSheddingDelayInSeconds)",
    "OutDatedData": "the brokers' load reports are too old to act on",
    "NoLoadData": "a broker has no load report yet",
    "NoBrokers": "fewer than two brokers to move load between",
    "Paused": "an operator paused the balancer (lbctl balancer status)",
    "Unknown": "the run failed (the leader's log says why)",
}
"""What each skip reason means, in the panel's words."""


def explain(strategy: str, skips: Skips, config: LoadBalancerConfig) -> dict[str, Any]:
    """The panel's entry for one strategy: the figures and the rule in words."""
    usage = skips.usage
    values = sorted(usage.values())
    figures: dict[str, Any] = {}
    if values:
        high = max(usage, key=lambda b: (usage[b], b))
        low = min(usage, key=lambda b: (usage[b], b))
        figures = {"highest": {"broker": high, "percent": round(usage[high], 1)},
                   "lowest": {"broker": low, "percent": round(usage[low], 1)},
                   "mean_percent": round(statistics.fmean(values), 1),
                   "std_percent": round(statistics.pstdev(values), 1)}
    return {"strategy": strategy, "reason": skips.reason, "meaning": MEANINGS.get(skips.reason, ""), "shedder": "",
            "runs": skips.runs, "since_ms": skips.since_ms,
            "last_ms": skips.last_ms, "last_move_ms": skips.last_move_ms, "totals": dict(skips.totals),
            "usage": {b: round(v, 1) for b, v in sorted(usage.items())}, "figures": figures,
            "rule": rule(strategy, config, values), "line_percent": threshold_line(strategy, config, values)}


def rule(strategy: str, config: LoadBalancerConfig, values: list[float]) -> dict[str, Any]:
    """What the strategy needs before it moves anything: words, the key and its value."""
    mean = statistics.fmean(values) if values else 0.0
    std = statistics.pstdev(values) if values else 0.0
    if strategy == "TransferShedder":
        target = config.load_balancer_broker_load_target_std
        return {"key": "loadBalancerBrokerLoadTargetStd", "value": target,
                "text": f"sheds when the brokers' usage spread (standard deviation) exceeds "
                        f"{target * 100:.0f} %, or a broker is above "
                        f"{config.load_balancer_broker_overloaded_threshold_percentage:g} % and the mean "
                        f"+ {target * 100:.0f} %, for more than "
                        f"{config.load_balancer_shedding_condition_hit_count_threshold} runs in a row; "
                        f"now {std:.1f} %"}
    if strategy == "ThresholdShedder":
        margin = config.load_balancer_broker_threshold_shedder_percentage
        return {"key": "loadBalancerBrokerThresholdShedderPercentage", "value": margin,
                "text": f"sheds from a broker above the mean + {margin:g} % (now {mean:.1f} % + "
                        f"{margin:g} % = {mean + margin:.1f} %)"}
    if strategy == "OverloadShedder":
        level = config.load_balancer_broker_overloaded_threshold_percentage
        return {"key": "loadBalancerBrokerOverloadedThresholdPercentage", "value": level,
                "text": f"sheds from a broker above {level:g} %"}
    if strategy == "UniformLoadShedder":
        spread = config.load_balancer_msg_rate_difference_shedder_threshold
        return {"key": "loadBalancerMsgRateDifferenceShedderThreshold", "value": spread,
                "text": f"sheds when the busiest broker's message rate exceeds the idlest's by "
                        f"{spread:g} % (or its throughput is "
                        f"{config.load_balancer_msg_throughput_multiplier_difference_shedder_threshold:g}x)"}
    if strategy == "AvgShedder":
        low, high = (config.load_balancer_avg_shedder_low_threshold,
                     config.load_balancer_avg_shedder_high_threshold)
        return {"key": "loadBalancerAvgShedderHighThreshold", "value": high,
                "text": f"sheds when the top and bottom brokers' scores differ by {high:g} points, or "
                        f"by {low:g} for several runs in a row"}
    return {"key": "loadBalancerLoadSheddingStrategy", "value": strategy,
            "text": f"{strategy}: see docs/concepts.md for its rule"}


def threshold_line(strategy: str, config: LoadBalancerConfig, values: list[float]) -> float | None:
    """The usage (percent) above which ``strategy`` calls a broker overloaded, if it has one."""
    mean = statistics.fmean(values) if values else 0.0
    if strategy == "ThresholdShedder":
        return round(mean + config.load_balancer_broker_threshold_shedder_percentage, 1)
    if strategy == "OverloadShedder":
        return float(config.load_balancer_broker_overloaded_threshold_percentage)
    if strategy == "TransferShedder":
        return round(max(config.load_balancer_broker_overloaded_threshold_percentage,
                         mean + config.load_balancer_broker_load_target_std * 100), 1)
    return None


FRACTIONS = frozenset({"avg", "average", "std", "target_std", "threshold", "mean_utilisation",
                       "max_ratio", "min_ratio", "tolerance", "trigger"})
"""Figures of the strategies' runs that are fractions of a broker's capacity (shown in %)."""


def figures_text(inputs: Mapping[str, Any]) -> str:
    """A run's figures in words, rounded, fractions in percent: ``avg 37.4 %, std 13.2 %, ...``."""
    return ", ".join(f"{key.replace('_', ' ')} {_figure(key, value)}" for key, value in inputs.items())


def _figure(key: str, value: Any) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return str(value).lower() if isinstance(value, bool) else str(value)
    if isinstance(value, Mapping):
        return "(" + ", ".join(f"{k} {_figure(key, v)}" for k, v in sorted(value.items())) + ")"
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) if value else "none"
    if not isinstance(value, int | float):
        return str(value)
    if key in FRACTIONS:
        return f"{value * 100:.1f} %"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{value:.3g}"
