"""The leader's drains, as a part of ``LeaderBody``: an operator empties a broker before a restart.

Invariants:
- a drain is a ``BrokerDrainRequested`` under ``_leader`` stamped with the leader's time, its end
  a ``BrokerUndrained``; which brokers are drained is folded from the log (``DrainFold``), so a
  restarted leader resumes every drain its predecessor recorded; the pacing (when the next move
  may start) is soft state, anchored at the first tick this leader sees the drain;
- a drained broker takes no new bundle: the placing and shedding views leave it out (lookups,
  orphans, transfers, shedding), from the moment its drain is folded until its undrain is;
- its bundles at rest move away one at a time in id order at the drain's rate
  (``balancer.drain``), each a transfer whose destination the placement rules choose (the
  anti-affinity groups and failure domains included); a bundle with no other broker to go to
  stays, and the drain waits; drain moves are neither paused nor throttled (the operator's
  rate is their bound);
- a drain survives its broker's restart (leaving and registering again): the broker stays out
  of placement until undrained;
- an undrain records how many of its moves had not started (cancelled: they never will) and
  how many bundles the broker still owns; moves already handing over finish;
- refusals (a bad rate, an unknown broker, the last broker) record nothing but the rejection the
  leader writes for every refused command; ``Cluster.drain_broker`` refuses them first.
"""

from __future__ import annotations

from typing import Any

from actors.effects import NOTHING, Effects, Receipt, appending, combine, unanswered
from balancer.decisions import Decision, Reason
from balancer.drain import Progress, allowance, check_drain, check_rate, next_bundles
from balancer.errors import UnknownBroker
from balancer.ownership import OwnershipRecord
from events.catalog import (
    LEADER_KEY,
    BrokerDrainRequested,
    BrokerRegistered,
    BrokerUndrained,
    DrainBroker,
    UndrainBroker,
)
from projections.drain import DRAIN_STRATEGY, DrainFold
from projections.ownership import OwnershipProjection
from projections.ownership_index import OwnershipIndex, owned_by


class Draining:
    """The drain half of the leader (mixed into ``LeaderBody``, which provides these fields)."""

    drains: DrainFold
    drain_pace: dict[tuple[str, int], list[int]]
    """(broker, drain since) -> [anchor ms, moves started since]: soft state of this leader."""
    ownership: OwnershipProjection
    by_broker: OwnershipIndex
    brokers: dict[str, BrokerRegistered]

    @property
    def my_epoch(self) -> int:
        raise NotImplementedError

    def _waiting(self, bundle: str, record: OwnershipRecord | None, now_ms: int,
                 cap_ms: int | None = None) -> bool:
        raise NotImplementedError

    def _move(self, decision: Decision, now_ms: int, *, reason: str,
              run: tuple[int, dict[str, int]] | None = None) -> Effects:
        raise NotImplementedError

    def _on_drained(self, bundle: str) -> bool:
        """``bundle`` is owned by a drained broker: it is on its way away (split it later)."""
        record = self.ownership.records.get(bundle)
        return record is not None and record.dst in self.drains.drains

    def _drain_command(self, command: DrainBroker | UndrainBroker, now_ms: int) -> Effects:
        """Record a drain (or its new rate) or an undrain, on this leader's time."""
        event: BrokerDrainRequested | BrokerUndrained
        drain = self.drains.drains.get(command.broker)
        if isinstance(command, DrainBroker):
            rate = check_rate(command.rate_per_minute)
            check_drain(command.broker, self.brokers, [b for b in self.drains.drains if b != command.broker])
            _, holding = owned_by(self.by_broker, self.ownership.records, command.broker)
            event = BrokerDrainRequested(broker=command.broker, since_ms=now_ms, rate_per_minute=rate,
                                         by=command.by, bundles=len(holding))
        else:
            if drain is None:
                if command.broker not in self.brokers:
                    raise UnknownBroker(f"broker {command.broker!r} is not registered and not drained",
                                        value=command.broker)
                return Effects(reply=Receipt(command.command_id, detail={"drained": False}))
            at_rest, holding = owned_by(self.by_broker, self.ownership.records, command.broker)
            cancelled = sum(1 for b in at_rest if not self._waiting(b, self.ownership.records.get(b), now_ms))
            event = BrokerUndrained(broker=command.broker, since_ms=drain.since_ms, at_ms=now_ms,
                                    by=command.by, cancelled=cancelled, left=len(holding))
        return appending(LEADER_KEY, [event], epoch=self.my_epoch, causation_id=command.command_id,
                         reply=Receipt(command.command_id, ((event.TYPE, event.to_payload()),)))

    def _drain_moves(self, now_ms: int) -> Effects:
        """Start the drain moves each drained broker's rate allows now."""
        if not self.drains.drains:
            return NOTHING
        parts: list[Effects] = []
        for broker, drain in sorted(self.drains.drains.items()):
            if broker not in self.brokers:
                continue  # restarting: nothing of it to move, nothing to pace
            pace = self.drain_pace.setdefault((broker, drain.since_ms), [now_ms, 0])
            count = allowance(drain.rate_per_minute, pace[0], now_ms, pace[1])
            if count <= 0:
                continue
            at_rest, _ = owned_by(self.by_broker, self.ownership.records, broker)
            busy = {b for b in at_rest if self._waiting(b, self.ownership.records.get(b), now_ms)}
            for bundle in next_bundles(at_rest, busy, count):
                decision = Decision(bundle, broker, None, reason=Reason.ADMIN, strategy=DRAIN_STRATEGY,
                                    inputs={"drain_since_ms": drain.since_ms, "rate_per_minute": drain.rate_per_minute,
                                            "requested_by": drain.by})
                effects = self._move(decision, now_ms, reason="drain")
                if not effects.send:
                    break  # no destination for it now: the drain waits
                pace[1] += 1
                parts.append(effects)
        return unanswered(combine(parts))

    def drain_status(self) -> list[dict[str, Any]]:
        """Each drain with its progress (``Progress``), for ``balancer status``."""
        out: list[dict[str, Any]] = []
        for broker, drain in sorted(self.drains.drains.items()):
            _, holding = owned_by(self.by_broker, self.ownership.records, broker)
            held = len(holding)
            progress = Progress(max(drain.bundles, held), held, drain.rate_per_minute)
            out.append({**drain.to_dict(), "left": held, "done": progress.done,
                        "etaS": progress.eta_s(), "registered": broker in self.brokers})
        return out
