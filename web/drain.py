"""Drains over REST (docs/control.md, docs/admin-api.md).

    POST /bb/v1/brokers/{broker}/drain    {"ratePerMinute": 120} (optional) -> the BrokerDrainRequested payload
    POST /bb/v1/brokers/{broker}/undrain                  -> {"undrained": payload | null}
    GET  /bb/v1/brokers/{broker}/drain                    -> the drain's progress

Invariants: each is one call on the ``Cluster``; who asked is the token's role (``anonymous``
when the service checks no token); a bad rate (0, negative, NaN, infinite, not a number), an
unknown broker or the last broker answers 4xx naming it and nothing is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from actors.api import Cluster
from actors.cluster.draining import progress_document
from balancer.drain import check_rate
from balancer.errors import MalformedInput
from web.auth import principal
from web.control import _json
from web.replies import answer, body_json


def add_routes(app: web.Application, cluster: Cluster) -> None:
    async def drain(request: web.Request) -> web.Response:
        body = await body_json(request, "drain")
        if not isinstance(body, Mapping):
            raise MalformedInput(f"drain body {body!r}: expected {{\"ratePerMinute\": 120}} or {{}}",
                                 value=body)
        rate = body.get("ratePerMinute")
        receipt = await cluster.drain_broker(request.match_info["broker"],
                                             None if rate is None else check_rate(rate, "ratePerMinute"),
                                             principal(request))
        return _json(receipt.first("BrokerDrainRequested"))

    async def undrain(request: web.Request) -> web.Response:
        receipt = await cluster.undrain_broker(request.match_info["broker"], principal(request))
        return _json({"undrained": receipt.first("BrokerUndrained")})

    async def progress(request: web.Request) -> web.Response:
        broker = request.match_info["broker"]
        return _json(progress_document(broker, *await cluster.drain_progress(broker)))

    app.router.add_post("/bb/v1/brokers/{broker}/drain", answer(drain))
    app.router.add_post("/bb/v1/brokers/{broker}/undrain", answer(undrain))
    app.router.add_get("/bb/v1/brokers/{broker}/drain", answer(progress))
