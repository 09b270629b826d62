"""The one effect executor: the order in which every host carries out a body's ``Effects``.

A body only says what it wants (``actors.effects``); this module says, once for the in-process
host, the simulator and the live (Ray) host alike, in what order it happens. A host supplies the
five steps (``EffectHost``), each for the writer that produced the effects.

Invariants:
- a writer the log has fenced (a newer incarnation took over its transactional id) carries out
  nothing and is answered ``WriterFenced``;
- the appends are ``append_plan``'s runs, in order; the first that fails ends them, and its error
  is the one ``execute`` returns;
- once anything was to be appended the host learns whether the log answered (``log_health``),
  then folds every record the log has past its cursor, the writer's own among them, before any
  command leaves: a body never decides on a state older than its own last write, and a command
  never overtakes the records that caused it;
- the commands go last, every one of them, even after a refused append (the body planned for
  that answer), except after a fenced append: what a fenced writer decided reaches no one;
- a group (``execute_group``, a live host's group commit, ``actors.runtime.group_commit``) is
  the same order for many effects at once: their events one append (each keeps its own
  causation id), one fold, then every member's commands in member order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from actors.effects import Effects, append_plan
from balancer.errors import LoadBalancerError, Unavailable, WriterFenced
from events.catalog import Command, Event


class EffectHost(Protocol):
    """The steps a host performs for ``writer`` (a body's name) while executing its effects."""

    def fenced(self, writer: str) -> bool:
        """True once a newer incarnation of ``writer`` took over its log handle."""
        ...

    async def append(self, writer: str, key: str, events: Sequence[Event], expected_seq: int | None,
                     effects: Effects) -> LoadBalancerError | None:
        """Append one run of ``effects`` atomically; the typed error if the log refused it."""
        ...

    def log_health(self, writer: str, healthy: bool) -> None: ...

    async def fold_new(self, writer: str) -> None:
        """Fold the records past the cursor into ``writer`` (its own first), and their effects."""
        ...

    def send(self, writer: str, command: Command) -> None: ...


class GroupHost(EffectHost, Protocol):
    """A host that can append many commands' events under one key in one transaction."""

    async def append_group(self, writer: str, key: str, events: Sequence[Event],
                           causation_ids: Sequence[str | None], epoch: int) -> LoadBalancerError | None:
        ...


async def execute_group(host: GroupHost, writer: str, parts: Sequence[Effects]) -> LoadBalancerError | None:
    """Carry out the effects of a group (each appends under one shared key and epoch, none
    with a compare-and-set); the failed append's error, which is every member's."""
    if host.fenced(writer):
        return WriterFenced(f"{writer} was fenced by a newer incarnation", writer=writer)
    runs = [(key, event, part.causation_id, part.epoch) for part in parts for key, event in part.append]
    failure: LoadBalancerError | None = None
    if runs:
        key, epoch = runs[0][0], runs[0][3]
        if any(k != key or e != epoch for k, _, _, e in runs):
            raise ValueError(f"a group appends under one key and epoch, not {sorted({(k, e) for k, _, _, e in runs})}")
        failure = await host.append_group(writer, key, [event for _, event, _, _ in runs],
                                          [cause for _, _, cause, _ in runs], epoch)
        host.log_health(writer, not isinstance(failure, Unavailable))
        await host.fold_new(writer)
    if isinstance(failure, WriterFenced):
        return failure
    for part in parts:
        for command in part.send:
            host.send(writer, command)
    return failure


async def execute(host: EffectHost, writer: str, effects: Effects) -> LoadBalancerError | None:
    """Carry out ``effects`` of ``writer`` on ``host``; the failed append's error, if any."""
    if host.fenced(writer):
        return WriterFenced(f"{writer} was fenced by a newer incarnation", writer=writer)
    failure: LoadBalancerError | None = None
    for key, events, expected in append_plan(effects):
        failure = await host.append(writer, key, events, expected, effects)
        if failure is not None:
            break
    if effects.append:
        host.log_health(writer, not isinstance(failure, Unavailable))
        await host.fold_new(writer)
    if isinstance(failure, WriterFenced):
        return failure
    for command in effects.send:
        host.send(writer, command)
    return failure
