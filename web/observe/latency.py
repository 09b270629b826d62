"""How long unloads, releases, assignments and lookups take, on the web service's own clock.

``Latencies.take(record, now_ms, live)`` follows a bundle through its records and observes, in
milliseconds, the phases PIP-307's ``UnloadManager`` times on a Pulsar broker, plus two of ours:

- ``unload`` (source broker): from the move's decision (``UnloadRequested``/``TransferPrepared``:
  Pulsar's Releasing) until the bundle is owned again, or released when it has no destination;
- ``release`` (source broker): from the decision until the source released it (a transfer's
  ``BundleAssigned``, which the source's release makes: Pulsar's Assigning; a plain unload's
  ``BundleReleased``);
- ``assign`` (destination broker): from a transfer's ``BundleAssigned`` until ``BundleOwned``;
- ``lookup`` (its new owner): from the assignment of an unowned bundle until it is owned;
- ``transfer`` (source broker): from a transfer's decision until its new owner has it.

Invariants:
- time is what the caller passes (``now_ms``: the service's monotonic clock when it took the
  record), as a Pulsar broker times its phases on its own clock: on every host a phase lasts
  what it took for the service to see it start and end (on Ray that includes the log's
  delivery; in process, where the bodies answer at once, the process's own work), never the
  log's timestamps (a virtual clock stamps a whole move with one instant);
- a phase is timed only from a record taken ``live`` (after the service started): replaying the
  history at start-up would time the replay, so, like a restarted broker's, the histograms
  start empty;
- memory is bounded: a phase that never ends is dropped when ``MAX_PENDING`` others wait.

Pure: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from events.log.port import Record
from web.observe.pulsar_names import LATENCY_BUCKETS_MS

MAX_PENDING = 10_000
OUR_BUCKETS_MS = (5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1_000.0, 2_500.0, 5_000.0, 10_000.0,
                  30_000.0, 60_000.0)
PULSAR_PHASES = ("unload", "release", "assign")
OUR_PHASES = ("lookup", "transfer")
NO_BROKER = "none"


@dataclass
class Histogram:
    """Bucket counts of one series (``cumulative`` gives Prometheus's running counts)."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf

    def observe(self, value: float) -> None:
        index = next((i for i, bound in enumerate(self.bounds) if value <= bound), len(self.bounds))
        self.counts[index] += 1
        self.total += value

    @property
    def observations(self) -> int:
        return sum(self.counts)

    def cumulative(self, scale: float = 1.0) -> list[tuple[str, int]]:
        """(le, count) pairs, the bounds multiplied by ``scale`` (1/1000: in seconds)."""
        out, running = [], 0
        for bound, count in zip((*(str(b * scale) for b in self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out


@dataclass
class _Start:
    at_ms: float
    broker: str


class Latencies:
    """Per (phase, broker): a histogram in milliseconds (see the module docstring)."""

    def __init__(self) -> None:
        self.histograms: dict[tuple[str, str], Histogram] = {}
        self._open: dict[str, dict[str, _Start]] = {p: {} for p in (*PULSAR_PHASES, *OUR_PHASES)}
        self._free_after_release: set[str] = set()

    def series(self, phase: str, brokers: list[str]) -> list[tuple[str, Histogram]]:
        """(broker, histogram) of ``phase`` for every broker given (empty ones from 0) and every
        broker observed, sorted."""
        for broker in brokers:
            self._histogram(phase, broker)
        return sorted((b, h) for (p, b), h in self.histograms.items() if p == phase)

    def take(self, record: Record, now_ms: float, live: bool) -> None:
        env = record.envelope
        payload = env.payload
        bundle = str(payload.get("bundle") or "")
        if env.type in ("UnloadRequested", "TransferPrepared"):
            decision = payload.get("decision") or {}
            src, dst = str(payload.get("src") or ""), payload.get("dst") or decision.get("destination")
            if live and bundle not in self._open["unload"]:
                for phase in ("unload", "release", *(("transfer",) if dst else ())):
                    self._begin(phase, bundle, now_ms, src)
                if not dst:
                    self._free_after_release.add(bundle)
        elif env.type == "BundleReleased":
            self._end("release", bundle, now_ms)
            if bundle in self._free_after_release:
                self._free_after_release.discard(bundle)
                self._end("unload", bundle, now_ms)
        elif env.type == "BundleAssigned":
            if payload.get("src"):
                self._end("release", bundle, now_ms)
            phase = "assign" if payload.get("src") else "lookup" if payload.get("reason") == "lookup" else None
            if live and phase is not None:
                self._begin(phase, bundle, now_ms, str(payload.get("dst") or ""))
        elif env.type == "BundleOwned":
            for phase in ("assign", "lookup", "unload", "transfer"):
                self._end(phase, bundle, now_ms)
            self._open["release"].pop(bundle, None)
            self._free_after_release.discard(bundle)

    def _begin(self, phase: str, bundle: str, now_ms: float, broker: str) -> None:
        table = self._open[phase]
        if bundle not in table and len(table) >= MAX_PENDING:
            del table[next(iter(table))]  # the oldest phase still open: its end was never seen
        table[bundle] = _Start(now_ms, broker or NO_BROKER)

    def _end(self, phase: str, bundle: str, now_ms: float) -> None:
        start = self._open[phase].pop(bundle, None)
        if start is not None:
            self._histogram(phase, start.broker).observe(max(0.0, now_ms - start.at_ms))

    def _histogram(self, phase: str, broker: str) -> Histogram:
        found = self.histograms.get((phase, broker))
        if found is None:
            bounds = LATENCY_BUCKETS_MS if phase in PULSAR_PHASES else OUR_BUCKETS_MS
            found = self.histograms[(phase, broker)] = Histogram(bounds)
        return found
