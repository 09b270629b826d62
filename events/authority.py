"""Who may write what: the rules a record's writer is held to, as pure functions.

Invariants:
- a *leader-written* record is one only the leader of some epoch writes: anything under
  ``_leader`` or ``_cluster``, and a broker's ``BrokerLeft(expired)`` (the leader's expiry of it).
  Such a record is fenced by the newest election, not by its key's own history: once epoch E is
  elected, a write at an epoch below E is a deposed leader's (the store refuses it, a fold of one
  ordered stream names it ``stale_epoch``), whichever key it goes to;
- a signed record's signer (``events.signing``: ``role`` or ``role:instance``) is held to its
  role (``may_write``): a leader writes ``_leader``, ``_cluster``, brokers' expiries and, as the
  newest elected leader, namespace keys, each only at an epoch whose election named it; elections
  only of itself, one epoch above the newest (the compare-and-set every candidate makes); a
  namespace shard its namespaces' keys and its own ``_ns:<shard>``; a broker its own key; an
  admin ``_cluster``. An identity without an instance (``broker``) is any of its role;
- nothing here reads a clock, a file or the log: the store and the folds call these rules.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from events.catalog import CLUSTER_KEY, LEADER_KEY, BrokerLeft, LeaderElected, Message
from events.envelope import Envelope
from events.signing import Forged, signature_parts, verify

LEADER_KEYS = frozenset((LEADER_KEY, CLUSTER_KEY))
"""Keys only a leader writes."""
ROLES = ("leader", "namespace", "broker", "admin")
SHARD_KEY_PREFIX = "_ns:"


def leader_write(key: str, messages: Iterable[Message]) -> bool:
    """An append of ``messages`` under ``key`` is a leader's (fenced by the newest election)."""
    return key in LEADER_KEYS or any(isinstance(m, BrokerLeft) and m.reason == "expired" for m in messages)


def leader_written(key: str, type_name: str, payload: Mapping[str, Any]) -> bool:
    """A stored record (its key, type and payload) is a leader's."""
    return key in LEADER_KEYS or (type_name == BrokerLeft.TYPE and payload.get("reason") == "expired")


def identity_name(role: str, instance: str | None = None) -> str:
    """``role`` or ``role:instance``: the name a signing identity is certified under."""
    return role if instance is None else f"{role}:{instance}"


def shard_instance(shard: int, shards: int) -> str:
    """The instance part of a namespace shard's identity."""
    return f"{shard}/{shards}"


def may_write(signer: str, key: str, type_name: str, payload: Mapping[str, Any], epoch: int,
              elected: int | None, leaders: Mapping[int, str]) -> str | None:
    """Why ``signer`` may not have written this record (None: it may). ``elected``: the newest
    election read before it; ``leaders``: epoch -> the leader that election named."""
    role, _, instance = signer.partition(":")
    if role == "leader":
        return _leader(instance, key, type_name, payload, epoch, elected, leaders)
    if role == "namespace":
        return _namespace(signer, instance, key)
    if role == "broker":
        if key in LEADER_KEYS or "/" in key or key.startswith("_") or (instance and key != instance):
            return f"{signer} writes only {'its own broker key' if instance else 'broker keys'}, not {key!r}"
        if leader_written(key, type_name, payload):
            return f"{signer} cannot expire a broker: the leader does"
        return None
    if role == "admin":
        return None if key == CLUSTER_KEY else f"{signer} writes only {CLUSTER_KEY!r}, not {key!r}"
    return f"{signer!r} is of no role that writes ({', '.join(ROLES)})"


def _leader(candidate: str, key: str, type_name: str, payload: Mapping[str, Any], epoch: int,
            elected: int | None, leaders: Mapping[int, str]) -> str | None:
    signer = identity_name("leader", candidate or None)
    if type_name == LeaderElected.TYPE:
        named = payload.get("leader_id")
        if candidate and named != candidate:
            return f"{signer} cannot elect {named!r}"
        if epoch != (elected or 0) + 1:
            return f"an election at epoch {epoch} after epoch {elected or 0}: epochs rise one at a time"
        return None
    namespace = "/" in key
    if not (namespace or leader_written(key, type_name, payload)):
        return f"{signer} does not write {type_name} under {key!r}"
    leader = leaders.get(epoch)
    if leader is None:
        if elected is None or epoch > elected:
            return None  # not elected yet: the epoch rules hold it or refuse it
        return f"no election named a leader at epoch {epoch}"
    if candidate and leader != candidate:
        return f"{signer} is not the leader of epoch {epoch} ({leader} is)"
    if namespace and epoch != elected:
        return f"{signer} writes a namespace only as the newest leader (epoch {elected}), not at epoch {epoch}"
    return None


def _namespace(signer: str, instance: str, key: str) -> str | None:
    if key.startswith(SHARD_KEY_PREFIX):
        if instance and key[len(SHARD_KEY_PREFIX):] != instance.partition("/")[0]:
            return f"{signer} writes only its own {SHARD_KEY_PREFIX}{instance.partition('/')[0]}, not {key!r}"
        return None
    if "/" not in key:
        return f"{signer} writes only namespace keys, not {key!r}"
    if instance:
        shard, _, shards = instance.partition("/")
        if (shard.isdigit() and shards.isdigit() and int(shards) > 1
                and zlib.crc32(key.encode("utf-8")) % int(shards) != int(shard)):
            return f"{signer} does not write namespace {key!r} (another shard's)"
    return None


def genuine_election(envelope: Envelope, root: bytes | None, elected: int | None) -> bool:
    """Whether the ``LeaderElected`` ``envelope`` may raise the newest election: in a log not
    signed yet (``root`` None), any; else only one signed by a leader candidate this cluster's
    root certified, electing itself one epoch above ``elected`` (what a store's fencing takes
    from it: a forged election would fence every real writer)."""
    if root is None:
        return True
    try:
        signer, _ = verify(envelope, root)
    except Forged:
        return False
    return may_write(signer, envelope.key, envelope.type, envelope.payload, envelope.epoch, elected, {}) is None


def root_of(envelope: Envelope) -> bytes | None:
    """The root key a signed record names (None: unsigned, or not a well-formed signature)."""
    try:
        return signature_parts(envelope.sig)[3] if envelope.sig is not None else None
    except Forged:
        return None
