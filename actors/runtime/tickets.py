"""The in-process host's plumbing: ``run_sync`` (a coroutine that never waits, run without an
event loop), ``Ticket`` (a submitted command and, once delivered, its answer) and
``lookup_topic`` (a client's lookup on the host's virtual clock)."""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from balancer.errors import LoadBalancerError, StaleEpoch, Unavailable, UnknownNamespace
from events.catalog import AssignBundle, Command
from projections.ownership import namespace_of_topic

if TYPE_CHECKING:
    from actors.runtime.inproc import InProcessHost

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


def lookup_topic(host: InProcessHost, topic: str, max_ms: int) -> str | None:
    """The topic's owner, asking the leader to place its bundle if it has none (retrying every
    ``lookup_retry_ms`` until ``max_ms`` of virtual time passed)."""
    namespace = namespace_of_topic(topic)
    if namespace not in host.view.namespaces:
        raise UnknownNamespace(f"namespace {namespace!r} of {topic!r} does not exist", value=namespace)
    owner = host.view.lookup(topic)
    if owner is not None:
        return owner
    bundle = host.view.bundle_of_topic(topic)
    deadline = host.now_ms + max_ms
    while host.now_ms < deadline:
        ticket = host.submit(AssignBundle(command_id=host.command_id("lookup"), epoch=host.epoch,
                                          bundle=bundle, reason="lookup"))
        host.run_until(lambda t=ticket: t.done, deadline - host.now_ms)  # type: ignore[misc]
        if ticket.error is not None and not ticket.error.retriable:
            if isinstance(ticket.error, StaleEpoch) and host.epoch > ticket.command.epoch:
                continue  # a leader was elected while it travelled: ask the new one
            raise ticket.error
        step = min(host.settings.lookup_retry_ms, deadline - host.now_ms)
        if host.run_until(lambda: host.view.lookup(topic) is not None, step):
            break
    return host.view.lookup(topic)
