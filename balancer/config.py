"""Load balancer configuration: Pulsar ``broker.conf`` keys, defaults and validation.

Invariants:
- every key of behaviour §7 is accepted, with Pulsar's default; another key of Pulsar 4.0's
  broker.conf (balancer/pulsar_keys.py) is ignored and counted in ``ignored``, a deprecated one
  listed in ``deprecated`` (Pulsar's loader takes both); any other key is refused, naming the closest;
- numbers are finite; percentages are not capped at 100 (Pulsar does not cap them);
- a ``LoadBalancerConfig`` is immutable and always valid (validation happens on construction);
- strategy and class values are stored in their short form (``ThresholdShedder``), whatever
  spelling came in (short name, ``impl.X``/``ext.X`` or a full Pulsar class name).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.errors import ConfigError
from balancer.pulsar_keys import DEPRECATED, PULSAR_KEYS

_IMPL = "org.apache.pulsar.broker.loadbalance.impl."
_EXT = "org.apache.pulsar.broker.loadbalance.extensions."

SHEDDING_STRATEGIES: dict[str, str] = {
    "ThresholdShedder": _IMPL + "ThresholdShedder",
    "OverloadShedder": _IMPL + "OverloadShedder",
    "UniformLoadShedder": _IMPL + "UniformLoadShedder",
    "AvgShedder": _IMPL + "AvgShedder",
    "TransferShedder": _EXT + "scheduler.TransferShedder",
    "PlannedTransferShedder": "bundle_balancer.PlannedTransferShedder",
}
"""Short name -> Pulsar class name. Project strategies register themselves here too."""

PLACEMENT_STRATEGIES: dict[str, str] = {
    "LeastLongTermMessageRate": _IMPL + "LeastLongTermMessageRate",
    "LeastResourceUsageWithWeight": _IMPL + "LeastResourceUsageWithWeight",
    "AvgShedder": _IMPL + "AvgShedder",
    "RoundRobin": _IMPL + "RoundRobinBrokerSelector",
}

LOAD_MANAGERS: dict[str, str] = {
    "ModularLoadManagerImpl": _IMPL + "ModularLoadManagerImpl",
    "ExtensibleLoadManagerImpl": _EXT + "ExtensibleLoadManagerImpl",
}

TABLE_VIEWS: dict[str, str] = {
    "ServiceUnitStateTableViewImpl": _EXT + "channel.ServiceUnitStateTableViewImpl",
    "ServiceUnitStateMetadataStoreTableViewImpl": _EXT
    + "channel.ServiceUnitStateMetadataStoreTableViewImpl",
}

SPLIT_ALGORITHMS: tuple[str, ...] = (
    "range_equally_divide",
    "topic_count_equally_divide",
    "specified_positions_divide",
    "flow_or_qps_equally_divide",
)


def resolve_class_name(value: str, table: Mapping[str, str], what: str, key: str) -> str:
    """Map a short name, ``impl.X``/``ext.X`` or a full class name to the short name."""
    text = value.strip()
    if text in table:
        return text
    for short, full in table.items():
        if text == full or text.endswith("." + short) or full.endswith("." + text):
            return short
    raise ConfigError(
        f"{key}: unknown {what} {text!r}; accepted: {', '.join(sorted(table))}",
        key=key,
        value=text,
    )


def snake_case(pulsar_key: str) -> str:
    """``loadBalancerCPUResourceWeight`` -> ``load_balancer_cpu_resource_weight``."""
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", pulsar_key)
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", spaced)
    return spaced.lower()


Parser = Callable[[str, Any], Any]


def _bool(key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"{key}: {raw!r} is not a boolean; accepted: true, false", key=key, value=raw)


def _number(kind: type, low: float | None, high: float | None) -> Parser:
    def parse(key: str, raw: Any) -> Any:
        if isinstance(raw, bool):
            raise ConfigError(f"{key}: {raw!r} is not a number", key=key, value=raw)
        try:
            value = kind(float(raw)) if kind is float else _to_int(raw)
            if not math.isfinite(value):
                raise ValueError(raw)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(
                f"{key}: {raw!r} is not {'an integer' if kind is int else 'a number'}",
                key=key,
                value=raw,
            ) from None
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"[{_fmt(low)}, {_fmt(high)}]"
            raise ConfigError(
                f"{key}: {raw!r} is out of range; accepted: {bounds}", key=key, value=raw
            )
        return value

    return parse


def _to_int(raw: Any) -> int:
    if isinstance(raw, int):
        return raw
    as_float = float(raw)
    if not as_float.is_integer():
        raise ValueError(raw)
    return int(as_float)


def _fmt(bound: float | None) -> str:
    return "inf" if bound is None else f"{bound:g}"


def _choice(table: Mapping[str, str], what: str) -> Parser:
    def parse(key: str, raw: Any) -> str:
        return resolve_class_name(str(raw), table, what, key)

    return parse


def _string(key: str, raw: Any) -> str | None:
    if raw is None:
        return None
    text = str(raw).strip()
    return text or None


def _csv(allowed: Iterable[str] | None = None) -> Parser:
    allowed_set = frozenset(allowed) if allowed is not None else None

    def parse(key: str, raw: Any) -> tuple[str, ...]:
        items = raw if isinstance(raw, list | tuple) else str(raw or "").split(",")
        values = tuple(str(item).strip() for item in items if str(item).strip())
        if allowed_set is not None:
            for value in values:
                if value not in allowed_set:
                    raise ConfigError(
                        f"{key}: unknown value {value!r}; accepted: {', '.join(sorted(allowed_set))}",
                        key=key,
                        value=value,
                    )
        return values

    return parse


def _split_algorithm(key: str, raw: Any) -> str:
    text = str(raw).strip()
    if text not in SPLIT_ALGORITHMS:
        raise ConfigError(
            f"{key}: unknown split algorithm {text!r}; accepted: {', '.join(SPLIT_ALGORITHMS)}",
            key=key,
            value=text,
        )
    return text


_ASSIGNER = "org.apache.pulsar.common.naming.ConsistentHashingTopicBundleAssigner"


def _assigner(key: str, raw: Any) -> str:
    text = str(raw).strip()
    if text not in (_ASSIGNER, "ConsistentHashingTopicBundleAssigner"):
        raise ConfigError(f"{key}: {text!r} is not supported; accepted: {_ASSIGNER}", key=key, value=text)
    return _ASSIGNER


PCT = _number(float, 0, None)  # Pulsar caps no percentage (its own tests use 400)
NONNEG_F = _number(float, 0, None)
NONNEG_I = _number(int, 0, None)
POS_I = _number(int, 1, None)
FRACTION = _number(float, 0, 1)


@dataclass(frozen=True)
class ConfigKey:
    """One broker.conf key: its Pulsar name, default, parser and one-line meaning."""

    name: str
    default: Any
    parse: Parser
    doc: str

    @property
    def attr(self) -> str:
        return snake_case(self.name)


K = ConfigKey
KEYS: tuple[ConfigKey, ...] = (
    K("loadManagerClassName", "ModularLoadManagerImpl", _choice(LOAD_MANAGERS, "load manager"),
      "ModularLoadManagerImpl (M) or ExtensibleLoadManagerImpl (E, PIP-192)"),
    K("loadBalancerEnabled", True, _bool, "master switch for load balancing"),
    K("loadBalancerSheddingEnabled", True, _bool, "switch for periodic shedding"),
    K("loadBalancerLoadSheddingStrategy", "ThresholdShedder", _choice(SHEDDING_STRATEGIES, "shedding strategy"),
      "ThresholdShedder, OverloadShedder, UniformLoadShedder, AvgShedder, TransferShedder (E), or a project strategy"),
    K("loadBalancerLoadPlacementStrategy", "LeastLongTermMessageRate", _choice(PLACEMENT_STRATEGIES, "placement strategy"),
      "M: LeastLongTermMessageRate, LeastResourceUsageWithWeight or AvgShedder"),
    K("loadBalancerSheddingIntervalMinutes", 1, POS_I, "minutes between shedding runs"),
    K("loadBalancerSheddingGracePeriodMinutes", 30, NONNEG_I, "minutes a shed bundle is exempt from shedding"),
    K("loadBalancerBrokerOverloadedThresholdPercentage", 85, PCT, "usage above which a broker is overloaded"),
    K("loadBalancerBrokerUnderloadedThresholdPercentage", 50, PCT, "accepted for compatibility, unused"),
    K("loadBalancerBrokerThresholdShedderPercentage", 10, PCT, "ThresholdShedder: margin above the average"),
    K("lowerBoundarySheddingEnabled", False, _bool, "ThresholdShedder: also shed towards brokers below the average"),
    K("loadBalancerHistoryResourcePercentage", 0.9, FRACTION, "EMA weight of history"),
    K("loadBalancerCPUResourceWeight", 1.0, NONNEG_F, "weight of CPU usage"),
    K("loadBalancerMemoryResourceWeight", 0.0, NONNEG_F, "weight of JVM heap usage (deprecated)"),
    K("loadBalancerDirectMemoryResourceWeight", 0.0, NONNEG_F, "weight of direct memory usage"),
    K("loadBalancerBandwidthInResourceWeight", 1.0, NONNEG_F, "weight of inbound bandwidth usage"),
    K("loadBalancerBandwidthOutResourceWeight", 1.0, NONNEG_F, "weight of outbound bandwidth usage"),
    K("loadBalancerBundleUnloadMinThroughputThreshold", 10.0, NONNEG_F, "ThresholdShedder: MiB/s below which nothing is shed"),
    K("loadBalancerMsgRateDifferenceShedderThreshold", 50.0, NONNEG_F, "UniformLoadShedder: rate spread, percent"),
    K("loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold", 4.0, NONNEG_F, "UniformLoadShedder: throughput ratio"),
    K("maxUnloadPercentage", 0.2, FRACTION, "Uniform/Avg: share of the difference to move (0.5 advised for Avg)"),
    K("minUnloadMessage", 1000, NONNEG_I, "Uniform/Avg: minimum msg/s worth moving"),
    K("minUnloadMessageThroughput", 1048576, NONNEG_I, "Uniform/Avg: minimum bytes/s worth moving"),
    K("maxUnloadBundleNumPerShedding", -1, _number(int, -1, None), "Uniform: cap on bundles per run (-1 = none)"),
    K("loadBalancerAvgShedderLowThreshold", 15.0, PCT, "AvgShedder: low score difference"),
    K("loadBalancerAvgShedderHighThreshold", 40.0, PCT, "AvgShedder: high score difference"),
    K("loadBalancerAvgShedderHitCountLowThreshold", 8, POS_I, "AvgShedder: hits needed at the low difference"),
    K("loadBalancerAvgShedderHitCountHighThreshold", 2, POS_I, "AvgShedder: hits needed at the high difference"),
    K("loadBalancerAverageResourceUsageDifferenceThresholdPercentage", 10.0, PCT, "LeastResourceUsageWithWeight band"),
    K("loadBalancerDistributeBundlesEvenlyEnabled", True, _bool, "M: spread a namespace's bundles evenly first"),
    K("loadBalancerBrokerMaxTopics", 50000, POS_I, "topic cap per broker"),
    K("failureDomainsEnabled", False, _bool, "anti-affinity honours failure domains"),
    K("preferLaterVersions", False, _bool, "place on the highest broker version only"),
    K("loadBalancerSheddingExcludedNamespaces", (), _csv(), "namespaces never shed (comma separated)"),
    K("loadBalancerHostUsageCheckIntervalMinutes", 1, POS_I, "minutes between host usage samples"),
    K("loadBalancerReportUpdateThresholdPercentage", 10.0, NONNEG_F, "change that forces a load report, percent"),
    K("loadBalancerReportUpdateMinIntervalMillis", 5000, NONNEG_I, "minimum milliseconds between report checks"),
    K("loadBalancerReportUpdateMaxIntervalMinutes", 15, NONNEG_I, "maximum minutes between reports"),
    K("loadBalancerResourceQuotaUpdateIntervalMinutes", 15, POS_I, "M: minutes between bundle data writes"),
    K("loadBalancerOverrideBrokerNicSpeedGbps", None, _string, "NIC speed override in Gbit/s (unset = detect)"),
    K("loadBalancerAutoBundleSplitEnabled", True, _bool, "split hot bundles automatically"),
    K("loadBalancerAutoUnloadSplitBundlesEnabled", True, _bool, "M: unload the children of an automatic split"),
    K("loadBalancerNamespaceBundleMaxTopics", 1000, NONNEG_I, "split trigger: topics per bundle"),
    K("loadBalancerNamespaceBundleMaxSessions", 1000, _number(int, None, None), "split trigger: producers+consumers (<= 0 off)"),
    K("loadBalancerNamespaceBundleMaxMsgRate", 30000, NONNEG_I, "split trigger: msg/s in+out"),
    K("loadBalancerNamespaceBundleMaxBandwidthMbytes", 100, NONNEG_I, "split trigger: MiB/s in+out"),
    K("loadBalancerNamespaceMaximumBundles", 128, POS_I, "cap on bundles per namespace"),
    K("loadBalancerNamespaceBundleSplitConditionHitCountThreshold", 3, NONNEG_I, "E: consecutive hits before a split"),
    K("loadBalancerMaxNumberOfBundlesToSplitPerCycle", 10, POS_I, "E: splits per cycle"),
    K("loadBalancerSplitIntervalMinutes", 1, POS_I, "E: minutes between split checks"),
    K("defaultNamespaceBundleSplitAlgorithm", "range_equally_divide", _split_algorithm, "split algorithm by default"),
    K("supportedNamespaceBundleSplitAlgorithms", SPLIT_ALGORITHMS, _csv(SPLIT_ALGORITHMS), "split algorithms allowed"),
    K("flowOrQpsDifferenceThresholdPercentage", 10.0, NONNEG_F, "flow_or_qps_equally_divide margin, percent"),
    K("defaultNumberOfNamespaceBundles", 4, _number(int, 1, 2**32 - 1), "bundles of a new namespace"),
    K("topicBundleAssignmentStrategy", _ASSIGNER, _assigner, "topic -> bundle rule (only value)"),
    K("loadBalancerMaxNumberOfBundlesInBundleLoadReport", 10, _number(int, -1, None), "top-k bundles per report (M: -1 all)"),
    K("namespaceBundleUnloadingTimeoutMs", 60000, NONNEG_I, "milliseconds an unload or split may take"),
    K("loadBalancerTransferEnabled", True, _bool, "E: transfer (with destination) instead of unload"),
    K("loadBalancerMultiPhaseBundleUnload", True, _bool, "E: clients stay connected during a transfer"),
    K("loadBalancerBrokerLoadTargetStd", 0.25, NONNEG_F, "E: target standard deviation of broker load"),
    K("loadBalancerSheddingConditionHitCountThreshold", 3, NONNEG_I, "E: consecutive hits before shedding"),
    K("loadBalancerMaxNumberOfBrokerSheddingPerCycle", 3, POS_I, "E: brokers shed per cycle"),
    K("loadBalanceSheddingDelayInSeconds", 180, NONNEG_I, "E: cool-down of a broker after it shed"),
    K("loadBalancerBrokerLoadDataTTLInSeconds", 1800, POS_I, "E: broker load data older than this is ignored"),
    K("loadBalancerSheddingBundlesWithPoliciesEnabled", False, _bool, "E: shed bundles with isolation/anti-affinity"),
    K("loadBalancerDebugModeEnabled", False, _bool, "E: debug logging (also changes swap accounting, behaviour §8)"),
    K("loadBalancerInFlightServiceUnitStateWaitingTimeInMillis", 30000, POS_I, "E: in-flight state timeout"),
    K("loadBalancerServiceUnitStateMonitorIntervalInSeconds", 60, POS_I, "E: ownership monitor period"),
    K("loadBalancerServiceUnitStateTombstoneDelayTimeInSeconds", 3600, _number(int, 30, None), "E: Free/Deleted kept this long"),
    K("loadBalancerServiceUnitStateMaxConcurrentOverrides", 64, POS_I, "E: overrides per monitor run"),
    K("loadManagerServiceUnitStateTableViewClassName", "ServiceUnitStateTableViewImpl", _choice(TABLE_VIEWS, "table view"),
      "E: compacted (ServiceUnitStateTableViewImpl) or strict (ServiceUnitStateMetadataStoreTableViewImpl)"),
    K("loadBalancerServiceUnitTableViewSyncer", None, _string, "accepted, no effect"),
    K("statsUpdateFrequencyInSecs", 60, POS_I, "E: top-bundle report cadence"),
    K("loadBalancerPlanTriggerPercentage", 8.0, PCT,
      "PlannedTransferShedder: start planning when a broker is this far above the mean, percent"),
    K("loadBalancerPlanUnderloadTriggerPercentage", 15.0, PCT,
      "PlannedTransferShedder: or when a warmed-up broker is this far below it, percent"),
    K("loadBalancerPlanTolerancePercentage", 0.25, PCT,
      "PlannedTransferShedder: then plan every broker to within this band of the mean, percent"),
    K("loadBalancerPlanMinGainPercentage", 0.1, PCT,
      "PlannedTransferShedder: a move must cut the imbalance by this much of the mean, percent"),
    K("loadBalancerPlanWarmupSeconds", 180, NONNEG_I,
      "PlannedTransferShedder: a new or restarted broker is neither source nor fill target for this long"),
    K("loadBalancerPlanMaxMovesPerCycle", 100, POS_I, "PlannedTransferShedder: moves per shedding run"),
    K("loadBalancerPlanMakeRoomTriggerPercentage", 25.0, PCT,
      "PlannedTransferShedder: a broker this far above the mean with no single move may have room made "
      "for a bundle (its destination first passes bundles on), percent"),
)
del K

KEY_BY_NAME: dict[str, ConfigKey] = {key.name: key for key in KEYS}
ALIASES: dict[str, str] = {
    "loadBalancerBandwithInResourceWeight": "loadBalancerBandwidthInResourceWeight",
    "loadBalancerBandwithOutResourceWeight": "loadBalancerBandwidthOutResourceWeight",
}


@dataclass(frozen=True)
class LoadBalancerConfig:
    """Every key of behaviour §7, as snake_case attributes, with Pulsar's defaults."""

    load_manager_class_name: str = "ModularLoadManagerImpl"
    load_balancer_enabled: bool = True
    load_balancer_shedding_enabled: bool = True
    load_balancer_load_shedding_strategy: str = "ThresholdShedder"
    load_balancer_load_placement_strategy: str = "LeastLongTermMessageRate"
    load_balancer_shedding_interval_minutes: int = 1
    load_balancer_shedding_grace_period_minutes: int = 30
    load_balancer_broker_overloaded_threshold_percentage: float = 85
    load_balancer_broker_underloaded_threshold_percentage: float = 50
    load_balancer_broker_threshold_shedder_percentage: float = 10
    lower_boundary_shedding_enabled: bool = False
    load_balancer_history_resource_percentage: float = 0.9
    load_balancer_cpu_resource_weight: float = 1.0
    load_balancer_memory_resource_weight: float = 0.0
    load_balancer_direct_memory_resource_weight: float = 0.0
    load_balancer_bandwidth_in_resource_weight: float = 1.0
    load_balancer_bandwidth_out_resource_weight: float = 1.0
    load_balancer_bundle_unload_min_throughput_threshold: float = 10.0
    load_balancer_msg_rate_difference_shedder_threshold: float = 50.0
    load_balancer_msg_throughput_multiplier_difference_shedder_threshold: float = 4.0
    max_unload_percentage: float = 0.2
    min_unload_message: int = 1000
    min_unload_message_throughput: int = 1048576
    max_unload_bundle_num_per_shedding: int = -1
    load_balancer_avg_shedder_low_threshold: float = 15.0
    load_balancer_avg_shedder_high_threshold: float = 40.0
    load_balancer_avg_shedder_hit_count_low_threshold: int = 8
    load_balancer_avg_shedder_hit_count_high_threshold: int = 2
    load_balancer_average_resource_usage_difference_threshold_percentage: float = 10.0
    load_balancer_distribute_bundles_evenly_enabled: bool = True
    load_balancer_broker_max_topics: int = 50000
    failure_domains_enabled: bool = False
    prefer_later_versions: bool = False
    load_balancer_shedding_excluded_namespaces: tuple[str, ...] = ()
    load_balancer_host_usage_check_interval_minutes: int = 1
    load_balancer_report_update_threshold_percentage: float = 10.0
    load_balancer_report_update_min_interval_millis: int = 5000
    load_balancer_report_update_max_interval_minutes: int = 15
    load_balancer_resource_quota_update_interval_minutes: int = 15
    load_balancer_override_broker_nic_speed_gbps: str | None = None
    load_balancer_auto_bundle_split_enabled: bool = True
    load_balancer_auto_unload_split_bundles_enabled: bool = True
    load_balancer_namespace_bundle_max_topics: int = 1000
    load_balancer_namespace_bundle_max_sessions: int = 1000
    load_balancer_namespace_bundle_max_msg_rate: int = 30000
    load_balancer_namespace_bundle_max_bandwidth_mbytes: int = 100
    load_balancer_namespace_maximum_bundles: int = 128
    load_balancer_namespace_bundle_split_condition_hit_count_threshold: int = 3
    load_balancer_max_number_of_bundles_to_split_per_cycle: int = 10
    load_balancer_split_interval_minutes: int = 1
    default_namespace_bundle_split_algorithm: str = "range_equally_divide"
    supported_namespace_bundle_split_algorithms: tuple[str, ...] = SPLIT_ALGORITHMS
    flow_or_qps_difference_threshold_percentage: float = 10.0
    default_number_of_namespace_bundles: int = 4
    topic_bundle_assignment_strategy: str = _ASSIGNER
    load_balancer_max_number_of_bundles_in_bundle_load_report: int = 10
    namespace_bundle_unloading_timeout_ms: int = 60000
    load_balancer_transfer_enabled: bool = True
    load_balancer_multi_phase_bundle_unload: bool = True
    load_balancer_broker_load_target_std: float = 0.25
    load_balancer_shedding_condition_hit_count_threshold: int = 3
    load_balancer_max_number_of_broker_shedding_per_cycle: int = 3
    load_balance_shedding_delay_in_seconds: int = 180
    load_balancer_broker_load_data_ttl_in_seconds: int = 1800
    load_balancer_shedding_bundles_with_policies_enabled: bool = False
    load_balancer_debug_mode_enabled: bool = False
    load_balancer_in_flight_service_unit_state_waiting_time_in_millis: int = 30000
    load_balancer_service_unit_state_monitor_interval_in_seconds: int = 60
    load_balancer_service_unit_state_tombstone_delay_time_in_seconds: int = 3600
    load_balancer_service_unit_state_max_concurrent_overrides: int = 64
    load_manager_service_unit_state_table_view_class_name: str = "ServiceUnitStateTableViewImpl"
    load_balancer_service_unit_table_view_syncer: str | None = None
    stats_update_frequency_in_secs: int = 60
    load_balancer_plan_trigger_percentage: float = 8.0
    load_balancer_plan_underload_trigger_percentage: float = 15.0
    load_balancer_plan_tolerance_percentage: float = 0.25
    load_balancer_plan_min_gain_percentage: float = 0.1
    load_balancer_plan_warmup_seconds: int = 180
    load_balancer_plan_max_moves_per_cycle: int = 100
    load_balancer_plan_make_room_trigger_percentage: float = 25.0
    extra: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    ignored: tuple[str, ...] = field(default=(), compare=False, repr=False)
    """Keys of other broker components that were read and ignored (Pulsar's loader takes them)."""
    deprecated: tuple[str, ...] = field(default=(), compare=False, repr=False)
    """Keys Pulsar 4.0 marks deprecated that were read; those not in §7 have no effect."""

    def __post_init__(self) -> None:
        if (self.load_balancer_load_placement_strategy == "AvgShedder"
                and self.load_balancer_load_shedding_strategy != "AvgShedder"):
            # Pulsar refuses to start: AvgShedder placement reads the shedder's plan.
            raise ConfigError(
                "loadBalancerLoadPlacementStrategy: AvgShedder placement needs "
                "loadBalancerLoadSheddingStrategy=AvgShedder, not "
                f"{self.load_balancer_load_shedding_strategy!r}",
                key="loadBalancerLoadPlacementStrategy",
                value="AvgShedder",
            )
        tombstone_ms = self.load_balancer_service_unit_state_tombstone_delay_time_in_seconds * 1000
        if tombstone_ms < self.load_balancer_in_flight_service_unit_state_waiting_time_in_millis:
            raise ConfigError(
                "loadBalancerServiceUnitStateTombstoneDelayTimeInSeconds: "
                f"{tombstone_ms // 1000} s is shorter than the in-flight wait "
                f"({self.load_balancer_in_flight_service_unit_state_waiting_time_in_millis} ms)",
                key="loadBalancerServiceUnitStateTombstoneDelayTimeInSeconds",
                value=tombstone_ms // 1000,
            )

    # -- derived values used across strategies ------------------------------------------
    @property
    def extensible(self) -> bool:
        """True for the extensible load manager (PIP-192), False for the modular one."""
        return self.load_manager_class_name == "ExtensibleLoadManagerImpl"

    @property
    def strict_ownership(self) -> bool:
        return self.load_manager_service_unit_state_table_view_class_name != "ServiceUnitStateTableViewImpl"

    @property
    def overload_threshold(self) -> float:
        return self.load_balancer_broker_overloaded_threshold_percentage / 100.0

    @property
    def grace_period_ms(self) -> int:
        return self.load_balancer_shedding_grace_period_minutes * 60_000

    @property
    def history(self) -> float:
        return self.load_balancer_history_resource_percentage

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> LoadBalancerConfig:
        """Build from Pulsar keys (``{"loadBalancerBrokerLoadTargetStd": 0.25}``)."""
        parsed, ignored, deprecated = _parse_keys(values)
        return cls(**parsed, ignored=ignored, deprecated=deprecated)

    @classmethod
    def from_broker_conf(cls, text: str) -> LoadBalancerConfig:
        """Parse ``broker.conf`` text: ``key=value`` lines, ``#`` comments, blank lines."""
        values: dict[str, str] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            stripped = line.strip()
            if not stripped or stripped.startswith(("#", "!")):
                continue
            if "=" not in stripped:
                raise ConfigError(
                    f"line {number}: {stripped!r} is not 'key=value'", key=None, value=stripped
                )
            key, _, value = stripped.partition("=")
            values[key.strip()] = value.strip()
        return cls.from_mapping(values)

    def with_overrides(self, values: Mapping[str, Any]) -> LoadBalancerConfig:
        """A copy with some Pulsar keys changed (validated like ``from_mapping``)."""
        parsed, ignored, deprecated = _parse_keys(values)
        return dataclasses.replace(self, **parsed, ignored=self.ignored + ignored,
                                   deprecated=self.deprecated + deprecated)

    def notice(self) -> str | None:
        """One line on what was read but not used (None if nothing), for the CLI to print."""
        parts = []
        if self.ignored:
            parts.append(f"{len(self.ignored)} keys outside load balancing ignored")
        if self.deprecated:
            parts.append(f"deprecated: {', '.join(sorted(set(self.deprecated)))}")
        return "; ".join(parts) or None

    def to_mapping(self) -> dict[str, Any]:
        """Pulsar key -> value, for every key (round-trips through ``from_mapping``)."""
        return {key.name: getattr(self, key.attr) for key in KEYS}


def _parse_keys(values: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...], tuple[str, ...]]:
    """(attribute -> parsed value, ignored keys, deprecated keys) of Pulsar keys."""
    parsed: dict[str, Any] = {}
    ignored: list[str] = []
    deprecated: list[str] = []
    for raw_key, raw_value in values.items():
        name = str(raw_key).strip()
        if name in DEPRECATED:
            deprecated.append(name)
        if ALIASES.get(name, name) not in KEY_BY_NAME and name in PULSAR_KEYS:
            if name not in DEPRECATED:
                ignored.append(name)
            continue
        key = _lookup_key(name)
        parsed[key.attr] = key.parse(key.name, raw_value)
    return parsed, tuple(ignored), tuple(deprecated)


def _lookup_key(name: str) -> ConfigKey:
    name = ALIASES.get(name, name)
    found = KEY_BY_NAME.get(name)
    if found is not None:
        return found
    known = list(KEY_BY_NAME) + list(ALIASES) + sorted(PULSAR_KEYS)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown configuration key {name!r}{hint}", key=name, value=None)


def render_broker_conf() -> str:
    """The shipped ``conf/broker.conf``: every key, its default and a one-line comment."""
    lines = [
        "# bundle-balancer load balancer settings: Pulsar broker.conf keys and defaults.",
        "# Other keys of Pulsar's broker.conf are ignored (and counted), misspelled ones rejected.",
        "# Strategy values take short or Pulsar class names.",
        "",
    ]
    for key in KEYS:
        lines.append(f"# {key.doc}")
        lines.append(f"{key.name}={_render_value(key.default)}")
        lines.append("")
    return "\n".join(lines)


def _render_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)
