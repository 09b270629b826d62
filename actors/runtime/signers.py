"""Which identity signs a body's appends, and a host's keyring of them.

Invariants:
- a body's identity follows from what it is: the leader candidate ``leader:<candidate id>``,
  a namespace shard ``namespace:<shard>/<shards>``, a broker ``broker:<id>``; a body that writes
  nothing (the clients) has none (``identity_name``);
- a ``Keyring`` issues each identity once from the host's root and keeps it; it holds the root,
  so it belongs to the process that founds the cluster (an in-process host, the simulator), never
  to a reader.
"""

from __future__ import annotations

from actors.body import Body
from events.authority import identity_name, shard_instance
from events.signing import Identity, Root


def body_identity(body: Body) -> str | None:
    """The identity name ``body`` signs with (None: it writes nothing)."""
    candidate = getattr(body, "candidate_id", None)
    if isinstance(candidate, str):
        return identity_name("leader", candidate)
    broker = getattr(body, "broker_id", None)
    if isinstance(broker, str):
        return identity_name("broker", broker)
    shard, shards = getattr(body, "shard", None), getattr(body, "shards", None)
    if isinstance(shard, int) and isinstance(shards, int):
        return identity_name("namespace", shard_instance(shard, shards))
    return None


class Keyring:
    """The identities a host's bodies sign with, issued from its root on first use."""

    def __init__(self, root: Root) -> None:
        self.root = root
        self._issued: dict[str, Identity] = {}

    def identity(self, name: str) -> Identity:
        found = self._issued.get(name)
        if found is None:
            found = self._issued[name] = self.root.issue(name)
        return found

    def for_body(self, body: Body | None) -> Identity | None:
        name = None if body is None else body_identity(body)
        return None if name is None else self.identity(name)
