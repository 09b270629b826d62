"""See the cluster: ``/metrics`` (Prometheus) and the live dashboard at ``/``.

``add_routes(app, cluster)`` adds to an aiohttp application (``web.app.create_app``):

- ``GET /metrics`` and ``/metrics/`` (a Pulsar broker serves both): the Prometheus text format
  (``web.observe.metrics``), unauthenticated like Pulsar's default
  ``authenticateMetricsEndpoint=false``;
- a Pulsar broker's probes (``web.observe.probes``): ``/status.html``,
  ``/admin/v2/brokers/health`` and ``/admin/v2/brokers/ready``; ``add_routes`` runs before the
  admin paths' so that these are not read as a cluster name;
- a middleware that counts and times the topic lookups (``web.observe.lookups``) for Pulsar's
  ``pulsar_broker_lookup*`` metrics;
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
from web.observe.lookups import LookupStats, lookup_timer
from web.observe.metrics import exposition, registry_for
from web.observe.observer import Observer
from web.observe.probes import add_probes
from web.observe.settings import ObserveSettings

STATIC = Path(__file__).resolve().parent / "static"
OBSERVER: web.AppKey[Observer] = web.AppKey("observer", Observer)


def add_routes(app: web.Application, cluster: Cluster, *, cluster_name: str = "standalone",
               settings: ObserveSettings | None = None) -> Observer:
    """Add ``/metrics``, the probes, the dashboard and its feed to ``app``; the observer they
    share. ``settings``: broker.conf's ``exposeBundlesMetricsInPrometheus`` and ``statusFilePath``."""
    settings = settings or ObserveSettings()
    observer = Observer(cluster)
    lookups = LookupStats()
    registry = registry_for(observer, cluster_name, expose_bundles=settings.expose_bundles,
                            lookups=lookups)
    app.middlewares.append(lookup_timer(lookups))  # inside the guard and the auth check
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
    app.router.add_get("/metrics/", metrics)
    add_probes(app, cluster, observer, settings.status_file_path)
    app.router.add_get("/", index)
    app.router.add_static("/static/", STATIC)
    app.add_routes(handlers(observer))
    return observer
