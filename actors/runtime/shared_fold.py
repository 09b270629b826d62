"""SharedFold: one fold of the log that all the bodies of an in-process host read.

A hundred brokers in one process each folding every record into a view of their own is the
in-process host's cost, not the cluster's (13.6M folds at 100 x 65,536). Every body
folds the same records in the same order, so the ``Follower`` part of each is the same function
of the same log: the host folds it once, into its client's view, and lets the bodies read it.

Invariants:
- ``fold`` folds each record into the base exactly once, in log order, and remembers per offset
  whether the base accepted it (``accepted``: not a repeat, written by a writer entitled to it);
  a body that ``share``s the fold folds only its own part, of accepted records;
- the host hands a record to the bodies right after the base folded it and before the next
  record is folded, so a body reacting to a record reads the view exactly as of that record;
- after a record that changed the base's election state (epoch, leader, ``_leader`` seq) every
  body takes it (``Follower.follow_base``) before any reacts;
- a broker body gets only the records ``actors.broker.concerned`` names it in (for any other
  its fold and reaction do nothing); every other body gets every accepted record.
"""

from __future__ import annotations

import heapq
import itertools
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence

from actors.body import Body, Follower
from actors.broker import BrokerBody, concerned
from actors.settings import broker_body_name
from events.log.port import Record


class SharedFold:
    """The base fold; per offset, whether it accepted the record there; per broker, where in
    the host's records the accepted records that concern it are (a restart folds those only)."""

    def __init__(self, base: Follower) -> None:
        self.base = base
        self._accepted = bytearray()
        self._election = self._election_of(base)
        self._concerning: dict[str, list[int]] = {}
        self._everyone: list[int] = []
        """Positions of accepted records that concern every broker (a new epoch)."""
        self.last_concerned: tuple[str | None, ...] | None = None
        """The brokers the last accepted record concerns (None: all)."""

    @staticmethod
    def _election_of(base: Follower) -> tuple[int, str | None, int]:
        return base.epoch, base.leader_id, base.leader_seq

    def fold(self, record: Record, position: int) -> bool:
        """Fold ``record`` (at ``position`` of the host's records) into the base; whether the
        bodies should see it."""
        accepted = self.base.fold(record)
        offset, flags = record.offset, self._accepted
        if offset >= len(flags):
            flags.extend(bytes(max(offset + 1 - len(flags), len(flags))))
        flags[offset] = accepted
        if accepted:
            names = self.last_concerned = concerned(record)
            if names is None:
                self._everyone.append(position)
            else:
                for name in set(names):
                    if name is not None:
                        self._concerning.setdefault(name, []).append(position)
        return accepted

    def accepted(self, record: Record) -> bool:
        offset = record.offset
        return offset < len(self._accepted) and bool(self._accepted[offset])

    def positions_for(self, broker: str, start: int, end: int) -> Iterator[int]:
        """Ascending positions in [start, end) of the accepted records concerning ``broker``."""
        own, everyone = self._concerning.get(broker, []), self._everyone
        return heapq.merge(own[bisect_left(own, start):bisect_left(own, end)],
                           everyone[bisect_left(everyone, start):bisect_left(everyone, end)])

    def election_moved(self) -> bool:
        """The last fold changed the base's election state (the bodies must take it)."""
        election = self._election_of(self.base)
        if election == self._election:
            return False
        self._election = election
        return True


def recipients(names: tuple[str | None, ...] | None, bodies: Mapping[str, Body],
               others: list[str]) -> list[str]:
    """The names of the bodies to hand a record to, in name order: every body in ``others``
    (no broker among them) and the live brokers the record concerns (``names``; None: all)."""
    if names is None:
        return sorted(bodies)
    brokers = {broker_body_name(n) for n in names if n is not None} & bodies.keys()
    return sorted(brokers.union(others)) if brokers else others


def history_for(shared: SharedFold, body: Body, records: Sequence[Record], start: int,
                end: int) -> Iterable[Record]:
    """The records ``records[start:end]`` a restarted ``body`` folds: a broker's own, every
    record for the others."""
    if not isinstance(body, BrokerBody):
        return itertools.islice(records, start, end)
    return (records[p] for p in shared.positions_for(body.broker_id, start, end))
