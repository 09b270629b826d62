"""Bundle ranking and selection shared by the modular shedding strategies (behaviour §4.1-§4.5).

Invariants:
- a candidate is a bundle the broker owns in the view that may be shed: not recently unloaded
  and not of a system namespace (behaviour §4.0 step 2);
- candidates are ranked by their value descending, ties by bundle id ascending (the project's
  determinism rule stands in for Pulsar's hash-map order);
- every selection is a prefix-ordered subset of the ranking: no bundle twice, ranking order kept;
- Java's ``(int)`` cast is emulated where Pulsar keeps a remainder in a ``MutableInt``
  (truncation toward zero, saturating at the int range, NaN -> 0).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from balancer.decisions import Decision, InputValue, Label, Reason
from balancer.load import BundleData
from balancer.shedding.base import ClusterView

JAVA_INT_MIN = -(2**31)
JAVA_INT_MAX = 2**31 - 1
UNIFORM_DELTA = 1000
"""UniformLoadShedder's slack on the remainder (Pulsar's ``1000/* delta */``)."""


class Candidate(NamedTuple):
    """A sheddable bundle and the value it is ranked by (msg/s or bytes/s)."""

    bundle: str
    value: float


def short_term_throughput(data: BundleData) -> float:
    """Short-term in+out throughput: what ThresholdShedder and OverloadShedder rank by."""
    return data.short_term.msg_throughput


def short_term_rate(data: BundleData) -> float:
    """Short-term in+out message rate."""
    return data.short_term.msg_rate


def java_int(value: float) -> int:
    """Java's ``(int) double``: truncation toward zero, saturating, NaN -> 0."""
    if math.isnan(value):
        return 0
    if value >= JAVA_INT_MAX:
        return JAVA_INT_MAX
    if value <= JAVA_INT_MIN:
        return JAVA_INT_MIN
    return int(value)


def java_int_add(a: int, b: int) -> int:
    """Java's ``int + int``: wraps around at 32 bits (a saturated remainder + 1000 goes negative)."""
    return (a + b + 2**31) % 2**32 - 2**31


def ranked(view: ClusterView, broker: str, value: Callable[[BundleData], float]) -> list[Candidate]:
    """The broker's sheddable bundles, heaviest first (ties: lowest id first)."""
    candidates = [
        Candidate(data.bundle, value(data))
        for data in view.bundles_of(broker)
        if view.is_sheddable(data.bundle)
    ]
    candidates.sort(key=lambda c: (-c.value, c.bundle))
    return candidates


def take_until_covered(candidates: Sequence[Candidate], need: float) -> list[Candidate]:
    """Greedy selection of §4.1.5: take bundles while the taken total is below ``need``.

    At least one bundle is taken when there is any, even if ``need`` is already covered,
    because Pulsar's loop also admits the first bundle unconditionally.
    """
    taken: list[Candidate] = []
    marked = 0.0
    for candidate in candidates:
        if taken and marked >= need:
            break
        taken.append(candidate)
        marked += candidate.value
    return taken


def take_fitting_int(
    candidates: Sequence[Candidate], required: int, cap: int
) -> tuple[list[Candidate], int]:
    """UniformLoadShedder's selection (§4.3.5): a bundle goes if it fits the remainder + 1000.

    Pulsar 4.0 compares with ``remainder + 1000 /* delta */`` (msg/s or bytes/s alike). The
    remainder is an int, as Pulsar's ``MutableInt``: each selected value is truncated
    before it is subtracted, and int arithmetic wraps (a remainder saturated at 2^31 - 1
    plus the delta is negative: nothing fits). ``cap`` = -1 means no cap. Returns the selection and what is left.
    """
    taken: list[Candidate] = []
    remainder = required
    for candidate in candidates:
        if cap != -1 and len(taken) >= cap:
            break
        if candidate.value <= java_int_add(remainder, UNIFORM_DELTA):
            taken.append(candidate)
            remainder = java_int_add(remainder, -java_int(candidate.value))
    return taken, remainder


def take_fitting_positive(
    candidates: Sequence[Candidate], required: float
) -> tuple[list[Candidate], float]:
    """AvgShedder's selection (§4.5.5): a bundle with traffic goes if it fits the remainder.

    Zero-traffic bundles never go (moving them changes nothing); a sole bundle may go.
    Returns the selection and what is left.
    """
    taken: list[Candidate] = []
    remainder = required
    for candidate in candidates:
        if 0 < candidate.value <= remainder:
            taken.append(candidate)
            remainder -= candidate.value
    return taken, remainder


def to_decisions(
    chosen: Sequence[Candidate],
    *,
    source: str,
    strategy: str,
    reason: Reason,
    inputs: dict[str, InputValue],
    value_key: str,
    destination: str | None = None,
) -> list[Decision]:
    """One decision per chosen bundle, each with the run's numbers plus its own load.

    ``value_key`` names the bundle's value in ``inputs`` (``selected_throughput`` ...);
    ``marked_before`` is what the earlier selections of this source had already covered.
    """
    decisions: list[Decision] = []
    marked = 0.0
    for candidate in chosen:
        details: dict[str, InputValue] = dict(inputs)
        details[value_key] = candidate.value
        details["marked_before"] = marked
        decisions.append(
            Decision(
                candidate.bundle, source, destination, Label.SUCCESS, reason, strategy, details
            )
        )
        marked += candidate.value
    return decisions


def shed_greedy(
    view: ClusterView,
    broker: str,
    need: float,
    *,
    strategy: str,
    reason: Reason,
    inputs: dict[str, InputValue],
) -> list[Decision]:
    """§4.1.5 for one broker: its heaviest sheddable bundles until ``need`` is covered.

    A broker owning a sole bundle keeps it (Pulsar only warns): moving it would move the
    hot spot, not spread it.
    """
    if view.bundle_count(broker) <= 1:
        return []
    chosen = take_until_covered(ranked(view, broker, short_term_throughput), need)
    return to_decisions(
        chosen,
        source=broker,
        strategy=strategy,
        reason=reason,
        inputs=inputs,
        value_key="selected_throughput",
    )
