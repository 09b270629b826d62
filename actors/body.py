"""The actor body port and the log-following state every body shares.

Invariants:
- a body is a plain object: no Ray, no asyncio, no clock (time is the ``now_ms`` argument), no
  global RNG (a seeded ``random.Random`` comes through its constructor);
- a body's state is a fold of the log: ``recover`` folds the history of a fresh body,
  ``on_event`` folds one more record, and both fold the same way, so a body restarted from the log
  equals the body that lived through it (no reaction happens during ``recover``);
- records are folded once: a record whose seq is not above the last folded seq of its (topic,
  key) is ignored, and one beyond its key's reach (``events.bounds``) is named by the view and
  folded by no body, so a host may redeliver safely, and records of the ``events`` and ``load``
  topics may come from two logs (each numbers its keys' seqs on its own);
- ``Follower`` keeps what every body needs: the ownership view, the newest leader epoch, the
  last seq of ``_leader`` (for the election's compare-and-set) and the registered brokers;
- folds read the record's typed event (``Envelope.typed``, built once per record and shared by
  every body of the process) and dispatch on its class; ``fold_more`` gets it beside the record;
- ``on_log_health(healthy, now_ms)``: the host tells a body whether its last append or read
  of the log succeeded (``Follower`` ignores it); a body may keep that as soft state (the
  leader does, to discount outages from brokers' liveness), never as something a restarted
  body must know;
- a body may ``share`` another Follower's fold (the in-process host's one fold of the log for a
  hundred bodies, ``actors.runtime.shared_fold``): its ``Follower`` part is then that fold's
  objects, folded once by the host; its own ``fold`` folds only what the subclass keeps
  (``fold_more``), for the records the shared fold accepted, and its snapshots hold only that;
- a body may ``skim`` records whose payload neither the view nor it reads (a broker: the other
  brokers' load reports; the workload's clients: every report): folded by their header, they
  leave the state the full records leave (``tests/actors/test_skim.py``); a skimmed record it
  reads more of it reads in full first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from sys import intern
from typing import Any, Protocol, cast, runtime_checkable

from actors.effects import NOTHING, Effects
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput
from balancer.ownership import AcceptMode, BundleState, OwnershipRecord
from events.bounds import beyond_reach
from events.catalog import (
    EVENTS_TOPIC,
    LEADER_KEY,
    LOAD_TOPIC,
    SCHEMAS,
    BrokerLeft,
    BrokerRegistered,
    Command,
    LeaderElected,
    Message,
    SplitCompleted,
)
from events.envelope import Envelope
from events.log.port import DeadLetter, Record, expand
from events.skim import Skim
from projections.ownership import HEADER_ONLY, OwnershipProjection, entitled
from projections.ownership_index import BUNDLE_EVENTS, BundleEvent, OwnershipIndex, touched


class SharedBase(Protocol):
    """The one fold several bodies read (``actors.runtime.shared_fold.SharedFold``)."""

    base: Follower

    def accepted(self, record: Record) -> bool:
        """The shared fold folded ``record`` (not a repeat, and its writer was entitled)."""
        ...


@runtime_checkable
class Body(Protocol):
    """What a host drives (docs/design/actors.md §1)."""

    name: str

    def recover(self, history: Iterable[Record]) -> None: ...

    def on_command(self, command: Command, now_ms: int) -> Effects: ...

    def on_event(self, record: Record, now_ms: int) -> Effects: ...

    def on_tick(self, now_ms: int) -> Effects: ...

    def on_log_health(self, healthy: bool, now_ms: int) -> None: ...

    def status(self) -> dict[str, Any]:
        """What the body says of itself (epoch, role, registration, degraded keys); a host adds
        its own (position, counts) and answers ``status`` with both."""
        ...


class Follower:
    """Folds the log into the ownership view, the leader epoch and the broker registry."""

    name: str = "follower"
    shared: SharedBase | None = None
    """The fold this body reads instead of folding the log itself (None: its own fold)."""
    skim: Skim | None = None
    """Records this body folds by their header only (``events.skim``; types of ``HEADER_ONLY``):
    its host asks the log to hand them so."""

    def __init__(self, config: LoadBalancerConfig) -> None:
        self.config = config
        self.ownership = OwnershipProjection(mode=AcceptMode.from_config(config))
        self.by_broker = OwnershipIndex()
        """Broker -> bundles whose record names it, kept per fold (a scan-free ``owned()``)."""
        self.epoch = 0
        self.leader_id: str | None = None
        self.leader_seq = 0
        self.brokers: dict[str, BrokerRegistered] = {}
        """Registered brokers (their BrokerRegistered events), until their BrokerLeft."""
        self._folded: dict[tuple[str, str], int] = {}
        self.voided: dict[str, int] = {}
        """Bundle -> version of its record when the broker it waited on or was owned by left:
        that record belongs to a dead session. Its broker never serves or confirms it, even
        registered again; the leader reassigns it (an orphan). Any later event of the bundle
        makes a new version, which counts again."""

    # -- the port --------------------------------------------------------------------------
    def recover(self, history: Iterable[Record]) -> None:
        for record in history:
            self.fold(record)

    def on_event(self, record: Record, now_ms: int) -> Effects:
        full = self.readable(record)
        if full is None or not self.fold(full):
            return NOTHING
        return self.react(full, now_ms)

    def on_command(self, command: Command, now_ms: int) -> Effects:
        return Effects(error=InvalidInput(f"{self.name} takes no {command.TYPE} command",
                                          value=command.TYPE))

    def on_tick(self, now_ms: int) -> Effects:
        return NOTHING

    def on_log_health(self, healthy: bool, now_ms: int) -> None:
        """The host's last append or read of the log succeeded (``healthy``) or failed."""

    def status(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "leads": False, "my_epoch": None, "role": "",
                "registered": None, "stopped": None, "degraded": dict(self.ownership.degraded)}

    # -- snapshots (actors.snapshots) ------------------------------------------------------
    SNAPSHOT_FIELDS: tuple[str, ...] = ("ownership", "by_broker", "epoch", "leader_id", "leader_seq",
                                        "brokers", "_folded", "voided")
    """The attributes ``recover`` rebuilds: a subclass adds its own folded ones, never soft
    state (timers, pending sends, a role), which a restarted body must not know."""

    def snapshot_identity(self) -> str:
        """What a snapshot must have been written for: the class, name, config and settings
        (a snapshot of another configuration folded other rules), and whether the body shares
        a fold (its snapshot then lacks the ``Follower`` part)."""
        settings = getattr(self, "settings", None)
        shares = "|shared" if self.shared is not None else ""
        return f"{type(self).__module__}.{type(self).__qualname__}|{self.name}|{self.config!r}|{settings!r}{shares}"

    def _own_fields(self) -> tuple[str, ...]:
        if self.shared is None:
            return self.SNAPSHOT_FIELDS
        return tuple(name for name in self.SNAPSHOT_FIELDS if name not in Follower.SNAPSHOT_FIELDS)

    def snapshot_state(self) -> dict[str, Any]:
        """The folded state, to be pickled at once (the live objects go on changing)."""
        return {name: getattr(self, name) for name in self._own_fields()}

    def restore_state(self, state: Mapping[str, Any]) -> None:
        """Take a snapshot's folded state (a fresh body, before ``recover`` folds the tail)."""
        fields = self._own_fields()
        missing = [name for name in fields if name not in state]
        if missing:
            raise ValueError(f"snapshot of {self.name} lacks {', '.join(missing)}")
        for name in fields:
            setattr(self, name, state[name])
        if self.shared is not None:
            return
        view = self.ownership
        view.__post_init__()  # its transition table is this process's own
        # Bodies that folded a record share its bundle name; unpickled, each would hold a copy of
        # every name (a hundred brokers x 65,536 bundles: 0.6 GB). Interned, restored ones share.
        view.records = {intern(bundle): record for bundle, record in view.records.items()}

    def share(self, shared: SharedBase) -> None:
        """Read ``shared``'s fold from now on (a fresh body, before it recovers): its view,
        indexes and registry are this body's, and its scalars are copied in by ``follow_base``."""
        self.shared = shared
        for name in Follower.SNAPSHOT_FIELDS:  # the Follower part, whatever it holds
            setattr(self, name, getattr(shared.base, name))

    def follow_base(self) -> None:
        """Take the shared fold's election state (the host calls it when that changed)."""
        shared = self.shared
        if shared is not None:
            base = shared.base
            self.epoch, self.leader_id, self.leader_seq = base.epoch, base.leader_id, base.leader_seq

    def state_size(self) -> int:
        """Bundles plus brokers held: what a snapshot's cost grows with."""
        return len(self.ownership.records) + len(self.brokers)

    # -- folding ---------------------------------------------------------------------------
    def fold(self, record: Record) -> bool:
        """Fold one record; False if it was folded before (a redelivery) or its writer was not
        entitled to it (``projections.ownership.entitled``: the view names it, nothing reacts).
        A body that shares a fold folds only its own part, of the records that fold accepted.
        A skimmed record (``events.skim``) this body skims is folded by its header (and False:
        nothing reacts to it); one it reads more of is read in full first."""
        if record.envelope[9] is None:  # skimmed: read in full unless this body folds its header
            full = self.readable(record)
            if full is None:
                return False
            record = full
        shared = self.shared
        if shared is not None:
            if not shared.accepted(record):
                return False
            self.fold_more(record, record.envelope.typed)
            return True
        envelope = record.envelope
        stream = (_topic(envelope.type), envelope.key)
        last = self._folded.get(stream, 0)
        if envelope.seq <= last:
            return False
        position = self.ownership.tracker.positions.get(envelope.key)
        if beyond_reach(last, 0 if position is None else position[1], envelope.seq, envelope.epoch):
            self.ownership.apply(record.offset, envelope)  # named there (out_of_range); moves no seq
            return False
        self._folded[stream] = envelope.seq
        if envelope.key == LEADER_KEY:
            # The election's compare-and-set is on the log's seqs, which every record under
            # ``_leader`` takes, a refused one too: else one forgery there blocks every election.
            self.leader_seq = max(self.leader_seq, envelope.seq)
        self.ownership.apply(record.offset, envelope)
        if envelope[9] is None:
            return False  # skimmed: its header is all this body folds of it
        if not entitled(envelope, self.ownership.elected, self.ownership.cluster_id):
            return False  # the view named it an anomaly; no body folds or reacts to it
        event = envelope.typed  # typed once per record, shared by every body that folds it
        if type(event) in BUNDLE_EVENTS:
            bundle = cast(BundleEvent, event).bundle
            self.by_broker.touch(bundle, self.ownership.records.get(bundle))
            if self.voided:
                self._unvoid((bundle,))
        elif isinstance(event, SplitCompleted):
            self.by_broker.touch_all(touched(event), self.ownership.records)
            if self.voided:
                self._unvoid(touched(event))
        if isinstance(event, LeaderElected):
            if event.epoch >= self.epoch:
                self.epoch, self.leader_id = event.epoch, event.leader_id
        elif isinstance(event, BrokerRegistered):
            self.brokers[event.broker_id] = event
        elif isinstance(event, BrokerLeft):
            self.brokers.pop(event.broker_id, None)
            self._void_session(event.broker_id)
        self.fold_more(record, event)
        return True

    def readable(self, record: Record) -> Record | None:
        """``record``, read in full if it was skimmed and this body reads more than its header
        (None: its bytes do not decode; the view names the dead letter)."""
        envelope = record.envelope
        if envelope[9] is not None or self._header_only(envelope):
            return record
        item = expand(record)
        if isinstance(item, DeadLetter):
            self.note_dead_letter(item)
            return None
        return item

    def _header_only(self, envelope: Envelope) -> bool:
        """This body folds ``envelope`` by its header: it skims it, and the view reads no more of
        a record of its type (a signed one's check digests the bytes the skim kept)."""
        skim = self.skim
        return (skim is not None and skim.applies(envelope) and envelope.type in HEADER_ONLY
                and self.shared is None)

    def _void_session(self, broker: str) -> None:
        records = self.ownership.records
        for bundle in self.by_broker.involving(broker):  # the bundles naming it, not all of them
            record = records[bundle]
            if (record.dst == broker and record.state.active) or (
                    record.src == broker and record.state in (BundleState.RELEASING, BundleState.SPLITTING)):
                self.voided[bundle] = record.version

    def is_void(self, bundle: str, record: OwnershipRecord) -> bool:
        """The record is still the one a departed broker's session left behind."""
        return self.voided.get(bundle) == record.version

    def _unvoid(self, bundles: Iterable[str]) -> None:
        """Forget the void records of ``bundles`` that a later event replaced (a fold of the
        log, so a body restored from a snapshot forgets the same)."""
        records = self.ownership.records
        for bundle in bundles:
            version = self.voided.get(bundle)
            if version is not None and (bundle not in records or records[bundle].version != version):
                del self.voided[bundle]

    def void_bundles(self) -> list[str]:
        """The bundles whose record is still void."""
        return list(self.voided)

    def note_dead_letter(self, letter: DeadLetter) -> None:
        """A record of the log that cannot be read: named in the view, its key's view degraded."""
        self.ownership.apply_dead_letter(letter.offset, letter.key, f"{letter.reason}: {letter.error}")

    def key_seq(self, key: str) -> int:
        """The last seq folded under ``key`` (an ``expected_seq`` for a compare-and-set).

        One log holds the events and load topics in every host, so a key has one seq space."""
        return max(self._folded.get((EVENTS_TOPIC, key), 0), self._folded.get((LOAD_TOPIC, key), 0))

    def fold_more(self, record: Record, event: Message) -> None:
        """Subclasses fold what else they keep (``event``: the record's typed event)."""

    def react(self, record: Record, now_ms: int) -> Effects:
        """Subclasses react to a newly folded record (never called during ``recover``)."""
        return NOTHING


def _topic(type_name: str) -> str:
    topic = _TOPICS.get(type_name)
    if topic is None:
        schema = SCHEMAS.get(type_name)
        topic = _TOPICS[type_name] = schema.cls.TOPIC if schema is not None else EVENTS_TOPIC
    return topic


_TOPICS: dict[str, str] = {}
