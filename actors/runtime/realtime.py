"""LiveHost: one actor body on a real clock and a real log (the Ray-free core of the Ray host).

A ``LiveHost`` runs one body in an asyncio loop: it rebuilds the body from the log (``recover``),
follows the log (``on_event``), ticks it (``on_tick``) and answers commands (``on_command``);
``actors.runtime.ray`` wraps it in a Ray actor and gives it a transport to the other actors.

Invariants:
- the body is touched one call at a time: every call into it, and the execution of the effects
  it returns, runs under one ``asyncio.Lock`` (bodies are not thread- or task-safe);
- effects are executed exactly as ``InProcessHost.apply`` does: append (the first run of a key
  with its ``expected_seq``), then read the log up to its end and feed every new record to the
  body, in log order, applying each reaction the same way, and only then send the commands; so
  the writer folds its own records before anything else reaches it;
- commands are taken in arrival order in groups (``actors.runtime.group_commit``): the
  commands queued behind the lock that the body scopes (``batch_scope``) are decided one after
  another and appended in one transaction, and no member is answered before it committed and
  was folded; a command without a scope runs alone, as above; a group decides what the same
  commands one by one decide;
- every record reaches the body once: a ``LogCursor`` keeps the next offset of each partition,
  and the subscription and the reads after an append both go through it (the body's own
  seq bookkeeping would drop a redelivery anyway);
- a command never overtakes what caused it: it carries the log position its sender had folded
  (``after``; every send of a host carries its own), and the body folds at least that far before
  it answers, so a lookup sent right after its namespace was created, or an assignment to a broker
  that just registered, is judged on a view that holds them;
- state is never carried over in memory: a (re)started host builds a fresh body, restores the
  newest usable snapshot of it from its ``snapshots`` store (``actors.snapshots``; one that
  cannot be used is named in the log and the next older one tried) and recovers it from the
  records after that snapshot's position, or from the whole log without one (and says so in
  ``status()["start"]``); a snapshot past the log's end is dropped and a base whose following
  records retention deleted refuses the start (``actors.runtime.history``); the host writes a
  snapshot whenever ``snapshot_policy`` says so, only with nothing left to fold, so a snapshot
  is always a fold of exactly the records before its position; a log that keeps per-writer
  heads (Kafka) is told of every record folded, so a key written by two processes (a broker's,
  also written by the leader when it expires the broker) continues after the other writer's
  records;
- time is ``Clock.now_ms``: the wall clock, sped up by ``speed`` from ``origin_ms`` (every process
  of a cluster shares the origin, so they agree on the time and the envelopes carry it), or the
  cluster's paced clock, which stands still while a member is late (``actors.runtime.paced``);
- a failure inside a loop (a body bug, a log outage) is logged and the loop goes on; an append
  that fails is the command's error, as in the in-process host.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from actors.body import Body, Follower
from actors.effects import Effects
from actors.runtime.abilities import (
    CountingTransport,
    DirectoryStore,
    FencedLog,
    NotingStore,
    ObservedLog,
    SkimmingLog,
    TopicLog,
)
from actors.runtime.admission import MAX_QUEUED, Gate, InFlight
from actors.runtime.cursor import LogCursor, read_new, subscribe
from actors.runtime.executor import execute, execute_group
from actors.runtime.group_commit import MAX_GROUP, Answer, Queued, count_group, take_group
from actors.runtime.history import LogLimits, limits, past_end, require_history
from actors.runtime.specs import ClockReading
from actors.runtime.tasks import cancel_all
from actors.settings import route
from actors.snapshots import (
    DEFAULT_POLICY,
    BodySnapshot,
    SnapshotPolicy,
    SnapshotStore,
    collector_paused,
)
from balancer.errors import (
    InvalidInput,
    LoadBalancerError,
    Unavailable,
)
from events.catalog import Command, Event
from events.envelope import Envelope
from events.log.local import LocalEventLog
from events.log.port import DeadLetter, EventLog, Offsets, Record

logger = logging.getLogger(__name__)

__all__ = ["Answer", "LiveHost", "Transport"]


class Transport(Protocol):
    """Delivers commands to other bodies by name (``LEADER`` = whichever leads); ``after`` is
    the sender's log position, which the receiver folds before it answers (``LiveHost.command``)."""

    def send(self, target: str, command: Command, after: Offsets | None = None) -> None: ...

    async def close(self) -> None: ...


class LiveHost:
    """Hosts one body: recover, follow, tick, answer commands, execute effects."""

    def __init__(self, body: Body, log: EventLog, clock: ClockReading, transport: Transport, *,
                 shards: int = 1, tick_s: float = 0.1, poll_s: float = 0.01,
                 snapshots: SnapshotStore | None = None,
                 snapshot_policy: SnapshotPolicy = DEFAULT_POLICY,
                 rebuild: Callable[[], Body] | None = None, max_group: int = MAX_GROUP,
                 max_queued: int = MAX_QUEUED) -> None:
        """``snapshots``: where this body's snapshots are kept (None: none, every start folds
        the whole log); ``rebuild`` makes a fresh body if a snapshot cannot be restored;
        ``max_group``: commands per group commit at most (1: one by one); ``max_queued``: retried
        commands waiting at most before the next is answered ``Busy`` (``actors.runtime.admission``)."""
        self.body, self.log, self.clock, self.transport = body, log, clock, transport
        self._set_ordered()
        self.snapshots, self.snapshot_policy, self.rebuild = snapshots, snapshot_policy, rebuild
        self._snapshot_at = 0
        """Records folded when the last snapshot was written (or the body started)."""
        self.started: tuple[int, int] = (0, 0)
        """(records the start took from a snapshot, records it then folded from the log)."""
        self.start_notes: list[str] = []
        """What the start could not use, and why (a snapshot refused, none found)."""
        self._restored_at: Offsets | None = None
        self.shards, self.tick_s, self.poll_s = shards, tick_s, poll_s
        self.cursor = LogCursor(on_dead=self._dead_letter)
        self.failed_appends: deque[tuple[str, LoadBalancerError]] = deque(maxlen=100)
        self.counts: dict[str, int] = {"commands": 0, "appends": 0, "records": 0, "sends": 0,
                                       "behind": 0, "behind_read": 0, "snapshots": 0,
                                       "groups": 0, "grouped": 0, "largest_group": 0}
        """``behind``: commands that waited to fold what their sender had seen; ``behind_read``:
        of those, the ones the subscription did not bring in time (the log was read);
        ``groups``: group commits of two commands or more, ``grouped``: the commands in them."""
        self.max_group = max_group
        self.gate = Gate(body.name, max_queued)
        self._queued: deque[Queued] = deque()
        self._drainer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._pending: deque[Record] = deque()
        self._tasks: list[asyncio.Task[None]] = []
        self._progress = asyncio.Event()
        self._log_ok = True
        # Optional abilities, checked once (``actors.runtime.abilities``).
        self._observe: Callable[[Envelope], None] | None = log.observe if isinstance(log, ObservedLog) else None
        self._fencing: FencedLog | None = log if isinstance(log, FencedLog) else None
        if isinstance(log, SkimmingLog) and isinstance(body, Follower):
            log.skim = body.skim  # this host is the handle's one reader

    @property
    def name(self) -> str:
        return self.body.name

    # -- life ------------------------------------------------------------------------------
    def _set_ordered(self) -> None:
        if isinstance(self.body, Follower):  # across partitions an election may be read late
            self.body.ownership.ordered = self.log.partitions == 1

    async def start(self) -> None:
        """Open the log, rebuild the body from its newest snapshot and the log after it (all of
        the log without one), then follow it and tick."""
        await self.log.start()
        try:
            restored = self._checked_base(self._restore(), await limits(self.log))
        except BaseException:  # a refused start holds no producer (nor its transactional id)
            await self.log.close()
            raise
        history = await read_new(self.log, self.cursor)
        for record in history:
            self._note(record)
        with collector_paused():
            self.body.recover(history)
        self.started = (restored, len(history))
        if not restored and history:
            store = self.snapshots.directory if isinstance(self.snapshots, DirectoryStore) else "(no snapshot store)"
            self._start_note(f"no usable snapshot in {store}: folded the whole log ({len(history)} records)")
        self.counts["records"] = self._snapshot_at = restored + len(history)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._follow()), loop.create_task(self._ticks())]

    async def close(self) -> None:
        await cancel_all([*self._tasks, *([self._drainer] if self._drainer is not None else [])])
        self._tasks, self._drainer = [], None
        while self._queued:  # never taken: their callers must not wait for ever
            self._queued.popleft().settle((None, Unavailable(f"{self.name} closed")))
        async with self._lock:
            await self.transport.close()
            await self.log.close()

    # -- the three inputs ------------------------------------------------------------------
    async def command(self, command: Command, after: Mapping[int, int] | None = None) -> Answer:
        """Deliver a command; the body's reply, or the typed error (a failed append's first).

        ``after`` is the log position its sender had folded: the body folds at least as much
        before it answers, so a command never overtakes what caused it (a lookup right after
        the namespace was created, an assignment to a broker that just registered). A retried
        command that finds the body too far behind is answered ``Busy`` at once."""
        answers = await self.commands([(command, after)])
        return answers[0]

    async def commands(self, batch: Sequence[tuple[Command, Mapping[int, int] | None]]) -> list[Answer]:
        """Deliver each command of ``batch`` as ``command`` does, in order; their answers (one
        that raised is answered ``Unavailable``, the others are not touched by it).

        Admission comes first (``Gate``: a busy body refuses retried commands before it waits for
        anything); the log position the admitted commands need folded is then reached once, for
        the whole batch (the furthest of them): a thousand commands each waiting on the
        subscription were woken by every record folded, which stalled a 65,536-bundle storm."""
        loop = asyncio.get_running_loop()
        now_s = loop.time()
        answers: list[Answer | None] = []
        for command, _ in batch:
            busy = self.gate.refuse(command, now_s)
            answers.append(None if busy is None else (None, busy))
        taken = [i for i, answer in enumerate(answers) if answer is None]
        try:
            furthest: dict[int, int] = {}
            for i in taken:
                for partition, offset in (batch[i][1] or {}).items():
                    furthest[partition] = max(furthest.get(partition, 0), offset)
            if furthest:
                await self.reach(furthest)
            done = await asyncio.gather(*(self._take(batch[i][0]) for i in taken), return_exceptions=True)
        finally:
            self.gate.release(len(taken), loop.time())
        for i, answer in zip(taken, done, strict=True):
            answers[i] = ((None, Unavailable(f"{batch[i][0].TYPE} {batch[i][0].command_id}: {answer!r}"))
                          if isinstance(answer, BaseException) else answer)
        return [answer for answer in answers if answer is not None]

    async def _take(self, command: Command) -> Answer:
        """Queue an admitted command for the body (or join the same lookup's wait)."""
        shared = self.gate.waiting_lookup(command)
        if shared is not None:
            return await asyncio.shield(shared)
        loop = asyncio.get_running_loop()
        queued = Queued(command, loop.create_future())
        self._queued.append(queued)
        self.gate.lookup_queued(command, queued.answer)
        if self._drainer is None or self._drainer.done():
            # One task takes the lock for every queued command: tens of thousands of callers
            # each waiting on the lock made every acquire and release walk them all.
            self._drainer = loop.create_task(self._drain_commands())
        return await queued.answer

    async def _drain_commands(self) -> None:
        while self._queued:
            async with self._lock:
                await self._commit_group()

    async def _commit_group(self) -> None:
        """Decide the commands at the head of the queue as one group, carry it out, answer it."""
        members = take_group(self._queued, self.body, self.clock.now_ms(), self.max_group).members
        count_group(self.counts, len(members))
        try:
            if len(members) == 1:
                failure = await self._apply(members[0][1])
            else:
                failure = await execute_group(self, self.name, [effects for _, effects in members])
        except BaseException as exc:  # a closed host, an adapter's bug: its callers hear of it
            if isinstance(exc, Exception):
                logger.exception("%s: executing %d commands failed", self.name, len(members))
            for queued, _ in members:
                queued.settle((None, Unavailable(f"{self.name} failed on {queued.command.TYPE}: {exc!r}")))
            if not isinstance(exc, Exception):
                raise
            return
        for queued, effects in members:  # a failed append fails only the members it carried
            queued.settle((effects.reply, (failure if effects.append else None) or effects.error))

    async def _follow(self) -> None:
        while True:
            try:
                async for item in subscribe(self.log, dict(self.cursor.position), self.poll_s):
                    async with self._lock:
                        self._log_health(True)
                        record = self.cursor.take(item)
                        if record is not None:
                            self._pending.append(self._note(record))
                            await self._drain()
                    self._progressed()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("%s: following the log failed; resubscribing", self.name)
                async with self._lock:
                    self._log_health(False)
                await asyncio.sleep(0.5)

    async def _ticks(self) -> None:
        while True:
            try:
                async with self._lock:
                    await self._apply(self.body.on_tick(self.clock.now_ms()))
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("%s: tick failed", self.name)
            await asyncio.sleep(self.tick_s)

    async def act(self, method: str) -> Effects:
        """Call a body-specific method ``method(now_ms) -> Effects`` (a broker's ``shutdown``)."""
        action = getattr(self.body, method, None)
        if not callable(action):
            raise InvalidInput(f"{self.name} has no {method!r}", value=method)
        async with self._lock:
            effects: Effects = action(self.clock.now_ms())
            await self._apply(effects)
        return effects

    # -- effects (actors.runtime.executor: the one order every host follows) -----------------
    async def _apply(self, effects: Effects) -> LoadBalancerError | None:
        return await execute(self, self.name, effects)

    async def append_group(self, writer: str, key: str, events: Sequence[Event],
                           causation_ids: Sequence[str | None], epoch: int) -> LoadBalancerError | None:
        return await self._logged(key, self.log.append(key, events, epoch=epoch,
                                                       causation_ids=causation_ids))

    def fenced(self, writer: str) -> bool:
        return self._fencing is not None and self._fencing.fenced

    async def append(self, writer: str, key: str, events: Sequence[Event], expected_seq: int | None,
                     effects: Effects) -> LoadBalancerError | None:
        return await self._logged(key, self.log.append(key, events, epoch=effects.epoch,
                                                       expected_seq=expected_seq,
                                                       causation_id=effects.causation_id))

    async def _logged(self, key: str, appending: Awaitable[object]) -> LoadBalancerError | None:
        """Await one append; the typed error if the log refused it (kept in ``failed_appends``)."""
        try:
            await appending
        except LoadBalancerError as exc:
            self.failed_appends.append((key, exc))
            return exc
        except Exception as exc:  # a client library error the adapter did not translate
            logger.exception("%s: append under %r failed", self.name, key)
            failure = Unavailable(f"append under {key!r} failed: {exc!r}")
            self.failed_appends.append((key, failure))
            return failure
        self.counts["appends"] += 1
        return None

    def log_health(self, writer: str, healthy: bool) -> None:
        self._log_health(healthy)

    async def fold_new(self, writer: str) -> None:
        await self._ingest()
        await self._drain()

    def send(self, writer: str, command: Command) -> None:
        self.counts["sends"] += 1
        self.transport.send(route(command, self.shards), command, dict(self.cursor.seen))

    def _log_health(self, healthy: bool) -> None:
        """Tell the body (``on_log_health``) when the log stops or starts answering it."""
        if healthy == self._log_ok:
            return
        self._log_ok = healthy
        self.body.on_log_health(healthy, self.clock.now_ms())

    async def _ingest(self) -> None:
        """Queue every record of the log past the cursor (the writer's own among them)."""
        for record in await read_new(self.log, self.cursor):
            self._pending.append(self._note(record))

    async def _drain(self) -> None:
        while self._pending:
            record = self._pending.popleft()
            self.counts["records"] += 1
            await self._apply(self.body.on_event(record, self.clock.now_ms()))
        self._maybe_snapshot()

    # -- snapshots (actors.snapshots) --------------------------------------------------------
    def _restore(self) -> int:
        """Restore the newest usable snapshot into the fresh body and move the cursor past it;
        the records it holds (0: none usable, the whole log is folded)."""
        body = self.body
        if self.snapshots is None or not isinstance(body, Follower):
            return 0
        with collector_paused():
            snapshot = self.snapshots.newest(body.name, body.snapshot_identity())
        if snapshot is None:
            return 0
        try:
            body.restore_state(snapshot.state)
        except Exception:
            if self.rebuild is None:
                raise
            logger.exception("%s: snapshot at %s not restored; folding the whole log",
                             self.name, dict(snapshot.position))
            self._fresh_body()
            return 0
        self._set_ordered()
        self.cursor.position = dict(snapshot.position)
        self.cursor.seen = dict(snapshot.position)
        self._restored_at = dict(snapshot.position)
        return snapshot.records

    def _checked_base(self, restored: int, found: LogLimits) -> int:
        """``restored``, or 0 once a snapshot past the log's end is dropped; ``HistoryMissing``
        if the log lost records after the base (``actors.runtime.history``)."""
        where = f"Kafka topic {self.log.topic}" if isinstance(self.log, TopicLog) else "the log"
        if restored and (refused := past_end(self.cursor.position, found, where)) is not None:
            self._start_note(refused)
            self._fresh_body()
            restored = 0
        require_history(self.cursor.position, found, where, snapshot=bool(restored))
        return restored

    def _fresh_body(self) -> None:
        """Start again from offset 0 with a body that no snapshot touched."""
        if self.rebuild is None:
            raise InvalidInput(f"{self.name}: a snapshot was refused and nothing can rebuild the body")
        self.body = self.rebuild()
        self._set_ordered()
        self.cursor.position, self.cursor.seen, self._restored_at = {}, {}, None

    def _start_note(self, note: str) -> None:
        self.start_notes.append(note)
        logger.warning("%s: %s", self.name, note)

    def _maybe_snapshot(self) -> None:
        body, store = self.body, self.snapshots
        if store is None or self._pending or not isinstance(body, Follower):
            return
        folded = self.counts["records"]
        if not self.snapshot_policy.due(folded - self._snapshot_at, body.state_size()):
            return
        try:
            store.save(BodySnapshot(body.name, body.snapshot_identity(), dict(self.cursor.position),
                                    folded, body.snapshot_state()))
            self.counts["snapshots"] += 1
        except Exception:  # a full disk must not stop the body: the log is still the truth
            logger.exception("%s: writing a snapshot failed", self.name)
        self._snapshot_at = folded

    def _note(self, record: Record) -> Record:
        if self._observe is not None:
            self._observe(record.envelope)
        return record

    # -- causality -------------------------------------------------------------------------
    def _progressed(self) -> None:
        progress, self._progress = self._progress, asyncio.Event()
        progress.set()

    async def reach(self, target: Mapping[int, int], timeout_s: float = 5.0) -> None:
        """Fold at least up to ``target``: wait for the subscription (Kafka pushes within a few
        ms), else read the log (at once for the embedded log: a read there is cheap)."""
        if self.cursor.reached(target):
            return
        self.counts["behind"] += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (0.0 if isinstance(self.log, LocalEventLog) else min(0.2, timeout_s))
        while not self.cursor.reached(target) and loop.time() < deadline:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._progress.wait(), deadline - loop.time())
        if not self.cursor.reached(target):
            self.counts["behind_read"] += 1
            try:
                await asyncio.wait_for(self.sync(target), timeout_s)
            except TimeoutError:
                logger.warning("%s: log position %s not reached; answering anyway", self.name, target)

    # -- inspection ------------------------------------------------------------------------
    async def sync(self, target: Mapping[int, int] | None = None) -> Offsets:
        """Fold the log at least up to ``target`` (default: its end now); the position."""
        async with self._lock:
            await self._ingest()
            await self._drain()
            while target is not None and not self.cursor.reached(target):
                await asyncio.sleep(self.poll_s)
                await self._ingest()
                await self._drain()
            return dict(self.cursor.position)

    async def snapshot(self, target: Mapping[int, int] | None = None) -> dict[str, Any]:
        """The body's ownership view once caught up (``OwnershipProjection.snapshot``, under
        ``ownership``) and the log position it is a fold of (``position``: partition -> next offset)."""
        if not isinstance(self.body, Follower):
            raise InvalidInput(f"{self.name} keeps no ownership view")
        position = await self.sync(target)
        return {"ownership": self.body.ownership.snapshot(), "position": position}

    def _dead_letter(self, letter: DeadLetter) -> None:
        if isinstance(self.body, Follower):  # a body that folds names it in its view
            self.body.note_dead_letter(letter)

    def status(self) -> dict[str, Any]:
        body = self.body
        return {
            "name": self.name, "pid": os.getpid(), "now_ms": self.clock.now_ms(),
            **body.status(),
            "position": dict(self.cursor.position), "counts": dict(self.counts),
            "admission": self.gate.status(),
            "failed_appends": [(key, exc.code, exc.message) for key, exc in self.failed_appends],
            **self._sends(),
            "dead_letters": self.cursor.dead_letters,
            "start": {"from_snapshot": self.started[0], "folded": self.started[1],
                      "snapshot_position": self._restored_at,
                      "notes": [*self._store_notes(), *self.start_notes]},
        }

    def _sends(self) -> dict[str, int]:
        sent = self.transport
        out = {"failed_sends": 0, "send_batches": 0}
        if isinstance(sent, CountingTransport):
            out = {"failed_sends": sent.failed_sends, "send_batches": sent.batches}
        inflight = getattr(sent, "inflight", None)
        if isinstance(inflight, InFlight):  # retries not sent, and busy answers heard
            out.update(coalesced_sends=inflight.coalesced, busy_answers=inflight.busy)
        return out

    def _store_notes(self) -> list[str]:
        return list(self.snapshots.notes) if isinstance(self.snapshots, NotingStore) else []
