"""The bundle ownership state machine: states, transitions, records and accept() (behaviour §6).

Invariants:
- ``TRANSITIONS`` is the whole table of §6; nothing else decides which state may follow which;
- an ``OwnershipRecord`` is immutable, its version is a signed 64-bit integer, blank broker names
  are stored as ``None``, and only a Free record may name no broker at all;
- ``accept`` applies the rules of §6.1 in their order: tombstone, version (with the one wrap from
  2^63 - 1 to -2^63), force, transition, brokers. It never takes a version that is not newer,
  except a tombstone (which has no version);
- the override functions of §6.3 only compute the overriding record (force, version + 1); who
  writes it, and when, belongs to the live system.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from sys import intern
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidBundle, InvalidInput

VERSION_MIN = -(1 << 63)
VERSION_MAX = (1 << 63) - 1


class BundleState(StrEnum):
    INIT = "Init"
    FREE = "Free"
    OWNED = "Owned"
    ASSIGNING = "Assigning"
    RELEASING = "Releasing"
    SPLITTING = "Splitting"
    DELETED = "Deleted"

    @property
    def in_flight(self) -> bool:
        return self in IN_FLIGHT

    @property
    def active(self) -> bool:
        return self in ACTIVE


IN_FLIGHT: frozenset[BundleState] = frozenset(
    {BundleState.ASSIGNING, BundleState.RELEASING, BundleState.SPLITTING})
ACTIVE: frozenset[BundleState] = IN_FLIGHT | {BundleState.OWNED}
SEMI_TERMINAL: frozenset[BundleState] = frozenset({BundleState.FREE, BundleState.DELETED})

TRANSITIONS: Mapping[BundleState, frozenset[BundleState]] = MappingProxyType({
    BundleState.INIT: frozenset(BundleState) - {BundleState.INIT},
    BundleState.FREE: frozenset({BundleState.ASSIGNING, BundleState.INIT}),
    BundleState.OWNED: frozenset({BundleState.SPLITTING, BundleState.RELEASING}),
    BundleState.ASSIGNING: frozenset({BundleState.OWNED}),
    BundleState.RELEASING: frozenset({BundleState.ASSIGNING, BundleState.FREE}),
    BundleState.SPLITTING: frozenset({BundleState.DELETED}),
    BundleState.DELETED: frozenset({BundleState.INIT}),
})
"""from -> allowed next states (compacted mode)."""

STRICT_INIT_TRANSITIONS: frozenset[BundleState] = frozenset({BundleState.ASSIGNING})
"""Strict mode narrows Init and Free to Assigning (Pulsar's ServiceUnitState, MetadataStore)."""


class AcceptMode(StrEnum):
    COMPACTED = "compacted"
    """Pulsar's default system-topic channel: a version gap is a compaction gap and is accepted."""
    STRICT = "strict"
    """Pulsar's metadata-store table view: versions must follow one by one, starting at 1."""

    @classmethod
    def parse(cls, value: str) -> AcceptMode:
        try:
            return cls(value)
        except ValueError:
            raise InvalidInput(f"unknown ownership mode {value!r}; accepted: compacted, strict",
                               value=value) from None

    @classmethod
    def from_config(cls, config: LoadBalancerConfig) -> AcceptMode:
        return cls.STRICT if config.strict_ownership else cls.COMPACTED


def transition_allowed(current: BundleState, incoming: BundleState,
                       mode: AcceptMode = AcceptMode.COMPACTED) -> bool:
    if mode is AcceptMode.STRICT and current in (BundleState.INIT, BundleState.FREE):
        return incoming in STRICT_INIT_TRANSITIONS
    return incoming in TRANSITIONS[current]


def next_version(version: int) -> int:
    """previous + 1, wrapping from 2^63 - 1 to -2^63 as a Java long does."""
    return VERSION_MIN if version == VERSION_MAX else version + 1


def _blank_to_none(name: str | None) -> str | None:
    # Pulsar tests brokers with StringUtils.isBlank: "" and "  " mean no broker.
    return name if name is not None and name.strip() else None


_NO_CHILDREN: Mapping[str, str | None] = MappingProxyType({})


def _unpickled_record(state: BundleState, dst: str | None, src: str | None,
                      children: Mapping[str, str | None] | None, force: bool, timestamp_ms: int,
                      version: int) -> OwnershipRecord:
    """A record read back from a snapshot (``OwnershipRecord.__reduce__``), unvalidated as the
    fold that made it left it."""
    kept = MappingProxyType(dict(children)) if children else _NO_CHILDREN
    # Folded records share their envelope's timestamp and broker names across every body that
    # folds them; restored ones share them through these tables (a hundred brokers restored at
    # 65,536 bundles would each hold a copy of every timestamp: 0.2 GB).
    if len(_SHARED) > _SHARED_KEPT:
        _SHARED.clear()
    timestamp_ms = _SHARED.setdefault(timestamp_ms, timestamp_ms)
    dst = intern(dst) if dst is not None else None
    src = intern(src) if src is not None else None
    return tuple.__new__(OwnershipRecord, (state, dst, src, kept, force, timestamp_ms, version))


_SHARED: dict[int, int] = {}
_SHARED_KEPT = 1 << 20


class _RecordFields(NamedTuple):
    state: BundleState
    dst: str | None
    src: str | None
    split_children: Mapping[str, str | None]
    force: bool
    timestamp_ms: int
    version: int


class OwnershipRecord(_RecordFields):
    """One bundle's ownership record; ``split_children`` maps child range -> broker (or None).

    A tuple underneath: a fold creates one per event, and a tuple is five times cheaper to
    build than a frozen dataclass. The constructor validates; ``trusted`` does not.
    """

    __slots__ = ()

    def __new__(cls, state: BundleState | str, dst: str | None = None, src: str | None = None,
                split_children: Mapping[str, str | None] | None = None, force: bool = False,
                timestamp_ms: int = 0, version: int = 1) -> OwnershipRecord:
        checked_state = _checked_state(state)
        dst, src = _blank_to_none(dst), _blank_to_none(src)
        if isinstance(version, bool) or not isinstance(version, int) or not VERSION_MIN <= version <= VERSION_MAX:
            raise InvalidInput(f"version {version!r} is not a signed 64-bit integer", value=version)
        if dst is None and src is None and checked_state is not BundleState.FREE:
            raise InvalidInput(f"a {checked_state} record must name a broker (dst or src)",
                               value=str(checked_state))
        children = MappingProxyType(dict(split_children)) if split_children else _NO_CHILDREN
        return tuple.__new__(cls, (checked_state, dst, src, children, force, timestamp_ms, version))

    def __hash__(self) -> int:
        # The children mapping is read-only but not hashable: hash everything else.
        return hash((self[0], self[1], self[2], self[4], self[5], self[6]))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The children are a read-only mapping, which pickle cannot take: a snapshot stores a
        # plain dict and rebuilds the record as it was (body snapshots).
        children = dict(self[3]) if self[3] else None
        return (_unpickled_record, (self[0], self[1], self[2], children, self[4], self[5], self[6]))

    @classmethod
    def trusted(cls, state: BundleState, dst: str | None, src: str | None, timestamp_ms: int,
                version: int, force: bool = False) -> OwnershipRecord:
        """A record from values already known to be valid (a fold's own transitions)."""
        return tuple.__new__(cls, (state, dst, src, _NO_CHILDREN, force, timestamp_ms, version))


def _checked_state(state: BundleState | str) -> BundleState:
    if isinstance(state, BundleState):
        return state
    try:
        return BundleState(state)
    except ValueError:
        raise InvalidInput(f"unknown bundle state {state!r}; accepted: "
                           f"{', '.join(BundleState)}", value=state) from None


@dataclass(frozen=True, slots=True)
class Verdict:
    """accept()'s answer with the rule that decided it (for logs and rejected-record anomalies)."""

    accepted: bool
    rule: str

    def __bool__(self) -> bool:
        return self.accepted


def judge(current: OwnershipRecord | None, incoming: OwnershipRecord | None,
          mode: AcceptMode = AcceptMode.COMPACTED) -> Verdict:
    """Whether the channel takes ``incoming`` over ``current`` (None = no record / tombstone)."""
    if incoming is None:
        return Verdict(True, "tombstone")
    by_version = _judge_version(current, incoming, mode)
    if by_version is not None:
        return by_version
    if incoming.force:
        return Verdict(True, "force")
    before = current.state if current is not None else BundleState.INIT
    if not transition_allowed(before, incoming.state, mode):
        return Verdict(False, f"{before}->{incoming.state} is not a transition of {mode} mode")
    if current is not None and not _brokers_agree(current, incoming):
        return Verdict(False, f"{before}->{incoming.state}: brokers (dst={incoming.dst}, "
                              f"src={incoming.src}) do not follow (dst={current.dst}, src={current.src})")
    return Verdict(True, f"{before}->{incoming.state}")


def accept(current: OwnershipRecord | None, incoming: OwnershipRecord | None,
           mode: AcceptMode = AcceptMode.COMPACTED) -> bool:
    """Behaviour §6.1: True if ``incoming`` replaces ``current``; a rejected record is skipped.

    The same rules as ``judge`` without building an explanation: this is the hot path of every
    projection fold (``judge`` says why, and a property test keeps the two in agreement).
    """
    if incoming is None:
        return True
    if current is None:
        if mode is AcceptMode.STRICT:
            return incoming.version == 1  # the version rule decides alone (behaviour §6.1 step 2)
        return incoming.force or incoming.state in NEXT_VERSION_RULES[mode][None]
    held, offered = current.version, incoming.version
    if not (held == VERSION_MAX and offered == VERSION_MIN):
        if held >= offered:
            return False
        if held < offered - 1:
            return mode is AcceptMode.COMPACTED
    if incoming.force:
        return True
    rule = NEXT_VERSION_RULES[mode][current.state].get(incoming.state)
    return rule is True or (rule is not None and rule(current, incoming))


def _judge_version(current: OwnershipRecord | None, incoming: OwnershipRecord,
                   mode: AcceptMode) -> Verdict | None:
    if current is None:
        if mode is AcceptMode.STRICT:
            if incoming.version != 1:
                return Verdict(False, f"strict mode: a first record has version 1, not {incoming.version}")
            return Verdict(True, "strict mode: a first record of version 1")
        return None
    if current.version == VERSION_MAX and incoming.version == VERSION_MIN:
        return None  # the 64-bit wrap counts as the next version
    if current.version >= incoming.version:
        return Verdict(False, f"version {incoming.version} is not newer than {current.version}")
    if current.version < incoming.version - 1:
        if mode is AcceptMode.COMPACTED:
            # Compaction may have dropped the versions in between: the newer record wins.
            return Verdict(True, f"compaction gap {current.version} -> {incoming.version}")
        return Verdict(False, f"strict mode: version gap {current.version} -> {incoming.version}")
    return None


# The rules index the records (1 = dst, 2 = src) rather than name the fields: they run once per
# folded event, and a tuple index is the cheaper read.

def same_brokers(current: OwnershipRecord, incoming: OwnershipRecord) -> bool:
    return incoming[1] == current[1] and incoming[2] == current[2]


def _split_by_owner(current: OwnershipRecord, incoming: OwnershipRecord) -> bool:
    return incoming[1] is None and incoming[2] == current[1]


def _release_by_owner(current: OwnershipRecord, incoming: OwnershipRecord) -> bool:
    return incoming[2] is not None and incoming[2] == current[1] and incoming[1] != current[1]


def _transfer_continues(current: OwnershipRecord, incoming: OwnershipRecord) -> bool:
    return incoming[1] is not None and incoming[1] == current[1] and incoming[2] == current[2]


def _fresh_assignment(current: OwnershipRecord, incoming: OwnershipRecord) -> bool:
    return incoming[2] is None and incoming[1] is not None


_BROKER_RULES: Mapping[tuple[BundleState, BundleState], Callable[[OwnershipRecord, OwnershipRecord], bool]] = {
    (BundleState.OWNED, BundleState.SPLITTING): _split_by_owner,
    (BundleState.OWNED, BundleState.RELEASING): _release_by_owner,
    (BundleState.ASSIGNING, BundleState.OWNED): same_brokers,
    (BundleState.RELEASING, BundleState.FREE): same_brokers,
    (BundleState.SPLITTING, BundleState.DELETED): same_brokers,
    (BundleState.RELEASING, BundleState.ASSIGNING): _transfer_continues,
    (BundleState.FREE, BundleState.ASSIGNING): _fresh_assignment,
}
"""§6.1 step 5: which brokers each transition must name; transitions not listed need nothing."""


def _brokers_agree(current: OwnershipRecord, incoming: OwnershipRecord) -> bool:
    rule = _BROKER_RULES.get((current.state, incoming.state))
    return True if rule is None else rule(current, incoming)


BrokerRule = Callable[[OwnershipRecord, OwnershipRecord], bool]
NextVersionRule = BrokerRule | Literal[True]
"""True: accepted; a function: accepted if it holds for (current, incoming)."""


NextVersionRules = dict[BundleState | None, dict[BundleState, NextVersionRule]]


def _next_version_rules(mode: AcceptMode) -> NextVersionRules:
    """state held -> state offered -> rule, for a non-forced record carrying the next version.

    ``None`` as the held state means no record; an offered state that is not a key is rejected.
    This is ``TRANSITIONS`` joined with ``_BROKER_RULES`` once, so that a fold, which numbers
    versions itself, decides a transition with two plain dict lookups (read-only: plain dicts
    because a fold's hot path reads them, and a mapping proxy or a tuple key costs double).
    """
    table: NextVersionRules = {}
    for before in (None, *BundleState):
        held = BundleState.INIT if before is None else before
        table[before] = {
            after: True if before is None else _BROKER_RULES.get((before, after), True)
            for after in BundleState if transition_allowed(held, after, mode)}
    if mode is AcceptMode.STRICT:
        # No record, strict: version 1 is accepted whatever its state (behaviour §6.1 step 2).
        table[None] = dict.fromkeys(BundleState, True)
    return table


NEXT_VERSION_RULES: Mapping[AcceptMode, NextVersionRules] = {
    mode: _next_version_rules(mode) for mode in AcceptMode
}


def owner_of(record: OwnershipRecord | None, bundle: str = "bundle") -> str | None:
    """§6.2 owner query: Owned -> dst, Splitting -> src, Assigning/Releasing -> dst (in flight:
    the answer is where the bundle is going), Init/Free/no record -> None, Deleted -> error."""
    if record is None:
        return None
    state = record.state
    if state is BundleState.OWNED or state is BundleState.ASSIGNING or state is BundleState.RELEASING:
        return record.dst
    if state is BundleState.SPLITTING:
        return record.src
    if state is BundleState.DELETED:
        raise InvalidBundle(f"{bundle} was split and deleted; look its topics up again", value=bundle)
    return None


# -- §6.3 broker loss and stuck records -------------------------------------------------------


def is_orphaned_by(record: OwnershipRecord, broker: str) -> bool:
    """Whether losing ``broker`` strands this record: (dst, active) or (src, in flight)."""
    return (record.dst == broker and record.state in ACTIVE) or (
        record.src == broker and record.state in IN_FLIGHT)


def override_for_lost_broker(record: OwnershipRecord, lost: str, new_broker: str | None, *,
                             now_ms: int, graceful: bool = False) -> OwnershipRecord | None:
    """The forced record that takes over from ``lost``; None if the record does not need one.

    ``new_broker`` is chosen by the caller among every broker but ``lost`` (None: none left).
    ``graceful`` is the broker cleaning up itself on shutdown: its Owned bundles are released
    to the new broker instead of being taken over.
    """
    if not is_orphaned_by(record, lost):
        return None
    if new_broker == lost:
        raise InvalidInput(f"broker {lost!r} is the lost broker; choose another", value=new_broker)
    version = next_version(record.version)
    if new_broker is None:
        return OwnershipRecord(BundleState.FREE, None, lost, force=True, timestamp_ms=now_ms, version=version)
    if record.state is BundleState.OWNED:
        state = BundleState.RELEASING if graceful else BundleState.OWNED
        return OwnershipRecord(state, new_broker, lost, force=True, timestamp_ms=now_ms, version=version)
    return _take_over_in_flight(record, new_broker, now_ms, version)


def override_stuck_in_flight(record: OwnershipRecord, new_broker: str | None, *,
                             now_ms: int) -> OwnershipRecord:
    """The forced record for an in-flight record older than the in-flight wait (monitor)."""
    if record.state not in IN_FLIGHT:
        raise InvalidInput(f"a {record.state} record is not in flight", value=str(record.state))
    version = next_version(record.version)
    if new_broker is None:
        return OwnershipRecord(BundleState.FREE, None, record.src, force=True, timestamp_ms=now_ms,
                               version=version)
    return _take_over_in_flight(record, new_broker, now_ms, version)


def _take_over_in_flight(record: OwnershipRecord, new_broker: str, now_ms: int,
                         version: int) -> OwnershipRecord:
    if record.state is BundleState.SPLITTING:
        # The split goes on under the new broker, with the same children.
        return OwnershipRecord(BundleState.SPLITTING, record.dst, new_broker, record.split_children,
                               force=True, timestamp_ms=now_ms, version=version)
    src = record.src if record.src != new_broker else None
    return OwnershipRecord(BundleState.OWNED, new_broker, src, force=True, timestamp_ms=now_ms,
                           version=version)


def in_flight_expired(record: OwnershipRecord, now_ms: int, config: LoadBalancerConfig) -> bool:
    """In flight for longer than ``loadBalancerInFlightServiceUnitStateWaitingTimeInMillis``."""
    wait_ms = config.load_balancer_in_flight_service_unit_state_waiting_time_in_millis
    return record.state in IN_FLIGHT and now_ms - record.timestamp_ms > wait_ms


def tombstone_due(record: OwnershipRecord, now_ms: int, config: LoadBalancerConfig) -> bool:
    """Free or Deleted for longer than ``loadBalancerServiceUnitStateTombstoneDelayTimeInSeconds``."""
    delay_ms = config.load_balancer_service_unit_state_tombstone_delay_time_in_seconds * 1000
    return record.state in SEMI_TERMINAL and now_ms - record.timestamp_ms > delay_ms
