"""A stack sampler for an actor's event loop thread: where a live actor spends its wall time,
without py-spy (which needs ptrace) and without cProfile's per-call cost.

Invariants:
- it only reads: a daemon thread looks at the sampled thread's current frame every
  ``interval_s`` (``sys._current_frames``) and counts, per function, the samples it was running
  in (``self``) and the samples it was anywhere on the stack (``total``, once per sample);
- it is off unless asked for: ``from_env`` starts one only for a body named in
  ``BB_SAMPLE_BODIES`` (comma-separated), writing its table as JSON to
  ``BB_SAMPLE_DIR/<body>.json`` every ``WRITE_S`` seconds and at ``stop`` (a killed actor leaves
  its last table); an idle loop (waiting in its selector) counts as ``idle``, not as work.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

WRITE_S = 5.0
IDLE = ("select", "poll", "epoll", "_run_once")


def _name(code: Any) -> str:
    return f"{Path(code.co_filename).name}:{code.co_name}"


class StackSampler:
    """Samples one thread's stack every ``interval_s`` seconds until ``stop``."""

    def __init__(self, thread_id: int, interval_s: float = 0.005, out: Path | None = None) -> None:
        self.thread_id, self.interval_s, self.out = thread_id, interval_s, out
        self.samples = 0
        self.idle = 0
        self.own: Counter[str] = Counter()
        self.total: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stack-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        self.write()

    def _run(self) -> None:
        last_write = time.monotonic()
        while not self._stop.wait(self.interval_s):
            self.sample()
            if self.out is not None and time.monotonic() - last_write >= WRITE_S:
                self.write()
                last_write = time.monotonic()

    def sample(self) -> None:
        frame = sys._current_frames().get(self.thread_id)
        if frame is None:
            return
        self.samples += 1
        leaf = _name(frame.f_code)
        if frame.f_code.co_name in IDLE[:3] or (frame.f_code.co_name == IDLE[3] and frame.f_back is None):
            self.idle += 1
            return
        self.own[leaf] += 1
        seen: set[str] = set()
        while frame is not None:
            name = _name(frame.f_code)
            if name not in seen:
                seen.add(name)
                self.total[name] += 1
            frame = frame.f_back

    def table(self, top: int = 25) -> dict[str, Any]:
        busy = max(1, self.samples - self.idle)
        return {"samples": self.samples, "idle": self.idle, "busy": self.samples - self.idle,
                "self": [(n, c, round(100 * c / busy, 1)) for n, c in self.own.most_common(top)],
                "total": [(n, c, round(100 * c / busy, 1)) for n, c in self.total.most_common(top)]}

    def write(self) -> None:
        if self.out is None:
            return
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.table()), encoding="utf-8")
        tmp.replace(self.out)


def from_env(body_name: str) -> StackSampler | None:
    """A started sampler of the calling thread if ``BB_SAMPLE_BODIES`` names ``body_name``."""
    wanted = {n.strip() for n in os.environ.get("BB_SAMPLE_BODIES", "").split(",") if n.strip()}
    if body_name not in wanted:
        return None
    folder = Path(os.environ.get("BB_SAMPLE_DIR", "."))
    folder.mkdir(parents=True, exist_ok=True)
    sampler = StackSampler(threading.get_ident(), out=folder / f"{body_name.replace(':', '_')}.json")
    sampler.start()
    return sampler
