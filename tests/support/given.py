"""Given / when / then for one actor body, with no host: the body is fed records and commands
directly, and what it asks for (its ``Effects``) is the observable outcome.

``given`` folds history the way a (re)started body recovers it; ``when_*`` is one reaction;
``appended`` lists what the body would append, as (key, type, payload). Records get per-key seqs,
offsets in log order and the epoch they are given, as a log would stamp them.
"""

from __future__ import annotations

from typing import Any

from actors.body import Body
from actors.effects import Effects
from events.catalog import Command, Event
from events.envelope import Envelope
from events.log.port import Record

START_MS = 1_700_000_000_000


class GivenBody:
    """One body under test, its log so far and a clock the test moves."""

    def __init__(self, body: Body) -> None:
        self.body = body
        self.records: list[Record] = []
        self.seqs: dict[str, int] = {}
        self.now_ms = START_MS

    def record(self, event: Event, *, key: str | None = None, epoch: int = 1,
               causation_id: str | None = None) -> Record:
        """``event`` as the log would hold it next (appended to this log, not yet folded)."""
        key = key or event.default_key()
        self.seqs[key] = self.seqs.get(key, 0) + 1
        envelope = Envelope(f"e-{len(self.records)}", event.TYPE, event.VERSION, key, self.seqs[key],
                            epoch, self.now_ms, causation_id, None, event.to_payload())
        found = Record(0, len(self.records), envelope)
        self.records.append(found)
        return found

    def given(self, *events: Event | tuple[str, Event], epoch: int = 1) -> GivenBody:
        """History the body recovers from (a key beside an event overrides its default key)."""
        fresh = [self.record(e[1], key=e[0], epoch=epoch) if isinstance(e, tuple)
                 else self.record(e, epoch=epoch) for e in events]
        self.body.recover(fresh)
        return self

    def when_command(self, command: Command) -> Effects:
        return self.body.on_command(command, self.now_ms)

    def when_event(self, event: Event, *, key: str | None = None, epoch: int = 1) -> Effects:
        return self.body.on_event(self.record(event, key=key, epoch=epoch), self.now_ms)

    def when_tick(self, after_ms: int = 0) -> Effects:
        self.now_ms += after_ms
        return self.body.on_tick(self.now_ms)

    def fold(self, effects: Effects) -> None:
        """What the host does with an accepted reaction: its appends come back through the log."""
        for key, event in effects.append:
            self.body.on_event(self.record(event, key=key, epoch=effects.epoch,
                                           causation_id=effects.causation_id), self.now_ms)


def appended(effects: Effects) -> list[tuple[str, str, dict[str, Any]]]:
    """(key, type, payload) of every event the reaction would append, in order."""
    return [(key, event.TYPE, event.to_payload()) for key, event in effects.append]
