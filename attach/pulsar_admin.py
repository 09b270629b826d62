"""What drive mode asks of a real Pulsar's admin REST API, and its load balancer settings.

Invariants:
- every call goes through the URL and token of an ``lbctl.admin_http.AdminHttp`` (pulsar-admin's
  flags or a client.conf); a PUT answered with a redirect (Pulsar's 307 to the bundle's owner)
  is sent again, same method and body, to the ``Location`` given, at most ``MAX_REDIRECTS`` times;
- ``request`` never raises for an HTTP status: any answer is an ``Answer`` (status and Pulsar's
  own message); only no answer at all (connection refused, reset, timed out) raises
  ``Unavailable`` naming the URL;
- Pulsar's settings are read from ``/admin/v2/brokers/configuration/runtime`` (every key with
  its current value), with the dynamic overrides of ``.../configuration/values`` on top;
  ``load_balancer_config`` keeps the keys ``LoadBalancerConfig`` knows, in Pulsar's spelling of
  values (``[a, b]`` lists, ``Optional[x]``), and names every value it could not read.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from balancer.config import KEY_BY_NAME, SHEDDING_STRATEGIES, LoadBalancerConfig, resolve_class_name
from balancer.errors import ConfigError, Unavailable
from lbctl.admin_http import AdminHttp, refusal

MAX_REDIRECTS = 5
REASON_CHARS = 300
TIMEOUT_S = 30.0
SHEDDING_KEY = "loadBalancerSheddingEnabled"
SPLIT_KEY = "loadBalancerAutoBundleSplitEnabled"
_REDIRECTS = (301, 302, 303, 307, 308)
_MODULAR_SHEDDERS = ("ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder")


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: its status, Pulsar's ``reason`` (or the body) and where it came from."""

    status: int
    message: str
    url: str
    body: str = ""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # every redirect comes back as an HTTPError, followed by ``request``


_OPENER = urllib.request.build_opener(_NoRedirect())


class PulsarAdmin:
    """Pulsar's admin REST API at one web service URL."""

    def __init__(self, http: AdminHttp, timeout_s: float = TIMEOUT_S) -> None:
        self.http, self.timeout_s = http, timeout_s

    @property
    def url(self) -> str:
        return self.http.url

    def request(self, method: str, path: str, *, query: Mapping[str, str] | None = None,
                body: Any = None) -> Answer:
        target = self.http.url.rstrip("/") + urllib.parse.quote(path)
        if query:
            target += "?" + urllib.parse.urlencode(dict(query))
        data = None if body is None else json.dumps(body).encode()
        for _ in range(MAX_REDIRECTS + 1):
            status, text, location = self._once(method, target, data)
            if status not in _REDIRECTS or not location:
                return Answer(status, _reason(text), target, text)
            target = urllib.parse.urljoin(target, location)
        return Answer(status, f"more than {MAX_REDIRECTS} redirects; last to {target}", target)

    def _once(self, method: str, target: str, data: bytes | None) -> tuple[int, str, str | None]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.http.token:
            headers["Authorization"] = f"Bearer {self.http.token}"
        request = urllib.request.Request(target, data=data, method=method, headers=headers)
        try:
            with _OPENER.open(request, timeout=self.timeout_s) as reply:
                return reply.status, reply.read().decode(errors="replace"), None
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace"), exc.headers.get("Location")
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Unavailable(f"Pulsar admin {target}: {reason}", value=self.http.url) from None

    def get_json(self, path: str) -> Any:
        """A GET's JSON; a non-2xx answer is the error ``lbctl`` gives for it."""
        answer = self.request("GET", path)
        if not answer.ok:
            raise refusal(answer.status, answer.body, "GET", path)
        try:
            return json.loads(answer.body) if answer.body.strip() else None
        except json.JSONDecodeError:
            raise Unavailable(f"Pulsar admin GET {path}: not JSON: {answer.body[:80]!r}",
                              value=self.http.url) from None

    # -- what drive mode asks ------------------------------------------------------------------
    def unload(self, bundle: str, destination: str) -> Answer:
        """Unload ``bundle`` (tenant/ns/range) to ``destination`` (a broker id)."""
        return self.request("PUT", f"/admin/v2/namespaces/{bundle}/unload",
                            query={"destinationBroker": destination})

    def split(self, bundle: str, algorithm: str) -> Answer:
        """Split ``bundle`` by Pulsar's ``algorithm`` without unloading the children. No split
        positions are sent: Pulsar 4.0.7's extensible manager answers 500 ("Bundle ... not
        found under namespace") to ``specified_positions_divide`` with positions, and the
        default algorithm computes the boundary the project's decision chose."""
        return self.request("PUT", f"/admin/v2/namespaces/{bundle}/split",
                            query={"unload": "false", "splitAlgorithmName": algorithm})

    def settings(self) -> dict[str, str]:
        """Pulsar's current broker settings: the runtime values, dynamic overrides on top."""
        runtime = self.get_json("/admin/v2/brokers/configuration/runtime") or {}
        try:
            overrides = self.get_json("/admin/v2/brokers/configuration/values") or {}
        except Exception:  # an older broker without the path: the runtime values hold them
            overrides = {}
        return {str(k): str(v) for k, v in {**runtime, **overrides}.items()}


def describe(method: str, path: str, query: Mapping[str, str] | None = None) -> str:
    return f"{method} {path}" + ("?" + urllib.parse.urlencode(dict(query)) if query else "")


def _reason(text: str) -> str:
    """Pulsar's own words: a JSON ``reason``, else the ``Message:`` line of its error page (a
    500 carries a stack trace after it), else the first line, at most ``REASON_CHARS``."""
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        found = None
    if isinstance(found, dict) and "reason" in found:
        return str(found["reason"])[:REASON_CHARS]
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    said = next((line[len("Message:"):].strip() for line in lines if line.startswith("Message:")), None)
    return (said or (lines[0] if lines else ""))[:REASON_CHARS]


def enabled(settings: Mapping[str, str], key: str, default: bool = True) -> bool:
    """A boolean setting of Pulsar's (its default when absent)."""
    value = settings.get(key)
    return default if value is None else value.strip().lower() == "true"


def load_balancer_config(settings: Mapping[str, str],
                         overrides: Mapping[str, str] | None = None) -> tuple[LoadBalancerConfig, list[str]]:
    """The load balancer settings a Pulsar cluster runs with, then ``overrides`` (attach's own
    broker.conf) on top, and one note per Pulsar value that could not be read (left at default)."""
    values: dict[str, str] = {}
    notes: list[str] = []
    for name, raw in sorted(settings.items()):
        key = KEY_BY_NAME.get(name)
        value = _plain(raw)
        if key is None or value is None:
            continue
        try:
            key.parse(name, value)
        except ConfigError as exc:
            notes.append(f"Pulsar's {name}={raw!r} not read ({exc.message})")
            continue
        values[name] = value
    strategy = values.get("loadBalancerLoadSheddingStrategy")
    manager = values.get("loadManagerClassName", "")
    if strategy is not None and "Extensible" in manager and _short(strategy) in _MODULAR_SHEDDERS:
        # The extensible manager cannot run a modular shedder: Pulsar falls back to this one.
        notes.append(f"Pulsar's {strategy} is a modular shedder: the extensible manager runs TransferShedder")
        values["loadBalancerLoadSheddingStrategy"] = "TransferShedder"
    config = LoadBalancerConfig.from_mapping(values)
    if overrides:
        config = config.with_overrides(overrides)
    return config, notes


def _short(name: str) -> str:
    try:
        return resolve_class_name(name, SHEDDING_STRATEGIES, "shedding strategy", "loadBalancerLoadSheddingStrategy")
    except ConfigError:
        return name


def _plain(raw: str) -> str | None:
    """A Java ``toString`` as broker.conf would spell it (None: no value)."""
    text = raw.strip()
    if text in ("null", "Optional.empty"):
        return None
    if text.startswith("Optional[") and text.endswith("]"):
        text = text[len("Optional["):-1]
    if text.startswith("[") and text.endswith("]"):
        text = ",".join(part.strip() for part in text[1:-1].split(","))
    return text
