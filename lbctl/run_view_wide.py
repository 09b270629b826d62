"""The live view of a wide cluster: a summary instead of one line per broker.

Invariants:
- up to ``LISTED`` brokers every broker is shown, as before; beyond that a frame shows counts
  (brokers, reporting, bundles held), the spread of load (min / p50 / p90 / max and a histogram
  of ten 10 % buckets) and the ``EDGE`` busiest and idlest reporting brokers;
- brokers without a report are counted, never ranked; ties rank by broker id;
- pure: a function of the frame's broker lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

LISTED = 12
EDGE = 5
BUCKETS = 10
BLOCKS = " ▁▂▃▄▅▆▇█"


class Line(Protocol):
    @property
    def broker(self) -> str: ...
    @property
    def load(self) -> float | None: ...
    @property
    def bundles(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Spread:
    brokers: int
    reporting: int
    bundles: int
    busiest: tuple[str, ...]
    idlest: tuple[str, ...]
    quantiles: tuple[float, float, float, float]  # min, p50, p90, max
    histogram: tuple[int, ...]

    def text(self) -> str:
        low, p50, p90, high = (f"{100 * q:.0f}%" for q in self.quantiles)
        return (f"{self.brokers} brokers ({self.reporting} reporting), {self.bundles} bundles held; "
                f"load min {low} p50 {p50} p90 {p90} max {high} [{sparkline(self.histogram)}]")


def is_wide(lines: Sequence[Line]) -> bool:
    return len(lines) > LISTED


def _quantile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


def spread(lines: Sequence[Line], edge: int = EDGE) -> Spread:
    """Counts, quantiles, histogram and the busiest / idlest brokers of one frame."""
    reporting = sorted((line for line in lines if line.load is not None),
                       key=lambda line: (-(line.load or 0.0), line.broker))
    loads = sorted(line.load or 0.0 for line in reporting)
    histogram = [0] * BUCKETS
    for load in loads:
        histogram[min(BUCKETS - 1, max(0, int(load * BUCKETS)))] += 1
    idlest = sorted(reporting, key=lambda line: (line.load or 0.0, line.broker))[:edge]
    return Spread(len(lines), len(reporting), sum(line.bundles for line in lines),
                  tuple(line.broker for line in reporting[:edge]),
                  tuple(line.broker for line in idlest),
                  (_quantile(loads, 0.0), _quantile(loads, 0.5), _quantile(loads, 0.9),
                   loads[-1] if loads else 0.0),
                  tuple(histogram))


def sparkline(histogram: Sequence[int]) -> str:
    """One block per bucket, its height the bucket's share of the largest one."""
    top = max(histogram, default=0)
    if top == 0:
        return " " * len(histogram)
    return "".join(BLOCKS[round(count * (len(BLOCKS) - 1) / top)] for count in histogram)
