"""Every event and command of contracts §1-2, as frozen dataclasses with a ``VERSION``.

Invariants:
- a class's ``TYPE`` (its name) and its field names are stored forever in logs: renaming either
  breaks old data; ``tests/unit/test_catalog.py`` pins both. A change of fields bumps
  ``VERSION`` and adds an upcaster in ``events/codec.py``;
- payloads hold only dict/list/str/int/float/bool/None/bytes (msgpack and orjson round-trip
  them; tuples would come back as lists, so fields are lists);
- decision-carrying events hold ``decision`` as a plain dict (``Decision.to_dict()``), so this
  module needs nothing from the shedding code;
- every class is keyword-only: the field order is not part of the contract, the names are;
- an event class has no ``__slots__``: ``view_of`` reads a stored payload as its event by making
  the payload the instance's attribute dict (no copy, no ``__init__``), which costs a fraction of
  building the dataclass; commands keep their slots (they are built, never read from the log).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from balancer.bundles import namespace_of
from balancer.errors import DecodeError
from events._fields import Check, check_for

LEADER_KEY = "_leader"
CLUSTER_KEY = "_cluster"

# The three topics of ARCHITECTURE §2; ``Message.TOPIC`` names the one a message belongs to.
EVENTS_TOPIC = "events"
LOAD_TOPIC = "load"
COMMANDS_TOPIC = "commands"


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """Base of events and commands: a type name, a version, a payload of plain values."""

    TYPE: ClassVar[str] = "Message"
    VERSION: ClassVar[int] = 1
    TOPIC: ClassVar[str] = EVENTS_TOPIC

    def to_payload(self) -> dict[str, Any]:
        # Shallow on purpose: field values are already plain data, and asdict's deep copy
        # is the slowest part of encoding.
        names = _FIELD_NAMES.get(type(self))
        if names is None:
            names = _FIELD_NAMES[type(self)] = tuple(f.name for f in fields(self))
        return {name: getattr(self, name) for name in names}

    def default_key(self) -> str:
        """The log key this message is appended under (ARCHITECTURE §2)."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True, slots=True)
class Event(Message):
    """Something that happened (past tense)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Command(Message):
    """A request to an actor; ``command_id`` makes it idempotent, ``epoch`` fences old leaders."""

    TOPIC: ClassVar[str] = COMMANDS_TOPIC
    command_id: str
    epoch: int


# -- events ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class LeaderElected(Event):
    leader_id: str
    epoch: int

    def default_key(self) -> str:
        return LEADER_KEY


@dataclass(frozen=True, kw_only=True)
class BrokerRegistered(Event):
    broker_id: str
    url: str
    failure_domain: str | None = None
    version: str = ""
    capacity: dict[str, Any] = field(default_factory=dict)

    def default_key(self) -> str:
        return self.broker_id


@dataclass(frozen=True, kw_only=True)
class BrokerLeft(Event):
    """v1 carried ``expired: bool``; v2 names the reason (upcaster in ``events/codec.py``)."""

    VERSION: ClassVar[int] = 2
    broker_id: str
    reason: str  # "graceful" | "expired"

    def default_key(self) -> str:
        return self.broker_id


@dataclass(frozen=True, kw_only=True)
class LoadReported(Event):
    TOPIC: ClassVar[str] = LOAD_TOPIC
    broker_id: str
    broker_load: dict[str, Any]
    bundles: list[dict[str, Any]] = field(default_factory=list)

    def default_key(self) -> str:
        return self.broker_id


@dataclass(frozen=True, kw_only=True)
class NamespaceCreated(Event):
    namespace: str
    boundaries: list[int]
    anti_affinity_group: str | None = None
    isolation: dict[str, Any] | None = None

    def default_key(self) -> str:
        return self.namespace


@dataclass(frozen=True, kw_only=True)
class NamespacePolicySet(Event):
    namespace: str
    anti_affinity_group: str | None = None
    isolation: dict[str, Any] | None = None

    def default_key(self) -> str:
        return self.namespace


@dataclass(frozen=True, kw_only=True)
class FailureDomainSet(Event):
    domain: str
    brokers: list[str]

    def default_key(self) -> str:
        return CLUSTER_KEY


@dataclass(frozen=True, kw_only=True)
class BundleAssigned(Event):
    bundle: str
    dst: str
    src: str | None = None
    reason: str = "lookup"  # "lookup" | "transfer" | "orphan" | "admin"
    force: bool = False

    def default_key(self) -> str:
        return namespace_of(self.bundle)


@dataclass(frozen=True, kw_only=True)
class BundleOwned(Event):
    bundle: str
    owner: str
    src: str | None = None

    def default_key(self) -> str:
        return namespace_of(self.bundle)


@dataclass(frozen=True, kw_only=True)
class UnloadRequested(Event):
    bundle: str
    src: str
    reason: str
    decision: dict[str, Any] = field(default_factory=dict)

    def default_key(self) -> str:
        return namespace_of(self.bundle)


@dataclass(frozen=True, kw_only=True)
class TransferPrepared(Event):
    bundle: str
    src: str
    dst: str
    reason: str
    decision: dict[str, Any] = field(default_factory=dict)

    def default_key(self) -> str:
        return namespace_of(self.bundle)


@dataclass(frozen=True, kw_only=True)
class BundleReleased(Event):
    bundle: str
    src: str

    def default_key(self) -> str:
        return namespace_of(self.bundle)


@dataclass(frozen=True, kw_only=True)
class SplitRequested(Event):
    bundle: str
    src: str
    algorithm: str
    positions: list[int] | None = None
    reason: str = "admin"
    unload_children: bool = False

    def default_key(self) -> str:
        return namespace_of(self.bundle)


@dataclass(frozen=True, kw_only=True)
class SplitCompleted(Event):
    parent: str
    children: list[str]
    owner: str
    boundaries: list[int]

    def default_key(self) -> str:
        return namespace_of(self.parent)


@dataclass(frozen=True, kw_only=True)
class SheddingSkipped(Event):
    """v2 adds ``folded``: partition (as text) -> the last offset the leader had folded when the
    run ran (what-if replays the run over exactly that much of the log); None from v1."""

    VERSION: ClassVar[int] = 2
    strategy: str
    reason: str  # HitCount, CoolDown, NoBrokers, ...
    folded: dict[str, int] | None = None

    def default_key(self) -> str:
        return LEADER_KEY


@dataclass(frozen=True, kw_only=True)
class LeaderHeartbeat(Event):
    """The elected leader is alive: written under ``_leader`` at its epoch when it wrote nothing
    there for a heartbeat, so candidates can tell a leader that never acts and replace it."""

    leader_id: str

    def default_key(self) -> str:
        return LEADER_KEY


@dataclass(frozen=True, kw_only=True)
class CommandRejected(Event):
    """``command`` is the rejected command's type name; ``error`` is ``{code, message, ...}``."""

    command_id: str
    command: str
    error: dict[str, Any]
    key: str = ""  # the rejected command's key; the envelope carries it too

    def default_key(self) -> str:
        return self.key


# -- commands -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class CreateNamespace(Command):
    namespace: str
    bundles: int | None = None
    boundaries: list[int] | None = None
    anti_affinity_group: str | None = None
    isolation: dict[str, Any] | None = None

    def default_key(self) -> str:
        return self.namespace


@dataclass(frozen=True, kw_only=True, slots=True)
class SetNamespacePolicy(Command):
    namespace: str
    anti_affinity_group: str | None = None
    isolation: dict[str, Any] | None = None

    def default_key(self) -> str:
        return self.namespace


@dataclass(frozen=True, kw_only=True, slots=True)
class SetFailureDomain(Command):
    domain: str
    brokers: list[str]

    def default_key(self) -> str:
        return CLUSTER_KEY


@dataclass(frozen=True, kw_only=True, slots=True)
class AssignBundle(Command):
    bundle: str
    dst: str | None = None
    reason: str = "lookup"
    force: bool = False

    def default_key(self) -> str:
        return namespace_of(self.bundle)


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfirmOwnership(Command):
    bundle: str
    owner: str
    src: str | None = None

    def default_key(self) -> str:
        return namespace_of(self.bundle)


@dataclass(frozen=True, kw_only=True, slots=True)
class UnloadBundle(Command):
    bundle: str
    dst: str | None = None
    reason: str = "admin"
    decision: dict[str, Any] | None = None

    def default_key(self) -> str:
        return namespace_of(self.bundle)


@dataclass(frozen=True, kw_only=True, slots=True)
class UnloadNamespace(Command):
    namespace: str

    def default_key(self) -> str:
        return self.namespace


@dataclass(frozen=True, kw_only=True, slots=True)
class SplitBundle(Command):
    """``bundle`` is a range ``0xLLLLLLLL_0xUUUUUUUU``, a full bundle id, ``LARGEST`` or ``HOT``."""

    namespace: str
    bundle: str
    algorithm: str
    positions: list[int] | None = None
    unload: bool = False

    def default_key(self) -> str:
        return self.namespace


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfirmRelease(Command):
    bundle: str
    src: str

    def default_key(self) -> str:
        return namespace_of(self.bundle)


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfirmSplit(Command):
    parent: str
    children: list[str]
    owner: str
    boundaries: list[int]

    def default_key(self) -> str:
        return namespace_of(self.parent)


EVENTS: tuple[type[Event], ...] = (
    LeaderElected, BrokerRegistered, BrokerLeft, LoadReported, NamespaceCreated,
    NamespacePolicySet, FailureDomainSet, BundleAssigned, BundleOwned, UnloadRequested,
    TransferPrepared, BundleReleased, SplitRequested, SplitCompleted, SheddingSkipped,
    CommandRejected, LeaderHeartbeat,
)
COMMANDS: tuple[type[Command], ...] = (
    CreateNamespace, SetNamespacePolicy, SetFailureDomain, AssignBundle, ConfirmOwnership,
    UnloadBundle, UnloadNamespace, SplitBundle, ConfirmRelease, ConfirmSplit,
)


@dataclass(frozen=True, slots=True)
class Schema:
    """What the codec checks a payload against: the class, its version, its field names."""

    cls: type[Message]
    version: int
    required: frozenset[str]
    allowed: frozenset[str]
    checks: tuple[tuple[str, Check], ...] = ()  # (field, its type and bound check)
    epoch_field: bool = False  # an event whose payload epoch must equal the envelope's
    viewed: bool = False  # an event: ``view_of`` may read a payload of every field in place


def _schema(cls: type[Message]) -> Schema:
    from dataclasses import MISSING

    all_fields = fields(cls)
    required = {f.name for f in all_fields if f.default is MISSING and f.default_factory is MISSING}
    checks = tuple((f.name, check_for(str(f.type))) for f in all_fields)
    names = frozenset(f.name for f in all_fields)
    return Schema(cls, cls.VERSION, frozenset(required), names, checks,
                  "epoch" in names and issubclass(cls, Event), issubclass(cls, Event))


def _register() -> dict[str, Schema]:
    table: dict[str, Schema] = {}
    for cls in (*EVENTS, *COMMANDS):
        # The stored type name is the class name; set explicitly so subclassing cannot change it.
        cls.TYPE = cls.__name__
        table[cls.TYPE] = _schema(cls)
    return table


SCHEMAS: dict[str, Schema] = _register()


def schema_of(type_name: str) -> Schema:
    """The schema of a type name; an unknown name is a ``DecodeError``."""
    try:
        return SCHEMAS[type_name]
    except KeyError:
        raise DecodeError(f"unknown type {type_name!r}", reason="unknown_type") from None


def from_payload(type_name: str, payload: dict[str, Any]) -> Message:
    """Build the message of ``type_name`` from a current-version payload."""
    schema = schema_of(type_name)
    try:
        return schema.cls(**payload)
    except TypeError as exc:
        raise DecodeError(f"{type_name}: {exc}", reason="bad_payload") from None


_new_message = object.__new__


def _viewing(schema: Schema) -> tuple[type[Message], int, Any]:
    # The class, its field count and the setter of its instances' attribute dict.
    return schema.cls, len(schema.allowed), vars(schema.cls)["__dict__"].__set__


_VIEWS: dict[str, tuple[type[Message], int, Any]] = {
    name: _viewing(schema) for name, schema in SCHEMAS.items() if schema.viewed}


def view_of(type_name: str, payload: dict[str, Any]) -> Message:
    """The typed event of a current-version payload, equal to ``from_payload``'s.

    A payload with as many keys as its event has fields (what every writer stores:
    ``to_payload``; the codec has checked that its keys are fields) becomes the event's attribute
    dict, shared, not copied, with no ``__init__``; any other (an optional field left out, a
    command) is built by ``from_payload``, which fills defaults or refuses."""
    found = _VIEWS.get(type_name)
    if found is None or len(payload) != found[1] or type(payload) is not dict:
        return from_payload(type_name, payload)
    cls, _, set_attributes = found
    event = _new_message(cls)
    set_attributes(event, payload)  # not setattr: the frozen dataclass refuses every attribute
    return event
