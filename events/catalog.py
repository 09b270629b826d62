"""Every event and command of contracts §1-2, as frozen dataclasses with a ``VERSION``.

Invariants:
- a class's ``TYPE`` (its name) and its field names are stored forever in logs: renaming either
  breaks old data; ``tests/events/test_catalog.py`` pins both. A change of fields bumps
  ``VERSION`` and adds an upcaster in ``events/codec.py``;
- payloads hold only dict/list/str/int/float/bool/None/bytes (msgpack and orjson round-trip
  them; tuples would come back as lists, so fields are lists);
- decision-carrying events hold ``decision`` as a plain dict (``Decision.to_dict()``), so this
  module needs nothing from the shedding code; ``decided()`` reads it typed
  (``events.decisions``). A load report's maps are typed the same way: ``LoadReported.parts``
  builds the events from ``balancer.load`` values, ``report()`` and ``bundle_stats()`` read them
  (``events.reports``); the stored form is the same plain maps either way;
- what a fold needs inside a field's maps and lists (beyond its annotation) is ``events.usable``:
  ``view_of`` refuses a payload that breaks it;
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
from balancer.load import BrokerReport, BundleStats
from events._fields import Check, FieldsCheck, check_for, fields_check
from events.decisions import DecisionRecord
from events.reports import report_parts, stats_from_payload, typed_report
from events.usable import RULES as _USABLE

LEADER_KEY = "_leader"
CLUSTER_KEY = "_cluster"
MIRROR_KEY = "_mirror"
"""The key of what a mirror of another system (``lbctl attach``) could not translate."""
PROPOSALS_KEY = "_proposals"
"""The key of proposals and of their executions on an attached Pulsar cluster: one key, so one
order of a proposal and every step of its executions on any log."""

# The streams a message belongs to (``Message.TOPIC``). The logs keep every event on one topic
# (ARCHITECTURE §2); the names stay, as stored records and the Kafka topics' settings name them.
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

    @classmethod
    def parts(cls, report: BrokerReport, stats: list[BundleStats], *, delta: bool = False) -> list[LoadReported]:
        """The events of one report: one, or several parts when its bundles do not fit one (a
        delta, ``stats`` its changed bundles only, is one; ``events.report_parts``)."""
        return [cls(broker_id=report.broker_id, broker_load=load, bundles=bundles)
                for load, bundles in report_parts(report, stats, delta=delta)]

    def report(self, failure_domain: str | None = None) -> BrokerReport | None:
        """The broker's report; None for a continuation part (it carries bundles only)."""
        return typed_report(self.broker_id, self.broker_load, failure_domain)

    def bundle_stats(self) -> list[BundleStats]:
        return [stats_from_payload(raw) for raw in self.bundles or ()]


@dataclass(frozen=True, kw_only=True)
class NamespaceCreated(Event):
    """v2 adds ``by``: the principal of the admin command that created it (a token's role,
    ``anonymous``, ``lbctl:<user>``); None when no principal was named (a run's own set-up, a
    mirror, a v1 record)."""

    VERSION: ClassVar[int] = 2
    namespace: str
    boundaries: list[int]
    anti_affinity_group: str | None = None
    isolation: dict[str, Any] | None = None
    by: str | None = None

    def default_key(self) -> str:
        return self.namespace


@dataclass(frozen=True, kw_only=True)
class NamespacePolicySet(Event):
    """v2 adds ``by``: the principal of the admin command that set the policy (None: none named)."""

    VERSION: ClassVar[int] = 2
    namespace: str
    anti_affinity_group: str | None = None
    isolation: dict[str, Any] | None = None
    by: str | None = None

    def default_key(self) -> str:
        return self.namespace


@dataclass(frozen=True, kw_only=True)
class FailureDomainSet(Event):
    """An empty ``brokers`` dissolves the domain. v2 adds ``by``: the principal of the admin
    command that set or deleted it (None: none named)."""

    VERSION: ClassVar[int] = 2
    domain: str
    brokers: list[str]
    by: str | None = None

    def default_key(self) -> str:
        return CLUSTER_KEY


@dataclass(frozen=True, kw_only=True)
class BundleAssigned(Event):
    """v2 adds ``decision``: why this broker, when the leader's placement chose it (``kind``
    ``assign`` and ``placement``: the candidates, their scores, the filter steps); empty when the
    destination was given (an admin's, a transfer's, an orphan's surviving destination)."""

    VERSION: ClassVar[int] = 2
    bundle: str
    dst: str
    src: str | None = None
    reason: str = "lookup"  # "lookup" | "transfer" | "orphan" | "admin"
    force: bool = False
    decision: dict[str, Any] = field(default_factory=dict)

    def default_key(self) -> str:
        return namespace_of(self.bundle)

    def decided(self) -> DecisionRecord:
        return DecisionRecord.from_payload(self.decision)


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

    def decided(self) -> DecisionRecord:
        return DecisionRecord.from_payload(self.decision)


@dataclass(frozen=True, kw_only=True)
class TransferPrepared(Event):
    bundle: str
    src: str
    dst: str
    reason: str
    decision: dict[str, Any] = field(default_factory=dict)

    def default_key(self) -> str:
        return namespace_of(self.bundle)

    def decided(self) -> DecisionRecord:
        return DecisionRecord.from_payload(self.decision)


@dataclass(frozen=True, kw_only=True)
class BundleReleased(Event):
    bundle: str
    src: str

    def default_key(self) -> str:
        return namespace_of(self.bundle)


@dataclass(frozen=True, kw_only=True)
class SplitRequested(Event):
    """v2 adds ``by``: the principal of the admin command that asked for the split; None for a
    split the leader decided on its own (and for a v1 record). v3 adds ``proposal``: the id of
    the leader's proposal this split carries out; None for an admin's split (and before v3)."""

    VERSION: ClassVar[int] = 3
    bundle: str
    src: str
    algorithm: str
    positions: list[int] | None = None
    reason: str = "admin"
    unload_children: bool = False
    by: str | None = None
    proposal: str | None = None

    def default_key(self) -> str:
        return namespace_of(self.bundle)


@dataclass(frozen=True, kw_only=True)
class SplitCompleted(Event):
    """v2 adds ``by``: the principal its ``SplitRequested`` named (None: none)."""

    VERSION: ClassVar[int] = 2
    parent: str
    children: list[str]
    owner: str
    boundaries: list[int]
    by: str | None = None

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
class BalancerPaused(Event):
    """The leader stopped shedding and splitting from ``since_ms`` until ``until_ms`` (cluster
    time), as ``by`` asked (a token's role, or ``lbctl:<user>``) for ``reason``."""

    since_ms: int
    until_ms: int
    reason: str
    by: str

    def default_key(self) -> str:
        return LEADER_KEY


@dataclass(frozen=True, kw_only=True)
class BalancerResumed(Event):
    """The pause that began at ``since_ms`` ended at ``at_ms``: ``by`` asked, or ``expired``."""

    since_ms: int
    at_ms: int
    by: str

    def default_key(self) -> str:
        return LEADER_KEY


@dataclass(frozen=True, kw_only=True)
class BrokerDrainRequested(Event):
    """``broker`` takes no new bundles from ``since_ms`` (cluster time) and its bundles move
    away at ``rate_per_minute``, as ``by`` asked; ``bundles``: how many it owned then (what the
    progress counts down from). A later one for the same broker changes the rate."""

    broker: str
    since_ms: int
    rate_per_minute: int
    by: str
    bundles: int

    def default_key(self) -> str:
        return LEADER_KEY


@dataclass(frozen=True, kw_only=True)
class BrokerUndrained(Event):
    """The drain of ``broker`` begun at ``since_ms`` ended at ``at_ms`` as ``by`` asked: the
    broker takes bundles again; ``cancelled``: its moves not started then (those handing over
    finish), ``left``: the bundles it still owned."""

    broker: str
    since_ms: int
    at_ms: int
    by: str
    cancelled: int
    left: int

    def default_key(self) -> str:
        return LEADER_KEY


@dataclass(frozen=True, kw_only=True)
class ProposalApproved(Event):
    """A waiting proposal (``loadBalancerExecution=review``) was approved at ``at_ms`` (the
    leader's time) by ``by`` (a token's role, or ``lbctl:<user>``): its moves go to the throttle."""

    proposal_id: str
    by: str
    at_ms: int

    def default_key(self) -> str:
        return LEADER_KEY


@dataclass(frozen=True, kw_only=True)
class ProposalRejected(Event):
    """A waiting proposal was rejected by ``by`` at ``at_ms``; none of its moves runs."""

    proposal_id: str
    by: str
    at_ms: int
    note: str = ""

    def default_key(self) -> str:
        return LEADER_KEY


@dataclass(frozen=True, kw_only=True)
class ProposalCancelled(Event):
    """A waiting or approved proposal was cancelled by ``by`` at ``at_ms``: ``bundles`` are its
    moves that had not started and never will (moves already handing over finish)."""

    proposal_id: str
    by: str
    at_ms: int
    bundles: list[str] = field(default_factory=list)

    def default_key(self) -> str:
        return LEADER_KEY


@dataclass(frozen=True, kw_only=True)
class ProposalStale(Event):
    """A waiting proposal will never run: the leader found at ``at_ms`` that ``reason`` (too old,
    or the load it was computed on moved beyond the tolerance, or a bundle left its source)."""

    proposal_id: str
    reason: str
    at_ms: int

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


@dataclass(frozen=True, kw_only=True)
class SourceMessageRejected(Event):
    """A message of a mirrored system (a real Pulsar's topic, or a REST answer) that could not be
    translated into the catalog: named with where it came from, its key, a bounded prefix of its
    value and why, so the mirror goes on and nothing is skipped in silence."""

    source: str  # the topic, or "GET <path>"
    message_id: str  # the source's id of the message ("" for a REST answer)
    key: str  # the message's key ("" when it had none)
    value: str  # at most a few hundred characters of the value, as text
    error: str

    def default_key(self) -> str:
        return MIRROR_KEY


@dataclass(frozen=True, kw_only=True)
class ShedderUnloadsCounted(Event):
    """A mirrored cluster's leader's unload counters, read: ``unloaded`` is reason -> how many
    bundles its own shedder unloaded since the read at ``since_ms`` (empty on the first read of
    a leader, which tells only that the counters can be read). Admin unloads are not counted
    there, so the moves of that window beyond these counts were not the shedder's."""

    strategy: str
    since_ms: int
    unloaded: dict[str, int]

    def default_key(self) -> str:
        return MIRROR_KEY


@dataclass(frozen=True, kw_only=True)
class ProposalRecorded(Event):
    """One decision cycle's moves as a proposal, recorded whether or not anything executes it.

    ``mode``: ``advise`` (never executed) or ``drive`` (its moves are executed, each one traced
    by the Execution* events naming ``proposal_id``). Each move is a plain dict: ``bundle``,
    ``kind`` (transfer | unload | split), ``source``, ``destination``, ``reason``, ``decision``
    (the strategy's own numbers; a destination placement chose is marked by ``placement``),
    ``load`` (the bundle's reported rates). ``skip``: why a cycle proposes nothing. ``folded``:
    partition (as text) -> the last offset folded when the cycle ran; ``brokers``: the load each
    broker showed the cycle; ``predicted``: the balance expected after the moves (None: not
    computed)."""

    proposal_id: str
    strategy: str
    mode: str
    run_ms: int
    moves: list[dict[str, Any]] = field(default_factory=list)
    skip: str | None = None
    folded: dict[str, int] = field(default_factory=dict)
    brokers: dict[str, Any] = field(default_factory=dict)
    predicted: dict[str, Any] | None = None

    def default_key(self) -> str:
        return PROPOSALS_KEY


@dataclass(frozen=True, kw_only=True)
class ExecutionRequested(Event):
    """A proposal's move sent to the cluster's admin API: ``kind`` transfer (an unload with
    ``dst``) or split (``algorithm``, ``boundaries`` when chosen); ``from_version`` is the
    bundle's ownership version when it was sent (what a confirmation must come after)."""

    execution_id: str
    proposal_id: str
    bundle: str
    kind: str
    src: str
    dst: str | None = None
    algorithm: str | None = None
    boundaries: list[int] | None = None
    decision: dict[str, Any] = field(default_factory=dict)
    from_version: int = 0
    request: str = ""

    def default_key(self) -> str:
        return PROPOSALS_KEY

    def decided(self) -> DecisionRecord:
        return DecisionRecord.from_payload(self.decision)


@dataclass(frozen=True, kw_only=True)
class ExecutionAccepted(Event):
    """The admin API answered the request with a 2xx ``status``."""

    execution_id: str
    bundle: str
    status: int
    message: str = ""

    def default_key(self) -> str:
        return PROPOSALS_KEY


@dataclass(frozen=True, kw_only=True)
class ExecutionUnanswered(Event):
    """No answer came (the connection failed or timed out): the move may or may not happen; the
    execution stays open until the ownership channel shows it or its time is up."""

    execution_id: str
    bundle: str
    error: str

    def default_key(self) -> str:
        return PROPOSALS_KEY


@dataclass(frozen=True, kw_only=True)
class ExecutionRefused(Event):
    """Terminal: the admin API answered with a non-2xx ``status`` and ``message``."""

    execution_id: str
    bundle: str
    status: int
    message: str

    def default_key(self) -> str:
        return PROPOSALS_KEY


@dataclass(frozen=True, kw_only=True)
class ExecutionConfirmed(Event):
    """Terminal: the ownership channel shows the move done: the bundle Owned at ``owner`` (the
    destination), or the split's ``children``; ``evidence`` names the record that showed it
    (its causation id, else partition:offset); ``waited_ms`` from the request."""

    execution_id: str
    bundle: str
    owner: str
    children: list[str] = field(default_factory=list)
    evidence: str = ""
    waited_ms: int = 0

    def default_key(self) -> str:
        return PROPOSALS_KEY


@dataclass(frozen=True, kw_only=True)
class ExecutionFailed(Event):
    """Terminal: no confirmation. ``reason``: ``timeout`` (not done within the setting),
    ``diverted`` (Owned at another broker), ``gone`` (the bundle no longer exists, not by this
    split), ``shutdown`` (attach stopped first); ``state`` is what the ownership view showed."""

    execution_id: str
    bundle: str
    reason: str
    detail: str = ""
    state: dict[str, Any] = field(default_factory=dict)
    waited_ms: int = 0

    def default_key(self) -> str:
        return PROPOSALS_KEY


# -- commands -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class CreateNamespace(Command):
    """v2 adds ``by``: the principal who asked (its event records it); None: none named."""

    VERSION: ClassVar[int] = 2
    namespace: str
    bundles: int | None = None
    boundaries: list[int] | None = None
    anti_affinity_group: str | None = None
    isolation: dict[str, Any] | None = None
    by: str | None = None

    def default_key(self) -> str:
        return self.namespace


@dataclass(frozen=True, kw_only=True, slots=True)
class SetNamespacePolicy(Command):
    """v2 adds ``by``: the principal who asked (its event records it); None: none named."""

    VERSION: ClassVar[int] = 2
    namespace: str
    anti_affinity_group: str | None = None
    isolation: dict[str, Any] | None = None
    by: str | None = None

    def default_key(self) -> str:
        return self.namespace


@dataclass(frozen=True, kw_only=True, slots=True)
class SetFailureDomain(Command):
    """v2 adds ``by``: the principal who asked (its event records it); None: none named."""

    VERSION: ClassVar[int] = 2
    domain: str
    brokers: list[str]
    by: str | None = None

    def default_key(self) -> str:
        return CLUSTER_KEY


@dataclass(frozen=True, kw_only=True, slots=True)
class AssignBundle(Command):
    """v2 adds ``decision``: the placement that chose ``dst`` (the event carries it on)."""

    VERSION: ClassVar[int] = 2
    bundle: str
    dst: str | None = None
    reason: str = "lookup"
    force: bool = False
    decision: dict[str, Any] | None = None

    def default_key(self) -> str:
        return namespace_of(self.bundle)


# A lookup and a drain request were both an ``AssignBundle`` without a ``dst``, told apart by
# ``reason="transfer"``; they are commands of their own now. Commands are never stored, but a
# refused one is named in its ``CommandRejected.command``: these two keep the name
# ``AssignBundle`` there (their ``TYPE``), so a log reads the same whichever code wrote it (no
# upcaster: no stored record changed). They are not in ``COMMANDS`` (no schema of their own).
@dataclass(frozen=True, kw_only=True, slots=True)
class LookupBundle(Command):
    """A client's lookup, to the leader: place ``bundle`` if it has no owner (the answer names
    the owner of a bundle that has one)."""

    TYPE: ClassVar[str] = "AssignBundle"
    bundle: str

    def default_key(self) -> str:
        return namespace_of(self.bundle)


@dataclass(frozen=True, kw_only=True, slots=True)
class DrainBundle(Command):
    """A broker shutting down asks the leader to move ``bundle``, which it owns, elsewhere."""

    TYPE: ClassVar[str] = "AssignBundle"
    bundle: str
    broker: str
    """The draining broker: the leader moves the bundle only while it still owns it."""

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
    """v2 adds ``by``: the principal who asked; each bundle's ``UnloadRequested`` keeps it in its
    decision (``requested_by``), as an admin's unload of one bundle does."""

    VERSION: ClassVar[int] = 2
    namespace: str
    by: str | None = None

    def default_key(self) -> str:
        return self.namespace


@dataclass(frozen=True, kw_only=True, slots=True)
class SplitBundle(Command):
    """``bundle`` is a range ``0xLLLLLLLL_0xUUUUUUUU``, a full bundle id, ``LARGEST`` or ``HOT``.
    v2 adds ``by``: the principal of an admin's split (None: the leader's own, or none named);
    v3 adds ``proposal``: the leader's proposal the split carries out (None: not the leader's)."""

    VERSION: ClassVar[int] = 3
    namespace: str
    bundle: str
    algorithm: str
    positions: list[int] | None = None
    unload: bool = False
    by: str | None = None
    proposal: str | None = None

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


@dataclass(frozen=True, kw_only=True, slots=True)
class PauseBalancer(Command):
    """Pause shedding and splitting for ``duration_ms`` of the leader's time."""

    duration_ms: int
    reason: str
    by: str

    def default_key(self) -> str:
        return LEADER_KEY


@dataclass(frozen=True, kw_only=True, slots=True)
class ResumeBalancer(Command):
    by: str

    def default_key(self) -> str:
        return LEADER_KEY


@dataclass(frozen=True, kw_only=True, slots=True)
class DrainBroker(Command):
    """Empty ``broker`` at ``rate_per_minute`` and give it no new bundles until undrained."""

    broker: str
    rate_per_minute: int
    by: str

    def default_key(self) -> str:
        return LEADER_KEY


@dataclass(frozen=True, kw_only=True, slots=True)
class UndrainBroker(Command):
    """Return ``broker`` to service: its drain's moves not started are cancelled."""

    broker: str
    by: str

    def default_key(self) -> str:
        return LEADER_KEY


@dataclass(frozen=True, kw_only=True, slots=True)
class ReviewProposal(Command):
    """An operator's verdict on a proposal: ``approve``, ``reject`` or ``cancel``."""

    proposal_id: str
    verdict: str
    by: str
    note: str = ""

    def default_key(self) -> str:
        return LEADER_KEY


EVENTS: tuple[type[Event], ...] = (
    LeaderElected, BrokerRegistered, BrokerLeft, LoadReported, NamespaceCreated,
    NamespacePolicySet, FailureDomainSet, BundleAssigned, BundleOwned, UnloadRequested,
    TransferPrepared, BundleReleased, SplitRequested, SplitCompleted, SheddingSkipped,
    CommandRejected, SourceMessageRejected, ShedderUnloadsCounted, ProposalRecorded, ExecutionRequested, ExecutionAccepted,
    ExecutionUnanswered, ExecutionRefused, ExecutionConfirmed, ExecutionFailed, BalancerPaused,
    BalancerResumed, LeaderHeartbeat, BrokerDrainRequested, BrokerUndrained, ProposalApproved, ProposalRejected, ProposalCancelled,
    ProposalStale,
)
COMMANDS: tuple[type[Command], ...] = (
    CreateNamespace, SetNamespacePolicy, SetFailureDomain, AssignBundle, ConfirmOwnership,
    UnloadBundle, UnloadNamespace, SplitBundle, ConfirmRelease, ConfirmSplit, PauseBalancer,
    ResumeBalancer, DrainBroker, UndrainBroker, ReviewProposal,
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
    check_fields: FieldsCheck | None = None  # ``checks`` compiled into one (None: run them in turn)


def _schema(cls: type[Message]) -> Schema:
    from dataclasses import MISSING

    all_fields = fields(cls)
    required = {f.name for f in all_fields if f.default is MISSING and f.default_factory is MISSING}
    annotated = [(f.name, str(f.type)) for f in all_fields]
    checks = tuple((name, check_for(annotation)) for name, annotation in annotated)
    names = frozenset(f.name for f in all_fields)
    return Schema(cls, cls.VERSION, frozenset(required), names, checks,
                  "epoch" in names and issubclass(cls, Event), issubclass(cls, Event),
                  fields_check(annotated))


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


def _viewing(schema: Schema) -> tuple[type[Message], int, Any, Any]:
    # The class, its field count, the setter of its instances' attribute dict and its usable
    # rule (None: its schema is enough): one lookup per typed event.
    return (schema.cls, len(schema.allowed), vars(schema.cls)["__dict__"].__set__,
            _USABLE.get(schema.cls.TYPE))


_VIEWS: dict[str, tuple[type[Message], int, Any, Any]] = {
    name: _viewing(schema) for name, schema in SCHEMAS.items() if schema.viewed}


def view_of(type_name: str, payload: dict[str, Any]) -> Message:
    """The typed event of a current-version payload, equal to ``from_payload``'s.

    A payload with as many keys as its event has fields (what every writer stores:
    ``to_payload``; the codec has checked that its keys are fields) becomes the event's attribute
    dict, shared, not copied, with no ``__init__``; any other (an optional field left out, a
    command) is built by ``from_payload``, which fills defaults or refuses.

    A payload no fold can use (``events.usable``: a report's bundle that names no bundle, a
    decision whose ``folded`` is not partition -> offset) is a ``DecodeError`` (``bad_payload``):
    the folds name it ``bad_event`` and go on."""
    found = _VIEWS.get(type_name)
    if found is None:
        return from_payload(type_name, payload)  # a command, or an unknown type (refused there)
    cls, count, set_attributes, rule = found
    if rule is not None:
        why = rule(payload)
        if why is not None:
            raise DecodeError(f"{type_name}: {why}", reason="bad_payload")
    if len(payload) != count or type(payload) is not dict:
        return from_payload(type_name, payload)
    event = _new_message(cls)
    set_attributes(event, payload)  # not setattr: the frozen dataclass refuses every attribute
    return event
