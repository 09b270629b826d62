"""Peak memory of a process tree (psutil): ``lbctl run``'s summary line.

A background thread samples, every ``interval_s``, the process ``root`` (default: this one) and
all its descendants (Ray's GCS, raylet, workers and dashboard are children and grandchildren of
the driver that started them), and keeps the largest total seen.

Invariants:
- totals are sums over the tree at one sample: RSS counts pages shared by several processes once
  per process, PSS (where the system reports it: Linux) splits them, so PSS is the honest "memory
  of all these processes" and RSS an upper bound; both are reported;
- the peak is also at least this process's own high-water mark (``getrusage``'s ``ru_maxrss``),
  so a spike between two samples of the driver itself is not missed;
- a process that exits (or hides) between listing and reading is skipped, never an error; when
  the root itself cannot be read the sampler reports nothing (``available`` is False).
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass

import psutil

try:
    import resource
except ImportError:  # not on every system: the high-water mark is then only what was sampled
    resource = None  # type: ignore[assignment]

GONE = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess)


@dataclass(frozen=True, slots=True)
class MemoryPeak:
    """The largest totals seen (bytes) and how many processes the tree had then."""

    rss: int = 0
    pss: int = 0
    processes: int = 0
    max_processes: int = 0
    samples: int = 0
    available: bool = True

    def describe(self) -> str:
        if not self.available or self.samples == 0:
            return "peak memory: not measured (the process could not be read)"
        pss = f"{gib(self.pss)} PSS, " if self.pss else ""
        return (f"peak memory: {pss}{gib(self.rss)} RSS across {self.processes} process(es) "
                f"(up to {self.max_processes}; {self.samples} samples)")


def gib(size: int) -> str:
    if size >= 1 << 30:
        return f"{size / (1 << 30):.2f} GiB"
    return f"{size / (1 << 20):.0f} MiB"


def tree_of(root: int) -> list[int]:
    """``root`` and every descendant (empty when ``root`` is gone)."""
    try:
        top = psutil.Process(root)
        return [root, *(child.pid for child in top.children(recursive=True))]
    except GONE:
        return []


def rss_of(pid: int) -> int:
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except GONE:
        return 0


def pss_of(pid: int) -> int:
    """Proportional set size where the system reports it (Linux), else 0."""
    try:
        return int(getattr(psutil.Process(pid).memory_full_info(), "pss", 0))
    except GONE:
        return 0


def own_high_water() -> int:
    if resource is None:
        return 0
    peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere


class MemorySampler:
    """Samples a process tree in a daemon thread; ``stop`` returns the peak."""

    def __init__(self, root: int | None = None, interval_s: float = 0.5) -> None:
        self.root = root if root is not None else os.getpid()
        self.interval_s = interval_s
        self.available = psutil.pid_exists(self.root)
        self._peak = MemoryPeak(available=self.available)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lbctl-memory", daemon=True)

    def start(self) -> MemorySampler:
        if self.available:
            self._thread.start()
        return self

    def sample(self) -> MemoryPeak:
        """Take one sample now and fold it into the peak."""
        pids = tree_of(self.root)
        rss = sum(rss_of(p) for p in pids)
        pss = sum(pss_of(p) for p in pids)
        old = self._peak
        bigger = max(pss, rss) > max(old.pss, old.rss)
        self._peak = MemoryPeak(
            rss=max(old.rss, rss), pss=max(old.pss, pss),
            processes=len(pids) if bigger else old.processes,
            max_processes=max(old.max_processes, len(pids)), samples=old.samples + 1)
        return self._peak

    @property
    def peak(self) -> MemoryPeak:
        return self._peak

    def stop(self) -> MemoryPeak:
        if not self.available:
            return self._peak
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        peak = self.sample()
        hwm = own_high_water()
        if hwm > peak.rss:
            self._peak = peak = MemoryPeak(hwm, max(peak.pss, 0), peak.processes,
                                           peak.max_processes, peak.samples)
        return peak

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)
