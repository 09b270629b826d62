"""``create_app``: the aiohttp application of the web service over one ``Cluster``.

Invariants: every route is added by a side's ``add_routes(app, cluster)`` (``web.admin``:
Pulsar's ``/admin/v2`` and ``/lookup/v2`` paths and the project's ``/bb/v1`` reads;
``web.observe``, issue 22: ``/metrics`` and the dashboard); the auth middleware, when given,
runs before any handler (``web.auth.PROTECTED`` says which paths it guards).
"""

from __future__ import annotations

from aiohttp import web

from actors.api import Cluster
from web import admin, control, observe
from web.auth import WebAuth


def create_app(cluster: Cluster, *, auth: WebAuth | None = None,
               cluster_name: str = admin.DEFAULT_CLUSTER_NAME) -> web.Application:
    """The application; ``cluster_name`` is what ``/admin/v2/clusters`` lists (broker.conf's
    ``clusterName``)."""
    middlewares = [auth.middleware()] if auth is not None else []
    app = web.Application(middlewares=middlewares)
    admin.add_routes(app, cluster, cluster_name=cluster_name)
    observe.add_routes(app, cluster, cluster_name=cluster_name)
    control.add_routes(app, cluster)
    return app
