"""Pulsar's admin v2 and lookup v2 REST paths, and the project's own reads, over one ``Cluster``.

Filled in by the verbs of issue 21; this first cut serves what a client needs to see that the
service is up: the cluster list and the leader broker.
"""

from __future__ import annotations

from aiohttp import web

from actors.api import Cluster

CLUSTER_NAME = "standalone"


def add_routes(app: web.Application, cluster: Cluster) -> None:
    async def clusters(request: web.Request) -> web.Response:
        return web.json_response([CLUSTER_NAME])

    async def leader(request: web.Request) -> web.Response:
        leader_id, _ = cluster.leader()
        return web.json_response({"serviceUrl": leader_id, "brokerId": leader_id})

    app.router.add_get("/admin/v2/clusters", clusters)
    app.router.add_get("/admin/v2/brokers/leaderBroker", leader)
