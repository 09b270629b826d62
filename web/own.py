"""The project's own reads under ``/bb/v1`` (Pulsar has no such paths).

    GET /bb/v1/explain/{tenant}/{namespace}/{bundle}     every move of the bundle, with its decision
    GET /bb/v1/log/tail?limit=N                          the last N records of the log (default 20)
    GET /bb/v1/brokers/{broker}/load-report              the broker's latest LoadReported
    GET /bb/v1/brokers                                   the brokers, their load and the leader
    GET /bb/v1/namespaces/{tenant}/{namespace}/bundles   each bundle's state, owner and version

Invariants: each is a read through ``Cluster`` (explain and the tail read the log back);
records are shaped as ``lbctl log tail --json`` prints them, the brokers and bundles as ``lbctl
brokers list --json`` and ``lbctl namespaces bundles --json`` (``web.documents``, the same
builders); a bad ``limit`` is 412 naming it.
"""

from __future__ import annotations

import json

from aiohttp import web

from actors.api import Cluster
from balancer.errors import MalformedInput, Unavailable
from events.codec import to_json, to_json_value
from events.log.port import Record
from web.documents import brokers_document, bundles_document
from web.replies import answer

DEFAULT_TAIL = 20
MAX_TAIL = 10_000


def add_routes(app: web.Application, cluster: Cluster) -> None:
    async def explain(request: web.Request) -> web.Response:
        info = request.match_info
        bundle = f"{info['tenant']}/{info['namespace']}/{info['bundle']}"
        moves = await cluster.explain(bundle)
        return _json({"bundle": bundle, "moves": [m.to_dict() for m in moves]})

    async def tail(request: web.Request) -> web.Response:
        raw = request.query.get("limit", str(DEFAULT_TAIL))
        if not raw.isdigit() or not 0 < int(raw) <= MAX_TAIL:
            raise MalformedInput(f"limit={raw}: expected 1-{MAX_TAIL}", value=raw)
        return _json({"records": [record_json(r) for r in await cluster.log_tail(int(raw))]})

    async def load_report(request: web.Request) -> web.Response:
        await cluster.catch_up()
        broker = request.match_info["broker"]
        report = cluster.load_report(broker)  # an unregistered broker is named
        if report["ts_ms"] is None:
            raise Unavailable(f"broker {broker} has not reported its load yet", value=broker)
        return _json(report)

    async def brokers(request: web.Request) -> web.Response:
        await cluster.catch_up()
        return _json(brokers_document(cluster))

    async def bundles(request: web.Request) -> web.Response:
        await cluster.catch_up()
        info = request.match_info
        return _json(bundles_document(cluster, f"{info['tenant']}/{info['namespace']}"))

    app.router.add_get("/bb/v1/brokers", answer(brokers))
    app.router.add_get("/bb/v1/namespaces/{tenant}/{namespace}/bundles", answer(bundles))
    app.router.add_get("/bb/v1/explain/{tenant}/{namespace}/{bundle}", answer(explain))
    app.router.add_get("/bb/v1/log/tail", answer(tail))
    app.router.add_get("/bb/v1/brokers/{broker}/load-report", answer(load_report))


def record_json(record: Record) -> object:
    """A log record as ``lbctl log tail --json`` prints one, with its partition and offset."""
    return {"partition": record.partition, "offset": record.offset,
            **json.loads(to_json(record.envelope))}


def _json(value: object) -> web.Response:
    return web.Response(body=to_json_value(value), content_type="application/json")
