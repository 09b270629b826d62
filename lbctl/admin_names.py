"""The names the admin verbs are given, read as pulsar-admin reads them: a tenant, a topic in any
of Pulsar's ``TopicName`` forms, a split's positions (a broker's ``host:port``:
``web.shapes.broker_at``, which the REST service reads too).

Invariants: pure (no cluster, no service); a name that is not one is ``MalformedInput`` (exit 2)
naming it as given, before anything is sent; a full topic name is ``domain://tenant/ns/topic``
(or the v1 ``domain://tenant/cluster/ns/topic``), its namespace everything before the last ``/``.
"""

from __future__ import annotations

import re

from balancer.bundles import validate_namespace
from balancer.errors import MalformedInput

_NAME = re.compile(r"[-=:.\w]+")  # a tenant's name, as Pulsar's NamedEntity allows it
DOMAINS = ("persistent", "non-persistent")


def tenant_name(raw: str) -> str:
    if not _NAME.fullmatch(raw):
        raise MalformedInput(f"tenant {raw!r}: expected a name such as public", value=raw)
    return raw


def topic_name(raw: str) -> str:
    """The full name of a topic given as ``domain://t/n/topic``, the v1 ``domain://t/cluster/n/topic``,
    ``t/n/topic`` (persistent) or a bare name (``persistent://public/default/NAME``), the forms
    Pulsar's ``TopicName.get`` takes."""
    domain, sep, rest = raw.partition("://")
    if not sep:
        domain, rest = "persistent", raw if "/" in raw else f"public/default/{raw}"
    parts = rest.split("/")
    if domain not in DOMAINS or len(parts) not in ((3, 4) if sep else (3,)) or not all(parts):
        raise MalformedInput(f"topic {raw!r}: expected persistent://tenant/namespace/topic",
                             value=raw)
    validate_namespace("/".join(parts[:-1]))
    return f"{domain}://{rest}"


def namespace_of(topic: str) -> str:
    """The namespace of a full topic name (``topic_name``'s)."""
    return topic.split("://", 1)[1].rsplit("/", 1)[0]


def split_positions(raw: str | None) -> list[int] | None:
    """``-sb``'s comma-separated hash positions (decimal or 0x...)."""
    if raw is None:
        return None
    try:
        return [int(p.strip(), 0) for p in raw.split(",") if p.strip()]
    except ValueError:
        raise MalformedInput(f"--split-boundaries {raw!r}: expected integers, e.g. 0x40000000,0x80000000",
                             value=raw) from None
