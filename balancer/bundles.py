"""Topic hashing, hash ranges, bundle ids and a namespace's bundle layout (behaviour §1, §2).

Invariants:
- a topic's hash is the unsigned CRC-32 (IEEE) of the UTF-8 bytes of its full name, nothing else;
- a ``HashRange`` always satisfies ``0 <= lower < upper <= 0xffffffff``; it covers
  ``[lower, upper)``, and the range ending at 0xffffffff also covers 0xffffffff itself;
- a bundle id is ``tenant/namespace/0xLLLLLLLL_0xUUUUUUUU`` (lower-case hex, 8 digits each);
- a ``NamespaceBundles`` is immutable; its boundaries start at 0, end at 0xffffffff and are
  strictly increasing, so its bundles tile the hash space and every hash lies in exactly one;
- splitting returns a new layout; only the split bundle changes, every other bundle is kept.

The layout keeps its boundaries as maximal arithmetic runs (greedy from the left), not as a
list: a fresh layout of N bundles is two runs whatever N is, so N up to 2^32 - 1 costs the same
memory and lookup time as N = 4, and a layout is equal to another exactly when their runs are.
"""

from __future__ import annotations

import re
import zlib
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from balancer.errors import InvalidBundle, InvalidInput, UnsplittableBundle

HASH_MAX = 0xFFFFFFFF
HASH_SPACE = 1 << 32
_RANGE_RE = re.compile(r"0[xX]([0-9a-fA-F]{8})_0[xX]([0-9a-fA-F]{8})")
# Pulsar's NamedEntity rule for tenant and namespace names.
_NAME_RE = re.compile(r"[-=:.\w]+")

_MEMO_LIMIT = 1 << 16  # bundles remembered per layout; a huge layout must not grow without bound
_Run = tuple[int, int, int]
"""(first edge, step, count): the edges first, first + step, ..., first + (count - 1) * step."""


def topic_hash(topic: str) -> int:
    """Unsigned CRC-32 of the full topic name (``persistent://t/ns/x-partition-3``)."""
    return zlib.crc32(topic.encode("utf-8")) & 0xFFFFFFFF


def validate_hash(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= HASH_MAX:
        raise InvalidInput(f"hash {value!r} is not an unsigned 32-bit integer (0..{HASH_MAX})",
                           value=value)
    return value


@dataclass(frozen=True, slots=True, order=True)
class HashRange:
    """``[lower, upper)`` of the hash space (closed at 0xffffffff); named ``0x%08x_0x%08x``."""

    lower: int
    upper: int

    def __post_init__(self) -> None:
        lower, upper = self.lower, self.upper
        if not (isinstance(lower, int) and isinstance(upper, int) and 0 <= lower < upper <= HASH_MAX):
            raise InvalidBundle(
                f"({lower!r}, {upper!r}) is not a hash range; need 0 <= lower < upper <= 0x{HASH_MAX:08x}",
                value=(lower, upper),
            )

    @classmethod
    def parse(cls, text: str) -> HashRange:
        """``0x00000000_0x40000000`` -> HashRange; anything else is an ``InvalidBundle`` naming it."""
        match = _RANGE_RE.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise InvalidBundle(
                f"{text!r} is not a bundle range; expected 0xLLLLLLLL_0xUUUUUUUU (8 hex digits each)",
                value=text,
            )
        lower, upper = int(match.group(1), 16), int(match.group(2), 16)
        if lower >= upper:
            raise InvalidBundle(f"{text!r} is not a bundle range: lower end must be below upper end",
                                value=text)
        return cls(lower, upper)

    @property
    def name(self) -> str:
        return f"0x{self.lower:08x}_0x{self.upper:08x}"

    @property
    def width(self) -> int:
        return self.upper - self.lower

    @property
    def splittable(self) -> bool:
        """Pulsar refuses to split a range of one hash (``upper - lower <= 1``)."""
        return self.upper - self.lower > 1

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, int):
            return False
        return self.lower <= value < self.upper or value == self.upper == HASH_MAX

    def __str__(self) -> str:
        return self.name

    def split_at(self, boundaries: Sequence[int]) -> tuple[HashRange, ...]:
        """The children for boundaries strictly inside and strictly increasing (none: itself)."""
        if not boundaries:
            return (self,)
        if not self.splittable:
            raise UnsplittableBundle(f"bundle {self.name} covers one hash and cannot be split",
                                     value=self.name)
        edges = [self.lower, *boundaries, self.upper]
        for before, after in pairwise(edges):
            if isinstance(after, bool) or not isinstance(after, int) or after <= before:
                raise UnsplittableBundle(
                    f"boundaries {list(boundaries)} do not split {self.name}: each must lie strictly "
                    f"inside ({self.lower}, {self.upper}) and above the previous one (bad: {after!r})",
                    value=after,
                )
        return tuple(HashRange(a, b) for a, b in pairwise(edges))


FULL_RANGE = HashRange(0, HASH_MAX)


def validate_namespace(namespace: str) -> str:
    """``tenant/ns`` or the v1 form ``property/cluster/ns`` (Pulsar's NamespaceName takes both):
    two or three non-empty names of ``[-=:.\\w]``; anything else names itself."""
    if namespace in _VALID_NAMESPACES:  # every placement checks its namespace several times
        return namespace
    parts = namespace.split("/") if isinstance(namespace, str) else []
    if len(parts) not in (2, 3) or not all(_NAME_RE.fullmatch(part) for part in parts):
        raise InvalidBundle(f"{namespace!r} is not a namespace; expected tenant/namespace "
                            "(or the v1 property/cluster/namespace)", value=namespace)
    if len(_VALID_NAMESPACES) < 65_536:
        _VALID_NAMESPACES.add(namespace)
    return namespace


_VALID_NAMESPACES: set[str] = set()


@dataclass(frozen=True, slots=True)
class BundleId:
    """``tenant/ns`` plus a range; ``str()`` gives ``tenant/ns/0xLLLLLLLL_0xUUUUUUUU``."""

    namespace: str
    range: HashRange

    def __post_init__(self) -> None:
        validate_namespace(self.namespace)

    @classmethod
    def parse(cls, text: str) -> BundleId:
        # Ids are immutable and the same few thousand are parsed on every placement and report.
        found = _PARSED.get(text) if isinstance(text, str) else None
        if found is None:
            found = cls._parse(text)
            if len(_PARSED) >= 1 << 18:
                _PARSED.clear()
            _PARSED[text] = found
        return found

    @classmethod
    def _parse(cls, text: str) -> BundleId:
        if not isinstance(text, str) or "/" not in text:
            raise InvalidBundle(f"{text!r} is not a bundle id; expected tenant/namespace/0xLLLLLLLL_0xUUUUUUUU",
                                value=text)
        namespace, _, range_text = text.rpartition("/")
        try:
            return cls(validate_namespace(namespace), HashRange.parse(range_text))
        except InvalidBundle as exc:
            raise InvalidBundle(f"{text!r} is not a bundle id: {exc.message}", value=text) from None

    def __str__(self) -> str:
        return f"{self.namespace}/{self.range.name}"

    def __lt__(self, other: BundleId) -> bool:
        # Ids sort as strings (code-point order), the project's tie rule.
        return str(self) < str(other)


_PARSED: dict[str, BundleId] = {}


def namespace_of(bundle: str) -> str:
    """``tenant/ns/0xLLLLLLLL_0xUUUUUUUU`` (or v1 ``property/cluster/ns/...``) -> its namespace;
    a namespace passes unchanged. The one rule, for every layer (it runs in every placement):
    the text before the last ``/`` when what follows it reads as a hash range, else the text
    itself, so a malformed id is its own (unknown) namespace, never a neighbour's. It equals
    ``BundleId.parse(bundle).namespace`` on every id; a topic's namespace is
    ``balancer.topics.namespace_of_topic``'s."""
    head, sep, last = bundle.rpartition("/")
    return head if sep and last.startswith("0x") and "_0x" in last else bundle


def format_bundle_id(namespace: str, hash_range: HashRange) -> str:
    return f"{namespace}/{hash_range.name}"


def _canonical(runs: Iterable[_Run]) -> tuple[_Run, ...]:
    """Maximal arithmetic runs, greedy from the left: one representation per edge sequence."""
    out: list[_Run] = []
    first = step = count = 0  # the open run; count 0 = none open
    for f, s, c in runs:
        while c:
            if count == 0:
                first, step, count, c = f, s, c, 0
            elif count == 1:
                # A lone edge takes its step from the next edge, as greedy-on-elements does.
                step, count, f, c = f - first, 2, f + s, c - 1
            elif f - (first + step * (count - 1)) == step:
                if c > 1 and s == step:
                    count, c = count + c, 0
                else:
                    count, f, c = count + 1, f + s, c - 1
            else:
                out.append((first, step if count > 1 else 1, count))
                count = 0
    if count:
        out.append((first, step if count > 1 else 1, count))
    return tuple(out)


def _check_runs(namespace: str, runs: tuple[_Run, ...]) -> None:
    previous = -1
    for first, step, count in runs:
        if count < 1 or step < 1 or first <= previous:
            before, bad = (previous, first) if first <= previous else (first, first + step)
            raise InvalidBundle(
                f"{namespace}: boundary {bad} does not follow {before}; "
                "boundaries must be strictly increasing", value=bad)
        previous = first + step * (count - 1)
    if not runs or runs[0][0] != 0 or previous != HASH_MAX:
        raise InvalidBundle(f"{namespace}: boundaries must start at 0x00000000 and end at 0xffffffff",
                            value=namespace)


_LAYOUTS: dict[tuple[str, tuple[int, ...]], NamespaceBundles] = {}
_LAYOUTS_KEPT = 64
_BY_RUNS: dict[tuple[str, tuple[_Run, ...]], NamespaceBundles] = {}


def _unpickled_layout(namespace: str, runs: tuple[_Run, ...]) -> NamespaceBundles:
    """A layout read back from a body snapshot: one shared instance per (namespace, runs), as
    the fold shares one per NamespaceCreated, without its lookup memo."""
    key = (namespace, runs)
    found = _BY_RUNS.get(key)
    if found is None:
        found = NamespaceBundles(namespace, runs)
        if len(_BY_RUNS) >= _LAYOUTS_KEPT:
            _BY_RUNS.pop(next(iter(_BY_RUNS)))
        _BY_RUNS[key] = found
    return found


@dataclass(frozen=True, slots=True)
class NamespaceBundles:
    """A namespace's bundle layout: boundaries b0 = 0 < b1 < ... < bn = 0xffffffff."""

    namespace: str
    runs: tuple[_Run, ...]
    _firsts: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _steps: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _counts: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _offsets: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _size: int = field(init=False, repr=False, compare=False)
    # Memo of looked-up bundles (the layout never changes, so entries never go stale).
    _ranges: dict[int, HashRange] = field(init=False, repr=False, compare=False)
    _ids: dict[int, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        validate_namespace(self.namespace)
        for run in self.runs:
            # Checked before canonicalising, which assumes positive steps and counts.
            if len(run) != 3 or not all(type(v) is int for v in run) or run[1] < 1 or run[2] < 1:
                raise InvalidBundle(f"{self.namespace}: {run!r} is not a run (first, step >= 1, count >= 1)",
                                    value=run)
        runs = _canonical(self.runs)
        _check_runs(self.namespace, runs)
        offsets, total = [], 0
        for _, _, count in runs:
            offsets.append(total)
            total += count
        object.__setattr__(self, "runs", runs)
        object.__setattr__(self, "_firsts", tuple(r[0] for r in runs))
        object.__setattr__(self, "_steps", tuple(r[1] for r in runs))
        object.__setattr__(self, "_counts", tuple(r[2] for r in runs))
        object.__setattr__(self, "_offsets", tuple(offsets))
        object.__setattr__(self, "_size", total - 1)
        object.__setattr__(self, "_ranges", {})
        object.__setattr__(self, "_ids", {})

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The namespace and its canonical runs are the whole layout: the memo of looked-up
        # bundles (up to one entry per bundle) stays out of snapshots.
        return (_unpickled_layout, (self.namespace, self.runs))

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def initial(cls, namespace: str, count: int) -> NamespaceBundles:
        """Pulsar's layout for a new namespace: ``seg = 2^32 // N``, edges ``j * seg``, 0xffffffff."""
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count < HASH_SPACE:
            # N = 2^32 would put (N-1)*seg on 0xffffffff itself: an empty last bundle.
            raise InvalidInput(
                f"{count!r} bundles is not a layout; accepted: 1..{HASH_SPACE - 1}", value=count)
        seg = HASH_SPACE // count
        return cls(namespace, ((0, seg, count), (HASH_MAX, 1, 1)))

    @classmethod
    def single(cls, namespace: str) -> NamespaceBundles:
        """A namespace without a stored layout: one bundle, 0x00000000_0xffffffff."""
        return cls(namespace, ((0, HASH_MAX, 2),))

    @classmethod
    def from_boundaries(cls, namespace: str, boundaries: Iterable[int]) -> NamespaceBundles:
        # A layout is immutable: every fold of one NamespaceCreated (each body folds it) shares
        # one instance instead of validating 65,537 edges again.
        key = (namespace, tuple(boundaries))
        if all(type(e) is int for e in key[1]):  # bools and floats compare equal to ints
            found = _LAYOUTS.get(key)
            if found is None:
                found = cls._from_boundaries(namespace, key[1])
                if len(_LAYOUTS) >= _LAYOUTS_KEPT:
                    _LAYOUTS.pop(next(iter(_LAYOUTS)))
                _LAYOUTS[key] = found
            return found
        return cls._from_boundaries(namespace, key[1])

    @classmethod
    def _from_boundaries(cls, namespace: str, boundaries: Iterable[int]) -> NamespaceBundles:
        edges: list[int] = []
        for position, edge in enumerate(boundaries):
            if isinstance(edge, bool) or not isinstance(edge, int) or not 0 <= edge <= HASH_MAX:
                raise InvalidBundle(
                    f"{namespace}: boundary [{position}] = {edge!r} is not an integer in 0..{HASH_MAX}",
                    value=edge)
            if edges and edge <= edges[-1]:
                raise InvalidBundle(
                    f"{namespace}: boundary [{position}] = {edge} does not follow {edges[-1]}; "
                    "boundaries must be strictly increasing", value=edge)
            edges.append(edge)
        return cls(namespace, tuple((edge, 1, 1) for edge in edges))

    # -- reading --------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"NamespaceBundles({self.namespace!r}, bundles={self._size}, runs={len(self.runs)})"

    def edge(self, index: int) -> int:
        """Boundary ``b_index`` (0 <= index <= len(self))."""
        if not 0 <= index <= self._size:
            raise IndexError(index)
        run = bisect_right(self._offsets, index) - 1
        return self._firsts[run] + self._steps[run] * (index - self._offsets[run])

    def boundaries(self) -> tuple[int, ...]:
        """Every boundary, materialised (len(self) + 1 integers: mind a huge layout)."""
        return tuple(edge for first, step, count in self.runs
                     for edge in range(first, first + step * count, step))

    def range_at(self, index: int) -> HashRange:
        if not 0 <= index < self._size:
            raise IndexError(index)
        return HashRange(self.edge(index), self.edge(index + 1))

    def __iter__(self) -> Iterator[HashRange]:
        """The bundles' ranges in ascending order, lazily."""
        edges = (e for first, step, count in self.runs for e in range(first, first + step * count, step))
        lower = next(edges)
        for upper in edges:
            yield HashRange(lower, upper)
            lower = upper

    def bundle_ids(self) -> Iterator[str]:
        return (format_bundle_id(self.namespace, r) for r in self)

    def index_of_hash(self, value: int) -> int:
        """Index of the bundle holding ``value``; an inner boundary starts its bundle (hot path)."""
        if not 0 <= value <= HASH_MAX:
            validate_hash(value)
        run = bisect_right(self._firsts, value) - 1
        step_index = (value - self._firsts[run]) // self._steps[run]
        count = self._counts[run]
        index = self._offsets[run] + (step_index if step_index < count else count - 1)
        # Only 0xffffffff reaches the last edge; it belongs to the last bundle (closed end).
        return index if index < self._size else self._size - 1

    def find(self, value: int) -> HashRange:
        """The range of the bundle holding hash ``value``."""
        index = self.index_of_hash(value)
        found = self._ranges.get(index)
        if found is None:
            found = HashRange(self.edge(index), self.edge(index + 1))
            if len(self._ranges) < _MEMO_LIMIT:
                self._ranges[index] = found
        return found

    def find_topic(self, topic: str) -> HashRange:
        return self.find(topic_hash(topic))

    def bundle_of(self, topic: str) -> str:
        """Bundle id of the bundle that serves ``topic`` (hot path of a lookup)."""
        index = self.index_of_hash(topic_hash(topic))
        found = self._ids.get(index)
        if found is None:
            found = format_bundle_id(self.namespace, self.range_at(index))
            if len(self._ids) < _MEMO_LIMIT:
                self._ids[index] = found
        return found

    def index_of(self, hash_range: HashRange) -> int:
        """Index of ``hash_range``; ``InvalidBundle`` (naming it) unless it is a bundle here."""
        index = self.index_of_hash(hash_range.lower)
        if self.edge(index) != hash_range.lower or self.edge(index + 1) != hash_range.upper:
            raise InvalidBundle(
                f"{hash_range.name} is not a bundle of {self.namespace}; "
                f"hash {hash_range.lower:#010x} lies in {self.range_at(index).name}",
                value=hash_range.name)
        return index

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, HashRange):
            return False
        try:
            self.index_of(item)
        except InvalidBundle:
            return False
        return True

    # -- splitting ------------------------------------------------------------------------

    def split(self, hash_range: HashRange, boundaries: Sequence[int]) -> NamespaceBundles:
        """The layout with ``hash_range`` cut at ``boundaries`` (empty: unchanged, no error)."""
        index = self.index_of(hash_range)
        if not hash_range.splittable:
            raise UnsplittableBundle(
                f"bundle {self.namespace}/{hash_range.name} covers one hash and cannot be split",
                value=hash_range.name)
        children = hash_range.split_at(boundaries)
        if len(children) == 1:
            return self
        runs = [*self._slice(0, index + 1), *((b, 1, 1) for b in boundaries),
                *self._slice(index + 1, self._size + 1)]
        return NamespaceBundles(self.namespace, tuple(runs))

    def _slice(self, start: int, stop: int) -> list[_Run]:
        """The runs of edges ``start <= i < stop``."""
        out: list[_Run] = []
        for (first, step, count), offset in zip(self.runs, self._offsets, strict=True):
            low, high = max(start, offset), min(stop, offset + count)
            if low < high:
                out.append((first + step * (low - offset), step, high - low))
        return out
