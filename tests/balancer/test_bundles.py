"""Topic hashing, ranges, bundle ids and namespace layouts (behaviour §1, §2 mechanics)."""

from __future__ import annotations

import itertools
import pickle
import zlib
from bisect import bisect_right

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.bundles import (
    FULL_RANGE,
    HASH_MAX,
    BundleId,
    HashRange,
    NamespaceBundles,
    topic_hash,
)
from balancer.errors import InvalidBundle, InvalidInput, UnsplittableBundle
from lbctl.decide import decide

NS = "public/default"


# -- hashing -------------------------------------------------------------------------------


def test_hash_is_crc32_of_the_full_topic_name() -> None:
    assert topic_hash("persistent://public/default/my-topic") == 0x2BAD45F7
    assert topic_hash("non-persistent://public/default/t1") == 0x8C15011C
    assert topic_hash("persistent://public/default/t1") != topic_hash("non-persistent://public/default/t1")


@given(st.text())
def test_hash_matches_zlib_for_any_name(name: str) -> None:
    value = topic_hash(name)
    assert value == zlib.crc32(name.encode("utf-8"))
    assert 0 <= value <= HASH_MAX


# -- ranges and ids ------------------------------------------------------------------------


def test_range_name_round_trips() -> None:
    parsed = HashRange.parse("0x40000000_0x80000000")
    assert (parsed.lower, parsed.upper) == (0x40000000, 0x80000000)
    assert parsed.name == str(parsed) == "0x40000000_0x80000000"
    assert HashRange.parse("0X0000000A_0x000000FF").name == "0x0000000a_0x000000ff"


@pytest.mark.parametrize(
    "text",
    ["0x00000000_0xzzzzzzzz", "0x0_0x40000000", "0x40000000_0x40000000", "0x80000000_0x40000000",
     "0x00000000-0x40000000", "", "0x00000000_0x100000000"],
)
def test_bad_ranges_are_named(text: str) -> None:
    with pytest.raises(InvalidBundle) as caught:
        HashRange.parse(text)
    assert repr(text) in caught.value.message


def test_a_range_contains_its_lower_end_but_not_its_upper_end_except_at_the_top() -> None:
    low = HashRange(0, 0x40000000)
    assert 0 in low and 0x3FFFFFFF in low and 0x40000000 not in low
    assert HASH_MAX in HashRange(0xC0000000, HASH_MAX)
    assert HASH_MAX - 1 in HashRange(0xC0000000, HASH_MAX)


def test_bundle_id_round_trips_and_sorts_as_text() -> None:
    bundle = BundleId.parse("public/default/0x00000000_0x40000000")
    assert bundle.namespace == NS and bundle.range == HashRange(0, 0x40000000)
    assert str(bundle) == "public/default/0x00000000_0x40000000"
    ids = [BundleId.parse(f"{ns}/0x00000000_0xffffffff") for ns in ("a/b", "a/b-x", "a/a")]
    assert [str(b) for b in sorted(ids)] == sorted(str(b) for b in ids)


def test_v1_namespaces_are_bundles_too() -> None:
    # Pulsar's NamespaceName takes property/cluster/namespace (v1); its topics hash with the cluster.
    bundle = BundleId.parse("prop/cluster/ns/0x00000000_0x40000000")
    assert bundle.namespace == "prop/cluster/ns"
    layout = NamespaceBundles.initial("prop/cluster/ns", 4)
    assert layout.bundle_of("persistent://prop/cluster/ns/t") == "prop/cluster/ns/0x00000000_0x40000000"


@pytest.mark.parametrize(
    "text",
    ["public/0x00000000_0x40000000", "a/b/c/d/0x00000000_0x40000000", "public//0x00000000_0x40000000",
     "public/def ault/0x00000000_0x40000000", "public/default/0x00000000_0xzzzzzzzz", "no-slash"],
)
def test_bad_bundle_ids_are_named(text: str) -> None:
    with pytest.raises(InvalidBundle) as caught:
        BundleId.parse(text)
    assert repr(text) in caught.value.message


# -- layouts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "edges"),
    [
        (1, (0, HASH_MAX)),
        (3, (0, 0x55555555, 0xAAAAAAAA, HASH_MAX)),
        (4, (0, 0x40000000, 0x80000000, 0xC0000000, HASH_MAX)),
    ],
)
def test_initial_layouts(count: int, edges: tuple[int, ...]) -> None:
    layout = NamespaceBundles.initial(NS, count)
    assert len(layout) == count
    assert layout.boundaries() == edges


def test_a_namespace_without_a_layout_has_the_full_bundle() -> None:
    layout = NamespaceBundles.single(NS)
    assert list(layout) == [FULL_RANGE] and layout == NamespaceBundles.initial(NS, 1)


@pytest.mark.parametrize("count", [7, 1000, (1 << 20) + 7, (1 << 31) + 1, (1 << 32) - 1])
def test_large_layouts_are_cheap_and_follow_pulsar_arithmetic(count: int) -> None:
    layout = NamespaceBundles.initial(NS, count)
    seg = (1 << 32) // count
    assert len(layout) == count and len(layout.runs) <= 2
    for value in (0, 1, seg - 1, seg, 5 * seg + 3, (count - 1) * seg, (count - 1) * seg - 1, HASH_MAX):
        expected = min(value // seg, count - 1)
        assert layout.index_of_hash(value) == expected
        found = layout.find(value)
        assert value in found
        assert found.lower == expected * seg


@pytest.mark.parametrize("count", [0, -1, 1 << 32, True])
def test_impossible_layout_sizes_are_refused(count: int) -> None:
    with pytest.raises(InvalidInput) as caught:
        NamespaceBundles.initial(NS, count)
    assert repr(count) in caught.value.message


def test_lookup_rules_of_the_four_bundle_layout() -> None:
    layout = NamespaceBundles.initial(NS, 4)
    assert layout.find(0).name == "0x00000000_0x40000000"
    assert layout.find(0x3FFFFFFF).name == "0x00000000_0x40000000"
    assert layout.find(0x40000000).name == "0x40000000_0x80000000"  # an inner edge starts its bundle
    assert layout.find(0xBFFFFFFF).name == "0x80000000_0xc0000000"
    assert layout.find(HASH_MAX).name == "0xc0000000_0xffffffff"  # the top hash: last bundle
    assert layout.bundle_of("persistent://public/default/my-topic") == "public/default/0x00000000_0x40000000"
    assert layout.find_topic("non-persistent://public/default/t1").name == "0x80000000_0xc0000000"


@pytest.mark.parametrize("value", [-1, 1 << 32])
def test_a_hash_outside_32_bits_is_refused(value: int) -> None:
    with pytest.raises(InvalidInput, match=str(value)):
        NamespaceBundles.initial(NS, 4).find(value)


@pytest.mark.parametrize(
    ("edges", "named"),
    [([1, HASH_MAX], "0x00000000"), ([0, 5], "0xffffffff"), ([0, 5, 5, HASH_MAX], "5"),
     ([0, 9, 5, HASH_MAX], "5"), ([0, -3, HASH_MAX], "-3"), ([0, 1.5, HASH_MAX], "1.5"), ([0], "0xffffffff")],
)
def test_bad_boundaries_are_refused_naming_the_value(edges: list[int], named: str) -> None:
    with pytest.raises(InvalidBundle) as caught:
        NamespaceBundles.from_boundaries(NS, edges)
    assert named in caught.value.message


def test_bad_namespace_is_named() -> None:
    with pytest.raises(InvalidBundle, match="'public'"):
        NamespaceBundles.initial("public", 4)


# -- splitting -----------------------------------------------------------------------------


def test_split_replaces_only_the_split_bundle() -> None:
    layout = NamespaceBundles.initial(NS, 4)
    after = layout.split(HashRange(0x40000000, 0x80000000), [0x50000000, 0x60000000])
    assert after.boundaries() == (0, 0x40000000, 0x50000000, 0x60000000, 0x80000000, 0xC0000000, HASH_MAX)
    assert layout.boundaries() == (0, 0x40000000, 0x80000000, 0xC0000000, HASH_MAX)  # unchanged
    assert layout.split(HashRange(0, 0x40000000), []) is layout


def test_split_refuses_a_range_that_is_not_a_bundle() -> None:
    layout = NamespaceBundles.initial(NS, 4)
    with pytest.raises(InvalidBundle, match="0x00000000_0x80000000"):
        layout.split(HashRange(0, 0x80000000), [0x10])
    assert HashRange(0, 0x80000000) not in layout and HashRange(0, 0x40000000) in layout


@pytest.mark.parametrize("cuts", [[0], [0x40000000], [0x30000000, 0x20000000], [0x10, 0x10], [-5]])
def test_split_refuses_boundaries_not_strictly_inside(cuts: list[int]) -> None:
    layout = NamespaceBundles.initial(NS, 4)
    with pytest.raises(UnsplittableBundle):
        layout.split(HashRange(0, 0x40000000), cuts)


def test_a_one_hash_bundle_cannot_split() -> None:
    layout = NamespaceBundles.from_boundaries(NS, [0, 0x10, 0x11, HASH_MAX])
    with pytest.raises(UnsplittableBundle, match="0x00000010_0x00000011"):
        layout.split(HashRange(0x10, 0x11), [])


def test_equal_layouts_reached_differently_are_equal() -> None:
    by_split = NamespaceBundles.initial(NS, 2).split(HashRange(0, 0x80000000), [0x40000000])
    by_split = by_split.split(HashRange(0x80000000, HASH_MAX), [0xC0000000])
    assert by_split == NamespaceBundles.initial(NS, 4)
    assert hash(by_split) == hash(NamespaceBundles.initial(NS, 4))
    assert NamespaceBundles.from_boundaries(NS, by_split.boundaries()) == by_split


def test_layouts_pickle() -> None:
    layout = NamespaceBundles.initial(NS, 16).split(HashRange(0, 0x10000000), [0x08000000])
    layout.find(5)
    copy = pickle.loads(pickle.dumps(layout))
    assert copy == layout and copy.find(5) == layout.find(5)


# -- properties ----------------------------------------------------------------------------


def _reference_index(edges: tuple[int, ...], value: int) -> int:
    return min(bisect_right(edges, value) - 1, len(edges) - 2)


@st.composite
def split_histories(draw: st.DrawFn) -> NamespaceBundles:
    layout = NamespaceBundles.initial(NS, draw(st.sampled_from([1, 2, 3, 4, 16, 1000, (1 << 32) - 1])))
    for _ in range(draw(st.integers(0, 25))):
        target = layout.range_at(draw(st.integers(0, len(layout) - 1)))
        if not target.splittable:
            continue
        inner = st.integers(target.lower + 1, target.upper - 1)
        cuts = sorted(draw(st.sets(inner, min_size=0, max_size=min(4, target.width - 1))))
        layout = layout.split(target, cuts)
    return layout


@settings(max_examples=200, deadline=None)
@given(split_histories(), st.lists(st.integers(0, HASH_MAX), max_size=30))
def test_splits_keep_a_tiling_and_each_hash_has_one_bundle(layout: NamespaceBundles, hashes: list[int]) -> None:
    ranges = list(layout) if len(layout) < 5000 else None
    if ranges is not None:
        assert ranges[0].lower == 0 and ranges[-1].upper == HASH_MAX
        assert all(a.upper == b.lower for a, b in itertools.pairwise(ranges))
        edges = layout.boundaries()
        assert NamespaceBundles.from_boundaries(NS, edges) == layout  # one representation
    for value in [*hashes, 0, HASH_MAX, *(layout.edge(i) for i in range(min(len(layout), 50)))]:
        found = layout.find(value)
        assert value in found
        index = layout.index_of_hash(value)
        assert layout.range_at(index) == found and layout.index_of(found) == index
        if ranges is not None:
            assert index == _reference_index(edges, value)
            assert sum(value in r for r in ranges) == 1


def test_decide_bundle_rejects_both_count_and_boundaries() -> None:
    from balancer.errors import MalformedInput

    with pytest.raises(MalformedInput, match="not both"):
        decide("bundle", {"namespace": NS, "bundles": 4, "boundaries": [0, HASH_MAX], "topics": []})


def test_decide_bundle_with_a_count_and_bad_values() -> None:
    got = decide("bundle", {"namespace": NS, "bundles": 4, "topics": ["persistent://public/default/my-topic"]})
    assert got == {"topics": {"persistent://public/default/my-topic":
                              {"hash": 0x2BAD45F7, "bundle": "0x00000000_0x40000000"}}}
    with pytest.raises(InvalidInput, match="bundles"):
        decide("bundle", {"namespace": NS, "bundles": 0, "topics": []})
    with pytest.raises(InvalidBundle, match="boundaries"):
        decide("bundle", {"namespace": NS, "boundaries": [0, 7, 3, HASH_MAX], "topics": []})
    with pytest.raises(InvalidBundle, match="'nope'"):
        decide("bundle", {"namespace": "nope", "topics": []})


_STEPS = st.sampled_from([1, 2, 3, 1 << 28])


@st.composite
def edge_runs(draw: st.DrawFn) -> tuple[tuple[int, int, int], ...]:
    # Arithmetic pieces with few distinct steps, so neighbouring pieces often continue each other.
    runs, edge = [], 0
    for step, count, gap in draw(st.lists(st.tuples(_STEPS, st.integers(1, 5), _STEPS), max_size=8)):
        if edge + step * (count - 1) >= HASH_MAX:
            break
        runs.append((edge, step, count))
        edge += step * (count - 1) + gap
    if not runs:
        runs.append((0, 1, 1))
    runs.append((HASH_MAX, 1, 1))
    return tuple(runs)


@settings(max_examples=300)
@given(edge_runs())
def test_any_run_split_of_the_same_boundaries_is_the_same_layout(runs: tuple[tuple[int, int, int], ...]) -> None:
    edges = [e for first, step, count in runs for e in range(first, first + step * count, step)]
    if any(b <= a for a, b in itertools.pairwise(edges)):
        return
    by_runs = NamespaceBundles(NS, runs)
    by_edges = NamespaceBundles.from_boundaries(NS, edges)
    assert by_runs == by_edges and by_runs.runs == by_edges.runs
    assert list(by_runs.boundaries()) == edges


@pytest.mark.parametrize("run", [(0, 1, -1), (0, 0, 2), (0, 1), (0, 1.0, 2)])
def test_malformed_runs_are_refused(run: tuple[int, ...]) -> None:
    with pytest.raises(InvalidBundle, match="not a run"):
        NamespaceBundles(NS, (run, (HASH_MAX, 1, 1)))  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "namespace"), [
    ("public/default/0x00000000_0x40000000", "public/default"),
    ("prop/cluster/ns/0x40000000_0x80000000", "prop/cluster/ns"),  # the v1 form
    ("public/default", "public/default"),  # a namespace passes unchanged
    ("prop/cluster/ns", "prop/cluster/ns"),
])
def test_namespace_of_a_bundle_is_one_rule_for_both_namespace_forms(name: str, namespace: str) -> None:
    from balancer.bundles import namespace_of

    assert namespace_of(name) == namespace
