"""``InProcLink``: the cluster's bodies in this process, on the host's virtual clock.

Built on ``actors.runtime.InProcessHost``: a simulated hour costs seconds of CPU. A kept cluster
lives in an event-log directory: ``start(..., keep_in=)`` writes the log there from the first
event, ``resume`` restarts every body from it (a restarted body rebuilds its state from the log,
never from memory: the leader campaigns for a new epoch).

Invariants:
- the log is swapped for a ``LocalEventLog`` before anything has run (an empty log) or before any
  body has reacted (resume: the history is folded, then every body is restarted from it);
- a command to a namespace shard is delivered at once, before any timer due now fires: a refused
  command appends its ``CommandRejected`` and nothing else; a command for the leader first waits
  (in cluster time) for a leader, which a resumed cluster must elect;
- the view is fed from the host's records after every call and at every step of a wait, in log
  order, each record once;
- one process at a time uses a kept log directory (an exclusive ``flock``); a second one gets
  ``Unavailable`` naming the directory.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from actors.client import ClientView
from actors.runtime import InProcessHost, Ticket, run_sync
from actors.settings import LEADER
from balancer.errors import LoadBalancerError, MalformedInput, Unavailable
from events.catalog import Command
from events.envelope import Stamper
from events.log.local import LocalEventLog
from events.log.port import Record

LEADER_WAIT_MS = 30_000


class InProcLink:
    """A ``Link`` over an ``InProcessHost``."""

    kind = "inproc"
    virtual = True

    def __init__(self, host: InProcessHost, *, lock_fd: int | None = None) -> None:
        self.host = host
        self.config, self.settings = host.config, host.settings
        self.view = ClientView(host.config, host.log)  # fed from the host's records, never started
        self._fed = 0
        self._lock_fd = lock_fd
        self._feed()

    @classmethod
    def start(cls, host: InProcessHost, *, keep_in: Path | None = None) -> InProcLink:
        """A fresh cluster; with ``keep_in`` its log is kept there (it must hold no log yet)."""
        if keep_in is None:
            return cls(host)
        lock = _lock(keep_in)
        if _history(keep_in):
            os.close(lock)
            raise MalformedInput(f"--state-dir {str(keep_in.parent)!r} already holds a cluster log; "
                                 "remove it or choose another --state-dir", value=str(keep_in.parent))
        _attach(host, keep_in)
        return cls(host, lock_fd=lock)

    @classmethod
    def resume(cls, build: Callable[[int | None], InProcessHost], log_dir: Path) -> InProcLink:
        """Restart the cluster whose log is ``log_dir``; ``build(start_ms)`` makes its host."""
        lock = _lock(log_dir)
        history = _history(log_dir)
        start_ms = max((r.envelope.ts_ms for r in history), default=0) + 1 if history else None
        host = build(start_ms)
        _attach(host, log_dir)
        # The restarted leader takes a new epoch: commands are made after its election.
        host.run_until(lambda: _elected(host), LEADER_WAIT_MS)
        return cls(host, lock_fd=lock)

    # -- the link --------------------------------------------------------------------------
    def _feed(self) -> None:
        fresh = self.host.records[self._fed:]
        if fresh:
            self._fed = len(self.host.records)
            self.view.take(fresh)

    async def call(self, target: str, command: Command,
                   timeout_s: float) -> tuple[object | None, LoadBalancerError | None]:
        ticket = Ticket(command, target)
        if target == LEADER:
            if not self.host.run_until(lambda: self.host.leader() is not None, LEADER_WAIT_MS):
                return None, Unavailable(f"{command.TYPE}: no leader elected within {LEADER_WAIT_MS} ms")
            self.host.schedule_command(ticket)
            self.host.run_until(lambda: ticket.done, int(timeout_s * 1000))
        else:
            self.host.deliver(ticket)
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

        return self.host.run_until(fed, int(timeout_s * 1000))

    def clock_s(self) -> float:
        return self.host.now_ms / 1000

    async def pause(self, seconds: float) -> None:
        await self.sleep(int(seconds * 1000))

    async def sleep(self, ms: int) -> None:
        self.host.advance(ms)
        self._feed()

    def now_ms(self) -> int:
        return self.host.now_ms

    def retry_s(self) -> float:
        return self.settings.lookup_retry_ms / 1000

    async def history(self) -> list[Record]:
        return list(self.host.records)

    def describe(self) -> Mapping[str, Any]:
        return {}  # the log directory next to cluster.json is all another process needs

    async def close(self) -> None:
        run_sync(self.host.log.close())
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None


def _lock(log_dir: Path) -> int:
    directory = log_dir.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / "lbctl.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Unavailable(f"the cluster in {str(directory)!r} is in use by another lbctl process; "
                          "wait for it to finish") from None
    return fd


def _history(log_dir: Path) -> list[Record]:
    if not log_dir.is_dir():
        return []
    log = LocalEventLog(log_dir, group_commit=False)
    try:
        return run_sync(log.read()).records
    finally:
        run_sync(log.close())


def _attach(host: InProcessHost, log_dir: Path) -> None:
    """Swap the host's memory log for the one in ``log_dir`` and restart every body from it."""
    log = LocalEventLog(log_dir, group_commit=False, stamper=Stamper(clock_ms=lambda: host.now_ms))
    history = run_sync(log.read()).records
    host.log = log  # type: ignore[assignment]  # same StoreLog API; nothing has run yet
    for record in history:
        host.records.append(record)
        host.client.fold(record)
    if history:
        for name in sorted(host.bodies):
            host.restart(name)


def _elected(host: InProcessHost) -> bool:
    """A leader leads and the client's view knows its epoch."""
    leader = host.leader()
    return leader is not None and host.epoch >= int(getattr(leader, "my_epoch", 0))
