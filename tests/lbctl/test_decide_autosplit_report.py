"""`lbctl decide autosplit` and `lbctl decide report`: auto-split selection and report publication
(behaviour §2 'Auto-split', §3 'Publishing a report'), as a user reads them."""

from __future__ import annotations

from typing import Any

from lbctl.decide import decide

HOT = {"topics": 3, "producers": 1, "consumers": 1, "msgRate": 30001.0, "throughput": 0.0}
QUIET = {"topics": 3, "producers": 1, "consumers": 1, "msgRate": 10.0, "throughput": 0.0}
B0 = "t/ns/0x00000000_0x40000000"


def _splits(document: dict[str, Any]) -> list[list[dict[str, Any]]]:
    return [cycle["splits"] for cycle in decide("autosplit", document)["cycles"]]


def test_modular_splits_a_hot_bundle_at_once_without_boundaries() -> None:
    cycles = _splits({"bundleCounts": {"t/ns": 4}, "cycles": [{"bundles": {B0: HOT}}]})
    assert cycles == [[{"bundle": B0, "reason": "MsgRate", "algorithm": "range_equally_divide",
                        "boundaries": []}]]


def test_modular_respects_the_namespace_bundle_cap() -> None:
    assert _splits({"bundleCounts": {"t/ns": 128}, "cycles": [{"bundles": {B0: HOT}}]}) == [[]]


def test_extensible_splits_on_the_fourth_consecutive_hit_with_one_boundary() -> None:
    document = {"config": {"loadManagerClassName": "ExtensibleLoadManagerImpl"}, "bundleCounts": {"t/ns": 4},
                "cycles": [{"bundles": {B0: HOT}}] * 4}
    cycles = _splits(document)
    assert cycles[:3] == [[], [], []]
    assert cycles[3] == [{"bundle": B0, "reason": "MsgRate", "algorithm": "range_equally_divide",
                          "boundaries": [0x20000000]}]


def test_extensible_hit_count_restarts_after_a_quiet_cycle() -> None:
    document = {"config": {"loadManagerClassName": "ExtensibleLoadManagerImpl"},
                "cycles": [{"bundles": {B0: HOT}}] * 3 + [{"bundles": {B0: QUIET}}] + [{"bundles": {B0: HOT}}] * 3}
    assert all(c == [] for c in _splits(document))


def _publish(rates: list[float], **config: Any) -> list[bool]:
    checks = [{"now_ms": i * 5000, "report": {"msgRateIn": r}} for i, r in enumerate(rates)]
    result: list[bool] = decide("report", {"config": config, "checks": checks})["results"]
    return result


def test_report_is_published_past_the_change_threshold() -> None:
    threshold = {"loadBalancerReportUpdateThresholdPercentage": 5}
    assert _publish([100, 104], **threshold) == [True, False]
    assert _publish([100, 105.1], **threshold) == [True, True]
    assert _publish([0, 1e-8], **threshold) == [True, True]


def test_report_is_published_after_the_maximum_interval_anyway() -> None:
    checks = [{"now_ms": 0, "report": {}}, {"now_ms": 15 * 60_000, "report": {}},
              {"now_ms": 15 * 60_000 + 1, "report": {}}, {"now_ms": 15 * 60_000 + 2, "report": {}, "forced": True}]
    assert decide("report", {"checks": checks})["results"] == [True, False, True, True]
