"""The names the admin verbs are given, read as pulsar-admin reads them: a tenant, a topic in any
of Pulsar's ``TopicName`` forms, a split's positions (a broker's ``host:port``:
``web.shapes.broker_at``, which the REST service reads too).

Invariants: pure (no cluster, no service); a name that is not one is ``MalformedInput`` (exit 2)
naming it as given, before anything is sent; a full topic name is ``domain://tenant/ns/topic``
(or the v1 ``domain://tenant/cluster/ns/topic``), parsed and namespaced by ``balancer.topics``.
"""

from __future__ import annotations

import re

from balancer.errors import MalformedInput
from balancer.topics import TopicName

_NAME = re.compile(r"[-=:.\w]+")  # a tenant's name, as Pulsar's NamedEntity allows it


def tenant_name(raw: str) -> str:
    if not _NAME.fullmatch(raw):
        raise MalformedInput(f"tenant {raw!r}: expected a name such as public", value=raw)
    return raw


def topic_name(raw: str) -> str:
    """The full name of a topic given in any form Pulsar's ``TopicName.get`` takes
    (``balancer.topics.TopicName.parse``)."""
    return str(TopicName.parse(raw))


def split_positions(raw: str | None) -> list[int] | None:
    """``-sb``'s comma-separated hash positions (decimal or 0x...)."""
    if raw is None:
        return None
    try:
        return [int(p.strip(), 0) for p in raw.split(",") if p.strip()]
    except ValueError:
        raise MalformedInput(f"--split-boundaries {raw!r}: expected integers, e.g. 0x40000000,0x80000000",
                             value=raw) from None
