"""See the cluster: ``/metrics`` (Prometheus) and the live dashboard at ``/``.

``add_routes(app, cluster)`` adds to an aiohttp application (``web.app.create_app``):

- ``GET /metrics``: the Prometheus text format (``web.observe.metrics``), unauthenticated like
  Pulsar's default ``authenticateMetricsEndpoint=false``;
- ``GET /``: the dashboard page, drawn by the server from the current state
  (``web.observe.page``), its script and style under ``/static/`` (shipped in this package: no
  CDN, no build step, works with no internet);
- ``/bb/v1/dashboard/...``: its data (``web.observe.dashboard``).

One ``Observer`` per application follows the log from the app's start-up to its clean-up.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from actors.api import Cluster
from web.auth import ROLE
from web.observe import page
from web.observe.dashboard import handlers, state
from web.observe.metrics import exposition, registry_for
from web.observe.observer import Observer

STATIC = Path(__file__).resolve().parent / "static"
OBSERVER: web.AppKey[Observer] = web.AppKey("observer", Observer)


def add_routes(app: web.Application, cluster: Cluster, *, cluster_name: str = "standalone") -> Observer:
    """Add ``/metrics``, the dashboard and its feed to ``app``; the observer they share."""
    observer = Observer(cluster)
    registry = registry_for(observer, cluster_name)
    app[OBSERVER] = observer

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=exposition(registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def index(request: web.Request) -> web.Response:
        return web.Response(text=page.render(state(observer), request.get(ROLE)), content_type="text/html",
                            headers=page.HEADERS)

    async def follow(app: web.Application) -> AsyncIterator[None]:
        observer.start()
        yield
        await observer.stop()

    async def release(app: web.Application) -> None:
        observer.release()

    app.cleanup_ctx.append(follow)
    app.on_shutdown.append(release)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/", index)
    app.router.add_static("/static/", STATIC)
    app.add_routes(handlers(observer))
    return observer
