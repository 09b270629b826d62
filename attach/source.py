"""The shell that reads a running Pulsar: its REST admin API and its load balancer's system topics.

REST goes through ``lbctl.admin_http.AdminHttp`` (token auth, client.conf), topics through
Apache's Python client (``pulsar-client``): a reader from the earliest message (or just after a
given one) on the ownership channel, readers from the latest message on the two
non-persistent load topics.

Invariants: every call names Pulsar's URL when it fails (``Unavailable``, retriable: the mirror
tries again next cycle); readers are blocking and are only called from worker threads
(``asyncio.to_thread``), one thread per reader at a time; ``close`` releases the client.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlparse

from attach.channel import CHANNEL_TOPIC, SourceMessage
from attach.loads import BROKER_LOAD_TOPIC, TOP_BUNDLES_TOPIC
from attach.positions import Position
from balancer.errors import InvalidInput, LoadBalancerError, Unavailable
from lbctl.admin_http import AdminHttp

V2 = "/admin/v2"
RECEIVER_QUEUE = 10_000
"""Channel messages the client fetches ahead (a catch-up reads thousands at a time)."""
NEXT_WAIT_MS = 2
"""How long a read of a non-persistent topic waits for one more message once it has some."""
EXTENSIBLE = "extensible"
MODULAR = "modular"


def boundaries_of(answer: Any, where: str) -> list[int]:
    """The edges of a ``.../bundles`` answer (``{"boundaries": ["0x00000000", ...]}``)."""
    found = answer.get("boundaries") if isinstance(answer, dict) else None
    if not isinstance(found, list) or len(found) < 2:
        raise InvalidInput(f"{where}: no bundle boundaries in Pulsar's answer", value=where)
    return [int(str(b), 16) for b in found]


@dataclass
class PulsarSource:
    """One Pulsar cluster, reached at ``http`` (its web service)."""

    http: AdminHttp
    cluster: str = ""
    service_url: str | None = None
    """The binary protocol URL for the client (default: the web service URL, HTTP lookups)."""
    _client: Any = None
    _readers: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return self.http.url.rstrip("/")

    @property
    def scheme(self) -> str:
        return urlparse(self.url).scheme or "http"

    # -- REST ------------------------------------------------------------------------------
    def get(self, path: str, *, on: str | None = None) -> Any:
        """``GET path`` on the web service (``on``: that broker's, ``host:port``)."""
        http = self.http if on is None else AdminHttp(f"{self.scheme}://{on}", self.http.token)
        return http.call("GET", path)

    def metrics(self, on: str) -> str:
        """The Prometheus text of broker ``on`` (``host:port``)."""
        found = self.get("/metrics", on=on)
        return found if isinstance(found, str) else ""

    def discover_cluster(self, name: str | None = None) -> str:
        """The cluster's name: ``name`` if given, else the first of ``/admin/v2/clusters``."""
        if name:
            self.cluster = name
            return name
        found = self.get(f"{V2}/clusters")
        if not isinstance(found, list) or not found:
            raise Unavailable(f"{self.url}: /admin/v2/clusters lists no cluster", value=self.url)
        self.cluster = str(sorted(found)[0])
        return self.cluster

    def brokers(self) -> list[str]:
        found = self.get(self.brokers_path())
        return sorted(str(b) for b in found) if isinstance(found, list) else []

    def brokers_path(self) -> str:
        return f"{V2}/brokers/{quote(self.cluster)}"

    def leader(self) -> Any:
        return self.get(f"{V2}/brokers/leaderBroker")

    def bundles_path(self, namespace: str) -> str:
        return f"{V2}/namespaces/{namespace}/bundles"

    def boundaries(self, namespace: str) -> list[int]:
        return boundaries_of(self.get(self.bundles_path(namespace)), f"GET {self.bundles_path(namespace)}")

    def load_manager(self) -> str:
        """``extensible`` or ``modular``: the runtime configuration's ``loadManagerClassName``,
        else what the load-report path answers (500 under the extensible manager)."""
        try:
            conf = self.get(f"{V2}/brokers/configuration/runtime")
            name = str(conf.get("loadManagerClassName", "")) if isinstance(conf, Mapping) else ""
            if name:
                return EXTENSIBLE if "Extensible" in name else MODULAR
        except LoadBalancerError:
            pass  # not a superuser, or an older broker: ask the load report instead
        try:
            self.get(f"{V2}/broker-stats/load-report")
        except Unavailable:
            return EXTENSIBLE
        return MODULAR

    def owned(self, broker: str) -> dict[str, Any]:
        """Bundle -> status of what ``broker`` owns (asked of that broker)."""
        found = self.get(self.owned_path(broker), on=broker)
        return dict(found) if isinstance(found, Mapping) else {}

    def owned_path(self, broker: str) -> str:
        return f"{V2}/brokers/{quote(self.cluster)}/{broker}/ownedNamespaces"

    def load_report(self, broker: str) -> Any:
        return self.get(f"{V2}/broker-stats/load-report", on=broker)

    # -- topics ----------------------------------------------------------------------------
    def _pulsar_client(self) -> Any:
        if self._client is None:
            import pulsar

            auth = pulsar.AuthenticationToken(self.http.token) if self.http.token else None
            self._client = pulsar.Client(self.service_url or self.url, authentication=auth,
                                         operation_timeout_seconds=30, logger=_quiet_logger())
        return self._client

    def open_readers(self, channel_after: Position | None, *, loads: bool = True,
                     compacted: bool = True) -> None:
        """Readers on the channel (from its earliest message, or just after ``channel_after``;
        ``compacted``: Pulsar's compacted view first, the latest record of every bundle, then
        every message since; else every message the topic still holds) and, with ``loads``, on
        the two load topics (from their latest message)."""
        import pulsar

        client = self._pulsar_client()
        if channel_after is None:
            start = pulsar.MessageId.earliest
        else:
            start = pulsar.MessageId(channel_after.partition, channel_after.ledger, channel_after.entry,
                                     channel_after.batch)
        try:
            self._readers[CHANNEL_TOPIC] = client.create_reader(CHANNEL_TOPIC, start, is_read_compacted=compacted,
                                                                  receiver_queue_size=RECEIVER_QUEUE)
            if loads:
                for topic in (BROKER_LOAD_TOPIC, TOP_BUNDLES_TOPIC):
                    self._readers[topic] = client.create_reader(topic, pulsar.MessageId.latest)
        except Exception as exc:  # the client raises its own exception types
            raise Unavailable(f"{self.url}: cannot read Pulsar's system topics ({exc})",
                              value=self.url) from None

    def topics(self) -> list[str]:
        return list(self._readers)

    def read(self, topic: str, limit: int, wait_ms: int) -> list[SourceMessage]:
        """Up to ``limit`` messages of ``topic``: waits ``wait_ms`` for the first, then takes
        what the topic holds beyond it (blocking: call from a worker thread)."""
        import pulsar

        reader = self._readers[topic]
        out: list[SourceMessage] = []
        # The channel is persistent: the reader knows whether more is there (no waiting); a
        # non-persistent topic cannot say (its last message id is unknown), so it is waited on.
        persistent = topic.startswith("persistent://")
        try:
            while len(out) < limit and (not out or not persistent or reader.has_message_available()):
                wait = wait_ms if not out else (wait_ms if persistent else NEXT_WAIT_MS)
                out.append(_message(topic, reader.read_next(timeout_millis=max(1, wait))))
        except pulsar.Timeout:
            pass
        except Exception as exc:
            if not out:
                raise Unavailable(f"{self.url}: reading {topic} failed ({exc})", value=topic) from None
        return out

    def close(self) -> None:
        with self._lock:
            for reader in self._readers.values():
                with contextlib.suppress(Exception):  # best effort: the client goes next
                    reader.close()
            self._readers.clear()
            if self._client is not None:
                with contextlib.suppress(Exception):
                    self._client.close()
                self._client = None


def _message(topic: str, message: Any) -> SourceMessage:
    ident = message.message_id()
    position = Position(ident.ledger_id(), ident.entry_id(), ident.partition(), ident.batch_index())
    value = None if message.has_null_value() else bytes(message.data())
    return SourceMessage(topic, position, message.partition_key() or "", value,
                         int(message.publish_timestamp()))


def _quiet_logger() -> Any:
    """The client's own log lines go to Python's logging (not the terminal), at warnings."""
    import logging

    logger = logging.getLogger("pulsar.client")
    logger.setLevel(logging.WARNING)
    return logger
