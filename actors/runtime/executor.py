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
  that answer), except after a fenced append: what a fenced writer decided reaches no one.
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
