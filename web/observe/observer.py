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
- the moves listed are ``projections.moves``' (taken from the ``Tally``'s fold: the dashboard,
  ``/metrics`` and the run summary count the same moves), every kind but a lookup's placement;
  a move told again replaces the one listed;
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
from typing import Any

from actors.api import Cluster
from balancer.errors import DecodeError
from balancer.load import max_usage
from events.catalog import BrokerLeft, LoadReported
from events.envelope import Envelope
from events.log.port import Record
from projections.moves import Change, Move
from web.observe.latency import Latencies
from web.observe.tally import Tally
from web.observe.whynot import MOVES as SHED_MOVES
from web.observe.whynot import WhyNot

logger = logging.getLogger(__name__)

SERIES = 240
MOVES = 40
ANOMALIES = 20
STATUS_EVERY_S = 2.0
WHY_NOT_TYPES = ("SheddingSkipped", *SHED_MOVES)


def _usable(env: Envelope) -> bool:
    try:
        env.typed  # noqa: B018  (its rules refuse a payload no fold can use)
    except DecodeError:
        return False
    return True


def move_row(move: Move) -> dict[str, Any]:
    """A move as the dashboard lists it: ``reason`` is the decision's when it has one."""
    return {"ts_ms": move.ts_ms, "kind": move.kind, "bundle": move.bundle, "src": move.src,
            "dst": move.dst, "reason": move.why, "label": move.label}


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
        change = self.tally.take(record)
        env = record.envelope
        usable = _usable(env)  # an unusable one is named by the ownership view (anomalies below)
        if usable:
            self.latencies.take(record, time.monotonic() * 1000.0, env.ts_ms >= self.live_from_ms)
        if usable and env.type in ("LoadReported", "BrokerLeft"):
            event = env.typed
            if isinstance(event, LoadReported):
                self._sample(event, env.ts_ms)
            elif isinstance(event, BrokerLeft):
                self.series.pop(event.broker_id, None)
        if change is not None:
            self._note_move(change)
        if usable and env.type in WHY_NOT_TYPES:
            latest = {broker: samples[-1][1] for broker, samples in self.series.items() if samples}
            self.why_not.take(env.type, env.payload, env.ts_ms, latest)
        self._note_anomalies()
        self.version += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _sample(self, event: LoadReported, ts_ms: int) -> None:
        report = event.report()
        if report is None:
            return  # a later part of a report: bundles only
        rate = report.msg_rate_in + report.msg_rate_out
        self.series.setdefault(event.broker_id, deque(maxlen=SERIES)).append(
            (ts_ms, round(max_usage(report) * 100.0, 2), round(rate, 1)))

    def _note_move(self, change: Change) -> None:
        move, previous = change.move, change.previous
        if move.kind == "assign" and move.reason == "lookup":
            return  # lookups place new bundles: counted by /metrics, not listed
        if previous is not None:
            self.moves = deque((move if m is previous else m for m in self.moves), maxlen=MOVES)
            return
        self.moves.append(move)

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
