"""The operator's drains in drive mode: a broker of a real Pulsar emptied before a planned restart.

``lbctl brokers drain BROKER [--rate N/min]`` and ``undrain`` reach the drive hook of ``lbctl
attach`` (``attach.drive.Steering.drain_or_undrain``); the rules are the project's own leader's
(``balancer.drain``: ``check_rate``, ``check_drain``, ``allowance``, ``next_bundles``), and which
brokers are drained is folded from the log by the advisor's replay (``projections.drain.DrainFold``).

Invariants:
- a drain is a ``BrokerDrainRequested`` (with who asked) under the proposals key, its end a
  ``BrokerUndrained``; a restarted attach folds both back; bad input (an unknown broker, the last
  broker not drained, a rate of 0, negative, NaN or infinite) is refused naming it and nothing
  is recorded;
- each cycle the drained broker's bundles at rest move away in id order at the drain's rate,
  each one an execution (``ExecutionRequested`` kind transfer, proposal ``drain-<broker>-<since>``,
  execution ids numbered on from the log's), one per bundle in flight; the pace is anchored at
  the first cycle that sees the drain, or one rate interval after the drain's last request the
  log holds, so a restart never starts a burst;
- **choice:** as the leader's drain moves, these are neither paused nor held by the throttle's
  caps (the operator's rate is their bound); they count as moves in flight for the advisor's own
  moves, which the caps do hold;
- a bundle Pulsar does not move stays, named with why: a heartbeat or SLA-monitor namespace
  (Pulsar 4.0's extensible manager assigns those without its channel, so a mirror rarely shows
  one; if one shows, Pulsar answers its unload with success and skips it), ``pulsar/system`` (the
  extensible manager keeps its own topics on its leader; Pulsar's shedders never move it), and a
  bundle whose drain move Pulsar refused (its answer is the reason); the progress counts them
  apart, so ``--wait`` ends when only they are left;
- a bundle Pulsar itself places on a drained broker (a lookup: Pulsar's placement is untouched in
  drive mode) is at rest there like any other and is moved off by the next cycles;
- pure: times are passed in; nothing here sends, appends or reads the log.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from balancer.decisions import Decision, Reason
from balancer.drain import MINUTE_MS, Progress, allowance, check_drain, check_rate, next_bundles
from balancer.errors import UnknownBroker
from balancer.ownership import OwnershipRecord
from balancer.placement.base import SYSTEM_NAMESPACE
from balancer.placement.pinned import pinned_owner
from balancer.proposals import TRANSFER
from balancer.shedding.base import is_system_namespace
from events.catalog import (
    BrokerDrainRequested,
    BrokerUndrained,
    DrainBroker,
    ExecutionRefused,
    ExecutionRequested,
    Message,
    UndrainBroker,
)
from projections.drain import DRAIN_REASON, DRAIN_STRATEGY, Drain
from projections.ownership_index import OwnershipIndex, owned_by, touched

PREFIX = "drain-"


def drain_id(drain: Drain) -> str:
    """The proposal id every execution of ``drain`` carries (explain and the audit name it)."""
    return f"{PREFIX}{drain.broker}-{drain.since_ms}"


def kept_by_pulsar(bundle: str, broker: str) -> str | None:
    """Why Pulsar keeps ``bundle`` on ``broker`` whatever is asked (None: it moves)."""
    namespace = bundle.rpartition("/")[0]
    if namespace == SYSTEM_NAMESPACE:
        return "pulsar/system: the extensible manager's own topics, kept on its leader"
    if not is_system_namespace(namespace):
        return None
    pin = pinned_owner(namespace, (broker,))
    if pin is not None and pin.broker == broker:
        return f"{pin.reason} namespace of {broker}: Pulsar keeps it on its broker"
    # Another broker's (it was away when the bundle was placed): Pulsar skips its unload all the same.
    return f"{namespace}: a heartbeat or SLA-monitor namespace, whose unload Pulsar skips"


@dataclass
class Pace:
    anchor_ms: int
    started: int = 0


class DriveDrains:
    """What the log says of the drains' executions, and the pace of each drain in this run."""

    def __init__(self) -> None:
        self.next_index: dict[str, int] = {}
        """Drain id -> the next execution number (past every one the log holds)."""
        self.last_request: dict[str, int] = {}
        self.bundle_of: dict[str, str] = {}
        """Execution id of a drain move -> its bundle."""
        self.refused: dict[str, dict[str, str]] = {}
        """Drain id -> bundle -> Pulsar's answer refusing its move."""
        self.pace: dict[str, Pace] = {}
        self.index = OwnershipIndex()
        """Broker -> the bundles its records name, kept by ``touch`` (no scan of every record)."""

    def touch(self, event: Message, records: Mapping[str, OwnershipRecord]) -> None:
        """Keep the index after the ownership view folded ``event``."""
        bundles = touched(event)
        if bundles:
            self.index.touch_all(bundles, records)

    def held_by(self, records: Mapping[str, OwnershipRecord], broker: str) -> tuple[list[str], list[str]]:
        """The bundles ``broker`` owns at rest, and every bundle it holds (moving to it too)."""
        return owned_by(self.index, records, broker)

    def fold(self, event: Message, ts_ms: int) -> None:
        if isinstance(event, ExecutionRequested) and event.proposal_id.startswith(PREFIX):
            index = event.execution_id.rpartition(":")[2]
            number = int(index) + 1 if index.isdigit() else 0
            pid = event.proposal_id
            self.next_index[pid] = max(self.next_index.get(pid, 0), number)
            self.last_request[pid] = max(ts_ms, self.last_request.get(pid, ts_ms))
            self.bundle_of[event.execution_id] = event.bundle
        elif isinstance(event, ExecutionRefused) and event.execution_id in self.bundle_of:
            pid = event.execution_id.rpartition(":")[0]
            answer = f"Pulsar refused its move: {event.status} {event.message}".rstrip()
            self.refused.setdefault(pid, {})[self.bundle_of[event.execution_id]] = answer

    # -- the operator's commands -------------------------------------------------------------
    def judge(self, command: DrainBroker | UndrainBroker, drains: Mapping[str, Drain],
              registered: Collection[str], records: Mapping[str, OwnershipRecord],
              moving: Collection[str], now_ms: int) -> BrokerDrainRequested | BrokerUndrained | None:
        """The record of a drain or an undrain, as the leader judges it (None: an undrain of a
        registered broker that is not drained records nothing); bad input raises, naming it."""
        broker = command.broker
        if isinstance(command, DrainBroker):
            rate = check_rate(command.rate_per_minute)
            check_drain(broker, registered, [b for b in drains if b != broker])
            return BrokerDrainRequested(broker=broker, since_ms=now_ms, rate_per_minute=rate, by=command.by,
                                        bundles=len(self.held_by(records, broker)[1]))
        drain = drains.get(broker)
        if drain is None:
            if broker not in registered:
                raise UnknownBroker(f"broker {broker!r} is not registered and not drained", value=broker)
            return None
        at_rest, holding = self.held_by(records, broker)
        cancelled = sum(1 for b in at_rest if b not in moving and self.stays(drain, b) is None)
        return BrokerUndrained(broker=broker, since_ms=drain.since_ms, at_ms=now_ms, by=command.by,
                               cancelled=cancelled, left=len(holding))

    def stays(self, drain: Drain, bundle: str) -> str | None:
        """Why ``bundle`` stays on the drained broker (None: the drain moves it)."""
        return kept_by_pulsar(bundle, drain.broker) or self.refused.get(drain_id(drain), {}).get(bundle)

    # -- each cycle ------------------------------------------------------------------------
    def due(self, drains: Mapping[str, Drain], registered: Collection[str],
            records: Mapping[str, OwnershipRecord], moving: Collection[str], now_ms: int) -> list[tuple[Drain, str]]:
        """The bundles each drain may start to move now (its rate allows), in id order."""
        out: list[tuple[Drain, str]] = []
        for broker, drain in sorted(drains.items()):
            if broker not in registered:
                continue  # restarting: nothing of it to move, nothing to pace
            pace = self._pace(drain, now_ms)
            count = allowance(drain.rate_per_minute, pace.anchor_ms, now_ms, pace.started)
            if count <= 0:
                continue
            at_rest = [b for b in self.held_by(records, broker)[0] if self.stays(drain, b) is None]
            out += [(drain, bundle) for bundle in next_bundles(at_rest, moving, count)]
        return out

    def _pace(self, drain: Drain, now_ms: int) -> Pace:
        pid = drain_id(drain)
        pace = self.pace.get(pid)
        if pace is None:
            last = self.last_request.get(pid)
            gap = math.ceil(MINUTE_MS / max(1, drain.rate_per_minute))
            pace = self.pace[pid] = Pace(now_ms if last is None else last + gap)
        return pace

    def request(self, drain: Drain, bundle: str, record: OwnershipRecord, dst: str,
                placement: Mapping[str, Any]) -> ExecutionRequested:
        """The execution of one drain move to ``dst`` (numbered on; the pace counts it)."""
        pid = drain_id(drain)
        index = self.next_index.get(pid, 0)
        self.next_index[pid] = index + 1
        self.pace.setdefault(pid, Pace(0)).started += 1
        decision = Decision(bundle, drain.broker, dst, reason=Reason.ADMIN, strategy=DRAIN_STRATEGY,
                            inputs={"drain_since_ms": drain.since_ms, "rate_per_minute": drain.rate_per_minute,
                                    "requested_by": drain.by}).to_dict()
        decision.update(placement=dict(placement), kind=TRANSFER, proposal=pid, drain=DRAIN_REASON)
        return ExecutionRequested(execution_id=f"{pid}:{index}", proposal_id=pid, bundle=bundle, kind=TRANSFER,
                                  src=drain.broker, dst=dst, decision=decision, from_version=record.version)

    # -- what the status shows ---------------------------------------------------------------
    def status(self, drains: Mapping[str, Drain], registered: Collection[str],
               records: Mapping[str, OwnershipRecord]) -> list[dict[str, Any]]:
        """Each drain in the leader's shape (``control.drains``), with the bundles that stay."""
        out: list[dict[str, Any]] = []
        for broker, drain in sorted(drains.items()):
            holding = self.held_by(records, broker)[1]
            staying = [{"bundle": b, "why": why} for b in sorted(holding)
                       if (why := self.stays(drain, b)) is not None]
            progress = Progress(max(drain.bundles, len(holding)), len(holding), drain.rate_per_minute,
                                stays=len(staying))
            out.append({**drain.to_dict(), "left": len(holding), "done": progress.done,
                        "etaS": progress.eta_s(), "registered": broker in registered,
                        "stays": len(staying), "staying": staying, "proposal": drain_id(drain)})
        return out
