"""``create_app``: the aiohttp application of the web service over one ``Cluster``.

Invariants: every route is added by a side's ``add_routes(app, cluster)`` (``web.admin``:
Pulsar's ``/admin/v2`` and ``/lookup/v2`` paths and the project's ``/bb/v1`` reads;
``web.observe``: ``/metrics``, the probes and the dashboard, added first so that a probe under
``/admin/v2/brokers/`` is not read as a cluster name); the auth middleware, when given,
runs before any handler (``web.auth.PROTECTED`` and the page say which paths it guards; the
dashboard's login, ``web.session``, admits a browser by a cookie), inside the guard
that answers any error no handler answered with a logged 500 (``web.replies.guard``); a body
past ``httpMaxRequestSize`` is refused (413) before it is read.
"""

from __future__ import annotations

from aiohttp import web

from actors.api import Cluster
from web import admin, control, drain, observe, proposals, session
from web.auth import WebAuth
from web.limits import WebLimits
from web.observe.settings import ObserveSettings
from web.replies import LIMITS, guard


def create_app(cluster: Cluster, *, auth: WebAuth | None = None,
               cluster_name: str = admin.DEFAULT_CLUSTER_NAME,
               limits: WebLimits | None = None, observe_settings: ObserveSettings | None = None,
               sessions: session.Sessions | None = None) -> web.Application:
    """The application; ``cluster_name`` is what ``/admin/v2/clusters`` lists (broker.conf's
    ``clusterName``); ``limits`` what one request may be (its body: aiohttp's 413 past it);
    ``observe_settings`` broker.conf's metrics and probe keys; ``sessions`` the dashboard's
    logins (made here when authentication is on and none is given)."""
    limits = limits or WebLimits()
    if sessions is None and auth is not None and auth.authentication_enabled:
        sessions = session.Sessions(auth)
    middlewares = [guard(), *([auth.middleware(sessions)] if auth is not None else [])]
    app = web.Application(middlewares=middlewares, client_max_size=limits.max_body)
    app[LIMITS] = limits
    session.add_routes(app, auth, sessions)
    observe.add_routes(app, cluster, cluster_name=cluster_name, settings=observe_settings)
    admin.add_routes(app, cluster, cluster_name=cluster_name)
    control.add_routes(app, cluster)
    drain.add_routes(app, cluster)
    proposals.add_routes(app, cluster)
    return app
