"""The operator's hold on the balancer over REST (docs/control.md, docs/admin-api.md).

    GET  /bb/v1/balancer/status                           idle, executing, paused or stalled, and why
    POST /bb/v1/balancer/pause   {"for": "5m", "reason": "..."}    -> the BalancerPaused payload
    POST /bb/v1/balancer/resume                           -> {"resumed": payload | null}

Invariants: each is one call on the ``Cluster``; who asked is the token's role (``anonymous``
when the service checks no token); ``for`` is a duration text (``90s``, ``5m``, ``1h``) or a
number of ms (``durationMs``); a bad one is 412 naming it and nothing is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from actors.api import Cluster
from balancer.control import parse_duration
from balancer.errors import MalformedInput
from events.codec import to_json_value
from web.auth import principal
from web.replies import answer, body_json


def add_routes(app: web.Application, cluster: Cluster) -> None:
    async def status(request: web.Request) -> web.Response:
        return _json(await cluster.balancer_status())

    async def pause(request: web.Request) -> web.Response:
        body = await body_json(request, "pause")
        if not isinstance(body, Mapping):
            raise MalformedInput(f"pause body {body!r}: expected {{\"for\": \"5m\", \"reason\": \"...\"}}",
                                 value=body)
        receipt = await cluster.pause_balancer(_duration(body), str(body.get("reason") or ""),
                                               principal(request))
        return _json(receipt.first("BalancerPaused"))

    async def resume(request: web.Request) -> web.Response:
        receipt = await cluster.resume_balancer(principal(request))
        return _json({"resumed": receipt.first("BalancerResumed")})

    app.router.add_get("/bb/v1/balancer/status", answer(status))
    app.router.add_post("/bb/v1/balancer/pause", answer(pause))
    app.router.add_post("/bb/v1/balancer/resume", answer(resume))


def _duration(body: Mapping[str, Any]) -> float:
    if "durationMs" in body:
        value = body["durationMs"]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise MalformedInput(f"durationMs {value!r}: expected a number of ms", value=value)
        return float(value)
    text = body.get("for")
    if not isinstance(text, str):
        raise MalformedInput(f"for {text!r}: expected a duration such as 90s, 5m or 1h", value=text)
    return parse_duration(text, "for")


def _json(value: object) -> web.Response:
    return web.Response(body=to_json_value(value), content_type="application/json")
