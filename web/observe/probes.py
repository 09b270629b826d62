"""A Pulsar broker's probes: ``/status.html``, ``/admin/v2/brokers/health`` and ``.../ready``.

- ``GET /status.html`` (Pulsar's ``VipStatus``, unauthenticated): ``OK`` (200) while the service
  is up and, when broker.conf sets ``statusFilePath``, that file exists; 404 otherwise (an
  operator deletes the file to take the service out of a load balancer's rotation). Pulsar also
  answers 404 when no ``statusFilePath`` is set; here an unset path does not take the service
  out of rotation (docs/operations.md says so);
- ``GET /admin/v2/brokers/ready`` (``BrokersBase.isReady``): ``ok`` while the service is up,
  500 without a body while it shuts down;
- ``GET /admin/v2/brokers/health[?topicVersion=V1|V2][&brokerId=B]`` (``BrokersBase.healthCheck``,
  an admin path: a super-user's token when authorisation is on): 503 without a body while the
  service shuts down; else the cluster's log is read to its end within ``HEALTH_TIMEOUT_S``
  (what Pulsar proves with a message through its heartbeat topic) and the broker, the service's
  home broker unless ``brokerId`` names another, must be registered: then ``ok``. A log that does
  not answer is 503, an unknown broker 404, a bad ``topicVersion`` 404 (Jersey's answer to a
  query value it cannot convert), each with Pulsar's ``{"reason": ...}`` naming the value.

Invariants: these routes are added before the admin paths, so ``/admin/v2/brokers/health`` is
never read as the cluster ``health`` of ``/admin/v2/brokers/{cluster}``; no probe changes anything.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web

from actors.api import Cluster
from balancer.errors import Unavailable
from web.documents import check_health
from web.observe.observer import Observer
from web.replies import refused, text

HEALTH_TIMEOUT_S = 10.0
TOPIC_VERSIONS = ("V1", "V2")


def add_probes(app: web.Application, cluster: Cluster, observer: Observer,
               status_file_path: str | None) -> None:
    """The three probes above, on ``app``; ``observer.closing`` says the service shuts down."""

    async def status(request: web.Request) -> web.Response:
        present = status_file_path is None or Path(status_file_path).is_file()
        if observer.closing or not present:
            raise web.HTTPNotFound()
        return web.Response(text="OK", content_type="text/plain")

    async def ready(request: web.Request) -> web.Response:
        return web.Response(status=500) if observer.closing else text("ok")

    async def health(request: web.Request) -> web.Response:
        if observer.closing:
            return web.Response(status=503)
        version = request.query.get("topicVersion")
        if version is not None and version not in TOPIC_VERSIONS:
            return refused(404, f"topicVersion={version[:40]}: expected V1 or V2")
        try:
            await asyncio.wait_for(cluster.catch_up(), HEALTH_TIMEOUT_S)
        except (TimeoutError, OSError, Unavailable) as exc:
            return refused(503, f"health check: the cluster's log did not answer within "
                                f"{HEALTH_TIMEOUT_S:g} s ({type(exc).__name__})")
        try:
            check_health(cluster)  # a leader elected and a broker registered
        except Unavailable as exc:
            return refused(503, f"health check: {exc.message}")
        registered = [status.broker_id for status in cluster.brokers()]
        broker = request.query.get("brokerId") or registered[0]
        if broker not in registered:
            return refused(404, f"broker {broker[:120]} is not registered")
        return text("ok")

    app.router.add_get("/status.html", status)
    app.router.add_get("/admin/v2/brokers/ready", ready)
    app.router.add_get("/admin/v2/brokers/health", health)
