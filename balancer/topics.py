"""Topic names and the one rule for a topic's namespace.

Invariants:
- a ``TopicName`` is ``domain://tenant/namespace/local`` or the v1
  ``domain://tenant/cluster/namespace/local``; its domain is ``persistent`` or ``non-persistent``,
  its local name is non-empty without ``/``, and its namespace passes ``validate_namespace``;
- ``parse`` takes the forms Pulsar's ``TopicName.get`` takes: a full name, ``tenant/ns/local``
  (persistent) and a bare ``local`` (``persistent://public/default/local``); a local name that
  holds a ``/`` is refused (Pulsar would read it as v1 with a slashed local name; nothing here
  produces such names, and refusing keeps the namespace rule below a single ``rpartition``);
- the namespace of a topic is everything between ``://`` and the last ``/``: ``tenant/ns`` or
  the v1 ``tenant/cluster/ns``. A partition (``local-partition-N``) lives in its topic's
  namespace: the suffix belongs to the local name. ``namespace_of_topic(str(t)) == t.namespace``
  for every ``TopicName`` t;
- ``str()`` gives the full name, the string that is hashed to find the topic's bundle.
"""

from __future__ import annotations

from dataclasses import dataclass

from balancer.bundles import validate_namespace
from balancer.errors import InvalidBundle, MalformedInput

DOMAINS = ("persistent", "non-persistent")
DEFAULT_NAMESPACE = "public/default"


@dataclass(frozen=True, slots=True)
class TopicName:
    """A full topic name: its domain, its namespace (``tenant/ns`` or v1 ``tenant/cluster/ns``)
    and its local name (which may end in ``-partition-N``)."""

    domain: str
    namespace: str
    local: str

    def __post_init__(self) -> None:
        if self.domain not in DOMAINS or not self.local or "/" in self.local:
            raise MalformedInput(f"topic {self.domain}://{self.namespace}/{self.local}: expected "
                                 "persistent://tenant/namespace/topic", value=str(self))
        validate_namespace(self.namespace)

    @classmethod
    def parse(cls, raw: str) -> TopicName:
        """Any of Pulsar's topic forms; anything else is ``MalformedInput`` naming ``raw``."""
        domain, sep, rest = raw.partition("://")
        if not sep:
            domain, rest = "persistent", raw if "/" in raw else f"{DEFAULT_NAMESPACE}/{raw}"
        parts = rest.split("/")
        if domain not in DOMAINS or len(parts) not in ((3, 4) if sep else (3,)) or not all(parts):
            raise MalformedInput(f"topic {raw!r}: expected persistent://tenant/namespace/topic",
                                 value=raw)
        return cls(domain, validate_namespace("/".join(parts[:-1])), parts[-1])

    @property
    def tenant(self) -> str:
        return self.namespace.partition("/")[0]

    @property
    def cluster(self) -> str | None:
        """The v1 name's cluster segment; None for a v2 name."""
        parts = self.namespace.split("/")
        return parts[1] if len(parts) == 3 else None

    def __str__(self) -> str:
        return f"{self.domain}://{self.namespace}/{self.local}"


def namespace_of_topic(topic: str) -> str:
    """``persistent://tenant/ns/t`` -> ``tenant/ns`` (a v1 name keeps its cluster segment); the
    domain prefix is optional. Fewer than three segments is ``InvalidBundle``. Cheap (every
    lookup runs it) and agrees with ``TopicName.namespace`` on every name ``parse`` takes."""
    _, _, rest = topic.partition("://")
    namespace, _, _ = (rest or topic).rpartition("/")
    if namespace.count("/") < 1:
        raise InvalidBundle(f"{topic!r} is not a topic name (domain://tenant/namespace/topic)",
                            value=topic)
    return namespace
