"""Load balancer configuration: Pulsar ``broker.conf`` keys, defaults and validation.

Invariants:
- every key of behaviour §7 is accepted, with Pulsar's default; another key of Pulsar 4.0's
  broker.conf (balancer/pulsar_keys.py) is ignored and counted in ``ignored``, a deprecated one
  listed in ``deprecated`` (Pulsar's loader takes both); a key of the actors' timers
  (``balancer.actor_keys``) is left to the actors (``actors.conf`` reads the file once for both);
  any other key is refused, naming the closest;
- numbers are finite; percentages are not capped at 100 (Pulsar does not cap them); the limits of
  admin input (and ``loadBalancerNamespaceMaximumBundles``) are capped so that whatever an admin
  command makes fits a log record (``events._fields``), which every reader decodes;
- a ``LoadBalancerConfig`` is immutable and always valid (validation happens on construction);
- strategy and class values are stored in their short form (``ThresholdShedder``), whatever
  spelling came in (short name, ``impl.X``/``ext.X`` or a full Pulsar class name);
- broker.conf text is read as ``java.util.Properties`` reads it (``javaproperties``), so every line
  form Pulsar's loader takes is taken here.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import javaproperties

from balancer.actor_keys import ACTOR_KEY_NAMES
from balancer.config_values import (
    ASSIGNER,
    FRACTION,
    LOAD_MANAGERS,
    NONNEG_F,
    NONNEG_I,
    PCT,
    PLACEMENT_STRATEGIES,
    POS_I,
    SHEDDING_STRATEGIES,
    SPLIT_ALGORITHMS,
    TABLE_VIEWS,
    Parser,
    assigner,
    boolean,
    bounded,
    choice,
    csv_list,
    resolve_class_name,
    root_key,
    snake_case,
    split_algorithm,
    text,
)
from balancer.errors import ConfigError
from balancer.pulsar_keys import DEPRECATED, PULSAR_KEYS

__all__ = ["KEYS", "LOAD_MANAGERS", "PLACEMENT_STRATEGIES", "SHEDDING_STRATEGIES", "SPLIT_ALGORITHMS",
           "TABLE_VIEWS", "ConfigKey", "LoadBalancerConfig", "at_line", "broker_conf_pairs", "read_broker_conf",
           "render_broker_conf", "resolve_class_name", "setting", "snake_case"]
T = TypeVar("T")
MAX_NAMESPACE_BUNDLES = 131_071
"""The most bundles a namespace may have: its boundaries (one more) must fit one list of a log
record (``events._fields.MAX_ITEMS``, 131,072)."""
MAX_ADMIN_STRING = 16_384
"""The longest string limit an admin may set: four bytes of UTF-8 a character must fit one string
of a log record (``events._fields.MAX_TEXT``, 65,536 bytes)."""
MAX_ADMIN_LIST = 131_072


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



ALIASES: dict[str, str] = {
    "loadBalancerBandwithInResourceWeight": "loadBalancerBandwidthInResourceWeight",
    "loadBalancerBandwithOutResourceWeight": "loadBalancerBandwidthOutResourceWeight",
}


def setting(name: str, default: T, parse: Parser, doc: str, *, folds: bool = True) -> T:
    """A broker.conf key declared once, where its attribute is: the attribute's default, and in
    its metadata the Pulsar name, the parser and the one-line meaning (``KEYS`` is read from it,
    and from ``KEYS`` come parsing, validation, ``to_mapping`` and the shipped broker.conf).

    ``folds=False``: the key changes no fold of the log (it is left out of ``repr``, which a
    body snapshot's identity holds, so switching it keeps every snapshot usable)."""
    found: T = field(default=default, repr=folds, metadata={"key": ConfigKey(name, default, parse, doc)})
    return found


@dataclass(frozen=True)
class LoadBalancerConfig:
    """Every key of behaviour §7, as snake_case attributes, with Pulsar's defaults."""

    load_manager_class_name: str = setting(
        "loadManagerClassName", "ModularLoadManagerImpl", choice(LOAD_MANAGERS, "load manager"),
        "ModularLoadManagerImpl (M) or ExtensibleLoadManagerImpl (E, PIP-192)")
    load_balancer_enabled: bool = setting(
        "loadBalancerEnabled", True, boolean,
        "master switch for load balancing")
    load_balancer_shedding_enabled: bool = setting(
        "loadBalancerSheddingEnabled", True, boolean,
        "switch for periodic shedding")
    load_balancer_load_shedding_strategy: str = setting(
        "loadBalancerLoadSheddingStrategy", "ThresholdShedder", choice(SHEDDING_STRATEGIES, "shedding strategy"),
        "ThresholdShedder, OverloadShedder, UniformLoadShedder, AvgShedder, TransferShedder (E), or a project strategy")
    load_balancer_load_placement_strategy: str = setting(
        "loadBalancerLoadPlacementStrategy", "LeastLongTermMessageRate", choice(PLACEMENT_STRATEGIES, "placement strategy"),
        "M: LeastLongTermMessageRate, LeastResourceUsageWithWeight or AvgShedder")
    load_balancer_shedding_interval_minutes: int = setting(
        "loadBalancerSheddingIntervalMinutes", 1, POS_I,
        "minutes between shedding runs")
    load_balancer_shedding_grace_period_minutes: int = setting(
        "loadBalancerSheddingGracePeriodMinutes", 30, NONNEG_I,
        "minutes a shed bundle is exempt from shedding")
    load_balancer_max_moves_in_flight_per_broker: int = setting(
        "loadBalancerMaxMovesInFlightPerBroker", 2, POS_I,
        "throttle: shedding moves in flight that may touch one broker (as source or destination)",
        folds=False)
    load_balancer_max_moves_in_flight: int = setting(
        "loadBalancerMaxMovesInFlight", 10, POS_I,
        "throttle: shedding moves in flight in the whole cluster", folds=False)
    load_balancer_max_moves_per_minute: int = setting(
        "loadBalancerMaxMovesPerMinute", 30, POS_I,
        "throttle: shedding moves started in any 60 s of cluster time", folds=False)
    load_balancer_drain_moves_per_minute: int = setting(
        "loadBalancerDrainMovesPerMinute", 60, POS_I,
        "drain: moves per minute off a drained broker when `lbctl brokers drain` gives no --rate",
        folds=False)
    load_balancer_max_pause_minutes: int = setting(
        "loadBalancerMaxPauseMinutes", 1440, POS_I,
        "the longest `lbctl balancer pause --for` accepted", folds=False)
    load_balancer_execution: str = setting(
        "loadBalancerExecution", "auto", choice({"auto": "auto", "review": "review"}, "execution mode"),
        "auto: each cycle's proposal runs at once (still recorded); review: it waits for "
        "`lbctl proposals approve`", folds=False)
    load_balancer_proposal_max_age_seconds: int = setting(
        "loadBalancerProposalMaxAgeSeconds", 300, POS_I,
        "review: a proposal not approved within this long goes stale, never executed", folds=False)
    load_balancer_proposal_load_tolerance: float = setting(
        "loadBalancerProposalLoadTolerance", 0.2, NONNEG_F,
        "review: a proposal goes stale once a broker's throughput moved by more than this share "
        "(of the larger of its own and the mean when computed)", folds=False)
    load_balancer_stalled_move_seconds: int = setting(
        "loadBalancerStalledMoveSeconds", 300, POS_I,
        "status: a shedding move in flight longer than this makes the balancer stalled", folds=False)
    load_balancer_stalled_load_report_seconds: int = setting(
        "loadBalancerStalledLoadReportSeconds", 60, POS_I,
        "status: a broker without a load report for this long makes the balancer stalled", folds=False)
    load_balancer_stalled_fold_lag_records: int = setting(
        "loadBalancerStalledFoldLagRecords", 10_000, POS_I,
        "status: the leader's fold this many records behind the log makes the balancer stalled",
        folds=False)
    load_balancer_broker_overloaded_threshold_percentage: float = setting(
        "loadBalancerBrokerOverloadedThresholdPercentage", 85, PCT,
        "usage above which a broker is overloaded")
    load_balancer_broker_underloaded_threshold_percentage: float = setting(
        "loadBalancerBrokerUnderloadedThresholdPercentage", 50, PCT,
        "accepted for compatibility, unused")
    load_balancer_broker_threshold_shedder_percentage: float = setting(
        "loadBalancerBrokerThresholdShedderPercentage", 10, PCT,
        "ThresholdShedder: margin above the average")
    lower_boundary_shedding_enabled: bool = setting(
        "lowerBoundarySheddingEnabled", False, boolean,
        "ThresholdShedder: also shed towards brokers below the average")
    load_balancer_history_resource_percentage: float = setting(
        "loadBalancerHistoryResourcePercentage", 0.9, FRACTION,
        "EMA weight of history")
    load_balancer_cpu_resource_weight: float = setting(
        "loadBalancerCPUResourceWeight", 1.0, NONNEG_F,
        "weight of CPU usage")
    load_balancer_memory_resource_weight: float = setting(
        "loadBalancerMemoryResourceWeight", 0.0, NONNEG_F,
        "weight of JVM heap usage (deprecated)")
    load_balancer_direct_memory_resource_weight: float = setting(
        "loadBalancerDirectMemoryResourceWeight", 0.0, NONNEG_F,
        "weight of direct memory usage")
    load_balancer_bandwidth_in_resource_weight: float = setting(
        "loadBalancerBandwidthInResourceWeight", 1.0, NONNEG_F,
        "weight of inbound bandwidth usage")
    load_balancer_bandwidth_out_resource_weight: float = setting(
        "loadBalancerBandwidthOutResourceWeight", 1.0, NONNEG_F,
        "weight of outbound bandwidth usage")
    load_balancer_bundle_unload_min_throughput_threshold: float = setting(
        "loadBalancerBundleUnloadMinThroughputThreshold", 10.0, NONNEG_F,
        "ThresholdShedder: MiB/s below which nothing is shed")
    load_balancer_msg_rate_difference_shedder_threshold: float = setting(
        "loadBalancerMsgRateDifferenceShedderThreshold", 50.0, NONNEG_F,
        "UniformLoadShedder: rate spread, percent")
    load_balancer_msg_throughput_multiplier_difference_shedder_threshold: float = setting(
        "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold", 4.0, NONNEG_F,
        "UniformLoadShedder: throughput ratio")
    max_unload_percentage: float = setting(
        "maxUnloadPercentage", 0.2, FRACTION,
        "Uniform/Avg: share of the difference to move (0.5 advised for Avg)")
    min_unload_message: int = setting(
        "minUnloadMessage", 1000, NONNEG_I,
        "Uniform/Avg: minimum msg/s worth moving")
    min_unload_message_throughput: int = setting(
        "minUnloadMessageThroughput", 1048576, NONNEG_I,
        "Uniform/Avg: minimum bytes/s worth moving")
    max_unload_bundle_num_per_shedding: int = setting(
        "maxUnloadBundleNumPerShedding", -1, bounded(int, -1, None),
        "Uniform: cap on bundles per run (-1 = none)")
    load_balancer_avg_shedder_low_threshold: float = setting(
        "loadBalancerAvgShedderLowThreshold", 15.0, PCT,
        "AvgShedder: low score difference")
    load_balancer_avg_shedder_high_threshold: float = setting(
        "loadBalancerAvgShedderHighThreshold", 40.0, PCT,
        "AvgShedder: high score difference")
    load_balancer_avg_shedder_hit_count_low_threshold: int = setting(
        "loadBalancerAvgShedderHitCountLowThreshold", 8, POS_I,
        "AvgShedder: hits needed at the low difference")
    load_balancer_avg_shedder_hit_count_high_threshold: int = setting(
        "loadBalancerAvgShedderHitCountHighThreshold", 2, POS_I,
        "AvgShedder: hits needed at the high difference")
    load_balancer_average_resource_usage_difference_threshold_percentage: float = setting(
        "loadBalancerAverageResourceUsageDifferenceThresholdPercentage", 10.0, PCT,
        "LeastResourceUsageWithWeight band")
    load_balancer_distribute_bundles_evenly_enabled: bool = setting(
        "loadBalancerDistributeBundlesEvenlyEnabled", True, boolean,
        "M: spread a namespace's bundles evenly first")
    load_balancer_broker_max_topics: int = setting(
        "loadBalancerBrokerMaxTopics", 50000, POS_I,
        "topic cap per broker")
    failure_domains_enabled: bool = setting(
        "failureDomainsEnabled", False, boolean,
        "anti-affinity honours failure domains")
    prefer_later_versions: bool = setting(
        "preferLaterVersions", False, boolean,
        "place on the highest broker version only")
    load_balancer_shedding_excluded_namespaces: tuple[str, ...] = setting(
        "loadBalancerSheddingExcludedNamespaces", (), csv_list(),
        "namespaces never shed (comma separated)")
    load_balancer_host_usage_check_interval_minutes: int = setting(
        "loadBalancerHostUsageCheckIntervalMinutes", 1, POS_I,
        "minutes between host usage samples")
    load_balancer_report_update_threshold_percentage: float = setting(
        "loadBalancerReportUpdateThresholdPercentage", 10.0, NONNEG_F,
        "change that forces a load report, percent")
    load_balancer_report_update_min_interval_millis: int = setting(
        "loadBalancerReportUpdateMinIntervalMillis", 5000, NONNEG_I,
        "minimum milliseconds between report checks")
    load_balancer_report_update_max_interval_minutes: int = setting(
        "loadBalancerReportUpdateMaxIntervalMinutes", 15, NONNEG_I,
        "maximum minutes between reports")
    load_balancer_resource_quota_update_interval_minutes: int = setting(
        "loadBalancerResourceQuotaUpdateIntervalMinutes", 15, POS_I,
        "M: minutes between bundle data writes")
    load_balancer_override_broker_nic_speed_gbps: str | None = setting(
        "loadBalancerOverrideBrokerNicSpeedGbps", None, text,
        "NIC speed override in Gbit/s (unset = detect)")
    load_balancer_auto_bundle_split_enabled: bool = setting(
        "loadBalancerAutoBundleSplitEnabled", True, boolean,
        "split hot bundles automatically")
    load_balancer_auto_unload_split_bundles_enabled: bool = setting(
        "loadBalancerAutoUnloadSplitBundlesEnabled", True, boolean,
        "M: unload the children of an automatic split")
    load_balancer_namespace_bundle_max_topics: int = setting(
        "loadBalancerNamespaceBundleMaxTopics", 1000, NONNEG_I,
        "split trigger: topics per bundle")
    load_balancer_namespace_bundle_max_sessions: int = setting(
        "loadBalancerNamespaceBundleMaxSessions", 1000, bounded(int, None, None),
        "split trigger: producers+consumers (<= 0 off)")
    load_balancer_namespace_bundle_max_msg_rate: int = setting(
        "loadBalancerNamespaceBundleMaxMsgRate", 30000, NONNEG_I,
        "split trigger: msg/s in+out")
    load_balancer_namespace_bundle_max_bandwidth_mbytes: int = setting(
        "loadBalancerNamespaceBundleMaxBandwidthMbytes", 100, NONNEG_I,
        "split trigger: MiB/s in+out")
    load_balancer_namespace_maximum_bundles: int = setting(
        "loadBalancerNamespaceMaximumBundles", 128, bounded(int, 1, MAX_NAMESPACE_BUNDLES),
        "cap on bundles per namespace: auto-splits, and an admin's numBundles and split positions")
    load_balancer_namespace_bundle_split_condition_hit_count_threshold: int = setting(
        "loadBalancerNamespaceBundleSplitConditionHitCountThreshold", 3, NONNEG_I,
        "E: consecutive hits before a split")
    load_balancer_max_number_of_bundles_to_split_per_cycle: int = setting(
        "loadBalancerMaxNumberOfBundlesToSplitPerCycle", 10, POS_I,
        "E: splits per cycle")
    load_balancer_split_interval_minutes: int = setting(
        "loadBalancerSplitIntervalMinutes", 1, POS_I,
        "E: minutes between split checks")
    default_namespace_bundle_split_algorithm: str = setting(
        "defaultNamespaceBundleSplitAlgorithm", "range_equally_divide", split_algorithm,
        "split algorithm by default")
    supported_namespace_bundle_split_algorithms: tuple[str, ...] = setting(
        "supportedNamespaceBundleSplitAlgorithms", SPLIT_ALGORITHMS, csv_list(SPLIT_ALGORITHMS),
        "split algorithms allowed")
    flow_or_qps_difference_threshold_percentage: float = setting(
        "flowOrQpsDifferenceThresholdPercentage", 10.0, NONNEG_F,
        "flow_or_qps_equally_divide margin, percent")
    default_number_of_namespace_bundles: int = setting(
        "defaultNumberOfNamespaceBundles", 4, bounded(int, 1, 2**32 - 1),
        "bundles of a new namespace")
    topic_bundle_assignment_strategy: str = setting(
        "topicBundleAssignmentStrategy", ASSIGNER, assigner,
        "topic -> bundle rule (only value)")
    load_balancer_max_number_of_bundles_in_bundle_load_report: int = setting(
        "loadBalancerMaxNumberOfBundlesInBundleLoadReport", 10, bounded(int, -1, None),
        "top-k bundles per report (M: -1 all)")
    namespace_bundle_unloading_timeout_ms: int = setting(
        "namespaceBundleUnloadingTimeoutMs", 60000, NONNEG_I,
        "milliseconds an unload or split may take")
    load_balancer_transfer_enabled: bool = setting(
        "loadBalancerTransferEnabled", True, boolean,
        "E: transfer (with destination) instead of unload")
    load_balancer_multi_phase_bundle_unload: bool = setting(
        "loadBalancerMultiPhaseBundleUnload", True, boolean,
        "E: clients stay connected during a transfer")
    load_balancer_broker_load_target_std: float = setting(
        "loadBalancerBrokerLoadTargetStd", 0.25, NONNEG_F,
        "E: target standard deviation of broker load")
    load_balancer_shedding_condition_hit_count_threshold: int = setting(
        "loadBalancerSheddingConditionHitCountThreshold", 3, NONNEG_I,
        "E: consecutive hits before shedding")
    load_balancer_max_number_of_broker_shedding_per_cycle: int = setting(
        "loadBalancerMaxNumberOfBrokerSheddingPerCycle", 3, POS_I,
        "E: brokers shed per cycle")
    load_balance_shedding_delay_in_seconds: int = setting(
        "loadBalanceSheddingDelayInSeconds", 180, NONNEG_I,
        "E: cool-down of a broker after it shed")
    load_balancer_broker_load_data_ttl_in_seconds: int = setting(
        "loadBalancerBrokerLoadDataTTLInSeconds", 1800, POS_I,
        "E: broker load data older than this is ignored")
    load_balancer_shedding_bundles_with_policies_enabled: bool = setting(
        "loadBalancerSheddingBundlesWithPoliciesEnabled", False, boolean,
        "E: shed bundles with isolation/anti-affinity")
    load_balancer_debug_mode_enabled: bool = setting(
        "loadBalancerDebugModeEnabled", False, boolean,
        "E: debug logging (also changes swap accounting, behaviour §8)")
    load_balancer_in_flight_service_unit_state_waiting_time_in_millis: int = setting(
        "loadBalancerInFlightServiceUnitStateWaitingTimeInMillis", 30000, POS_I,
        "E: in-flight state timeout")
    load_balancer_service_unit_state_monitor_interval_in_seconds: int = setting(
        "loadBalancerServiceUnitStateMonitorIntervalInSeconds", 60, POS_I,
        "E: ownership monitor period")
    load_balancer_service_unit_state_tombstone_delay_time_in_seconds: int = setting(
        "loadBalancerServiceUnitStateTombstoneDelayTimeInSeconds", 3600, bounded(int, 30, None),
        "E: Free/Deleted kept this long")
    load_balancer_service_unit_state_max_concurrent_overrides: int = setting(
        "loadBalancerServiceUnitStateMaxConcurrentOverrides", 64, POS_I,
        "E: overrides per monitor run")
    load_manager_service_unit_state_table_view_class_name: str = setting(
        "loadManagerServiceUnitStateTableViewClassName", "ServiceUnitStateTableViewImpl", choice(TABLE_VIEWS, "table view"),
        "E: compacted (ServiceUnitStateTableViewImpl) or strict (ServiceUnitStateMetadataStoreTableViewImpl)")
    load_balancer_service_unit_table_view_syncer: str | None = setting(
        "loadBalancerServiceUnitTableViewSyncer", None, text,
        "accepted, no effect")
    stats_update_frequency_in_secs: int = setting(
        "statsUpdateFrequencyInSecs", 60, POS_I,
        "E: top-bundle report cadence")
    load_balancer_plan_trigger_percentage: float = setting(
        "loadBalancerPlanTriggerPercentage", 8.0, PCT,
        "PlannedTransferShedder: start planning when a broker is this far above the mean, percent")
    load_balancer_plan_underload_trigger_percentage: float = setting(
        "loadBalancerPlanUnderloadTriggerPercentage", 15.0, PCT,
        "PlannedTransferShedder: or when a warmed-up broker is this far below it, percent")
    load_balancer_plan_tolerance_percentage: float = setting(
        "loadBalancerPlanTolerancePercentage", 0.25, PCT,
        "PlannedTransferShedder: then plan every broker to within this band of the mean, percent")
    load_balancer_plan_min_gain_percentage: float = setting(
        "loadBalancerPlanMinGainPercentage", 0.1, PCT,
        "PlannedTransferShedder: a move must cut the imbalance by this much of the mean, percent")
    load_balancer_plan_warmup_seconds: int = setting(
        "loadBalancerPlanWarmupSeconds", 180, NONNEG_I,
        "PlannedTransferShedder: a new or restarted broker is neither source nor fill target for this long")
    load_balancer_plan_max_moves_per_cycle: int = setting(
        "loadBalancerPlanMaxMovesPerCycle", 100, POS_I,
        "PlannedTransferShedder: moves per shedding run")
    load_balancer_plan_make_room_trigger_percentage: float = setting(
        "loadBalancerPlanMakeRoomTriggerPercentage", 25.0, PCT,
        "PlannedTransferShedder: a broker this far above the mean with no single move may have room made "
      "for a bundle (its destination first passes bundles on), percent")
    embedded_log_retention_enabled: bool = setting(
        "embeddedLogRetentionEnabled", False, boolean,
        "embedded log: after each snapshot, drop whole segments below every reader's oldest snapshot "
        "and checkpoint (off: the log grows forever; `lbctl log retain` drops on request)", folds=False)
    attach_decision_interval_seconds: int = setting(
        "attachDecisionIntervalSeconds", 0, NONNEG_I,
        "lbctl attach --mode advise|drive: seconds between decision cycles "
        "(0: loadBalancerSheddingIntervalMinutes)", folds=False)
    attach_drive_max_executions_per_cycle: int = setting(
        "attachDriveMaxExecutionsPerCycle", 1, POS_I,
        "lbctl attach --mode drive: unloads and splits sent to Pulsar per decision cycle", folds=False)
    attach_drive_max_executions_per_minute: int = setting(
        "attachDriveMaxExecutionsPerMinute", 4, POS_I,
        "lbctl attach --mode drive: unloads and splits sent to Pulsar in any 60 s", folds=False)
    attach_drive_execution_timeout_seconds: int = setting(
        "attachDriveExecutionTimeoutSeconds", 60, POS_I,
        "lbctl attach --mode drive: seconds an execution may take to show in Pulsar's ownership "
        "channel before it is recorded as timed out", folds=False)
    admin_input_max_string_length: int = setting(
        "adminInputMaxStringLength", 1024, bounded(int, 1, MAX_ADMIN_STRING),
        "characters of any string of an admin command (names, groups, broker ids, isolation regexes)",
        folds=False)
    admin_input_max_list_length: int = setting(
        "adminInputMaxListLength", 1024, bounded(int, 1, MAX_ADMIN_LIST),
        "items of any list or map of an admin command (a failure domain's brokers, an isolation "
        "policy's regexes); split positions and boundaries are capped by loadBalancerNamespaceMaximumBundles",
        folds=False)
    web_service_max_json_depth: int = setting(
        "webServiceMaxJsonDepth", 32, bounded(int, 1, 1000),
        "levels of nesting of a JSON body the web service reads (deeper: 400)", folds=False)
    bundle_balancer_root_key: str | None = setting(
        "bundleBalancerRootKey", None, root_key,
        "the cluster's root public key (base64; `lbctl log root` prints a log's): a reader pinned "
        "to it refuses a log founded under another root (empty: a log's first signed record "
        "names its root)", folds=False)
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
        """Parse ``broker.conf`` text (``broker_conf_pairs``); an error about a key names its line."""
        pairs, lines = read_broker_conf(text)
        try:
            return cls.from_mapping(pairs)
        except ConfigError as exc:
            raise at_line(exc, lines) from None

    def with_overrides(self, values: Mapping[str, Any]) -> LoadBalancerConfig:
        """A copy with some Pulsar keys changed (validated like ``from_mapping``)."""
        parsed, ignored, deprecated = _parse_keys(values)
        return dataclasses.replace(self, **parsed, ignored=self.ignored + ignored,
                                   deprecated=self.deprecated + deprecated)

    def notice(self, applied: Collection[str] = ()) -> str | None:
        """One line on what was read but not used (None if nothing), for the CLI to print;
        ``applied``: keys of other components that the caller does apply (not "ignored")."""
        parts = []
        ignored = [key for key in self.ignored if key not in applied]
        if ignored:
            parts.append(f"{len(ignored)} {'key' if len(ignored) == 1 else 'keys'} outside load "
                         "balancing ignored")
        if self.deprecated:
            parts.append(f"deprecated: {', '.join(sorted(set(self.deprecated)))}")
        return "; ".join(parts) or None

    def to_mapping(self) -> dict[str, Any]:
        """Pulsar key -> value, for every key (round-trips through ``from_mapping``)."""
        return {key.name: getattr(self, key.attr) for key in KEYS}


KEYS: tuple[ConfigKey, ...] = tuple(
    f.metadata["key"] for f in dataclasses.fields(LoadBalancerConfig) if "key" in f.metadata)
"""Every broker.conf key, in the order the dataclass declares them (and broker.conf lists them)."""
KEY_BY_NAME: dict[str, ConfigKey] = {key.name: key for key in KEYS}


def broker_conf_pairs(text: str) -> dict[str, str]:
    """The pairs of broker.conf text read as Java reads a ``.properties`` file (Pulsar loads it
    with ``java.util.Properties``): ``key=value``, ``key:value`` and ``key value`` lines, ``#`` and
    ``!`` comments, lines continued by a trailing ``\\``, ``\\`` escapes (``\\uXXXX``, ``\\t``,
    an escaped ``=``, ``:`` or space inside a key), a later key overriding an earlier one. Values are
    trimmed as Pulsar trims them. The one reading of the file's syntax (``from_broker_conf``
    validates the keys); an unreadable line is a ``ConfigError`` naming its number."""
    return _read_properties(text, {})


def read_broker_conf(text: str) -> tuple[dict[str, str], dict[str, int]]:
    """``broker_conf_pairs`` and the line each key was last set on (for ``at_line``)."""
    lines: dict[str, int] = {}
    return _read_properties(text, lines), lines


def at_line(exc: ConfigError, lines: Mapping[str, int]) -> ConfigError:
    """``exc`` naming the line of its key (itself when the key is on no line)."""
    line = lines.get(str(exc.details.get("key")))
    return exc if line is None else ConfigError(f"line {line}: {exc.message}", **exc.details)


def _read_properties(text: str, lines: dict[str, int]) -> dict[str, str]:
    """``broker_conf_pairs``, filling ``lines`` with the line each key was last set on."""
    values: dict[str, str] = {}
    line = 1
    try:
        for item in javaproperties.parse(text):
            if isinstance(item, javaproperties.KeyValue):
                if not item.key.strip():
                    source = item.source.strip()
                    raise ConfigError(f"line {line}: {source!r} has no key", key=None, value=source)
                values[item.key.strip()] = item.value.strip()
                lines[item.key.strip()] = line
            line += item.source.count("\n")
    except javaproperties.InvalidUEscapeError as exc:
        raise ConfigError(f"line {line}: {exc.escape!r} is not a \\uXXXX escape (four hex digits)",
                          key=None, value=exc.escape) from None
    return values


def _parse_keys(values: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...], tuple[str, ...]]:
    """(attribute -> parsed value, ignored keys, deprecated keys) of Pulsar keys."""
    parsed: dict[str, Any] = {}
    ignored: list[str] = []
    deprecated: list[str] = []
    for raw_key, raw_value in values.items():
        name = str(raw_key).strip()
        if name in ACTOR_KEY_NAMES:
            continue  # the actors' own key: ``actors.conf`` reads it
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
    known = list(KEY_BY_NAME) + list(ALIASES) + sorted(ACTOR_KEY_NAMES) + sorted(PULSAR_KEYS)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown configuration key {name!r}{hint}", key=name, value=None)


def render_broker_conf(sections: Sequence[tuple[str, Sequence[ConfigKey]]] = ()) -> str:
    """The shipped ``conf/broker.conf``: every key, its default and a one-line comment; then each
    of ``sections`` (a heading, the keys of another component of this project)."""
    lines = [
        "# bundle-balancer load balancer settings: Pulsar broker.conf keys and defaults.",
        "# Other keys of Pulsar's broker.conf are ignored (and counted), misspelled ones rejected.",
        "# Strategy values take short or Pulsar class names.",
        "",
    ]
    for key in KEYS:
        lines.append(f"# {key.doc}")
        # A deprecated key is shown at its default but not set: the shipped file must not
        # earn the deprecation notice on every command.
        lead = "# (deprecated in Pulsar 4.0) " if key.name in DEPRECATED else ""
        lines.append(f"{lead}{key.name}={_render_value(key.default)}")
        lines.append("")
    for heading, keys in sections:
        lines += [f"# -- {heading}", ""]
        for key in keys:
            lines += [f"# {key.doc}", f"{key.name}={_render_value(key.default)}", ""]
    return "\n".join(lines)


def _render_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)
