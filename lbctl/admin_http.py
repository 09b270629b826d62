"""How ``lbctl`` reaches the admin REST API: ``--admin-url`` / ``--auth-plugin`` / ``--auth-params``,
or ``webServiceUrl`` / ``authPlugin`` / ``authParams`` of a ``client.conf``, as pulsar-admin
reads them; and the HTTP calls themselves.

Invariants:
- the flags win over the file; no URL anywhere means the verbs use the cluster directly
  (``lbctl.attach``); the only auth plugin is the token one (``AuthenticationToken``), whose
  params are ``token:<jwt>``, ``file:///path`` (the token in a file) or ``{"token": "<jwt>"}``;
- an answer other than 2xx becomes one error naming the status and Pulsar's ``reason``: the
  project's own error when the service names it (``X-BB-Error``), so the exit status is the one
  ``lbctl`` gives on the cluster itself; else 409 a ``StateConflict`` (a refused change, exit 1),
  any other 4xx ``InvalidInput`` (exit 2); an unreachable service or a 5xx is ``Unavailable``
  naming the URL (exit 2).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from balancer.config import broker_conf_pairs
from balancer.errors import (
    ERRORS_BY_CODE,
    ConfigError,
    InvalidInput,
    MalformedInput,
    StateConflict,
    Unavailable,
)
from web.replies import ERROR_HEADER

TOKEN_PLUGINS = ("org.apache.pulsar.client.impl.auth.AuthenticationToken", "AuthenticationToken", "token")
TIMEOUT_S = 120.0


class AdminRefused(InvalidInput):
    code = "admin_refused"


@dataclass(frozen=True)
class AdminHttp:
    """The admin REST API at ``url``, with an optional bearer token."""

    url: str
    token: str | None = None

    def call(self, method: str, path: str, body: Any = None, *, raw: str | None = None,
             query: dict[str, str] | None = None) -> Any:
        """The answer's JSON (a bare string as is; 204: None)."""
        return self.exchange(method, path, body, raw=raw, query=query)[0]

    def exchange(self, method: str, path: str, body: Any = None, *, raw: str | None = None,
                 query: dict[str, str] | None = None) -> tuple[Any, dict[str, str]]:
        """The answer as ``call`` gives it, and its headers (names in lower case)."""
        target = self.url.rstrip("/") + urllib.parse.quote(path)
        if query:
            target += "?" + urllib.parse.urlencode(query)
        data = raw.encode() if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(target, data=data, method=method,
                                         headers={"Content-Type": "application/json", **self._auth()})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as reply:
                text, headers = reply.read().decode(), {k.lower(): v for k, v in reply.headers.items()}
        except urllib.error.HTTPError as exc:
            raise refusal(exc.code, exc.read().decode(errors="replace"), method, path,
                          exc.headers.get(ERROR_HEADER)) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Unavailable(f"admin service {self.url}: {reason}", value=self.url) from None
        if not text:
            return None, headers
        try:
            return json.loads(text), headers
        except json.JSONDecodeError:
            return text, headers

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def refusal(status: int, body: str, method: str, path: str, code: str | None = None) -> Exception:
    try:
        reason = str(json.loads(body).get("reason", body))
    except (json.JSONDecodeError, AttributeError):
        reason = body.strip() or "no reason given"
    message = f"{method} {path}: {status} {reason}"
    known = ERRORS_BY_CODE.get(code or "")
    if known is not None:  # the service named the project's error: the same one as locally
        return known(message, value=path)
    if status == 409:
        return StateConflict(message, value=path)
    if 400 <= status < 500:
        return AdminRefused(message, value=path)
    return Unavailable(message, value=path)


def endpoint(admin_url: str | None, auth_plugin: str | None, auth_params: str | None,
             client_conf: str | None) -> AdminHttp | None:
    """The admin API to use, or None (the cluster directly)."""
    conf = _client_conf(client_conf)
    url = admin_url or conf.get("webServiceUrl")
    if not url:
        return None
    if not url.startswith(("http://", "https://")):
        raise MalformedInput(f"--admin-url {url!r}: expected http://host:port", value=url)
    plugin = auth_plugin or conf.get("authPlugin") or None
    params = auth_params or conf.get("authParams") or None
    if plugin is None:
        return AdminHttp(url)
    if plugin not in TOKEN_PLUGINS:
        raise MalformedInput(f"auth plugin {plugin!r}: only {TOKEN_PLUGINS[0]} is supported",
                             value=plugin)
    return AdminHttp(url, token_of(params))


def token_of(params: str | None) -> str:
    """The token in ``AuthenticationToken``'s params."""
    if not params:
        raise MalformedInput("the token auth plugin needs auth params: token:<jwt> or file:///path",
                             value=params)
    if params.startswith("token:"):
        return params[len("token:"):].strip()
    if params.startswith("file:"):
        path = params.removeprefix("file://") if params.startswith("file://") else params[5:]
        try:
            return Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise MalformedInput(f"auth params {params!r}: cannot read it ({exc.strerror})",
                                 value=params) from None
    if params.lstrip().startswith("{"):
        try:
            return str(json.loads(params)["token"])
        except (json.JSONDecodeError, KeyError, TypeError):
            raise MalformedInput(f"auth params {params!r}: expected {{\"token\": \"...\"}}",
                                 value=params) from None
    return params.strip()


def _client_conf(path: str | None) -> dict[str, str]:
    path = path or os.environ.get("PULSAR_CLIENT_CONF")
    if not path:
        return {}
    try:
        return broker_conf_pairs(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"client.conf {path!r}: cannot read it ({exc.strerror})", value=path) from None
