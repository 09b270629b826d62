"""Peak memory of a process tree, read from ``/proc`` (no psutil): ``lbctl run``'s summary line.

A background thread samples, every ``interval_s``, the process ``root`` (default: this one) and
all its descendants (Ray's GCS, raylet, workers and dashboard are children and grandchildren of
the driver that started them), and keeps the largest total seen.

Invariants:
- totals are sums over the tree at one sample: RSS (``/proc/PID/statm``) counts pages shared by
  several processes once per process, PSS (``/proc/PID/smaps_rollup``) splits them, so PSS is the
  honest "memory of all these processes" and RSS an upper bound; both are reported;
- the peak is also at least this process's own high-water mark (``VmHWM``), so a spike between
  two samples of the driver itself is not missed;
- a process that exits between listing and reading is skipped, never an error; on a system
  without ``/proc`` the sampler reports nothing (``available`` is False).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


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
            return "peak memory: not measured (no /proc)"
        pss = f"{gib(self.pss)} PSS, " if self.pss else ""
        return (f"peak memory: {pss}{gib(self.rss)} RSS across {self.processes} process(es) "
                f"(up to {self.max_processes}; {self.samples} samples)")


def gib(size: int) -> str:
    if size >= 1 << 30:
        return f"{size / (1 << 30):.2f} GiB"
    return f"{size / (1 << 20):.0f} MiB"


def children_map() -> dict[int, list[int]]:
    """ppid -> pids, for every process visible in /proc."""
    tree: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces or ')': split after the last.
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1:
            tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def tree_of(root: int) -> list[int]:
    """``root`` and every descendant."""
    tree, out, todo = children_map(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(tree.get(pid, ()))
    return out


def rss_of(pid: int) -> int:
    try:
        return int((PROC / str(pid) / "statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _kib_field(path: Path, name: str) -> int:
    try:
        for line in path.read_text().splitlines():
            if line.startswith(name):
                return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def pss_of(pid: int) -> int:
    return _kib_field(PROC / str(pid) / "smaps_rollup", "Pss:")


def own_high_water() -> int:
    return _kib_field(PROC / "self" / "status", "VmHWM:")


class MemorySampler:
    """Samples a process tree in a daemon thread; ``stop`` returns the peak."""

    def __init__(self, root: int | None = None, interval_s: float = 0.5) -> None:
        self.root = root if root is not None else os.getpid()
        self.interval_s = interval_s
        self.available = (PROC / str(self.root)).exists()
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
