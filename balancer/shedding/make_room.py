"""PlannedTransferShedder's make-room step: a two-hop plan for a broker stuck far above the mean.

A broker left with lumpy bundles (the hot one and another large one) may have no single move: each
of its bundles would leave any destination above where the source started, so the pair's worst
end would get no better (``Plan.gain`` refuses it). If it is above ``1 + make_room_trigger``, a
destination first passes some of its own bundles on to other brokers ("hops", labelled with the
bundle they make room for), then receives the bundle. The step is taken whole or not at all.

Invariants:
- the hops are the plan's own moves from the destination with the bundle counted on it
  (``Plan.gain``, no hand-on), largest gain first, to brokers that the checks accept (filters, no
  send-back), that are not warming, are neither the source nor the destination and end within
  the trigger band; they stop once the destination is within max(the source's new ratio,
  1 + trigger), so no broker of the step is left to pass load on in turn;
- one bundle per anti-affinity group in a step, none of a group already moved in the run;
- taken only if the step's worst distance from the band gets better and its summed distance falls
  by at least the minimum gain: the summed distance still strictly falls with every step, so on
  a constant load planning terminates and no sequence of moves can cycle;
- among candidate steps: the largest summed gain, ties to fewer hops, then the first found.
"""

from __future__ import annotations

from dataclasses import dataclass

from balancer.decisions import Reason
from balancer.shedding.plan_model import EPS, HANDS_ON, UNCLEAN, Move, Node, PlanView


@dataclass(frozen=True, slots=True)
class Room:
    """One make-room step: the hops off the destination, then the move into the room."""

    hops: tuple[Move, ...]
    move: Move

    def rank(self) -> tuple[float, int]:
        return self.move.gain, -len(self.hops)

    def moves(self) -> list[Move]:
        return [*self.hops, self.move]


def make_room(plan: PlanView, source: Node) -> Room | None:
    """The best make-room step for one of ``source``'s bundles, or None."""
    best: Room | None = None
    for bundle, load in source.bundles.items():
        for destination in plan.nodes.values():
            if (destination is source or destination.warming or load <= 0
                    or not plan.checks.allowed(bundle, destination.broker)):
                continue
            room = _room(plan, source, destination, bundle, load)
            if room is not None and (best is None or room.rank() > best.rank()):
                best = room
    return best


def _room(plan: PlanView, source: Node, destination: Node, bundle: str, load: float) -> Room | None:
    """The step moving ``bundle`` onto ``destination`` once it has made room; loads restored."""
    target = max(plan.ratio(source, -load), 1 + plan.settings.trigger)
    need = (plan.ratio(destination, load) - target) * destination.capacity * plan.util
    if need > sum(destination.bundles.values()):
        return None  # it cannot make that much room
    saved = {source.broker: source.load, destination.broker: destination.load}
    source.load -= load
    destination.load += load
    try:
        hops = _hops(plan, source, destination, bundle, target, saved)
        return None if hops is None else _scored(plan, source, destination, bundle, load, hops, saved)
    finally:
        for broker, was in saved.items():
            plan.nodes[broker].load = was


def _hops(plan: PlanView, source: Node, destination: Node, bundle: str, target: float,
          saved: dict[str, float]) -> list[Move] | None:
    """Hops off ``destination`` (holding ``bundle``) until it is within ``target``; None if it
    cannot get there. Applies them to the loads and records each receiver's load in ``saved``."""
    hops: list[Move] = []
    group = plan.checks.group(bundle)
    groups = set() if group is None else {group}
    while plan.ratio(destination) > target + EPS:
        hop = _best_hop(plan, source, destination, bundle, {h.bundle for h in hops}, groups)
        if hop is None:
            return None
        receiver = plan.nodes[hop.destination]
        saved.setdefault(receiver.broker, receiver.load)
        destination.load -= hop.load
        receiver.load += hop.load
        hops.append(hop)
        hop_group = plan.checks.group(hop.bundle)
        if hop_group is not None:
            groups.add(hop_group)
    return hops


def _best_hop(plan: PlanView, source: Node, destination: Node, room_for: str, used: set[str],
              groups: set[str]) -> Move | None:
    best: Move | None = None
    for bundle, load in destination.bundles.items():
        if bundle in used or load <= 0 or plan.checks.group(bundle) in groups:
            continue
        for receiver in plan.nodes.values():
            if receiver is source or receiver is destination or receiver.warming:
                continue
            hop = _hop(plan, destination, receiver, bundle, load, room_for)
            if (hop is not None and (best is None or hop.rank() > best.rank())
                    and plan.checks.allowed(bundle, receiver.broker)):
                best = hop
    return best


def _hop(plan: PlanView, destination: Node, receiver: Node, bundle: str, load: float,
         room_for: str) -> Move | None:
    scored = plan.gain(destination, receiver, load)
    if scored is None or scored[1] == HANDS_ON:
        return None
    if plan.ratio(receiver, load) > 1 + plan.settings.trigger + EPS:
        return None  # it would have to pass load on in turn
    return Move(bundle, load, destination.broker, receiver.broker, scored[0], scored[1],
                Reason.OVERLOADED, room_for=room_for)


def _scored(plan: PlanView, source: Node, destination: Node, bundle: str, load: float,
            hops: list[Move], saved: dict[str, float]) -> Room | None:
    """The step if its worst distance gets better and it gains at least the minimum."""
    before = [plan.distance(plan.ratio(plan.nodes[b], was - plan.nodes[b].load))
              for b, was in saved.items()]
    after = [plan.distance(plan.ratio(plan.nodes[b])) for b in saved]
    gain = sum(before) - sum(after)
    if gain < plan.settings.min_gain or max(after) >= max(before) - EPS:
        return None
    move = Move(bundle, load, source.broker, destination.broker, gain, UNCLEAN,
                Reason.OVERLOADED, hops=len(hops))
    return Room(tuple(hops), move)
