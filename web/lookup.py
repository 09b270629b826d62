"""Pulsar's lookup v2 REST paths over one ``Cluster``.

    GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}          LookupData
    GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}/bundle   "0xLLLLLLLL_0xUUUUUUUU"
    GET /lookup/v2/destination/{domain}/{tenant}/{cluster}/{namespace}/{topic}[/bundle]   the same,
        for a v1 topic name (a namespace with a cluster), where Pulsar's client sends one

Invariants: a lookup is ``Cluster.lookup`` (an owned bundle is a read of the client's view, an
unowned one is placed by the leader first), its answer naming a degraded view of the namespace in
``X-BB-Degraded``; the bundle range is a read of the view and assigns nothing; an unknown
namespace is 404.
"""

from __future__ import annotations

from aiohttp import web

from actors.api import Cluster
from balancer.bundles import BundleId
from balancer.errors import MalformedInput
from balancer.topics import DOMAINS, namespace_of_topic
from web import shapes
from web.replies import answer, degraded, document, text

TOPIC = "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}"
V1_TOPIC = "/lookup/v2/destination/{domain}/{tenant}/{cluster}/{namespace}/{topic}"


def add_routes(app: web.Application, cluster: Cluster) -> None:
    async def lookup(request: web.Request) -> web.Response:
        topic = _topic(request)
        owner = await cluster.lookup(topic)
        url = next((b.url for b in cluster.brokers() if b.broker_id == owner), "")
        namespace = namespace_of_topic(topic)
        return degraded(document(shapes.lookup_data(url)), cluster.ownership().degraded_reason(namespace))

    async def bundle(request: web.Request) -> web.Response:
        topic = _topic(request)
        await cluster.catch_up()
        cluster.bundles(namespace_of_topic(topic))  # names an unknown namespace
        return text(BundleId.parse(cluster.ownership().bundle_of_topic(topic)).range.name)

    for path in (TOPIC, V1_TOPIC):
        app.router.add_get(path + "/bundle", answer(bundle))
        app.router.add_get(path, answer(lookup))


def _topic(request: web.Request) -> str:
    info = request.match_info
    if info["domain"] not in DOMAINS:
        raise MalformedInput(f"topic domain {info['domain']!r}: expected persistent or "
                             "non-persistent", value=info["domain"])
    cluster = f"{info['cluster']}/" if "cluster" in info else ""
    return f"{info['domain']}://{info['tenant']}/{cluster}{info['namespace']}/{info['topic']}"
