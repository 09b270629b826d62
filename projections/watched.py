"""The events of a recorded history that one fold watches, decoded in log order.

Invariants: a record whose type is not watched is passed over unread (cheap: the type is in the
envelope); a watched record that does not decode is named in the caller's ``unreadable`` list
(partition, offset, type and why), never skipped in silence, and the fold goes on.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator

from events.catalog import Message
from events.envelope import Envelope
from events.log.port import Record


def watched_events(records: Iterable[Record], watched: Collection[str],
                   unreadable: list[str]) -> Iterator[tuple[Message, Envelope]]:
    """Each watched record's event and its envelope (its time, key and seq), in the order of
    ``records``."""
    for record in records:
        envelope = record.envelope
        if envelope.type not in watched:
            continue
        try:
            event = envelope.typed
        except Exception as exc:  # a record that does not decode is named, never skipped
            unreadable.append(f"{record.partition}:{record.offset}: {envelope.type} unreadable ({exc})")
            continue
        yield event, envelope
