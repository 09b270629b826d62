"""The exact sum a placement scores with: order-free, kept per change, rounded once."""

from __future__ import annotations

import math
import random
import struct
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.exact_sum import ExactSum, exact_sum

FINITE = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(FINITE, max_size=40))
def test_the_sum_is_the_exact_one_rounded_once(values: list[float]) -> None:
    exact = sum((Fraction(v) for v in values), Fraction(0))
    try:
        expected: float = float(exact) if values else 0  # Fraction rounds once, half to even
    except OverflowError:
        expected = math.inf if exact > 0 else -math.inf
    assert exact_sum(values) == expected
    if all(abs(v) < 1e300 for v in values):  # no intermediate overflow for math.fsum
        assert exact_sum(values) == (math.fsum(values) if values else 0)  # fsum's rounding


@settings(max_examples=200, deadline=None)
@given(values=st.lists(FINITE, min_size=1, max_size=30), seed=st.integers(0, 2**32))
def test_adds_and_removes_in_any_order_give_the_sum_of_what_is_left(values: list[float], seed: int) -> None:
    rng = random.Random(seed)
    kept = ExactSum()
    extra = [rng.uniform(-1e300, 1e300) for _ in range(len(values))]
    moves = [(v, True) for v in values + extra]
    rng.shuffle(moves)
    for value, _ in moves:
        kept.add(value)
    for value in extra:
        kept.remove(value)
    rng.shuffle(values)
    assert kept.value() == exact_sum(values)
    assert len(kept) == len(values)


def test_an_empty_sum_is_the_int_zero_as_sum_gives() -> None:
    kept = ExactSum([1.5])
    kept.remove(1.5)
    assert exact_sum([]) == 0 and isinstance(exact_sum([]), int)
    assert kept.value() == 0 and isinstance(kept.value(), int)
    assert repr(exact_sum([0.0])) == "0.0"


def test_order_does_not_change_the_sum_where_a_running_sum_does() -> None:
    values = [1e16, 1.0, -1e16, 1.0]
    assert sum(values) != sum(sorted(values))  # a left-to-right sum depends on the order
    assert exact_sum(values) == exact_sum(sorted(values)) == 2.0


def test_infinities_and_nan_follow_ieee() -> None:
    assert exact_sum([1.0, math.inf]) == math.inf
    assert exact_sum([-math.inf, 2.0]) == -math.inf
    assert math.isnan(exact_sum([math.inf, -math.inf]))
    assert math.isnan(exact_sum([math.nan, 1.0]))
    kept = ExactSum([math.nan, 3.0])
    kept.remove(math.nan)
    assert kept.value() == 3.0
    biggest = struct.unpack("<d", struct.pack("<Q", 0x7FEFFFFFFFFFFFFF))[0]
    assert exact_sum([biggest, biggest]) == math.inf
    assert exact_sum([biggest, biggest, -biggest]) == biggest
    assert exact_sum([5e-324, 5e-324]) == 1e-323
