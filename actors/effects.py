"""What an actor body asks its host to do, as a value (docs/design/actors.md §1).

Invariants:
- an ``Effects`` is immutable and says everything a reaction causes: the events to append (in
  order, each under the key its body writes), the commands to send, the reply or the typed error
  for the caller; a body never performs a side effect itself;
- ``epoch`` is the writer's epoch for every append of this value; ``expected_seq`` turns the first
  append under a key into a compare-and-set (leader election); ``causation_id`` is stamped on
  every appended envelope (a command's id makes retries idempotent);
- a rejection is an ``error`` *and* a ``CommandRejected`` event in ``append``, nothing else
  (``rejection``); merging effects keeps the order of both parts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from balancer.errors import ERRORS_BY_CODE, LoadBalancerError
from events.catalog import Command, CommandRejected, Event, Message

_EMPTY: Mapping[str, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Receipt:
    """The reply to an accepted command: the events it caused (type, payload), in order.

    ``duplicate`` is True when the command id had been processed before and the receipt is the
    first one's, rebuilt from the log.
    """

    command_id: str
    events: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    duplicate: bool = False
    detail: Mapping[str, Any] = field(default_factory=dict)

    def types(self) -> list[str]:
        return [kind for kind, _ in self.events]

    def first(self, kind: str) -> Mapping[str, Any] | None:
        """The payload of the first event of type ``kind``, if any."""
        return next((payload for name, payload in self.events if name == kind), None)


@dataclass(frozen=True, slots=True)
class Effects:
    """Events to append, commands to send, and the answer to the caller."""

    append: tuple[tuple[str, Event], ...] = ()
    send: tuple[Command, ...] = ()
    reply: object | None = None
    error: LoadBalancerError | None = None
    epoch: int = 0
    expected_seq: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    causation_id: str | None = None

    def __bool__(self) -> bool:
        return bool(self.append or self.send or self.reply is not None or self.error is not None)

    def __add__(self, other: Effects) -> Effects:
        if not other:
            return self
        if not self:
            return other
        return Effects(
            append=self.append + other.append,
            send=self.send + other.send,
            reply=other.reply if other.reply is not None else self.reply,
            error=self.error or other.error,
            epoch=max(self.epoch, other.epoch),
            expected_seq={**other.expected_seq, **self.expected_seq},
            causation_id=self.causation_id or other.causation_id,
        )


NOTHING = Effects()


def combine(parts: Iterable[Effects]) -> Effects:
    """``sum`` of ``parts`` with ``+``, in one pass (a broker's tick may confirm thousands of
    bundles: adding them pairwise copied the growing tuples each time)."""
    present = [part for part in parts if part]
    if len(present) <= 1:
        return present[0] if present else NOTHING
    replies = [part.reply for part in present if part.reply is not None]
    expected: dict[str, int] = {}
    for part in reversed(present):  # the first part's value wins, as in ``+``
        expected.update(part.expected_seq)
    return Effects(
        append=tuple(item for part in present for item in part.append),
        send=tuple(command for part in present for command in part.send),
        reply=replies[-1] if replies else None,
        error=next((part.error for part in present if part.error), None),
        epoch=max(part.epoch for part in present),
        expected_seq=expected,
        causation_id=next((part.causation_id for part in present if part.causation_id), None),
    )


def appending(key: str, events: Iterable[Event], *, epoch: int,
              causation_id: str | None = None, reply: object | None = None) -> Effects:
    """Effects that append ``events`` under ``key``."""
    return Effects(append=tuple((key, e) for e in events), epoch=epoch,
                   causation_id=causation_id, reply=reply)


def append_plan(effects: Effects) -> list[tuple[str, list[Event], int | None]]:
    """The appends every host makes of ``effects``, in order: each run of consecutive events of
    one key is one atomic append; only a key's first run carries its ``expected_seq`` (the
    compare-and-set the body asked for; the runs after it follow its own records)."""
    plan: list[tuple[str, list[Event], int | None]] = []
    guarded: set[str] = set()
    for key, event in effects.append:
        if plan and plan[-1][0] == key:
            plan[-1][1].append(event)
            continue
        plan.append((key, [event], None if key in guarded else effects.expected_seq.get(key)))
        guarded.add(key)
    return plan


def unanswered(effects: Effects) -> Effects:
    """``effects`` without its reply or error: what a tick caused, which answers nobody."""
    return Effects(append=effects.append, send=effects.send, epoch=effects.epoch,
                   expected_seq=effects.expected_seq)


def sending(*commands: Command) -> Effects:
    return Effects(send=tuple(commands))


def rejection(command: Command, error: LoadBalancerError, *, key: str, epoch: int,
              under: str | None = None) -> Effects:
    """The typed error plus its ``CommandRejected`` event (the only event).

    The event names the command's ``key``; it is appended under ``under`` (default: ``key``)
    when the rejecting body does not write ``key`` itself (the leader rejecting a lookup).
    """
    event = CommandRejected(command_id=command.command_id, command=command.TYPE,
                            error=error.to_dict(), key=key)
    return Effects(append=((under or key, event),), error=error, epoch=epoch,
                   causation_id=command.command_id)


@dataclass(slots=True)
class _Outcome:
    events: list[Message] = field(default_factory=list)
    error: Mapping[str, Any] | None = None


class Outcomes:
    """Command id -> the events it caused, or its rejection, folded from the log.

    A body folds the records of the keys it writes; a repeated command id is then answered with
    the first outcome (``repeat``), without appending anything.
    """

    def __init__(self, kept: int = 100_000) -> None:
        self._by_id: dict[str, _Outcome] = {}
        self.kept = kept
        """The newest ``kept`` command ids are remembered (bounded memory); a repeat of
        an older one is treated as new. Eviction follows log order, so a body rebuilt from the
        log remembers exactly what the live one does."""

    def __len__(self) -> int:
        return len(self._by_id)

    def fold(self, event: Message, causation_id: str | None) -> None:
        if causation_id is None:
            return
        if isinstance(event, CommandRejected):
            self._by_id[causation_id] = _Outcome(error=event.error)
        else:
            self._by_id.setdefault(causation_id, _Outcome()).events.append(event)
        while len(self._by_id) > self.kept:
            del self._by_id[next(iter(self._by_id))]

    def repeat(self, command: Command) -> Effects | None:
        """The first outcome of ``command.command_id`` as effects, or None if it is new."""
        done = self._by_id.get(command.command_id)
        if done is None:
            return None
        if done.error is not None:
            return Effects(error=error_from_dict(done.error))
        events = tuple((event.TYPE, event.to_payload()) for event in done.events)
        return Effects(reply=Receipt(command.command_id, events, duplicate=True))


def error_from_dict(data: Mapping[str, Any]) -> LoadBalancerError:
    """Rebuild the typed error a ``CommandRejected`` event stored (for idempotent repeats)."""
    cls = ERRORS_BY_CODE.get(str(data.get("code", "")), LoadBalancerError)
    return cls(str(data.get("message", "")))
