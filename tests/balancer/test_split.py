"""Split algorithms, auto-split of M and E, and ``lbctl decide split`` errors (behaviour §2)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.bundles import FULL_RANGE, HASH_MAX, HashRange, NamespaceBundles, topic_hash
from balancer.config import LoadBalancerConfig
from balancer.errors import (
    ConfigError,
    InvalidBundle,
    InvalidInput,
    MalformedInput,
    UnknownNamespace,
    UnknownStrategy,
    UnsplittableBundle,
)
from balancer.split import (
    MIB,
    BundleSplitStats,
    SplitHitCounts,
    SplitReason,
    TopicLoad,
    equal_pieces,
    extensible_split_candidates,
    flow_or_qps_equally_divide,
    modular_split_candidates,
    range_equally_divide,
    specified_positions_divide,
    split_boundaries,
    topic_count_equally_divide,
)
from lbctl.decide import decide

CONFIG = LoadBalancerConfig()
NS = "public/default"
QUARTERS = [f"{NS}/{r.name}" for r in NamespaceBundles.initial(NS, 4)]


# -- algorithms ----------------------------------------------------------------------------


def test_range_equally_divide_keeps_pulsars_rounding() -> None:
    assert range_equally_divide(FULL_RANGE) == (0x7FFFFFFF,)
    assert range_equally_divide(HashRange(0, 0x7FFFFFFF)) == (0x3FFFFFFF,)
    assert range_equally_divide(HashRange(0x7FFFFFFF, HASH_MAX)) == (0xBFFFFFFF,)


def test_equal_pieces_of_the_full_range() -> None:
    assert equal_pieces(FULL_RANGE, 4) == (0x3FFFFFFF, 0x7FFFFFFE, 0xBFFFFFFD)
    assert equal_pieces(FULL_RANGE, 1) == ()
    with pytest.raises(UnsplittableBundle, match="3 pieces"):
        equal_pieces(HashRange(10, 12), 3)
    with pytest.raises(InvalidInput, match="0"):
        equal_pieces(FULL_RANGE, 0)


def test_topic_count_takes_the_midpoint_left_of_the_median() -> None:
    hashes = [topic_hash(t) for t in ("a", "b", "c")]
    assert topic_count_equally_divide(hashes) == (0x3C3C67B4,)
    assert topic_count_equally_divide([10, 20, 30, 40]) == (25,)
    assert topic_count_equally_divide([10]) == ()
    assert topic_count_equally_divide([]) == ()


def test_specified_positions_keep_those_strictly_inside() -> None:
    inside = HashRange(1, 1000)
    positions = [1100, 500, -1, 0, 1, 100, 200, 800, 1000, 500]
    assert specified_positions_divide(inside, 2, positions) == (100, 200, 500, 800)
    assert specified_positions_divide(inside, 1, positions) == ()
    assert specified_positions_divide(inside, 0, positions, force=True) == (100, 200, 500, 800)
    assert specified_positions_divide(inside, 2, [0, 1000]) == ()
    with pytest.raises(MalformedInput, match="positions"):
        specified_positions_divide(inside, 2, [])


def _flow(topics: list[TopicLoad], rate: float = 30000, mbytes: int = 100, pct: float = 10) -> tuple[int, ...]:
    return flow_or_qps_equally_divide(topics, rate, mbytes * MIB, pct / 100)


def test_flow_or_qps_pip169_example_adds_one() -> None:
    rates = [(10, 100, 1), (20, 200, 2), (80, 300, 3), (90, 400, 4), (100, 500, 5), (110, 2000, 190)]
    topics = [TopicLoad(h, r, m * MIB) for h, r, m in rates]
    assert _flow(topics) == (106,)


def test_flow_or_qps_needs_the_total_over_the_limit_plus_the_margin() -> None:
    topics = [TopicLoad(10, 16000), TopicLoad(20, 16000)]  # 32000 < 30000 * 1.1
    assert _flow(topics) == ()
    topics = [TopicLoad(10, 17000), TopicLoad(20, 17000)]  # 34000 >= 33000
    assert _flow(topics) == (16,)


def test_flow_or_qps_ignores_topics_without_traffic_or_stats() -> None:
    hot = [TopicLoad(10, 20000), TopicLoad(30, 20000)]
    assert _flow([*hot, TopicLoad(20, 0, 0), TopicLoad(25, 5, 5, has_stats=False)]) == (21,)
    assert _flow([TopicLoad(10, 40000), TopicLoad(20, 0, 0)]) == ()
    assert _flow([TopicLoad(10, 40000)]) == ()


def test_flow_or_qps_can_give_several_boundaries() -> None:
    topics = [TopicLoad(h, 20000) for h in (100, 200, 300, 400)]
    assert _flow(topics) == (151, 251, 351)


def test_topic_load_refuses_negative_rates() -> None:
    with pytest.raises(InvalidInput, match="-1"):
        TopicLoad(5, -1.0)
    with pytest.raises(InvalidInput, match="nan"):
        TopicLoad(5, 0.0, float("nan"))


@settings(max_examples=200)
@given(st.lists(st.integers(0, HASH_MAX), min_size=2, max_size=40))
def test_topic_count_boundary_lies_between_the_topics(hashes: list[int]) -> None:
    (cut,) = topic_count_equally_divide(hashes)
    assert min(hashes) <= cut <= max(hashes)
    below = sum(h < cut for h in hashes)
    assert below <= len(hashes) // 2


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, HASH_MAX - 1), st.floats(0, 50000), st.floats(0, 200 * MIB)),
                min_size=2, max_size=30, unique_by=lambda t: t[0]))
def test_flow_or_qps_boundaries_are_increasing_and_inside(raw: list[tuple[int, float, float]]) -> None:
    topics = [TopicLoad(h, r, t) for h, r, t in raw]
    cuts = _flow(topics)
    hashes = sorted(h for h, _, _ in raw)
    assert list(cuts) == sorted(set(cuts))
    assert all(hashes[0] < c <= hashes[-1] for c in cuts)


@settings(max_examples=100)
@given(st.integers(0, HASH_MAX - 1).flatmap(
    lambda low: st.tuples(st.just(low), st.integers(low + 1, HASH_MAX))), st.integers(1, 64))
def test_equal_pieces_cut_strictly_inside(bounds: tuple[int, int], pieces: int) -> None:
    hash_range = HashRange(*bounds)
    if hash_range.width < pieces:
        with pytest.raises(UnsplittableBundle):
            equal_pieces(hash_range, pieces)
        return
    cuts = equal_pieces(hash_range, pieces)
    assert len(hash_range.split_at(cuts)) == pieces


# -- split_boundaries (what decide split runs) ---------------------------------------------


def test_unknown_algorithm_names_the_accepted_ones() -> None:
    with pytest.raises(UnknownStrategy) as caught:
        split_boundaries("half", FULL_RANGE, [], CONFIG)
    assert "'half'" in caught.value.message and "topic_count_equally_divide" in caught.value.message


def test_an_algorithm_the_config_does_not_support_is_refused() -> None:
    config = CONFIG.with_overrides({"supportedNamespaceBundleSplitAlgorithms": "range_equally_divide"})
    with pytest.raises(ConfigError, match="topic_count_equally_divide"):
        split_boundaries("topic_count_equally_divide", FULL_RANGE, [], config)


def test_a_topic_outside_the_bundle_is_named() -> None:
    topic = TopicLoad.named("persistent://public/default/my-topic")  # 0x2bad45f7
    with pytest.raises(InvalidBundle, match="persistent://public/default/my-topic"):
        split_boundaries("range_equally_divide", HashRange(0x40000000, 0x80000000), [topic], CONFIG)


def test_one_hash_bundles_and_edge_answers_are_unsplittable() -> None:
    with pytest.raises(UnsplittableBundle, match="0x00000010_0x00000011"):
        split_boundaries("range_equally_divide", HashRange(0x10, 0x11), [], CONFIG)
    # Two topics on the lower edge: the midpoint is the edge itself, so the split cannot happen.
    on_edge = [TopicLoad(0x10), TopicLoad(0x11)]
    with pytest.raises(UnsplittableBundle, match="16"):
        split_boundaries("topic_count_equally_divide", HashRange(0x10, 0x20), on_edge, CONFIG)


def _split_doc(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {"algorithm": "topic_count_equally_divide", "bundle": f"{NS}/0x00000000_0xffffffff",
                                "config": {}, "topics": [{"name": "a"}, {"name": "b"}, {"hash": 7}]}
    document.update(changes)
    return document


def test_decide_split_reads_names_hashes_and_plain_names() -> None:
    assert decide("split", _split_doc()) == {"boundaries": [topic_count_equally_divide(
        [topic_hash("a"), topic_hash("b"), 7])[0]]}
    assert decide("split", _split_doc(topics=["a", "b", "c"])) == {"boundaries": [0x3C3C67B4]}


@pytest.mark.parametrize(
    ("changes", "error", "named"),
    [
        ({"topics": [{"name": "a", "hash": 5}]}, MalformedInput, "topics[0]"),
        ({"topics": [{"msgRate": 5}]}, MalformedInput, "topics[0]"),
        ({"topics": [{"hash": 1 << 32}]}, MalformedInput, "4294967296"),
        ({"topics": [{"hash": 5, "msgRate": -1}]}, MalformedInput, "topics[0].msgRate"),
        ({"topics": "a"}, MalformedInput, "topics"),
        ({"bundle": "public/default"}, InvalidBundle, "public/default"),
        ({"bundle": 7}, MalformedInput, "bundle"),
        ({"algorithm": "specified_positions_divide", "positions": ["x"]}, MalformedInput, "positions[0]"),
        ({"algorithm": "specified_positions_divide"}, MalformedInput, "positions"),
        ({"bundle": f"{NS}/0x00000000_0x00000100"}, InvalidBundle, "'a'"),
    ],
)
def test_decide_split_bad_input(changes: dict[str, Any], error: type[Exception], named: str) -> None:
    with pytest.raises(error) as caught:
        decide("split", _split_doc(**changes))
    assert named in str(caught.value)


# -- auto-split, M ---------------------------------------------------------------------------


def _stats(bundle: str, topics: int = 5, sessions: int = 0, rate: float = 0.0, tput: float = 0.0,
           loads: tuple[TopicLoad, ...] = ()) -> BundleSplitStats:
    return BundleSplitStats(bundle, topics, sessions, rate, tput, loads)


def test_modular_reasons_in_order_with_the_numbers() -> None:
    bundles = [
        _stats(QUARTERS[0], topics=1001, sessions=5000),
        _stats(QUARTERS[1], sessions=1001, rate=40000),
        _stats(QUARTERS[2], rate=30001, tput=200 * MIB),
        _stats(QUARTERS[3], tput=100 * MIB + 1),
    ]
    decisions = modular_split_candidates(bundles, {NS: 4}, CONFIG)
    assert [(d.bundle, d.reason, d.value, d.limit) for d in decisions] == [
        (QUARTERS[0], SplitReason.TOPICS, 1001, 1000),
        (QUARTERS[1], SplitReason.SESSIONS, 1001, 1000),
        (QUARTERS[2], SplitReason.MSG_RATE, 30001, 30000),
        (QUARTERS[3], SplitReason.BANDWIDTH, 100 * MIB + 1, 100 * MIB),
    ]
    assert all(d.unload_children and d.hit_count == 0 and d.boundaries == () for d in decisions)
    assert decisions[0].algorithm == "range_equally_divide"


def test_modular_skips_single_topic_bundles_and_values_at_the_limit() -> None:
    bundles = [_stats(QUARTERS[0], topics=1, rate=99999), _stats(QUARTERS[1], topics=1000, sessions=1000,
                                                                 rate=30000, tput=100 * MIB)]
    assert modular_split_candidates(bundles, {NS: 4}, CONFIG) == ()


def test_modular_sessions_limit_off_at_zero_and_switch_off() -> None:
    busy = [_stats(QUARTERS[0], sessions=10**6)]
    off = CONFIG.with_overrides({"loadBalancerNamespaceBundleMaxSessions": 0})
    assert modular_split_candidates(busy, {NS: 4}, off) == ()
    disabled = CONFIG.with_overrides({"loadBalancerAutoBundleSplitEnabled": False})
    assert modular_split_candidates(busy, {NS: 4}, disabled) == ()


def test_modular_namespace_cap_counts_candidates_of_this_pass() -> None:
    hot = [_stats(b, rate=50000) for b in QUARTERS]
    config = CONFIG.with_overrides({"loadBalancerNamespaceMaximumBundles": 6})
    assert [d.bundle for d in modular_split_candidates(hot, {NS: 4}, config)] == QUARTERS[:2]
    assert modular_split_candidates(hot, {NS: 6}, config) == ()
    with pytest.raises(UnknownNamespace, match="public/default"):
        modular_split_candidates(hot, {}, config)


# -- auto-split, E -----------------------------------------------------------------------------


def _cycles(rounds: list[list[BundleSplitStats]], config: LoadBalancerConfig = CONFIG,
            counts: dict[str, int] | None = None, splitting: tuple[str, ...] = ()) -> list[list[str]]:
    hits = SplitHitCounts()
    out = []
    for bundles in rounds:
        result = extensible_split_candidates(bundles, counts or {NS: 4}, hits, config, splitting)
        hits = result.hit_counts
        out.append([d.bundle for d in result.decisions])
    return out


def test_extensible_splits_on_the_fourth_consecutive_hit_and_resets() -> None:
    hot = [_stats(QUARTERS[0], rate=40000)]
    assert _cycles([hot] * 5) == [[], [], [], [QUARTERS[0]], []]


def test_extensible_hit_count_is_removed_by_a_quiet_cycle() -> None:
    hot, quiet = [_stats(QUARTERS[0], rate=40000)], [_stats(QUARTERS[0], rate=10)]
    assert _cycles([hot, hot, hot, quiet, hot, hot, hot, hot]) == [[]] * 7 + [[QUARTERS[0]]]


def test_extensible_hit_counts_are_carried_as_a_value() -> None:
    hits = SplitHitCounts()
    result = extensible_split_candidates([_stats(QUARTERS[0], topics=2000)], {NS: 4}, hits, CONFIG)
    assert hits.get(QUARTERS[0]) == 0 and result.hit_counts.get(QUARTERS[0]) == 1
    with pytest.raises(TypeError):
        result.hit_counts.counts[QUARTERS[0]] = 9  # type: ignore[index]


def test_extensible_decision_carries_reason_numbers_and_one_boundary() -> None:
    config = CONFIG.with_overrides({"loadBalancerNamespaceBundleSplitConditionHitCountThreshold": 0})
    result = extensible_split_candidates([_stats(QUARTERS[1], sessions=1500, rate=40000)], {NS: 4},
                                         SplitHitCounts(), config)
    (decision,) = result.decisions
    assert (decision.reason, decision.value, decision.limit, decision.hit_count) == (
        SplitReason.SESSIONS, 1500, 1000, 1)
    assert decision.boundaries == (0x40000000 + 0x20000000,)
    assert not decision.unload_children
    assert decision.to_dict()["reason"] == "Sessions"


def test_extensible_waits_for_a_splitting_parent_as_pulsar_checks_it() -> None:
    # Pulsar 4.0's check: the splitting bundle's id starts with the namespace (a string prefix) and
    # its range starts with this bundle's lower or ends with its upper boundary. Adjacent bundles
    # do not wait (make conformance, autosplit-extensible).
    config = CONFIG.with_overrides({"loadBalancerNamespaceBundleSplitConditionHitCountThreshold": 0})
    hot = [_stats(QUARTERS[1], rate=40000)]
    lower, upper = QUARTERS[1].rsplit("/", 1)[1].split("_")
    assert _cycles([hot], config, splitting=(f"{NS}/{lower}_0xffffffff",)) == [[]]  # same lower
    assert _cycles([hot], config, splitting=(f"{NS}/0x00000000_{upper}",)) == [[]]  # same upper
    assert _cycles([hot], config, splitting=(QUARTERS[1],)) == [[]]
    assert _cycles([hot], config, splitting=(QUARTERS[0],)) == [[QUARTERS[1]]]  # adjacent below
    assert _cycles([hot], config, splitting=(QUARTERS[2],)) == [[QUARTERS[1]]]  # adjacent above
    assert _cycles([hot], config, splitting=(f"{NS}x/{lower}_{upper}",)) == [[]]  # the prefix quirk
    other_ns = "public/other/0x00000000_0x40000000"
    assert _cycles([hot], config, splitting=(other_ns,)) == [[QUARTERS[1]]]


def test_extensible_forgets_the_hit_count_of_an_unreported_bundle() -> None:
    config = CONFIG.with_overrides({"loadBalancerNamespaceBundleSplitConditionHitCountThreshold": 1})
    hot, cold = [_stats(QUARTERS[1], rate=40000)], [_stats(QUARTERS[2], rate=40000)]
    assert _cycles([hot, hot], config) == [[], [QUARTERS[1]]]
    assert _cycles([hot, cold, hot], config) == [[], [], []]  # not reported in between: starts over


def test_extensible_caps_per_cycle_and_per_namespace() -> None:
    config = CONFIG.with_overrides({"loadBalancerNamespaceBundleSplitConditionHitCountThreshold": 0,
                                    "loadBalancerMaxNumberOfBundlesToSplitPerCycle": 2})
    hot = [_stats(b, rate=40000) for b in QUARTERS]
    first = extensible_split_candidates(hot, {NS: 4}, SplitHitCounts(), config)
    assert [d.bundle for d in first.decisions] == QUARTERS[:2]
    assert dict(first.hit_counts.counts) == {}  # the cycle stopped before the last two bundles
    assert _cycles([hot, hot[2:]], config) == [QUARTERS[:2], QUARTERS[2:]]
    capped = config.with_overrides({"loadBalancerNamespaceMaximumBundles": 5})
    assert _cycles([hot], capped) == [QUARTERS[:1]]


def test_extensible_needs_exactly_one_boundary() -> None:
    config = CONFIG.with_overrides({"loadBalancerNamespaceBundleSplitConditionHitCountThreshold": 0,
                                    "defaultNamespaceBundleSplitAlgorithm": "flow_or_qps_equally_divide"})
    several = tuple(TopicLoad(h, 20000) for h in (100, 200, 300, 400))
    one = tuple(TopicLoad(h, 20000) for h in (100, 200))
    result = extensible_split_candidates([_stats(QUARTERS[0], topics=4, rate=80000, loads=several)],
                                         {NS: 4}, SplitHitCounts(), config)
    assert result.decisions == () and result.hit_counts.get(QUARTERS[0]) == 1  # kept for later
    result = extensible_split_candidates([_stats(QUARTERS[0], topics=2, rate=40000, loads=one)],
                                         {NS: 4}, SplitHitCounts(), config)
    assert [d.boundaries for d in result.decisions] == [(151,)]


def test_extensible_reports_unsplittable_bundles_as_failures() -> None:
    tiny = f"{NS}/0x00000010_0x00000011"
    result = extensible_split_candidates([_stats(tiny, rate=40000)], {NS: 4}, SplitHitCounts(), CONFIG)
    assert result.failures == (tiny,) and result.decisions == () and result.hit_counts.get(tiny) == 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 60000), min_size=4, max_size=4), min_size=1, max_size=12),
       st.integers(0, 4))
def test_extensible_never_splits_before_threshold_hits(rates: list[list[int]], threshold: int) -> None:
    config = CONFIG.with_overrides({"loadBalancerNamespaceBundleSplitConditionHitCountThreshold": threshold})
    hits, streak = SplitHitCounts(), dict.fromkeys(QUARTERS, 0)
    for round_rates in rates:
        bundles = [_stats(b, rate=r) for b, r in zip(QUARTERS, round_rates, strict=True)]
        result = extensible_split_candidates(bundles, {NS: 4}, hits, config)
        for bundle, rate in zip(QUARTERS, round_rates, strict=True):
            streak[bundle] = streak[bundle] + 1 if rate > 30000 else 0
        for decision in result.decisions:
            assert streak[decision.bundle] > threshold
            streak[decision.bundle] = 0
        assert dict(result.hit_counts.counts) == {b: n for b, n in streak.items() if n}
        hits = result.hit_counts
