"""The dashboard's login: a token given once, kept in a cookie the page's own requests carry.

A browser's ``EventSource`` cannot send an ``Authorization`` header, so with token
authentication on, the dashboard signs in at ``/login`` instead:

    GET  /login     the form (a token, bare, as ``token:<jwt>`` or client.conf's ``authParams=token:<jwt>``)
    POST /login     verify it, set the session cookie, 303 to ``/``
    POST /logout    clear the cookie, 303 to ``/login``

Invariants:
- the token is verified exactly as a bearer token is (``WebAuth.role_of``) and, with
  authorisation on, its role must be a super-user; a refused token answers 401 (403 for a role
  that is not a super-user) with the form and one line saying why, and sets no cookie;
- the cookie holds the token and the session's end, signed (HMAC-SHA256) with a key this service
  made at start-up (a restarted service asks for a new login); it is ``HttpOnly``,
  ``SameSite=Strict``, ``Path=/``, ``Secure`` when the request came over TLS (``over_tls``: its
  own, or a proxy's ``X-Forwarded-Proto: https``), and lives until the
  token's own ``exp`` or ``max_age_s``, whichever comes first;
- a request with the cookie is authenticated again on every request (``WebAuth`` middleware): a
  session past its end, a bad signature or a token that no longer verifies is 401;
- a state-changing request (not GET, HEAD or OPTIONS) authenticated by the cookie, and the login
  form itself, must come from the service's own origin: its ``Origin`` (else ``Referer``) header
  names the same scheme, host and port, or it is 403 and nothing happens;
- the clock is the caller's (``clock``, seconds): the tests move it to expire a session.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import secrets
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import jwt
from aiohttp import web


class WebAuth(Protocol):
    """What a session needs of the service's authentication (``web.auth.WebAuth`` meets it; a
    protocol here, since that module imports this one for its middleware)."""

    @property
    def authentication_enabled(self) -> bool: ...
    @property
    def authorization_enabled(self) -> bool: ...
    @property
    def super_user_roles(self) -> frozenset[str]: ...
    def role_of(self, token: str) -> str: ...

COOKIE = "bb_session"
LOGIN_HEADERS = {"Cache-Control": "no-store", "X-Frame-Options": "DENY",
                 "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'"}
"""Never cached, never framed by another site (no clickjacking of the form), posted only here."""
DEFAULT_MAX_AGE_S = 8 * 3600
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class SessionRefused(Exception):
    """Why a session cookie does not authenticate (its one line is the 401's reason)."""


@dataclass
class Sessions:
    """Issues and checks the dashboard's session cookies for one running service."""

    auth: WebAuth
    max_age_s: int = DEFAULT_MAX_AGE_S
    clock: Callable[[], float] = time.time
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)

    def issue(self, token: str) -> tuple[str, str, int]:
        """(cookie value, role, seconds it lives) for a token that verifies; else
        ``jwt.InvalidTokenError``."""
        role = self.auth.role_of(token)
        now = int(self.clock())
        ends = now + self.max_age_s
        claimed = jwt.decode(token, options={"verify_signature": False}).get("exp")
        if isinstance(claimed, int | float):
            ends = min(ends, int(claimed))
        body = f"{ends}.{_b64(token.encode())}"
        return f"{body}.{_b64(self._sign(body))}", role, max(0, ends - now)

    def token_of(self, value: str) -> str:
        """The token a cookie value holds; ``SessionRefused`` naming why it does not count."""
        body, _, signature = value.rpartition(".")
        ends, _, token = body.partition(".")
        try:
            good = hmac.compare_digest(_unb64(signature), self._sign(body))
            ends_s, raw = int(ends), _unb64(token).decode()
        except ValueError:
            good = False
        if not good:
            raise SessionRefused("the dashboard session cookie is not one this service issued "
                                 "(the service restarted, or the cookie was altered): log in again")
        if self.clock() >= ends_s:
            raise SessionRefused(f"the dashboard session ended at "
                                 f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(ends_s))}: log in again")
        return raw

    def _sign(self, body: str) -> bytes:
        return hmac.new(self.key, body.encode(), hashlib.sha256).digest()


def over_tls(request: web.Request) -> bool:
    """Whether the browser reached the service over TLS: its own, or a TLS-terminating proxy's
    (``X-Forwarded-Proto: https``; operations.md puts one in front to serve it further)."""
    return request.secure or request.headers.get("X-Forwarded-Proto", "").strip().lower() == "https"


def same_origin(request: web.Request) -> bool:
    """Whether the request's ``Origin`` (else ``Referer``) names this service's own origin."""
    own = f"{'https' if over_tls(request) else 'http'}://{request.host}".lower()
    origin = request.headers.get("Origin")
    if origin is None:
        referer = urllib.parse.urlsplit(request.headers.get("Referer", ""))
        origin = f"{referer.scheme}://{referer.netloc}" if referer.netloc else ""
    return origin.lower() == own


def cross_site(request: web.Request) -> web.HTTPForbidden:
    """The 403 of a request with the cookie from elsewhere, with Pulsar's error body."""
    named = request.headers.get("Origin") or request.headers.get("Referer") or "no Origin or Referer header"
    reason = (f"{request.method} {request.path} with the dashboard's session cookie from another "
              f"origin ({named}) is refused: it must come from the dashboard itself")
    return web.HTTPForbidden(text=json.dumps({"reason": reason}), content_type="application/json")


def token_from_form(text: str) -> str:
    """The token of what a user pasted: a bare JWT, ``token:<jwt>`` or ``authParams=token:<jwt>``."""
    given = text.strip()
    if given.startswith("authParams="):
        given = given.removeprefix("authParams=").strip()
    if given.startswith(("file:", "env:")):
        raise jwt.InvalidTokenError(f"{given.split(':', 1)[0]}: the form takes the token itself "
                                    "(token:<jwt>), not where the server would read it")
    return given.removeprefix("token:").strip()


def add_routes(app: web.Application, auth: WebAuth | None, sessions: Sessions | None) -> None:
    """``/login`` and ``/logout``; with authentication off the login form leads to the page."""

    async def form(request: web.Request) -> web.Response:
        if sessions is None:
            raise web.HTTPSeeOther("/")
        note = "Your session ended: log in again." if request.query.get("ended") else ""
        return login_page(note, status=200, notice=True)

    async def login(request: web.Request) -> web.StreamResponse:
        if sessions is None or auth is None:
            raise web.HTTPSeeOther("/")
        if "Origin" in request.headers and not same_origin(request):
            return login_page("A login from another site is refused.", status=403)
        posted = await request.post()
        try:
            value, role, lives = sessions.issue(token_from_form(str(posted.get("token", ""))))
        except jwt.InvalidTokenError as exc:
            return login_page(f"The token was refused: it does not verify ({exc}). No session was "
                              "started.", status=401)
        if auth.authorization_enabled and role not in auth.super_user_roles:
            return login_page(f"Role {role!r} may not use the dashboard (superUserRoles only). No "
                              "session was started.", status=403)
        response = web.HTTPSeeOther("/")
        response.set_cookie(COOKIE, value, max_age=lives, path="/", httponly=True,
                            samesite="Strict", secure=over_tls(request))
        raise response

    async def logout(request: web.Request) -> web.StreamResponse:
        if request.cookies.get(COOKIE) and not same_origin(request):
            raise cross_site(request)
        response = web.HTTPSeeOther("/login")
        response.del_cookie(COOKIE, path="/", samesite="Strict")
        raise response

    app.router.add_get("/login", form)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)


def login_page(message: str, *, status: int, notice: bool = False) -> web.Response:
    """The login form, with ``message`` (an error unless ``notice``) above it."""
    kind = "notice" if notice else "error"
    shown = f'<p class="{kind}" role="alert" id="login-message">{html.escape(message)}</p>' if message else ""
    body = LOGIN_HTML.replace("<!--message-->", shown)
    return web.Response(text=body, status=status, content_type="text/html", headers=LOGIN_HEADERS)


LOGIN_HTML = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bundle-balancer: log in</title>
<link rel="stylesheet" href="/static/dashboard.css">
</head>
<body class="login">
<header><h1>bundle-balancer</h1></header>
<main class="login-main">
<section>
<h2>Log in to the dashboard</h2>
<!--message-->
<form method="post" action="/login" id="login-form">
<label for="token">Token</label>
<textarea id="token" name="token" rows="4" required autocomplete="off" spellcheck="false"
 placeholder="eyJhbGciOi... or token:eyJhbGciOi..."></textarea>
<p class="hint">A token as <code>lbctl tokens create</code> (or <code>pulsar tokens create</code>)
prints it, or client.conf's <code>authParams=token:...</code>. The browser keeps it in an
HTTP-only cookie until the token expires or the session ends.</p>
<button type="submit">Log in</button>
</form>
</section>
</main>
</body>
</html>
"""


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ValueError(str(exc)) from None
