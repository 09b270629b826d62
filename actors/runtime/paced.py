"""The paced clock: one cluster time that every process of a Ray cluster on one machine reads,
and that stands still for a late process instead of running ahead of it.

On the plain ``Clock`` every process computes cluster time from its own wall clock: a process
the machine did not run for a while (a busy host, a stall) then looks late to the others by
that wall time x ``speed``, and the leader expires a broker that was merely late.

Shape: a coordinator (``Pacer``, a thread of the process that started the cluster) writes the
schedule into a small memory-mapped file (``ClockFile``, on tmpfs when there is one):
cluster time at wall time t is ``virtual_base + (min(t, horizon) - wall_base) x speed``. A read
is one look at the mapped file and the wall clock, never a call to another process. Each member
(a body's actor) touches its own heartbeat file every ``beat_s`` from its event loop
(``Heartbeat``); the pacer keeps the horizon at the oldest live heartbeat + ``lease_s``. A member
whose loop is late thus stops cluster time for every process at the same instant, within
``lease_s``; once it beats again the pacer rebases, and time goes on from where it stood.

Invariants:
- a reader's time never goes back (it holds its last value) and is never ahead of the schedule:
  a reader of an older schedule is capped at that schedule's (earlier) horizon;
- the schedule's function changes only after a stop, its new base being the old one's value at
  its horizon, so nobody's time jumps; otherwise only the horizon moves, and only forward;
- a member whose process is gone is not waited for, nor one silent past ``max_wait_s`` (named
  in ``PaceReport.gave_up``): a broker really killed is still expired, a hung one at last too;
- ``Pacing`` is pure (wall times and heartbeats are passed in); the file, the heartbeats and the
  thread are its shells.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mmap
import os
import shutil
import struct
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import psutil

logger = logging.getLogger(__name__)

CLOCK_FILE = "clock"
MEMBERS = "members"
_SEQ = struct.Struct("<Q")
_FIELDS = struct.Struct("<dddd")
SIZE = _SEQ.size + _FIELDS.size
PACER = "the clock's own thread"
"""Whom a stop is put down to when every member was current (the pacer was late)."""


@dataclass(frozen=True, slots=True)
class PacingSpec:
    """Where a cluster's paced clock lives and how tightly it follows its members (shipped to
    every actor in ``HostSpec``)."""

    directory: str
    lease_s: float
    """Wall seconds cluster time runs past the oldest heartbeat of a live member."""
    beat_s: float
    """Wall seconds between two heartbeats of a member."""
    max_wait_s: float = 30.0
    """A member silent this long (wall seconds) is no longer waited for."""

    @classmethod
    def for_timeout(cls, directory: str, session_timeout_ms: int, speed: float,
                    max_wait_s: float = 30.0) -> PacingSpec:
        """A lease of a sixth of the session timeout's wall time (between 20 ms and 1 s): a member
        stopped for a whole lease is then still far from being expired."""
        lease = min(1.0, max(0.02, session_timeout_ms / 1000.0 / speed / 6))
        return cls(directory, lease, lease / 4, max_wait_s)


@dataclass(frozen=True, slots=True)
class Schedule:
    """Cluster time as a function of wall time (``time.time()`` seconds)."""

    virtual_base_ms: float
    wall_base_s: float
    speed: float
    horizon_s: float

    def at(self, wall_s: float) -> float:
        """Cluster time (ms) at ``wall_s``: it stands still past the horizon."""
        moved = max(0.0, min(wall_s, self.horizon_s) - self.wall_base_s)
        return self.virtual_base_ms + moved * self.speed * 1000.0


@dataclass(frozen=True, slots=True)
class PaceReport:
    """How far cluster time fell behind the wall clock, and for whom it waited."""

    stood_s: float
    """Wall seconds cluster time stood still (waiting for late members)."""
    stops: int
    waited: dict[str, float]
    """Member -> wall seconds cluster time stood still for it."""
    gave_up: list[str]
    """Members silent past ``max_wait_s``, no longer waited for."""

    def describe(self) -> str:
        if not self.stops:
            return "cluster time never stood still for a late actor"
        most = sorted(self.waited.items(), key=lambda kv: -kv[1])[:3]
        who = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in most)
        text = f"cluster time stood still {self.stops} times, {self.stood_s:.1f} s of wall time in all ({who})"
        if self.gave_up:
            text += f"; stopped waiting for {', '.join(self.gave_up)} (silent for too long)"
        return text


@dataclass
class Pacing:
    """The pure pacer: from the members' heartbeats to the schedule."""

    schedule: Schedule
    lease_s: float
    max_wait_s: float
    stood_s: float = 0.0
    stops: int = 0
    waited: dict[str, float] = field(default_factory=dict)
    gave_up: list[str] = field(default_factory=list)
    _blamed: str | None = None

    def step(self, now_s: float, beats: Mapping[str, float]) -> bool:
        """Move the schedule on from the live members' last heartbeats (wall seconds); True if
        it changed."""
        live = {name: beat for name, beat in beats.items() if now_s - beat <= self.max_wait_s}
        for name in beats.keys() - live.keys():
            if name not in self.gave_up:
                self.gave_up.append(name)
                logger.warning("paced clock: %s silent for %.0f s: no longer waited for", name, self.max_wait_s)
        oldest = min(live, key=live.__getitem__) if live else None
        horizon = (live[oldest] if oldest is not None else now_s) + self.lease_s
        current = self.schedule
        if now_s > current.horizon_s:  # standing still since the horizon
            if horizon <= now_s:
                self._blamed = self._blamed or oldest
                return False
            # Every member current at the first look: the pacer itself was late.
            blamed, self._blamed = self._blamed or PACER, None
            stood = now_s - current.horizon_s
            self.stood_s += stood
            self.stops += 1
            self.waited[blamed] = self.waited.get(blamed, 0.0) + stood
            self.schedule = Schedule(current.at(current.horizon_s), now_s, current.speed, horizon)
            return True
        if horizon > current.horizon_s:
            self.schedule = replace(current, horizon_s=horizon)
            return True
        return False

    def report(self) -> PaceReport:
        return PaceReport(self.stood_s, self.stops, dict(self.waited), list(self.gave_up))


class ClockFile:
    """The schedule in a memory-mapped file: one writer (the pacer), any number of readers; a
    sequence number around each write lets a reader retry a torn read."""

    def __init__(self, path: str, *, writable: bool = False) -> None:
        flags = os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY
        fd = os.open(path, flags, 0o600)
        try:
            if writable:
                os.ftruncate(fd, SIZE)
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
            self._map = mmap.mmap(fd, SIZE, prot=prot)
        finally:
            os.close(fd)
        self._seq = 0
        self._read: tuple[int, Schedule | None] = (-1, None)
        """The sequence number and schedule last read: a read that finds it unchanged is one
        unpack (the schedule changes a few times a second, the clock is read per event)."""

    def write(self, schedule: Schedule) -> None:
        self._seq += 1
        _SEQ.pack_into(self._map, 0, self._seq * 2 - 1)  # odd: being written
        _FIELDS.pack_into(self._map, _SEQ.size, schedule.virtual_base_ms, schedule.wall_base_s,
                          schedule.speed, schedule.horizon_s)
        _SEQ.pack_into(self._map, 0, self._seq * 2)

    def read(self) -> Schedule:
        seq, known = self._read
        (now,) = _SEQ.unpack_from(self._map, 0)
        if now == seq and known is not None:
            return known
        while True:
            (before,) = _SEQ.unpack_from(self._map, 0)
            fields = _FIELDS.unpack_from(self._map, _SEQ.size)
            (after,) = _SEQ.unpack_from(self._map, 0)
            if before == after and before % 2 == 0:
                schedule = Schedule(*fields)
                self._read = (before, schedule)
                return schedule

    def close(self) -> None:
        with contextlib.suppress(BufferError, ValueError):
            self._map.close()


class PacedClock:
    """Cluster time read from a cluster's ``ClockFile`` (reads as ``specs.Clock`` does)."""

    def __init__(self, spec: PacingSpec, speed: float, origin_ms: int) -> None:
        self.speed, self.origin_ms = speed, origin_ms
        self.file = ClockFile(str(Path(spec.directory) / CLOCK_FILE))
        self._last = 0

    def now_ms(self) -> int:
        value = max(self._last, int(self.file.read().at(time.time())))
        self._last = value
        return value

    def wall_s(self, virtual_ms: float) -> float:
        """How long ``virtual_ms`` takes on the wall clock when time does not stand still."""
        return virtual_ms / 1000.0 / self.speed


def readable(spec: PacingSpec | None) -> bool:
    """True if this process can read the paced clock of ``spec`` (it runs on its machine)."""
    return spec is not None and (Path(spec.directory) / CLOCK_FILE).is_file()


class Heartbeat:
    """A member's heartbeat: its file in ``members/``, touched every ``beat_s`` from the event
    loop that runs its body (a late loop is a late heartbeat)."""

    def __init__(self, spec: PacingSpec, name: str) -> None:
        self.spec = spec
        self.path = Path(spec.directory) / MEMBERS / name
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.path.write_text(str(os.getpid()))
        self._task = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        while True:
            with contextlib.suppress(OSError):  # a directory removed at close
                os.utime(self.path)
            await asyncio.sleep(self.spec.beat_s)

    async def stop(self) -> None:
        """Leave: no longer waited for."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(OSError):
            if self.path.read_text() == str(os.getpid()):  # not a restarted successor's
                self.path.unlink()


def member_beats(directory: Path, now_s: float, lease_s: float) -> dict[str, float]:
    """Each member's last heartbeat; a member silent past ``lease_s`` whose process is gone is
    left out (a killed actor)."""
    beats: dict[str, float] = {}
    with contextlib.suppress(FileNotFoundError), os.scandir(directory) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                beat = entry.stat().st_mtime
                if now_s - beat <= lease_s or _alive(Path(entry.path).read_text()):
                    beats[entry.name] = beat
    return beats


def _alive(pid_text: str) -> bool:
    try:
        status: str = psutil.Process(int(pid_text)).status()
        return bool(status != psutil.STATUS_ZOMBIE)
    except (ValueError, psutil.Error):
        return False


class Pacer:
    """The coordinator: a daemon thread that steps ``Pacing`` every ``beat_s / 2`` and writes
    the schedule; it owns the clock's directory (made by ``start``, removed by ``close``)."""

    def __init__(self, spec: PacingSpec, origin_ms: int, speed: float) -> None:
        self.spec = spec
        now = time.time()
        self.pacing = Pacing(Schedule(origin_ms, origin_ms / 1000.0, speed, now + spec.lease_s),
                             spec.lease_s, spec.max_wait_s)
        (Path(spec.directory) / MEMBERS).mkdir(parents=True, exist_ok=True)
        self.file = ClockFile(str(Path(spec.directory) / CLOCK_FILE), writable=True)
        self.file.write(self.pacing.schedule)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="paced-clock", daemon=True)
        self._thread.start()

    @classmethod
    def make(cls, session_timeout_ms: int, origin_ms: int, speed: float) -> Pacer:
        """A pacer in a fresh directory (on tmpfs when the machine has one)."""
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        directory = tempfile.mkdtemp(prefix="bundle-balancer-clock-", dir=shm)
        return cls(PacingSpec.for_timeout(directory, session_timeout_ms, speed), origin_ms, speed)

    def _run(self) -> None:
        members = Path(self.spec.directory) / MEMBERS
        while not self._stop.wait(self.spec.beat_s / 2):
            try:
                now = time.time()
                beats = member_beats(members, now, self.spec.lease_s)
                with self._lock:
                    if self.pacing.step(now, beats):
                        self.file.write(self.pacing.schedule)
            except Exception:  # the clock must keep going: a stuck horizon stops the cluster
                logger.exception("paced clock: a step failed")

    def report(self) -> PaceReport:
        with self._lock:
            return self.pacing.report()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        self.file.close()
        shutil.rmtree(self.spec.directory, ignore_errors=True)
