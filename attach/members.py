"""Pulsar's brokers and its leader -> ``BrokerRegistered``/``BrokerLeft`` and ``LeaderElected``.

The shell polls ``GET /admin/v2/brokers/{cluster}`` (the active brokers' ids,
``host:webServicePort``) and ``GET /admin/v2/brokers/leaderBroker``; ``Members`` turns each poll
into the events that make the log's registry and leader equal to what Pulsar answered.

Invariants: pure (no I/O, no clock); a broker in the answer and not registered in the log gets
``BrokerRegistered``; a registered one missing from the answer gets ``BrokerLeft(reason="expired")``
(Pulsar drops a broker from the list when its registration lapses, gracefully or not: the list
does not say which); a leader other than the log's newest gets ``LeaderElected`` with the next
epoch (epochs only rise, so the mirror's own appends are never fenced); ``observe`` folds the
same events back from the log after a restart.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlparse

from attach.channel import Append
from events.catalog import LEADER_KEY, BrokerLeft, BrokerRegistered, Event, LeaderElected


class Members:
    """The log's registry and leader, as far as the mirror wrote them."""

    def __init__(self) -> None:
        self.brokers: dict[str, BrokerRegistered] = {}
        self.leader: str | None = None
        self.epoch = 0

    def observe(self, event: Event) -> None:
        if isinstance(event, BrokerRegistered):
            self.brokers[event.broker_id] = event
        elif isinstance(event, BrokerLeft):
            self.brokers.pop(event.broker_id, None)
        elif isinstance(event, LeaderElected) and event.epoch >= self.epoch:
            self.leader, self.epoch = event.leader_id, event.epoch

    def brokers_seen(self, ids: Iterable[str], *, scheme: str, ts_ms: int, causation_id: str) -> list[Append]:
        """The appends that make the registry ``ids``."""
        found = sorted(set(ids))
        out: list[Append] = []
        for broker in found:
            if broker not in self.brokers:
                joined = BrokerRegistered(broker_id=broker, url=f"{scheme}://{broker}")
                out.append(Append(broker, (joined,), ts_ms, (causation_id,)))
        for broker in sorted(set(self.brokers) - set(found)):
            out.append(Append(broker, (BrokerLeft(broker_id=broker, reason="expired"),), ts_ms, (causation_id,)))
        for append in out:
            for event in append.events:
                self.observe(event)
        return out

    def leader_seen(self, leader: str | None, *, ts_ms: int, causation_id: str) -> list[Append]:
        """The election that makes ``leader`` the log's leader (none if it already is)."""
        if leader is None or leader == self.leader:
            return []
        event = LeaderElected(leader_id=leader, epoch=self.epoch + 1)
        self.observe(event)
        return [Append(LEADER_KEY, (event,), ts_ms, (causation_id,))]


def leader_id(answer: object) -> str | None:
    """The broker id in ``/admin/v2/brokers/leaderBroker``'s answer (``brokerId``, else the
    host:port of its ``serviceUrl``)."""
    if not isinstance(answer, dict):
        return None
    broker = answer.get("brokerId")
    if isinstance(broker, str) and broker:
        return broker
    url = answer.get("serviceUrl")
    if isinstance(url, str) and url:
        return urlparse(url).netloc or url
    return None
