"""The leader's proposals over REST (docs/control.md#proposals, docs/admin-api.md).

    GET  /bb/v1/proposals                                every kept proposal, oldest first
    GET  /bb/v1/proposals/{id}                           one, with its moves and predicted balance
    POST /bb/v1/proposals/{id}/approve|reject|cancel     {"note": "..."} -> the recorded verdict

Invariants: each is one call on the ``Cluster``; who gave a verdict is the token's role
(``anonymous`` when the service checks no token; with authorisation on only a super-user gets
here at all); an unknown proposal is 404, a verdict it cannot take 412, naming it, and nothing
is recorded for either.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from actors.api import Cluster
from balancer.errors import MalformedInput
from web.auth import principal
from web.control import _json
from web.replies import answer, body_json


def add_routes(app: web.Application, cluster: Cluster) -> None:
    async def listing(request: web.Request) -> web.Response:
        return _json((await cluster.proposals()).listing())

    async def one(request: web.Request) -> web.Response:
        return _json((await cluster.proposals()).entry(request.match_info["id"]).to_dict())

    async def verdict(request: web.Request) -> web.Response:
        body = await body_json(request, "verdict") if request.can_read_body else {}
        if not isinstance(body, Mapping):
            raise MalformedInput(f"verdict body {body!r}: expected {{\"note\": \"...\"}}", value=body)
        receipt = await cluster.review_proposal(request.match_info["id"], request.match_info["verdict"],
                                                principal(request), str(body.get("note") or ""))
        kind, payload = receipt.events[0]
        return _json({"event": kind, **payload})

    app.router.add_get("/bb/v1/proposals", answer(listing))
    app.router.add_get("/bb/v1/proposals/{id}", answer(one))
    app.router.add_post("/bb/v1/proposals/{id}/{verdict}", answer(verdict))
