"""The in-process host's plumbing: ``run_sync`` (a coroutine that never waits, run without an
event loop) and ``Ticket`` (a submitted command and, once delivered, its answer). A client's
lookup is ``Cluster.lookup`` on every host (over ``InProcLink`` in process)."""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from balancer.errors import LoadBalancerError, Unavailable
from events.catalog import Command

T = TypeVar("T")


def run_sync(awaitable: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never waits (MemoryEventLog calls) to completion, without a loop."""
    try:
        awaitable.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    awaitable.close()
    raise RuntimeError("the in-process host needs a log whose calls complete without waiting")


@dataclass(slots=True)
class Ticket:
    """A submitted command and, once delivered, its reply or typed error."""

    command: Command
    target: str
    done: bool = False
    reply: object | None = None
    error: LoadBalancerError | None = None

    def result(self) -> object | None:
        if not self.done:
            raise Unavailable(f"{self.command.TYPE} {self.command.command_id} was not delivered yet")
        if self.error is not None:
            raise self.error
        return self.reply
