"""Token authentication and authorisation, the way a Pulsar broker's web service does them.

Settings are broker.conf's: ``authenticationEnabled``, ``authenticationProviders`` (the token
provider, ``AuthenticationProviderToken``), ``tokenSecretKey`` (HS256) or ``tokenPublicKey``
(RS256 etc., ``tokenPublicAlg``), ``tokenAuthClaim`` (default ``sub``), ``authorizationEnabled``
and ``superUserRoles``.

Invariants:
- only paths under ``PROTECTED`` and the dashboard's page (``/``) are checked; ``/metrics``,
  the login form and the page's assets are open (Pulsar's ``authenticateMetricsEndpoint=false``);
- with authentication on, a request without ``Authorization: Bearer <jwt>`` or the dashboard's
  session cookie (``web.session``), or with one that does not verify (signature, algorithm,
  expiry, the session's end), is 401 and reaches no handler; the page itself sends the browser
  to ``/login`` instead; a state-changing request authenticated by the cookie alone must come
  from the service's own origin (403 otherwise: no cross-site request forgery);
- the token's role claim is the role; with authorisation on, a role not in ``superUserRoles`` is
  403: this project has no tenants and no grants, so only super-users may administer or look up;
- every refusal has Pulsar's error body, ``{"reason": "..."}``, naming what was wrong.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jwt
from aiohttp import web
from aiohttp.typedefs import Middleware

from balancer.errors import ConfigError
from web.keys import public_key, read_key
from web.session import COOKIE, SAFE_METHODS, SessionRefused, Sessions, cross_site, same_origin

TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
PROTECTED = ("/admin/", "/lookup/", "/bb/")
PAGE = "/"
"""The dashboard's page: authenticated like ``PROTECTED``, but a browser without a session is sent
to the login form rather than answered 401."""
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ROLE = web.RequestKey("role", str)
"""The authenticated role of a request (absent when the service checks no token)."""
ANONYMOUS = "anonymous"
"""Who a write records as its principal when the service checks no token."""


def principal(request: web.Request) -> str:
    """Who asked: the token's role, ``anonymous`` when the service runs without authentication."""
    return str(request.get(ROLE, ANONYMOUS))


@dataclass(frozen=True)
class WebAuth:
    """Who may call the web service: token verification and the super-user roles."""

    authentication_enabled: bool = False
    secret_key: bytes | None = None
    public_key: Any = None
    public_alg: str = "RS256"
    auth_claim: str = "sub"
    authorization_enabled: bool = False
    super_user_roles: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_broker_conf(cls, pairs: Mapping[str, str]) -> WebAuth | None:
        """The auth of broker.conf's pairs; None when neither authentication nor authorisation
        is on. A token provider without a key, or another provider, is a ``ConfigError``."""
        authn = _boolean(pairs, "authenticationEnabled")
        authz = _boolean(pairs, "authorizationEnabled")
        if not authn and not authz:
            return None
        supers = frozenset(r.strip() for r in pairs.get("superUserRoles", "").split(",") if r.strip())
        if not authn:
            raise ConfigError("authorizationEnabled=true needs authenticationEnabled=true (a role "
                              "comes from an authenticated token)", key="authorizationEnabled",
                              value="true")
        providers = [p.strip() for p in pairs.get("authenticationProviders", "").split(",") if p.strip()]
        if providers != [TOKEN_PROVIDER]:
            raise ConfigError(f"authenticationProviders={','.join(providers)}: the web service "
                              f"supports {TOKEN_PROVIDER} only", key="authenticationProviders",
                              value=",".join(providers))
        secret, public = pairs.get("tokenSecretKey", ""), pairs.get("tokenPublicKey", "")
        if bool(secret) == bool(public):
            raise ConfigError("the token provider needs exactly one of tokenSecretKey (HS256) and "
                              "tokenPublicKey", key="tokenSecretKey", value=None)
        return cls(authentication_enabled=True,
                   secret_key=read_key("tokenSecretKey", secret) if secret else None,
                   public_key=public_key("tokenPublicKey", read_key("tokenPublicKey", public)) if public else None,
                   public_alg=pairs.get("tokenPublicAlg") or "RS256",
                   auth_claim=pairs.get("tokenAuthClaim") or "sub",
                   authorization_enabled=authz, super_user_roles=supers)

    def role_of(self, token: str) -> str:
        """The role a token carries; ``jwt.InvalidTokenError`` if it does not verify."""
        if self.secret_key is not None:
            claims = jwt.decode(token, self.secret_key, algorithms=["HS256"],
                                options={"verify_aud": False})
        else:
            claims = jwt.decode(token, self.public_key, algorithms=[self.public_alg],
                                options={"verify_aud": False})
        role = claims.get(self.auth_claim)
        if not isinstance(role, str) or not role:
            raise jwt.InvalidTokenError(f"no {self.auth_claim!r} claim")
        return role

    def middleware(self, sessions: Sessions | None = None) -> Middleware:
        """The check of every request; ``sessions`` (``web.session``) also admits the
        dashboard's session cookie."""

        @web.middleware
        async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
            page = request.path == PAGE
            if not request.path.startswith(PROTECTED) and not page:
                return await handler(request)
            try:
                role = self._authenticate(request, sessions)
            except web.HTTPUnauthorized:
                if page and sessions is not None:
                    ended = "?ended=1" if request.cookies.get(COOKIE) else ""
                    raise web.HTTPSeeOther(f"/login{ended}") from None
                raise
            if self.authorization_enabled and role not in self.super_user_roles:
                raise refusal(web.HTTPForbidden, f"role {role!r} is not authorized for "
                              f"{request.method} {request.path} (superUserRoles only)")
            request[ROLE] = role  # who asked, for what a handler records (a pause)
            return await handler(request)

        return check

    def _authenticate(self, request: web.Request, sessions: Sessions | None) -> str:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if header or sessions is None or not request.cookies.get(COOKIE):
            if scheme.lower() != "bearer" or not token.strip():
                raise refusal(web.HTTPUnauthorized, "Authentication required: no bearer token in "
                              "the Authorization header" + ("" if sessions is None else
                                                            " and no dashboard session (log in at /login)"))
            return self._verified(token.strip())
        try:
            token = sessions.token_of(request.cookies[COOKIE])
        except SessionRefused as exc:
            raise refusal(web.HTTPUnauthorized, f"Authentication required: {exc}") from None
        if request.method not in SAFE_METHODS and not same_origin(request):
            raise cross_site(request)
        return self._verified(token)

    def _verified(self, token: str) -> str:
        try:
            return self.role_of(token)
        except jwt.InvalidTokenError as exc:
            raise refusal(web.HTTPUnauthorized, f"Authentication required: the token does not "
                          f"verify ({exc})") from None


def refusal(kind: type[web.HTTPError], reason: str) -> web.HTTPError:
    """An HTTP error with Pulsar's JSON body, ``{"reason": ...}``."""
    return kind(text=json.dumps({"reason": reason}), content_type="application/json")


def _boolean(pairs: Mapping[str, str], key: str) -> bool:
    value = pairs.get(key, "false").strip().lower()
    if value not in ("true", "false", ""):
        raise ConfigError(f"{key}={pairs[key]}: expected true or false", key=key, value=pairs[key])
    return value == "true"
