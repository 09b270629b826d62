"""One follower of the log per web service: it feeds ``/metrics`` and the dashboard.

Invariants:
- every record of the log is taken once, in the client's fold order, from the start of the log
  (``Cluster.events(from_start=True)``): counters are the whole history's, not since the service
  started, so a restarted service exports the same totals;
- the metrics come from the log and the client's own views, never from asking actors one by one:
  on Ray one exporter in the web service's process covers every actor. The one exception is the
  fold position of each actor (``bb_fold_lag_records``), which only the actor knows: it is asked
  for in the background, at most every ``STATUS_EVERY_S``, never during a scrape, and so is the
  balancer's status (its pause, throttle and last cycle: the leader's own);
- latencies are timed on this process's monotonic clock as records are taken
  (``web.observe.latency``), from records stamped after the service started (``live``);
- the dashboard's history is bounded: ``SERIES`` load samples per broker, ``MOVES`` moves,
  ``ANOMALIES`` anomalies; ``version`` rises with every record taken, and ``changed`` wakes
  whoever waits on it (the server-sent events).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from actors.api import Cluster
from balancer.errors import DecodeError
from balancer.load import max_usage
from events.envelope import Envelope
from events.log.port import Record
from events.report_parts import is_continuation
from projections.load import report_from_payload
from web.observe.latency import Latencies
from web.observe.tally import Tally
from web.observe.whynot import MOVES as SHED_MOVES
from web.observe.whynot import WhyNot

logger = logging.getLogger(__name__)

SERIES = 240
MOVES = 40
ANOMALIES = 20
STATUS_EVERY_S = 2.0
MOVE_TYPES = ("UnloadRequested", "TransferPrepared", "SplitRequested", "BundleAssigned")
WHY_NOT_TYPES = ("SheddingSkipped", *SHED_MOVES)


def _usable(env: Envelope) -> bool:
    try:
        env.typed  # noqa: B018  (its rules refuse a payload no fold can use)
    except DecodeError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Move:
    """A change of ownership as the dashboard lists it."""

    ts_ms: int
    kind: str
    bundle: str
    src: str | None
    dst: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"ts_ms": self.ts_ms, "kind": self.kind, "bundle": self.bundle, "src": self.src,
                "dst": self.dst, "reason": self.reason}


class Observer:
    """Follows the log of ``cluster``: a ``Tally``, load series, recent moves and anomalies."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.tally = Tally()
        self.latencies = Latencies()
        self.live_from_ms = cluster.now_ms()
        """Cluster time the service started at: a record stamped from then on is timed."""
        self.series: dict[str, deque[tuple[int, float, float]]] = {}
        """Broker -> (ts_ms, max usage %, msg rate in+out) of its reports, newest last."""
        self.moves: deque[Move] = deque(maxlen=MOVES)
        self.why_not = WhyNot()
        """Each shedding strategy's last skips (the dashboard's "why not" panel)."""
        self.anomaly_counts: Counter[str] = Counter()
        self.recent_anomalies: deque[dict[str, Any]] = deque(maxlen=ANOMALIES)
        self.actor_positions: dict[str, int] = {}
        self.balancer: dict[str, Any] | None = None
        """The balancer's status (``Cluster.balancer_status``) at the last background fetch."""
        self.version = 0
        self.closing = False
        """Set when the service shuts down: open event streams end at once (``release``)."""
        self._anomalies_seen = 0
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # -- life --------------------------------------------------------------------------------
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._follow()), loop.create_task(self._poll_balancer())]
        if self.cluster.kind == "ray":
            self._tasks.append(loop.create_task(self._poll_statuses()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []

    def release(self) -> None:
        """End every open event stream now (the service is shutting down): without this a page
        left open would hold the shutdown for aiohttp's whole grace period."""
        self.closing = True
        self._changed.set()

    async def wait_changed(self, timeout_s: float) -> bool:
        """Until a record is taken (True) or ``timeout_s`` passes (False)."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout_s)
            return True
        return False

    async def _follow(self) -> None:
        events = self.cluster.events(from_start=True)
        try:
            async for record in events:
                self.take(record)
        finally:
            await events.aclose()

    async def _poll_statuses(self) -> None:
        while True:
            try:
                statuses = await asyncio.wait_for(self.cluster.statuses(), 10.0)
                self.actor_positions = {name: sum((s.get("position") or {}).values())
                                        for name, s in statuses.items() if "error" not in s}
            except Exception as exc:  # an actor restarting, Ray busy: try again later
                logger.warning("web: the actors' fold positions are not available: %s", exc)
            await asyncio.sleep(STATUS_EVERY_S)

    async def _poll_balancer(self) -> None:
        while True:
            try:
                self.balancer = await self.cluster.balancer_status(timeout_s=10.0)
            except Exception as exc:  # no leader yet, an actor restarting: try again later
                self.balancer = None
                logger.warning("web: the balancer's status is not available: %s", exc)
            await asyncio.sleep(STATUS_EVERY_S)

    # -- folding -----------------------------------------------------------------------------
    def take(self, record: Record) -> None:
        """Fold one record (the tally, the series, the moves), then note new anomalies."""
        self.tally.take(record)
        env = record.envelope
        usable = _usable(env)
        if usable:
            self.latencies.take(record, time.monotonic() * 1000.0, env.ts_ms >= self.live_from_ms)
        if not usable:
            pass  # named by the ownership view: it reaches the dashboard's anomalies below
        elif env.type == "LoadReported":
            self._sample(env.payload, env.ts_ms)
        elif env.type == "BrokerLeft":
            self.series.pop(str(env.payload["broker_id"]), None)
        elif env.type in MOVE_TYPES:
            self._note_move(env.type, env.payload, env.ts_ms)
        if usable and env.type in WHY_NOT_TYPES:
            latest = {broker: samples[-1][1] for broker, samples in self.series.items() if samples}
            self.why_not.take(env.type, env.payload, env.ts_ms, latest)
        self._note_anomalies()
        self.version += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _sample(self, payload: Mapping[str, Any], ts_ms: int) -> None:
        load = payload["broker_load"]
        if is_continuation(load):
            return
        broker = str(payload["broker_id"])
        report = report_from_payload(broker, load)
        rate = report.msg_rate_in + report.msg_rate_out
        self.series.setdefault(broker, deque(maxlen=SERIES)).append(
            (ts_ms, round(max_usage(report) * 100.0, 2), round(rate, 1)))

    def _note_move(self, kind: str, payload: Mapping[str, Any], ts_ms: int) -> None:
        bundle = str(payload["bundle"])
        if kind == "BundleAssigned":
            if payload.get("reason") not in ("orphan", "admin") or payload.get("src"):
                return  # lookups place new bundles; a transfer's destination is its own move
            self.moves.append(Move(ts_ms, "assign", bundle, None, str(payload["dst"]),
                                   str(payload["reason"])))
            return
        decision = payload.get("decision") or {}
        dst = payload.get("dst") or decision.get("destination")
        last = self.moves[-1] if self.moves else None
        if last is not None and last.bundle == bundle and last.kind == "unload" and kind == "TransferPrepared":
            self.moves.pop()  # UnloadRequested then TransferPrepared: one move, told twice
        move_kind = "split" if kind == "SplitRequested" else "unload"
        reason = str(decision.get("reason") or payload.get("reason") or "")
        self.moves.append(Move(ts_ms, move_kind, bundle, payload.get("src"), dst, reason))

    def _note_anomalies(self) -> None:
        view = self.cluster.ownership()
        found = view.anomalies
        total = view.tracker.dropped + len(found)
        if total <= self._anomalies_seen:
            return
        for anomaly in found[len(found) - min(len(found), total - self._anomalies_seen):]:
            self.anomaly_counts[anomaly.kind] += 1
            self.recent_anomalies.append({"kind": anomaly.kind, "offset": anomaly.offset,
                                          "key": anomaly.key, "type": anomaly.event_type,
                                          "detail": anomaly.detail})
        self._anomalies_seen = total
