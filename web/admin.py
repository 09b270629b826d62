"""Pulsar's admin v2 REST paths over one ``Cluster`` (docs/admin-api.md lists each one).

    GET    /admin/v2/clusters                                   [name]
    POST   /admin/v2/clusters/{c}/failureDomains/{d}            {"brokers": [...]} -> 204
    GET    /admin/v2/clusters/{c}/failureDomains[/{d}]          {d: {"brokers": [...]}} | {"brokers": [...]}
    DELETE /admin/v2/clusters/{c}/failureDomains/{d}            204
    GET    /admin/v2/tenants                                    ["tenant", ...]
    GET    /admin/v2/namespaces/{tenant}                        ["tenant/ns", ...]
    PUT    /admin/v2/namespaces/{t}/{n}                         Policies ({"bundles": BundlesData}) -> 204
    GET    /admin/v2/namespaces/{t}/{n}                         Policies
    GET    /admin/v2/namespaces/{t}/{n}/bundles                 BundlesData
    PUT    /admin/v2/namespaces/{t}/{n}/unload                  204
    PUT    /admin/v2/namespaces/{t}/{n}/{bundle}/unload[?destinationBroker=B]           204 (B: id or host:port)
    PUT    /admin/v2/namespaces/{t}/{n}/{bundle}/split?unload=&splitAlgorithmName=      [boundaries] -> 204
           (X-BB-Split-Algorithm: the algorithm that split it)
    POST|GET|DELETE /admin/v2/namespaces/{t}/{n}/antiAffinity   the group, as a bare string
    GET    /admin/v2/brokers[/{c}]                              [broker id, ...]
    GET    /admin/v2/brokers/leaderBroker                       BrokerInfo
    GET    /admin/v2/brokers/health                             (``web.observe.probes``: a broker's probe)
    GET    /admin/v2/broker-stats/load-report                   LocalBrokerData

Invariants: each handler is one call on the ``Cluster`` (no verb is re-implemented here) and
answers as ``web.replies`` says; a change returns once the cluster's view shows it settled; a
cluster name other than this one's is 404, as Pulsar answers for an unknown cluster; the
service answers for its home broker (the first registered) where Pulsar's answers for the
broker it runs in (``broker-stats``); a refusal names the bad value cut short, never a whole body,
and the admin input limits (``actors.limits``) hold here as for every client of the cluster;
every write names its principal (the token's role, ``anonymous`` without authentication),
which its events record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from actors.api import Cluster
from balancer.errors import MalformedInput, UnknownBroker
from web import documents, lookup, own, shapes
from web.auth import principal
from web.replies import (
    ALGORITHM_HEADER,
    answer,
    body_json,
    document,
    done,
    refused,
    text,
    text_body,
)

DEFAULT_CLUSTER_NAME = "standalone"
SPECIFIED = "specified_positions_divide"


def add_routes(app: web.Application, cluster: Cluster, *,
               cluster_name: str = DEFAULT_CLUSTER_NAME) -> None:
    """Every admin v2 path above, plus ``web.lookup``'s and ``web.own``'s."""
    routes = _Routes(cluster, cluster_name)
    v2 = "/admin/v2"
    domains = v2 + "/clusters/{cluster}/failureDomains"
    ns = v2 + "/namespaces/{tenant}/{namespace}"
    add = app.router.add_route
    for method, path, handler in (
        ("GET", v2 + "/clusters", routes.clusters),
        ("GET", domains, routes.domains),
        ("GET", domains + "/{domain}", routes.domain),
        ("POST", domains + "/{domain}", routes.set_domain),
        ("DELETE", domains + "/{domain}", routes.delete_domain),
        ("GET", v2 + "/tenants", routes.tenants),
        ("GET", v2 + "/namespaces/{tenant}", routes.namespaces),
        ("PUT", ns, routes.create_namespace),
        ("GET", ns, routes.policies),
        ("GET", ns + "/bundles", routes.bundles),
        ("PUT", ns + "/unload", routes.unload_namespace),
        ("GET", ns + "/antiAffinity", routes.affinity),
        ("POST", ns + "/antiAffinity", routes.set_affinity),
        ("DELETE", ns + "/antiAffinity", routes.delete_affinity),
        ("PUT", ns + "/{bundle}/unload", routes.unload_bundle),
        ("PUT", ns + "/{bundle}/split", routes.split),
        ("GET", v2 + "/brokers/leaderBroker", routes.leader),
        ("GET", v2 + "/brokers", routes.brokers),
        ("GET", v2 + "/brokers/{cluster}", routes.brokers),
        ("GET", v2 + "/broker-stats/load-report", routes.load_report),
    ):
        add(method, path, answer(handler))
    lookup.add_routes(app, cluster)
    own.add_routes(app, cluster)


class _Routes:
    """The handlers, bound to one cluster and its name."""

    def __init__(self, cluster: Cluster, name: str) -> None:
        self.cluster, self.name = cluster, name

    def _known(self, request: web.Request) -> None:
        asked = request.match_info.get("cluster", self.name)
        if asked != self.name:
            raise web.HTTPNotFound(text=f'{{"reason": "Cluster {asked} does not exist"}}',
                                   content_type="application/json")

    # -- clusters and failure domains ------------------------------------------------------------
    async def clusters(self, request: web.Request) -> web.Response:
        return document([self.name])

    async def domains(self, request: web.Request) -> web.Response:
        self._known(request)
        await self.cluster.catch_up()
        return document({d: shapes.failure_domain(b) for d, b in self.cluster.failure_domains().items()})

    async def domain(self, request: web.Request) -> web.Response:
        self._known(request)
        await self.cluster.catch_up()
        name = request.match_info["domain"]
        found = self.cluster.failure_domains().get(name)
        if found is None:
            return refused(404, f"Domain {name} does not exist in cluster {self.name}")
        return document(shapes.failure_domain(found))

    async def set_domain(self, request: web.Request) -> web.Response:
        self._known(request)
        body = await body_json(request, "failure domain")
        brokers = body.get("brokers") if isinstance(body, Mapping) else None
        if not isinstance(brokers, list) or not all(isinstance(b, str) for b in brokers):
            raise MalformedInput(f"failure domain body {_shown(body)}: expected {{\"brokers\": [ids]}}",
                                 value=_shown(body))
        await self.cluster.catch_up()
        registered = [(b.broker_id, b.url) for b in self.cluster.brokers()]
        await self.cluster.set_failure_domain(request.match_info["domain"],
                                              [shapes.broker_at(b, registered, "broker") for b in brokers],
                                              by=principal(request))
        return done()

    async def delete_domain(self, request: web.Request) -> web.Response:
        self._known(request)
        await self.cluster.delete_failure_domain(request.match_info["domain"], by=principal(request))
        return done()

    # -- namespaces --------------------------------------------------------------------------------
    async def tenants(self, request: web.Request) -> web.Response:
        await self.cluster.catch_up()
        return document(documents.tenants(self.cluster))

    async def namespaces(self, request: web.Request) -> web.Response:
        await self.cluster.catch_up()
        return document(documents.tenant_namespaces(self.cluster, request.match_info["tenant"]))

    async def policies(self, request: web.Request) -> web.Response:
        await self.cluster.catch_up()
        return document(documents.policies_document(self.cluster, _namespace(request)))

    async def create_namespace(self, request: web.Request) -> web.Response:
        policies = await body_json(request, "namespace policies")
        bundles, boundaries = _bundles_policy(policies)
        await self.cluster.create_namespace(_namespace(request), bundles=bundles, boundaries=boundaries,
                                            by=principal(request))
        return done()

    async def bundles(self, request: web.Request) -> web.Response:
        await self.cluster.catch_up()
        return document(shapes.bundles_data(self.cluster.bundles(_namespace(request))))

    async def unload_namespace(self, request: web.Request) -> web.Response:
        await self.cluster.unload(_namespace(request), by=principal(request))
        return done()

    async def unload_bundle(self, request: web.Request) -> web.Response:
        destination = request.query.get("destinationBroker") or None
        if destination is not None:  # pulsar-admin's -d names a broker by host:port
            await self.cluster.catch_up()
            destination = shapes.broker_at(destination, [(b.broker_id, b.url) for b in self.cluster.brokers()],
                                           "destinationBroker")
        await self.cluster.unload(_namespace(request), request.match_info["bundle"], destination,
                                  by=principal(request))
        return done()

    async def split(self, request: web.Request) -> web.Response:
        raw = await body_json(request, "split boundaries")
        positions = _positions(raw)
        algorithm = request.query.get("splitAlgorithmName") or (SPECIFIED if positions else None)
        unload = request.query.get("unload", "false").lower() == "true"
        receipt = await self.cluster.split_bundle(_namespace(request), request.match_info["bundle"],
                                                  algorithm, positions, unload, by=principal(request))
        requested = receipt.first("SplitRequested")
        answer_ = done()
        if requested is not None:  # which algorithm split it (the default one if none was named)
            answer_.headers[ALGORITHM_HEADER] = str(requested["algorithm"])
        return answer_

    async def affinity(self, request: web.Request) -> web.Response:
        await self.cluster.catch_up()
        group = self.cluster.anti_affinity_group(_namespace(request))
        return done() if group is None else text(group)

    async def set_affinity(self, request: web.Request) -> web.Response:
        group = (await text_body(request, "anti-affinity group")).strip()
        if group.startswith('"') and group.endswith('"') and len(group) >= 2:
            group = group[1:-1]  # a JSON string, as some clients send it
        if not group:
            return refused(412, "antiAffinityGroup can't be empty")
        await self.cluster.set_anti_affinity_group(_namespace(request), group, by=principal(request))
        return done()

    async def delete_affinity(self, request: web.Request) -> web.Response:
        await self.cluster.set_anti_affinity_group(_namespace(request), None, by=principal(request))
        return done()

    # -- brokers -------------------------------------------------------------------------------------
    async def brokers(self, request: web.Request) -> web.Response:
        self._known(request)
        await self.cluster.catch_up()
        return document([b.broker_id for b in self.cluster.brokers()])

    async def leader(self, request: web.Request) -> web.Response:
        await self.cluster.catch_up()
        leader_id, _ = self.cluster.leader()
        return document(shapes.broker_info(leader_id, f"{request.scheme}://{request.host}"))

    async def load_report(self, request: web.Request) -> web.Response:
        await self.cluster.catch_up()
        brokers = self.cluster.brokers()
        if not brokers:
            raise UnknownBroker("no broker is registered", value=None)
        home = brokers[0]
        report = self.cluster.load_report(home.broker_id)
        return document(shapes.local_broker_data(report, home.url, home.version))


def _namespace(request: web.Request) -> str:
    return f"{request.match_info['tenant']}/{request.match_info['namespace']}"


def _bundles_policy(policies: Any) -> tuple[int | None, list[int] | None]:
    """(numBundles, boundaries) of a ``Policies`` body; both None: the configured default."""
    if policies is None:
        return None, None
    data = policies.get("bundles") if isinstance(policies, Mapping) else None
    if data is None:
        return None, None
    if not isinstance(data, Mapping):
        raise MalformedInput(f"bundles {_shown(data)}: expected BundlesData", value=_shown(data))
    boundaries = data.get("boundaries")
    if boundaries:
        if not isinstance(boundaries, list) or not all(isinstance(b, str) for b in boundaries):
            raise MalformedInput(f"boundaries {_shown(boundaries)}: expected a list of hex strings "
                                 "such as 0x40000000", value=_shown(boundaries))
        try:
            return None, [int(b, 16) for b in boundaries]
        except ValueError:
            raise MalformedInput(f"boundaries {_shown(boundaries)}: expected hex strings such as "
                                 "0x40000000", value=_shown(boundaries)) from None
    count = data.get("numBundles")
    if count is None or count == 0:
        return None, None
    if isinstance(count, bool) or not isinstance(count, int):
        raise MalformedInput(f"numBundles {_shown(count)}: expected an integer", value=_shown(count))
    return count, None


def _shown(value: Any) -> str:
    """A value as an error names it: its repr, cut short (a refusal never echoes a whole body)."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:80]}..."


def _positions(raw: Any) -> list[int] | None:
    if raw is None or raw == "" or raw == []:
        return None
    if not isinstance(raw, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in raw):
        raise MalformedInput(f"split boundaries {_shown(raw)}: expected a JSON list of hash positions",
                             value=_shown(raw))
    return list(raw)
