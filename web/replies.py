"""How a handler answers: Pulsar's status codes and error bodies for the project's errors.

Invariants:
- every refusal is JSON ``{"reason": "..."}`` (Pulsar's ``ErrorData``), the reason being the
  error's own one line, which names the bad value;
- the status follows what Pulsar answers for the same case: unknown namespace, bundle or failure
  domain 404 (the client's ``NotFoundException``); an existing namespace or a broker held by
  another domain 409 (``ConflictException``); other bad input 412
  (``PreconditionFailedException``); a refused state change 409; a cluster that cannot answer
  now 503; a body that is not UTF-8, not JSON or too deep 400; any other error 500 with an
  incident id, logged with its traceback under the same id (``guard``: no error of a handler
  drops the connection);
- a change that succeeded is 204 without a body, as Pulsar's admin answers it;
- a refusal from one of the project's errors also names its code in the ``X-BB-Error`` header
  (Pulsar's clients ignore it), so ``lbctl --admin-url`` raises the same error, and exits with
  the same status, as ``lbctl`` on the cluster itself; an answer from a degraded view says so in
  ``X-BB-Degraded``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from balancer.errors import (
    InvalidInput,
    LoadBalancerError,
    NamespaceExists,
    StateConflict,
    Unavailable,
    UnknownBundle,
    UnknownFailureDomain,
    UnknownNamespace,
    UnknownProposal,
)
from web.limits import WebLimits

logger = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
NOT_FOUND = (UnknownNamespace, UnknownBundle, UnknownFailureDomain, UnknownProposal)


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
ALGORITHM_HEADER = "X-BB-Split-Algorithm"
"""On a split's 204: the algorithm that split the bundle (the configured default if none was named)."""
DEGRADED_HEADER = "X-BB-Degraded"
"""On an answer read from a view that a record under it could not be read into: why (Pulsar's
clients ignore it; ``lbctl --admin-url`` warns as it does on the cluster itself)."""


def degraded(response: web.Response, reason: str | None) -> web.Response:
    """``response``, naming ``reason`` in ``DEGRADED_HEADER`` when there is one (printable ASCII,
    cut short: a header carries one line)."""
    if reason is not None:
        shown = "".join(c if " " <= c <= "~" else "?" for c in reason)
        response.headers[DEGRADED_HEADER] = shown if len(shown) <= 200 else f"{shown[:200]}..."
    return response


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
            return _error(request, exc)

    return answering


def _error(request: web.Request, exc: LoadBalancerError) -> web.Response:
    status = status_of(exc)
    if status == 500:
        incident = uuid.uuid4().hex[:12]
        logger.exception("internal error %s: %s %s", incident, request.method, request.path_qs[:200])
        return refused(500, f"{exc.message} (internal error {incident}: the server's log holds its "
                            "traceback)", exc.code)
    return refused(status, exc.message, exc.code)


def done() -> web.Response:
    return web.Response(status=204)


def document(value: Any) -> web.Response:
    return web.json_response(value, dumps=lambda v: json.dumps(v, sort_keys=True))


def text(value: str) -> web.Response:
    """A bare string, as Pulsar's admin answers ``String`` (the client reads the body as is)."""
    return web.Response(text=value, content_type="application/json")


LIMITS: web.AppKey[WebLimits] = web.AppKey("limits", WebLimits)


def bad_request(reason: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(text=json.dumps({"reason": reason}), content_type="application/json")


async def body_json(request: web.Request, what: str) -> Any:
    """The request's JSON body (None when empty); a body that is not UTF-8, not JSON, or nested
    deeper than ``webServiceMaxJsonDepth`` is a 400 naming ``what`` (a body past
    ``httpMaxRequestSize`` is aiohttp's 413 before it is read)."""
    raw = await text_body(request, what)
    if not raw.strip():
        return None
    depth = request.app.get(LIMITS, WebLimits()).max_json_depth
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise bad_request(f"{what}: not JSON ({exc.msg})") from None
    except RecursionError:
        raise bad_request(f"{what}: JSON nested more than webServiceMaxJsonDepth={depth} levels") from None
    if _depth(value, depth + 1) > depth:
        raise bad_request(f"{what}: JSON nested more than webServiceMaxJsonDepth={depth} levels")
    return value


async def text_body(request: web.Request, what: str) -> str:
    """The request's body as text; bytes that are not UTF-8 are a 400 naming where."""
    data = await request.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_request(f"{what}: the body is not UTF-8 (byte 0x{data[exc.start]:02x} at "
                          f"position {exc.start})") from None


def _depth(value: Any, stop: int) -> int:
    """Levels of lists and maps in ``value``, counted up to ``stop`` at most (no recursion)."""
    deepest, level = 0, [(value, 1)]
    while level:
        item, depth = level.pop()
        if isinstance(item, list | dict):
            deepest = max(deepest, depth)
            if deepest >= stop:
                return deepest
            level.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def guard() -> Middleware:
    """The outermost middleware: an error no handler answered is a 500 with an id, logged with
    its traceback under that id, never a dropped connection; the project's errors and aiohttp's
    own answers pass as they are."""
    @web.middleware
    async def guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPRequestEntityTooLarge:
            limit = request.app.get(LIMITS, WebLimits()).max_body
            return refused(413, f"the request body is larger than httpMaxRequestSize={limit} bytes")
        except web.HTTPException:
            raise
        except LoadBalancerError as exc:
            return _error(request, exc)
        except Exception:
            incident = uuid.uuid4().hex[:12]
            logger.exception("internal error %s: %s %s", incident, request.method, request.path_qs[:200])
            return refused(500, f"internal error {incident} (the server's log holds its traceback)")

    return guarded
