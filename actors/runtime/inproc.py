"""InProcessHost: the actor bodies in one process, on a virtual clock, over a MemoryEventLog.

Invariants:
- deterministic for a seed: time is ``now_ms`` (advanced only by ``advance``/``run_until``),
  envelope ids count up, each body's ``Random`` is seeded from (seed, name, incarnation), and
  every choice of order is fixed (a queue ordered by (due time, insertion), bodies by name);
- the log is the only shared state: effects are appended through the ``EventLog`` API (seq,
  epoch fencing, compare-and-set are the log's), and every body folds every record, in log order,
  exactly once; the writer folds its own records right after its append, before anything else
  reaches it, so a body never decides on a state older than its own last write;
- a crashed body receives nothing and loses its memory; ``restart`` builds a fresh one from its
  factory, never from the old object: it takes the newest usable snapshot the host kept of that
  body (``actors.snapshots``; the host's memory stands for a disk that outlives the body) and
  ``recover``s the records after it, or the whole log when there is none; a body is snapshot
  whenever ``snapshot_policy`` says so, between two records (its state is then a fold of exactly
  the records before its cursor), so a restart folds a bounded tail whatever the history;
- commands travel through the queue (``command_latency_ms`` later); a command to a body that is
  down, or to the leader when none leads, is answered ``Unavailable`` and dropped;
- with ``shared_fold`` (``Cluster``'s in-process clusters) the bodies read one fold of the log
  (``actors.runtime.shared_fold``) instead of folding it a hundred times: each record is folded
  once and handed to its bodies at once, record by record, every time the log grows (so no body
  lags the log between two steps, and ``event_latency_ms`` must be 0); a broker gets only the
  records that concern it. Without it (the simulator) each body folds at its own pace, as a
  separate process would.

Subclasses (the fault simulator) may override ``schedule_command`` to drop, delay, duplicate or
reorder deliveries, and set ``skew_ms`` per body to skew its clock.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
from collections.abc import Callable, Sequence
from random import Random
from typing import TypeVar

from actors.body import Body, Follower
from actors.broker import BrokerBody
from actors.effects import NOTHING, Effects
from actors.runtime.executor import execute
from actors.runtime.heap import HeapSettler
from actors.runtime.inproc_calls import HostCalls
from actors.runtime.shared_fold import SharedFold, history_for, recipients
from actors.runtime.signers import Keyring
from actors.runtime.tickets import Ticket, run_sync
from actors.settings import LEADER, ActorSettings, broker_body_name, route
from actors.snapshots import (
    DEFAULT_POLICY,
    BodySnapshot,
    MemorySnapshots,
    SnapshotPolicy,
    collector_paused,
)
from actors.workload import Capacity
from balancer.config import LoadBalancerConfig
from balancer.errors import LoadBalancerError, Unavailable
from events.catalog import Command, Event
from events.envelope import Stamper, counting_ids
from events.log.memory import MemoryEventLog
from events.log.port import DeadLetter, Record
from events.signing import Root

T = TypeVar("T")
BodyFactory = Callable[[], Body]
DEFAULT_START_MS = 1_700_000_000_000


_Item = tuple[int, int, Callable[[], None]]  # (due ms, unique seq, run): compared in C, never by run


class InProcessHost(HostCalls):
    """Hosts bodies by name; routes commands; feeds the log to every body; ticks the clock."""

    def __init__(self, config: LoadBalancerConfig | None = None, *, seed: int = 0,
                 settings: ActorSettings | None = None, start_ms: int = DEFAULT_START_MS,
                 tick_ms: int = 500, command_latency_ms: int = 0, event_latency_ms: int = 0,
                 snapshot_policy: SnapshotPolicy | None = DEFAULT_POLICY, shared_fold: bool = False,
                 heap: HeapSettler | None = None, root: Root | None = None) -> None:
        if shared_fold and event_latency_ms:
            raise ValueError(f"event_latency_ms={event_latency_ms}: a shared fold hands every record "
                             "to its bodies at once (0)")
        self.config = config or LoadBalancerConfig()
        self.settings = settings or ActorSettings()
        self.heap = heap
        """The process's collector schedule (a long-lived cluster's; None: CPython's own)."""
        self.seed, self.tick_ms = seed, tick_ms
        self.command_latency_ms, self.event_latency_ms = command_latency_ms, event_latency_ms
        self.now_ms = start_ms
        self.keyring = Keyring(root or Root(hashlib.blake2b(f"{seed}".encode(), person=b"bb-sim-root",
                                                             digest_size=32).digest()))
        """Each body signs its appends with its own identity (``actors.runtime.signers``). Without
        a ``root`` one is derived from the seed, so a seed's log is the same bytes every run: fit
        for a simulation, not for a cluster whose writers must not be impersonated (``Cluster``
        and the kept clusters pass a random root of their own)."""
        self.stamper = Stamper(clock_ms=lambda: self.now_ms, new_id=counting_ids())
        self.log = MemoryEventLog(stamper=self.stamper)
        self.records: list[Record] = []
        self.dead_letters: list[DeadLetter] = []
        """Entries of the log that are no readable event (named in the client's view)."""
        self._read_next = 0
        """Every record of the log, decoded once, in log order."""
        self.client = Follower(self.config)
        """The caller's own projection (what ``lookup`` and ``view`` answer from)."""
        self.shared = SharedFold(self.client) if shared_fold else None
        """The one fold every body reads (None: each body folds the log itself)."""
        self._handed = 0
        """Shared fold: the records folded and handed to their bodies."""
        self._handing = False
        self._others: list[str] | None = None  # shared fold: the bodies that get every record
        self._contenders: list[Body] | None = None  # the bodies that may lead
        self._next_snapshot_check = 0
        self.bodies: dict[str, Body] = {}
        self.crashed: set[str] = set()
        self.skew_ms: dict[str, int] = {}
        self.failed_appends: list[tuple[str, str, LoadBalancerError]] = []
        self._factories: dict[str, BodyFactory] = {}
        self._incarnations: dict[str, int] = {}
        self._cursor: dict[str, int] = {}
        self._queue: list[_Item] = []
        self._seq = itertools.count()
        self._ids = itertools.count(1)
        self._pump_due = False
        self.snapshots = MemorySnapshots()
        """Each body's newest snapshot (position: its cursor into ``records``)."""
        self.snapshot_policy = snapshot_policy
        """When a body is snapshot (None: never; every restart folds the whole log)."""
        self._snapshot_at: dict[str, int] = {}
        self._snapshot_floor = snapshot_policy.min_records if snapshot_policy is not None else 1 << 62
        self.started: dict[str, tuple[int, int]] = {}
        """Body -> (records its last start took from a snapshot, records it then folded)."""
        self.new_broker: Callable[[str, str | None, Capacity | None], Body] | None = None
        """Makes broker (id, failure domain, capacity) for ``add_broker`` (``build_cluster``'s)."""
        self.schedule(start_ms, self._tick)

    # -- bodies ----------------------------------------------------------------------------
    def rng_for(self, name: str) -> Random:
        """The seeded Random of body ``name``'s current incarnation."""
        return Random(f"{self.seed}:{name}:{self._incarnations.get(name, 0)}")

    def add(self, factory: BodyFactory) -> Body:
        """Start a body (it recovers from the log as it is now)."""
        body = factory()
        if body.name in self._factories:
            raise ValueError(f"a body named {body.name!r} is already hosted")
        self._factories[body.name] = factory
        self._incarnations[body.name] = 0
        return self._start(body)

    def _start(self, body: Body) -> Body:
        with collector_paused():
            body = self._rebuild(body)
        name = body.name
        self.bodies[name] = body
        self._cursor[name] = self._snapshot_at[name] = self._folded_to()
        self.crashed.discard(name)
        self._others = self._contenders = None
        return body

    def _folded_to(self) -> int:
        """Where a body starting now stands: the end of the log, or the shared fold's position."""
        return self._handed if self.shared is not None else len(self.records)

    def _rebuild(self, body: Body) -> Body:
        """``body`` (fresh) restored from its newest usable snapshot and the records after it."""
        name, end = body.name, self._folded_to()
        self._share(body)
        start, snapshot = 0, self._newest_snapshot(body)
        if snapshot is not None:
            try:
                body.restore_state(snapshot.state)  # type: ignore[attr-defined]
                start = snapshot.position[0]
            except Exception as exc:  # a snapshot this code cannot take: named, then the whole log
                note = f"snapshot of {name} not restored: {type(exc).__name__}: {exc}"
                self.snapshots.notes.append(note)
                body, start = self._factories[name](), 0
                self._share(body)
        if self.shared is not None:
            body.recover(history_for(self.shared, body, self.records, start, end))
        else:
            body.recover(itertools.islice(self.records, start, end))
        self.started[name] = (start, end - start)
        return body

    def _share(self, body: Body) -> None:
        if self.shared is not None and isinstance(body, Follower):
            body.share(self.shared)

    def _newest_snapshot(self, body: Body) -> BodySnapshot | None:
        if not isinstance(body, Follower):
            return None
        return self.snapshots.newest(body.name, body.snapshot_identity())

    def _maybe_snapshot(self, name: str) -> None:
        body, policy = self.bodies.get(name), self.snapshot_policy
        if policy is None or not isinstance(body, Follower):
            return
        at = self._handed if self.shared is not None else self._cursor[name]
        if policy.due(at - self._snapshot_at[name], body.state_size()):
            self.snapshots.save(BodySnapshot(name, body.snapshot_identity(), {0: at}, at,
                                             body.snapshot_state()))
            self._snapshot_at[name] = at

    def add_broker(self, broker_id: str, failure_domain: str | None = None,
                   capacity: Capacity | None = None) -> Body:
        """Start broker ``broker_id``: a new one, or again after its crash (a fresh body rebuilt
        from its snapshot and the log, registering anew)."""
        make = self.new_broker
        if make is None:
            raise ValueError("this host was built without a broker factory (build_cluster makes one)")
        name = broker_body_name(broker_id)
        if name in self.bodies:
            raise ValueError(f"a body named {name!r} is already hosted")

        def factory() -> Body:
            return make(broker_id, failure_domain, capacity)

        if name in self.crashed:
            self._factories[name] = factory
            return self.restart(name)
        return self.add(factory)

    def adopt(self, history: Sequence[Record], dead_letters: Sequence[DeadLetter], read_next: int) -> None:
        """Take a kept log's records (before anything ran on its new log): the client's view
        folds them, dead letters are named in it, and every body restarts from them."""
        for record in history:
            self.records.append(record)
            if self.shared is not None:
                self.shared.fold(record, len(self.records) - 1)
            else:
                self.client.fold(record)
        for letter in dead_letters:  # named in the view, its key degraded; never skipped silently
            self.client.note_dead_letter(letter)
            self.dead_letters.append(letter)
        self._read_next, self._handed = read_next, len(self.records)
        if history:
            for name in sorted(self.bodies):
                self.restart(name)

    def fold_all(self) -> None:
        """Let every live body fold every record the log has (what a pump does)."""
        if self.shared is not None:
            self._hand_out()
            return
        for name in sorted(self.bodies):
            self._catch_up(name)

    def position_of(self, name: str) -> dict[int, int]:
        """The log position body ``name`` has folded (partition 0 -> next offset)."""
        if self.shared is not None and name in self.bodies:
            return {0: self._handed}
        return {0: self._cursor.get(name, 0)}

    def crash(self, name: str) -> None:
        """Stop ``name`` at once; its memory is gone, queued commands to it fail."""
        if self.bodies.pop(name, None) is None:
            raise KeyError(f"no live body {name!r}")
        self.crashed.add(name)
        self._others = self._contenders = None

    def restart(self, name: str) -> Body:
        """A fresh body from the factory, rebuilt from its newest snapshot and the log after it
        (the whole log without one)."""
        if name in self.bodies:
            self.crash(name)
        self._incarnations[name] += 1
        return self._start(self._factories[name]())

    def body(self, name: str) -> Body:
        return self.bodies[name]

    def leader(self) -> Body | None:
        """The live body that leads (the newest epoch if, briefly, two think they do)."""
        if self._contenders is None:  # asked on every delivery to the leader: not a hundred getattrs
            self._contenders = [b for b in self.bodies.values() if hasattr(type(b), "leads")]
        leading = [b for b in self._contenders if getattr(b, "leads", False)]
        return max(leading, key=lambda b: int(getattr(b, "my_epoch", 0)), default=None)

    def now_for(self, name: str) -> int:
        return self.now_ms + self.skew_ms.get(name, 0)

    # -- time ------------------------------------------------------------------------------
    def schedule(self, due_ms: int, run: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (due_ms, next(self._seq), run))

    def step(self) -> bool:
        """Run the next due item (advancing time to it); False when nothing is queued."""
        if not self._queue:
            return False
        due, _, run = heapq.heappop(self._queue)
        self.now_ms = max(self.now_ms, due)
        if self.heap is None:
            run()
        else:
            with self.heap.paused():
                run()
        return True

    def advance(self, ms: int) -> None:
        """Run everything due within the next ``ms`` milliseconds."""
        target = self.now_ms + ms
        while self._queue and self._queue[0][0] <= target:
            self.step()
        self.now_ms = target

    def run_until(self, predicate: Callable[[], bool], max_ms: int) -> bool:
        """Step until ``predicate()`` holds (True) or ``max_ms`` pass (False)."""
        target = self.now_ms + max_ms
        if predicate():
            return True
        while self._queue and self._queue[0][0] <= target:
            self.step()
            if predicate():
                return True
        self.now_ms = max(self.now_ms, target)
        return predicate()

    def _tick(self) -> None:
        for name in sorted(self.bodies):
            body = self.bodies.get(name)
            if body is not None:
                self.apply(name, body.on_tick(self.now_for(name)))
        self.schedule(self.now_ms + self.tick_ms, self._tick)

    # -- commands --------------------------------------------------------------------------
    def schedule_command(self, ticket: Ticket) -> None:
        """Queue a delivery (the simulator's hook for faults)."""
        self.schedule(self.now_ms + self.command_latency_ms, lambda: self.deliver(ticket))

    def deliver(self, ticket: Ticket) -> None:
        name = ticket.target
        if name == LEADER:
            leader = self.leader()
            name = leader.name if leader is not None else ""
        body = self.bodies.get(name)
        if body is None:
            down = "no body leads" if ticket.target == LEADER else f"{ticket.target} is down"
            ticket.done, ticket.error = True, Unavailable(f"{ticket.command.TYPE}: {down}")
            return
        effects = body.on_command(ticket.command, self.now_for(name))
        failure = self.apply(name, effects)
        ticket.done, ticket.reply, ticket.error = True, effects.reply, failure or effects.error

    def shutdown_broker(self, broker_id: str) -> None:
        """Graceful shutdown of a hosted broker (it drains, then leaves)."""
        name = f"broker:{broker_id}"
        body = self.bodies[name]
        shutdown = getattr(body, "shutdown")  # noqa: B009 - only brokers have it
        self.apply(name, shutdown(self.now_for(name)))

    # -- effects (actors.runtime.executor: the one order every host follows) -----------------
    def apply(self, writer: str, effects: Effects) -> LoadBalancerError | None:
        """Append, let the writer fold what it wrote, then send; the append error, if any."""
        return run_sync(execute(self, writer, effects))

    def fenced(self, writer: str) -> bool:
        # The bodies share one log handle without transactional ids: a stale writer is refused
        # append by append instead (``WriterFenced`` from the log).
        return False

    async def append(self, writer: str, key: str, events: Sequence[Event], expected_seq: int | None,
                     effects: Effects) -> LoadBalancerError | None:
        # One log handle for every body: the append is signed as the body making it (the log
        # commits it before returning: no other append can take this signer meanwhile).
        self.stamper.signer = self.keyring.for_body(self.bodies.get(writer))
        try:
            await self.log.append(key, events, epoch=effects.epoch, expected_seq=expected_seq,
                                  causation_id=effects.causation_id)
        except LoadBalancerError as exc:
            self.failed_appends.append((writer, key, exc))
            return exc
        finally:
            self.stamper.signer = None
        return None

    def log_health(self, writer: str, healthy: bool) -> None:
        """Tell body ``writer`` (``Body.on_log_health``) whether the log just answered it."""
        body = self.bodies.get(writer)
        if body is not None:
            body.on_log_health(healthy, self.now_for(writer))

    async def fold_new(self, writer: str) -> None:
        self._ingest()
        if self.shared is not None:
            self._hand_out()
            return
        self._catch_up(writer)
        self._schedule_pump()

    def send(self, writer: str, command: Command) -> None:
        self.schedule_command(Ticket(command, route(command, self.settings.namespace_shards)))

    def _ingest(self) -> None:
        result = run_sync(self.log.read({0: self._read_next}))
        self._read_next = result.next.get(0, self._read_next)
        for item in result.items:
            if isinstance(item, DeadLetter):
                self.dead_letters.append(item)
                self.client.note_dead_letter(item)
                continue
            self.records.append(item)
            if self.shared is None:
                self.client.fold(item)  # else the shared fold folds it, as it hands it out

    def _catch_up(self, name: str) -> None:
        while name in self.bodies and self._cursor[name] < len(self.records):
            record = self.records[self._cursor[name]]
            self._cursor[name] += 1
            effects = self.bodies[name].on_event(record, self.now_for(name))
            if effects is not NOTHING:  # most records change nothing to do (100 bodies)
                self.apply(name, effects)
        # Cheap first: this runs once per body per pump (a hundred bodies).
        if self._cursor.get(name, 0) - self._snapshot_at.get(name, 0) >= self._snapshot_floor:
            self._maybe_snapshot(name)

    def _hand_out(self) -> None:
        """Shared fold: fold each record not yet handed out and hand it to its bodies, until the
        log stops growing (what they append meanwhile included). Not re-entered: a body's append
        during it is handed out by the loop already running."""
        shared = self.shared
        if shared is None or self._handing:
            return
        self._handing = True
        try:
            while self._handed < len(self.records):
                record = self.records[self._handed]
                self._handed += 1
                if shared.fold(record, self._handed - 1):
                    self._hand(shared, record)
        finally:
            self._handing = False
        self._snapshot_all()

    def _hand(self, shared: SharedFold, record: Record) -> None:
        if shared.election_moved():
            for follower in self.bodies.values():
                if isinstance(follower, Follower):
                    follower.follow_base()
        if self._others is None:
            self._others = sorted(n for n, b in self.bodies.items() if not isinstance(b, BrokerBody))
        for name in recipients(shared.last_concerned, self.bodies, self._others):
            body = self.bodies.get(name)
            if body is not None:
                effects = body.on_event(record, self.now_for(name))
                if effects is not NOTHING:
                    self.apply(name, effects)

    def _snapshot_all(self) -> None:
        # Cheap first: one comparison per hand-out; each body's policy every eighth of its floor.
        if self._handed >= self._next_snapshot_check:
            self._next_snapshot_check = self._handed + max(1, self._snapshot_floor // 8)
            for name in sorted(self.bodies):
                self._maybe_snapshot(name)

    def _schedule_pump(self) -> None:
        if not self._pump_due:
            self._pump_due = True
            self.schedule(self.now_ms + self.event_latency_ms, self._pump)

    def _pump(self) -> None:
        self._pump_due = False
        self.fold_all()
