"""Bundles and topics that are never placed by a strategy (Pulsar's NamespaceService and
ExtensibleLoadManagerImpl).

Invariants:
- a heartbeat namespace (``pulsar/<cluster>/<host:port>`` or ``pulsar/<host:port>``) belongs to the
  broker its name carries; an SLA-monitor namespace (``sla-monitor/<cluster>/<host:port>``) too,
  when that broker is available, else it is placed as any other;
- **Project choice:** a heartbeat namespace of an unavailable broker gets no owner (Pulsar answers
  with the dead broker and the lookup fails there);
- the extensible manager's internal topics (its ownership channel and load-data stores) belong to
  the channel owner, the leader.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import NamedTuple

HEARTBEAT = re.compile(r"pulsar/[^/]+/([^:]+:\d+)")
HEARTBEAT_V2 = re.compile(r"pulsar/([^:]+:\d+)")
SLA_MONITOR = re.compile(r"sla-monitor/[^/]+/([^:]+:\d+)")

_SYSTEM = "persistent://pulsar/system/"
INTERNAL_TOPICS = (
    _SYSTEM + "loadbalancer-service-unit-state",
    _SYSTEM + "loadbalancer-broker-load-data",
    _SYSTEM + "loadbalancer-top-bundles-load-data",
)
"""Prefixes of ExtensibleLoadManagerImpl.isInternalTopic (partitions and suffixes included)."""


class Pin(NamedTuple):
    broker: str | None
    reason: str


def pinned_owner(namespace: str, available: Collection[str]) -> Pin | None:
    """The broker a heartbeat or SLA-monitor namespace belongs to; None: place it normally."""
    for pattern in (HEARTBEAT, HEARTBEAT_V2):
        match = pattern.fullmatch(namespace)
        if match is not None:
            broker = match.group(1)
            return Pin(broker if broker in available else None, "heartbeat")
    match = SLA_MONITOR.fullmatch(namespace)
    if match is not None and match.group(1) in available:
        return Pin(match.group(1), "sla-monitor")
    return None


def is_internal_topic(topic: str) -> bool:
    return topic.startswith(INTERNAL_TOPICS)


def internal_topic_owner(topic: str, leader: str | None) -> str | None:
    """The extensible manager's internal topics live on the leader (None: not such a topic)."""
    return leader if is_internal_topic(topic) else None
