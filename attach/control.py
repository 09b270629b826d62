"""The operator's hold on drive mode: pause, resume, the throttle's caps and a status, as the
project's own leader keeps them for its cluster.

Invariants:
- the pause is folded from the attach log (``BalancerPaused``/``BalancerResumed`` recorded under
  the proposals key), so a restarted attach knows it; its expiry is recorded once, by the attach
  that sees its time is up;
- while a pause holds, drive mode still decides and records its proposals (the advice goes on)
  but sends nothing; Pulsar goes on placing new bundles on lookup (availability first);
- the status has the leader's shape (``actors.control_status.status_document``), so ``lbctl
  balancer status``, the REST path and the dashboard read one document; drive mode adds what
  only it can be stuck on (Pulsar's own shedding back on, the log refusing writes);
- pure: times are passed in; nothing here sends, appends or reads the log.
"""

from __future__ import annotations

from typing import Any

from actors.leader_control import ControlFold, LastCycle, caps_of
from attach.execute import Executions
from attach.proposals import Proposal, ProposedMove
from balancer.config import LoadBalancerConfig
from balancer.control import Caps
from events.catalog import ExecutionRequested, LoadReported, Message

STEERING_NAME = "lbctl-attach"
"""The name the status gives the hook that leads the mirrored cluster's balancing."""


class DriveHold:
    """The pause (from the log), the last cycle, the moves held back, and what each broker last
    reported (the stalled check's load freshness)."""

    def __init__(self, config: LoadBalancerConfig, started_ms: int = 0) -> None:
        self.config = config
        self.started_ms = started_ms
        """When this attach began to watch: a broker's silence counts from then at the latest."""
        self.caps: Caps = caps_of(config)
        self.held = ControlFold()
        self.expired_sent: int | None = None
        """The ``since_ms`` of the pause whose expiry this attach recorded."""
        self.last = LastCycle()
        self.waiting: list[tuple[ProposedMove, str, int]] = []
        """The last cycle's moves held back (move, why, when), until the next cycle."""
        self.reported: dict[str, int] = {}
        """Broker -> the time of its newest load report in the log."""

    def fold(self, event: Message, ts_ms: int) -> None:
        self.held.fold(event, ts_ms)
        if isinstance(event, ExecutionRequested):
            self.held.hour.append(ts_ms)
        elif isinstance(event, LoadReported):
            self.reported[event.broker_id] = max(ts_ms, self.reported.get(event.broker_id, 0))

    def decided(self, proposal: Proposal) -> None:
        moves = len(proposal.moves)
        self.last = LastCycle(proposal.run_ms, "moves" if moves else str(proposal.skip or "no move"), moves)
        self.waiting = []

    def hold_back(self, held: list[tuple[ProposedMove, str]], now_ms: int) -> None:
        self.waiting = [(move, why, now_ms) for move, why in held]

    def _report_bound(self) -> dict[str, Any]:
        """Pulsar's brokers publish a load report when it changed enough, and at least every
        ``loadBalancerReportUpdateMaxIntervalMinutes``: silence is stalled only beyond that."""
        every = self.config.load_balancer_report_update_max_interval_minutes
        slack = self.config.load_balancer_stalled_load_report_seconds
        return {"ms": (every * 60 + slack) * 1000,
                "rule": f"Pulsar's loadBalancerReportUpdateMaxIntervalMinutes={every} "
                        f"and loadBalancerStalledLoadReportSeconds={slack}"}

    def status(self, executions: Executions, now_ms: int, position: dict[int, int],
               stalled: list[str]) -> dict[str, Any]:
        """The leader-shaped status ``actors.control_status.status_document`` reads."""
        pause = self.held.paused(now_ms)
        in_flight = executions.in_flight()
        throttle = {
            "caps": self.caps.to_dict(), "inFlight": len(in_flight),
            "startedLastMinute": sum(1 for t in executions.requested if t > now_ms - 60_000),
            "queue": [{"bundle": m.bundle, "src": m.source, "queuedMs": at, "why": why}
                      for m, why, at in self.waiting],
            "moving": [{"bundle": e.bundle, "src": e.request.src, "dst": e.request.dst,
                        "startedMs": e.requested_ms} for e in in_flight]}
        oldest = max((now_ms - e.requested_ms for e in in_flight), default=0)
        control = {"paused": None if pause is None else pause.to_dict(), "throttle": throttle,
                   "oldestMoveMs": oldest, "lastCycle": self.last.to_dict(),
                   "movesLastHour": self.held.moves_last_hour(now_ms), "nowMs": now_ms,
                   "maxPauseMs": self.config.load_balancer_max_pause_minutes * 60_000, "stalled": stalled,
                   "loadReportBound": self._report_bound(), "watchingSinceMs": self.started_ms}
        return {"name": STEERING_NAME, "leads": True, "my_epoch": 0, "now_ms": now_ms,
                "position": dict(position), "load_seen": dict(self.reported), "control": control}
