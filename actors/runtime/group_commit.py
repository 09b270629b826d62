"""Group commit: the commands queued behind a live host's lock, decided one after another and
appended in one transaction (a lookup storm answered in batches).

Invariants:
- only a command the body names a scope for (``batch_scope``) joins a group; its scope is what
  its decision reads that another command's events could change (the namespace body: the
  bundle's record, and the command id its outcome is kept under). A body that names a scope
  promises that ``on_command`` changes nothing in the body for that command (a pure decision),
  so a decision that does not fit a group may be dropped and taken again later;
- members join in arrival order; a group ends before a command without a scope (it runs alone,
  as every command did before), before one whose scope meets a member's, at ``max_group``, and
  before a decision whose appends do not fit the group's (another key, another epoch, a
  compare-and-set): that decision is dropped and taken again, first of the next group, on a
  view holding this group's events. So every member is decided on a view that differs from the
  one-by-one view only in events that its decision does not read: a group decides exactly what
  the same commands, one after another in arrival order, decide;
- the members' events are one append under the group's key, in member order, each stamped with
  its own command's id (``causation_ids``); the host folds the log before any member's commands
  leave (``execute_group``); a failed append is the error of every member that appends (a
  member answered without appending, a repeated command id, is not touched by it), and since no
  body folded anything of it, nothing has to be rebuilt.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field

from actors.body import Body
from actors.effects import Effects
from balancer.errors import LoadBalancerError
from events.catalog import Command

logger = logging.getLogger(__name__)

Answer = tuple[object | None, LoadBalancerError | None]
"""A command's reply and its typed error (one of them is None)."""

MAX_GROUP = 1_000
"""Commands per group at most: a group is one Kafka transaction (and one reply wait for all)."""


@dataclass(slots=True)
class Queued:
    """A command waiting for a group, and the future its answer goes to."""

    command: Command
    answer: asyncio.Future[Answer]

    def settle(self, answer: Answer) -> None:
        """Answer it, unless its caller stopped waiting."""
        if not self.answer.done():
            self.answer.set_result(answer)


@dataclass(slots=True)
class Group:
    """Members (command, decision) in arrival order; the key and epoch their appends share."""

    members: list[tuple[Queued, Effects]] = field(default_factory=list)
    key: str | None = None
    epoch: int | None = None
    scopes: set[Hashable] = field(default_factory=set)

    def fits(self, effects: Effects) -> bool:
        """``effects`` may share the group's one append: one key, one epoch, no compare-and-set."""
        if not effects.append:
            return True
        if effects.expected_seq:
            return False
        keys = {key for key, _ in effects.append}
        if len(keys) != 1:
            return False
        key = keys.pop()
        return (self.key is None or self.key == key) and (self.epoch is None or self.epoch == effects.epoch)

    def add(self, queued: Queued, effects: Effects, scope: frozenset[Hashable]) -> None:
        self.members.append((queued, effects))
        self.scopes |= scope
        if effects.append:
            self.key, self.epoch = effects.append[0][0], effects.epoch


def count_group(counts: dict[str, int], members: int) -> None:
    """A host's counts: every command, and groups of two or more (how many, their commands,
    the largest)."""
    counts["commands"] += members
    if members > 1:
        counts["groups"] += 1
        counts["grouped"] += members
        counts["largest_group"] = max(counts["largest_group"], members)


def scope_of(body: Body, command: Command) -> frozenset[Hashable] | None:
    """What ``command``'s decision reads that others' events may change; None: it runs alone."""
    scope = getattr(body, "batch_scope", None)
    return None if scope is None else scope(command)


def decide(body: Body, command: Command, now_ms: int) -> Effects:
    """The body's decision; a body bug is the command's error, never a lost actor."""
    try:
        return body.on_command(command, now_ms)
    except Exception as exc:
        logger.exception("%s failed on %s", body.name, command.TYPE)
        return Effects(error=LoadBalancerError(f"{body.name} failed on {command.TYPE}: {exc!r}"))


def take_group(queue: deque[Queued], body: Body, now_ms: int, max_group: int = MAX_GROUP) -> Group:
    """Decide the commands at the head of ``queue`` into one group and take them off it (at
    least the first: a command without a scope, or one whose decision fits no other, alone)."""
    group = Group()
    while queue and len(group.members) < max_group:
        queued = queue[0]
        scope = scope_of(body, queued.command)
        if scope is None:
            if not group.members:  # alone, exactly as every command ran before groups
                queue.popleft()
                group.add(queued, decide(body, queued.command, now_ms), frozenset())
            break
        if not scope.isdisjoint(group.scopes):
            break  # it reads what a member writes: decided after this group's events
        effects = decide(body, queued.command, now_ms)
        if group.members and not group.fits(effects):
            break  # dropped: decided again, first of the next group, after this one's events
        queue.popleft()
        group.add(queued, effects, scope)
    return group
