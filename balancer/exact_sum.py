"""Correctly rounded sums of floats that can be kept per change.

A placement scores a broker by the sum of its bundles' long-term rates. A left-to-right float sum
depends on its order, so a kept sum could only be extended at the end and had to be recomputed
after any other change: a burst of placements on one broker re-summed all its pending bundles
each time (quadratic). Pulsar's own sum runs in hash-map order, so no order is Pulsar's; this
project's order-free rule is the exact sum, rounded once (half to even), as ``math.fsum`` rounds.

Invariants:
- ``ExactSum.value()`` is the correctly rounded sum of the multiset of values added and not yet
  removed, whatever the order of adds and removes, bit for bit equal to ``exact_sum`` of those
  values; an empty sum is the int 0 (what ``sum(())`` gives, so scores print alike);
- non-finite values follow IEEE: any nan, or +inf with -inf, gives nan; otherwise an infinity
  wins; a finite sum too large for a float is +-inf;
- pure, no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

_SCALE_BITS = 1074
"""Every finite double is an integer multiple of 2**-1074 (the smallest subnormal)."""
_SCALE = 1 << _SCALE_BITS


def _scaled(value: float) -> int:
    """``value * 2**1074`` as an exact integer (``value`` finite)."""
    numerator, denominator = value.as_integer_ratio()
    return numerator << (_SCALE_BITS + 1 - denominator.bit_length())


class ExactSum:
    """A multiset of floats with its correctly rounded sum, O(1) per add and remove."""

    __slots__ = ("_count", "_nan", "_neg_inf", "_pos_inf", "_scaled")

    def __init__(self, values: Iterable[float] = ()) -> None:
        self._count = 0
        self._scaled = 0
        self._nan = self._pos_inf = self._neg_inf = 0
        for value in values:
            self.add(value)

    def add(self, value: float) -> None:
        self._step(value, 1)

    def remove(self, value: float) -> None:
        """Take back one ``value`` added before (the very float that was added)."""
        self._step(value, -1)

    def _step(self, value: float, sign: int) -> None:
        self._count += sign
        if math.isfinite(value):
            self._scaled += sign * _scaled(value)
        elif value != value:
            self._nan += sign
        elif value > 0:
            self._pos_inf += sign
        else:
            self._neg_inf += sign

    def __len__(self) -> int:
        return self._count

    def value(self) -> float:
        if not self._count:
            return 0
        if self._nan or (self._pos_inf and self._neg_inf):
            return math.nan
        if self._pos_inf or self._neg_inf:
            return math.inf if self._pos_inf else -math.inf
        try:
            return self._scaled / _SCALE  # int / int is correctly rounded, half to even
        except OverflowError:
            return math.inf if self._scaled > 0 else -math.inf


def exact_sum(values: Iterable[float]) -> float:
    """The correctly rounded sum of ``values`` (the int 0 when there are none)."""
    return ExactSum(values).value()
