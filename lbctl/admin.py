"""The admin verbs' entry: which transport a verb of ``lbctl.admin_verbs`` runs on.

``lbctl --admin-url URL`` (or client.conf's ``webServiceUrl``, ``lbctl.admin_http.endpoint``):
the admin REST service (``lbctl.admin_rest.HttpTransport``). Otherwise the cluster itself
(``lbctl.admin_cluster.ClusterTransport``): ``lbctl --cluster FILE``'s deployment, or what
``lbctl run --keep`` recorded under ``--state-dir``.

A verb that only a running ``lbctl attach --mode advise|drive`` can answer (``steering``: the
balancer's pause, resume and status, the verdicts on its proposals, drains) goes to the web service that
process serves for the state directory, as if ``--admin-url`` named it.

Invariants: a verb runs on exactly one transport, chosen here and nowhere else; on the cluster,
what happened before the verb is not its completion (the client's records so far are polled
away first); the cluster is closed afterwards unless the caller holds it (``lbctl.attach.using``).
"""

from __future__ import annotations

import argparse
import asyncio

from actors.cluster.kept import STATE_FILE, read_spec, state_dir
from lbctl import admin_verbs, drain
from lbctl.admin_cluster import ClusterTransport
from lbctl.admin_http import AdminHttp, endpoint
from lbctl.admin_rest import HttpTransport
from lbctl.admin_verbs import SubParsers, Verb
from lbctl.attach import session
from lbctl.settings import deployment_of


def register(sub: SubParsers) -> None:
    admin_verbs.register(sub, run)
    drain.register(admin_verbs.verbs_of(sub, "brokers"), run)


def run(verb: Verb, args: argparse.Namespace) -> int:
    """``verb`` on the transport ``args`` name."""
    http = endpoint(getattr(args, "admin_url", None), getattr(args, "auth_plugin", None),
                    getattr(args, "auth_params", None), getattr(args, "client_conf", None))
    http = http or _steering_service(args)
    if http is not None:
        return asyncio.run(verb(HttpTransport(http), args))

    async def go() -> int:
        async with session(args.state_dir, deployment_of(args)) as cluster:
            await cluster.catch_up()
            cluster.poll()  # what happened before this command is not its completion
            return await verb(ClusterTransport(cluster), args)

    return asyncio.run(go())


def _steering_service(args: argparse.Namespace) -> AdminHttp | None:
    """For the verbs only a running ``lbctl attach --mode advise|drive`` can answer (its pause,
    resume and status): the web service that process serves for the state directory, if any."""
    if not getattr(args, "steering", False) or getattr(args, "cluster_conf", None):
        return None
    directory = state_dir(args.state_dir)
    if not (directory / STATE_FILE).is_file():
        return None  # the session names the missing file, as for every verb
    spec = read_spec(directory)
    if spec.host != "pulsar" or not spec.web_service_url:  # a mirror (attach.mirror.HOST)
        return None
    return endpoint(spec.web_service_url, getattr(args, "auth_plugin", None),
                    getattr(args, "auth_params", None), None)
