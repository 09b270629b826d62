"""Who may write what: the rules a record's writer is held to, as pure functions.

Invariants:
- a *leader-written* record is one only the leader of some epoch writes: anything under
  ``_leader`` or ``_cluster``, and a broker's ``BrokerLeft(expired)`` (the leader's expiry of it).
  Such a record is fenced by the newest election, not by its key's own history: once epoch E is
  elected, a write at an epoch below E is a deposed leader's (the store refuses it, a fold of one
  ordered stream names it ``stale_epoch``), whichever key it goes to;
- nothing here reads a clock, a file or the log: the store and the folds call these rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from events.catalog import CLUSTER_KEY, LEADER_KEY, BrokerLeft, Message

LEADER_KEYS = frozenset((LEADER_KEY, CLUSTER_KEY))
"""Keys only a leader writes."""


def leader_write(key: str, messages: Iterable[Message]) -> bool:
    """An append of ``messages`` under ``key`` is a leader's (fenced by the newest election)."""
    return key in LEADER_KEYS or any(isinstance(m, BrokerLeft) and m.reason == "expired" for m in messages)


def leader_written(key: str, type_name: str, payload: dict[str, Any]) -> bool:
    """A stored record (its key, type and payload) is a leader's."""
    return key in LEADER_KEYS or (type_name == BrokerLeft.TYPE and payload.get("reason") == "expired")
