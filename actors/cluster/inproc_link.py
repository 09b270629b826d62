"""``InProcLink``: the cluster's bodies in this process, on the host's virtual clock.

Built on ``actors.runtime.InProcessHost``: a simulated hour costs seconds of CPU. A kept cluster
lives in an event-log directory: ``start(..., keep_in=)`` writes the log there from the first
event; ``resume`` folds it into the client's view and nothing more, so a read verb (a lookup of
an owned bundle, a listing, a load report) answers from that fold and appends nothing. The
bodies start only when something needs them (a command, cluster time passing, a body's status):
then every body restarts from the log (a restarted body rebuilds its state from the log, never
from memory: the leader campaigns for a new epoch), before the command is made.

Invariants:
- the log is swapped for a ``LocalEventLog`` before anything has run (an empty log) or before any
  body has reacted (resume: the history is folded into the view at once, and into the bodies,
  restarted from it, only when they are first needed: ``open_for_commands``);
- a command to a namespace shard is delivered at once, before any timer due now fires: a refused
  command appends its ``CommandRejected`` and nothing else; a command for the leader first waits
  (in cluster time) for a leader, which a resumed cluster must elect;
- the view is fed from the host's records after every call and at every step of a wait, in log
  order, each record once;
- one process at a time uses a kept log directory (``lock_directory``, which a Ray-hosted
  embedded cluster takes too); a second one gets ``Unavailable`` naming the directory.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.body import Body, Follower
from actors.client import ClientView
from actors.cluster.lock import lock_directory
from actors.deploy import SIGNING_SUBDIR
from actors.runtime import InProcessHost, Ticket, run_sync
from actors.runtime.signers import Keyring
from actors.settings import LEADER, broker_body_name
from actors.workload import Capacity
from balancer.errors import (
    InvalidInput,
    LoadBalancerError,
    MalformedInput,
    Unavailable,
    UnknownBroker,
)
from events.bounds import clock_start
from events.catalog import Command
from events.envelope import Stamper, new_cluster_id
from events.log.local import LocalEventLog
from events.log.port import (
    FOUNDING_RECORDS,
    ReadResult,
    Record,
    dropped_note,
    founding_cluster,
    refuse_foreign,
)
from events.signing import keyring_root

LEADER_WAIT_MS = 30_000
logger = logging.getLogger(__name__)


class InProcLink:
    """A ``Link`` over an ``InProcessHost``."""

    kind = "inproc"
    virtual = True

    def __init__(self, host: InProcessHost, *, lock_fd: int | None = None,
                 cluster_id: str | None = None, kept: _Kept | None = None) -> None:
        self.host = host
        self.cluster_id = cluster_id
        self.config, self.settings = host.config, host.settings
        self.view = ClientView(host.config, host.log)  # fed from the host's records, never started
        self._fed = self._fed_dead = 0
        self._lock_fd = lock_fd
        self._kept = kept
        """A resumed cluster whose bodies have not started yet (None: they run)."""
        if kept is not None:  # the view folds the kept log now; the bodies when first needed
            self.view.log = kept.log
            for letter in kept.read.dead_letters:
                self.view.note_dead_letter(letter)
            self.view.take(kept.read.records)
            self._fed, self._fed_dead = len(kept.read.records), len(kept.read.dead_letters)
        self._feed()

    @classmethod
    def start(cls, host: InProcessHost, *, keep_in: Path | None = None) -> InProcLink:
        """A fresh cluster; with ``keep_in`` its log is kept there (it must hold no log yet)."""
        if keep_in is None:
            return cls(host)
        lock = lock_directory(keep_in)
        if _history(keep_in):
            os.close(lock)
            raise MalformedInput(f"--state-dir {str(keep_in.parent)!r} already holds a cluster log; "
                                 "remove it or choose another --state-dir", value=str(keep_in.parent))
        cluster_id = new_cluster_id()
        _attach(host, keep_in, cluster_id)
        return cls(host, lock_fd=lock, cluster_id=cluster_id)

    @classmethod
    def resume(cls, build: Callable[[int | None], InProcessHost], log_dir: Path,
               cluster_id: str | None = None) -> InProcLink:
        """The cluster whose log is ``log_dir``, folded into the client's view; ``build(start_ms)``
        makes its host, whose bodies restart from the log when first needed
        (``open_for_commands``); ``cluster_id`` (what the state file recorded): a log of another
        cluster is refused."""
        lock = lock_directory(log_dir)
        try:
            history = _history(log_dir)
            if cluster_id is not None:
                refuse_foreign(history[:FOUNDING_RECORDS], cluster_id, f"the log in {log_dir}")
        except BaseException:
            os.close(lock)
            raise
        cluster_id = cluster_id or founding_cluster(history) or new_cluster_id()
        # Clamped: a record stamped near the end of time must not start a clock that runs out.
        start_ms = clock_start(max(r.envelope.ts_ms for r in history)) if history else None
        host = build(start_ms)
        kept = _open(host, log_dir, cluster_id)
        return cls(host, lock_fd=lock, cluster_id=cluster_id, kept=kept)

    async def open_for_commands(self) -> None:
        """Restart every body of a resumed cluster from its log (once) and wait for the leader
        it elects, so a command made next carries the new epoch; a running cluster: nothing."""
        self._run()

    def _run(self) -> InProcessHost:
        """The host with its bodies running (restarted from the kept log on first use)."""
        kept, self._kept = self._kept, None
        if kept is not None:
            self.host.adopt(kept.read.records, kept.read.dead_letters, kept.read.next.get(0, 0))
            # The restarted leader takes a new epoch: commands are made after its election.
            self.host.run_until(lambda: _elected(self.host), LEADER_WAIT_MS)
            self._feed()
        return self.host

    # -- the link --------------------------------------------------------------------------
    def _feed(self) -> None:
        # The host read the log for the view: what it could not read is named there too.
        for letter in self.host.dead_letters[self._fed_dead:]:
            self.view.note_dead_letter(letter)
        self._fed_dead = len(self.host.dead_letters)
        fresh = self.host.records[self._fed:]
        if fresh:
            self._fed = len(self.host.records)
            self.view.take(fresh)

    async def call(self, target: str, command: Command,
                   timeout_s: float) -> tuple[object | None, LoadBalancerError | None]:
        ticket, host = Ticket(command, target), self._run()
        if target == LEADER:
            if not host.run_until(lambda: host.leader() is not None, LEADER_WAIT_MS):
                return None, Unavailable(f"{command.TYPE}: no leader elected within {LEADER_WAIT_MS} ms")
            host.schedule_command(ticket)
            host.run_until(lambda: ticket.done, int(timeout_s * 1000))
        else:
            host.deliver(ticket)
        self._feed()
        if not ticket.done:
            return None, Unavailable(f"{command.TYPE} {command.command_id}: no answer within {timeout_s:g} s")
        return ticket.reply, ticket.error

    async def catch_up(self) -> None:
        self._feed()

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        def fed() -> bool:
            self._feed()
            return predicate()

        return self._run().run_until(fed, int(timeout_s * 1000))

    def clock_s(self) -> float:
        return self.host.now_ms / 1000

    async def pause(self, seconds: float) -> None:
        await self.sleep(int(seconds * 1000))

    async def sleep(self, ms: int) -> None:
        self._run().advance(ms)
        self._feed()

    def now_ms(self) -> int:
        return self.host.now_ms

    def retry_s(self) -> float:
        return self.settings.lookup_retry_ms / 1000

    async def history(self) -> list[Record]:
        if self._kept is not None:  # read from the fold of the kept log: no body started
            return list(self._kept.read.records)
        return list(self.host.records)

    def describe(self) -> Mapping[str, Any]:
        # The log directory next to the state file is where another process finds the cluster.
        return {} if self.cluster_id is None else {"cluster_id": self.cluster_id}

    def cluster_s(self, ms: int) -> float:
        return ms / 1000

    # -- the actors' life (actors.cluster.life) ---------------------------------------------
    async def spawn_broker(self, broker_id: str | None, failure_domain: str | None,
                           capacity: Capacity | None, options: Mapping[str, Any] | None) -> str:
        if options:
            raise InvalidInput(f"Ray actor options {sorted(options)} apply to Ray only; this cluster "
                               "runs in this process", value=sorted(options))
        host = self._run()
        broker_id = broker_id or next(f"broker-{i}" for i in itertools.count(1)
                                      if broker_body_name(f"broker-{i}") not in host.bodies)
        if broker_body_name(broker_id) in host.bodies:
            raise InvalidInput(f"broker {broker_id!r} is already hosted", value=broker_id)
        host.add_broker(broker_id, failure_domain, capacity)
        return broker_id

    def kill(self, name: str, *, broker_id: str | None = None, restart: bool) -> None:
        self._live(name, broker_id)
        self.host.crash(name)
        if restart:
            self.host.restart(name)

    async def ask_broker(self, broker_id: str, method: str) -> None:
        name = broker_body_name(broker_id)
        action = getattr(self._live(name, broker_id), method, None)
        if not callable(action):
            raise InvalidInput(f"{name} has no {method!r}", value=method)
        self.host.apply(name, action(self.host.now_for(name)))
        self._feed()

    async def retire(self, name: str) -> None:
        host = self._run()
        if name in host.bodies:
            host.crash(name)

    def _live(self, name: str, broker_id: str | None) -> Body:
        bodies = self._run().bodies
        body = bodies.get(name)
        if body is None:
            hosted = ", ".join(sorted(bodies))
            if broker_id is not None:
                raise UnknownBroker(f"broker {broker_id!r} is not running in this cluster; running: "
                                    f"{hosted}", value=broker_id)
            raise InvalidInput(f"no running body {name!r}; running: {hosted}", value=name)
        return body

    async def snapshots(self, target: Mapping[int, int], timeout_s: float) -> dict[str, dict[str, Any]]:
        """Each body's view once it has folded every record (the host is one process)."""
        self._run().fold_all()
        return {name: {"ownership": body.ownership.snapshot(), "position": self.host.position_of(name)}
                for name, body in sorted(self.host.bodies.items()) if isinstance(body, Follower)}

    async def statuses(self, timeout_s: float | None = None) -> dict[str, dict[str, Any]]:
        # One process: every live body answers at once (``timeout_s`` is for hosts that wait).
        # The bodies' own words: a resumed cluster starts them to be asked.
        self._run()
        out: dict[str, dict[str, Any]] = {
            name: {"name": name, "now_ms": self.host.now_for(name), **body.status(),
                   "position": self.host.position_of(name)}
            for name, body in sorted(self.host.bodies.items())}
        out.update({name: {"error": f"{name} crashed"} for name in sorted(self.host.crashed)})
        return out

    async def close(self) -> None:
        run_sync(self.host.log.close())
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None


def _history(log_dir: Path) -> list[Record]:
    if not log_dir.is_dir():
        return []
    log = LocalEventLog(log_dir, group_commit=False)
    try:
        return run_sync(log.read()).records
    finally:
        run_sync(log.close())


@dataclass(frozen=True, slots=True)
class _Kept:
    """A kept log opened for a host whose bodies have not folded it yet."""

    log: LocalEventLog
    read: ReadResult


def _open(host: InProcessHost, log_dir: Path, cluster_id: str) -> _Kept:
    """Swap the host's memory log for the one in ``log_dir`` (nothing has run yet) and read it;
    the bodies fold it when they start (``InProcessHost.adopt``)."""
    host.keyring = Keyring(keyring_root(log_dir / SIGNING_SUBDIR))  # the root the log resumes with
    host.stamper = Stamper(clock_ms=lambda: host.now_ms, cluster_id=cluster_id)
    log = LocalEventLog(log_dir, group_commit=False, stamper=host.stamper)
    read = run_sync(log.read())
    if read.dropped:  # only when the operator retained past these bodies (--ignore inproc:bodies)
        logger.warning("the log in %s: %s; every body folds only what is left", log_dir,
                       dropped_note(read.dropped))
    host.log = log  # type: ignore[assignment]  # same StoreLog API; nothing has run yet
    return _Kept(log, read)


def _attach(host: InProcessHost, log_dir: Path, cluster_id: str) -> None:
    """Swap the host's memory log for the one in ``log_dir`` and restart every body from it."""
    kept = _open(host, log_dir, cluster_id)
    host.adopt(kept.read.records, kept.read.dead_letters, kept.read.next.get(0, 0))


def _elected(host: InProcessHost) -> bool:
    """A leader leads and the client's view knows its epoch."""
    leader = host.leader()
    return leader is not None and host.epoch >= int(getattr(leader, "my_epoch", 0))
