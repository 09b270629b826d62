"""How a handler answers: Pulsar's status codes and error bodies for the project's errors.

Invariants:
- every refusal is JSON ``{"reason": "..."}`` (Pulsar's ``ErrorData``), the reason being the
  error's own one line, which names the bad value;
- the status follows what Pulsar answers for the same case: unknown namespace, bundle or failure
  domain 404 (the client's ``NotFoundException``); an existing namespace or a broker held by
  another domain 409 (``ConflictException``); other bad input 412
  (``PreconditionFailedException``); a refused state change 409; a cluster that cannot answer
  now 503; any other error 500, logged with its traceback;
- a change that succeeded is 204 without a body, as Pulsar's admin answers it;
- a refusal from one of the project's errors also names its code in the ``X-BB-Error`` header
  (Pulsar's clients ignore it), so ``lbctl --admin-url`` raises the same error, and exits with
  the same status, as ``lbctl`` on the cluster itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from balancer.errors import (
    InvalidInput,
    LoadBalancerError,
    NamespaceExists,
    StateConflict,
    Unavailable,
    UnknownBundle,
    UnknownFailureDomain,
    UnknownNamespace,
)

logger = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
NOT_FOUND = (UnknownNamespace, UnknownBundle, UnknownFailureDomain)


def status_of(error: LoadBalancerError) -> int:
    if isinstance(error, NOT_FOUND):
        return 404
    if isinstance(error, NamespaceExists | StateConflict):
        return 409
    if isinstance(error, InvalidInput):
        return 412
    if isinstance(error, Unavailable):
        return 503
    return 500


ERROR_HEADER = "X-BB-Error"


def refused(status: int, reason: str, code: str | None = None) -> web.Response:
    return web.Response(status=status, text=json.dumps({"reason": reason}),
                        content_type="application/json",
                        headers={ERROR_HEADER: code} if code is not None else None)


def answer(handler: Handler) -> Handler:
    """``handler`` with the project's errors turned into Pulsar's answers."""
    async def answering(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except LoadBalancerError as exc:
            status = status_of(exc)
            if status == 500:
                logger.exception("%s %s failed", request.method, request.path)
            return refused(status, exc.message, exc.code)

    return answering


def done() -> web.Response:
    return web.Response(status=204)


def document(value: Any) -> web.Response:
    return web.json_response(value, dumps=lambda v: json.dumps(v, sort_keys=True))


def text(value: str) -> web.Response:
    """A bare string, as Pulsar's admin answers ``String`` (the client reads the body as is)."""
    return web.Response(text=value, content_type="application/json")


async def body_json(request: web.Request, what: str) -> Any:
    """The request's JSON body (None when empty); bad JSON is a 400 naming ``what``."""
    raw = await request.text()
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise web.HTTPBadRequest(text=json.dumps({"reason": f"{what}: not JSON ({exc.msg})"}),
                                 content_type="application/json") from None
