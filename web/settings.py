"""What broker.conf says about the web service: ``webServicePort``, the auth keys, the limits,
the metrics and probe keys (``web.observe.settings``), from the pairs of the process's one read of
the file (``actors.conf.Settings.pairs``).

Invariants: the keys are Pulsar's (``LoadBalancerConfig`` reads the same file and ignores
them as keys of another component); no ``webServicePort`` means no web service for ``lbctl run``
(Pulsar's default, 8080, applies where a broker.conf sets the key without a value); a bad value
is one ``ConfigError`` naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from balancer.config import broker_conf_pairs
from balancer.errors import ConfigError
from web.admin import DEFAULT_CLUSTER_NAME
from web.auth import WebAuth
from web.limits import WebLimits
from web.observe.settings import ObserveSettings

PULSAR_DEFAULT_PORT = 8080
LOOPBACK = "127.0.0.1"
APPLIED_KEYS = frozenset({
    "webServicePort", "clusterName", "bindAddress", "httpMaxRequestSize", "httpMaxRequestHeaderSize",
    "authenticationEnabled", "authenticationProviders", "tokenSecretKey", "tokenPublicKey",
    "tokenPublicAlg", "tokenAuthClaim", "authorizationEnabled", "superUserRoles"})
"""The keys of other broker components that a running web service applies: while it runs they
are not "outside load balancing ignored" (``LoadBalancerConfig.notice``)."""


@dataclass(frozen=True)
class WebSettings:
    """The web service of one broker.conf: its port (None: off) and its auth (None: open)."""

    port: int | None = None
    auth: WebAuth | None = None
    cluster_name: str = DEFAULT_CLUSTER_NAME
    """``clusterName``: what ``/admin/v2/clusters`` lists and cluster paths must name."""
    bind_address: str = LOOPBACK
    """``bindAddress``: where the service listens. Pulsar's default is every interface; ours is
    the loopback unless broker.conf says otherwise (a container sets 0.0.0.0, compose/)."""
    limits: WebLimits = field(default_factory=WebLimits)
    """What one request may be (``httpMaxRequestSize``, ``httpMaxRequestHeaderSize``,
    ``webServiceMaxJsonDepth``)."""
    observe: ObserveSettings = field(default_factory=ObserveSettings)
    """``exposeBundlesMetricsInPrometheus`` and ``statusFilePath``."""

    @classmethod
    def from_pairs(cls, pairs: Mapping[str, str]) -> WebSettings:
        """From broker.conf's pairs as the one read of the file gave them (``actors.conf``:
        ``Settings.pairs``; no pairs: no service, no auth)."""
        return cls(port=_port(pairs.get("webServicePort")), auth=WebAuth.from_broker_conf(pairs),
                   cluster_name=pairs.get("clusterName") or DEFAULT_CLUSTER_NAME,
                   bind_address=pairs.get("bindAddress") or LOOPBACK, limits=WebLimits.from_pairs(pairs),
                   observe=ObserveSettings.from_pairs(pairs))

    @classmethod
    def from_text(cls, text: str) -> WebSettings:
        """From broker.conf text (tests; a process reads its file once, ``actors.conf``)."""
        return cls.from_pairs(broker_conf_pairs(text))


def _port(value: str | None) -> int | None:
    if value is None:
        return None
    if not value.strip():
        return PULSAR_DEFAULT_PORT
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ConfigError(f"webServicePort={value}: expected a port number 0-65535",
                          key="webServicePort", value=value)
    return port
