"""What one request to the web service may be: its size, its header, the depth of its JSON.

Invariants:
- the limits are broker.conf's: Pulsar's ``httpMaxRequestSize`` (the body, bytes) and
  ``httpMaxRequestHeaderSize`` (the request line and each header field, bytes), and the
  project's ``webServiceMaxJsonDepth`` (declared with the other keys, ``balancer.config``); a key left out takes the default here. Pulsar reads
  ``httpMaxRequestSize=-1`` (its default) as no limit; here any value below 1 takes the default
  (1 MiB): no admin body needs more, and the service must not hold a body of any size;
- a request past a limit is refused before any handler runs what it asked (413 for the body,
  400 for the header, 400 for the JSON), with one line naming the limit and its key;
- pure data: ``aiohttp`` applies the sizes (``web.serve``), ``web.replies.body_json`` the depth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from balancer.config import KEY_BY_NAME
from balancer.errors import ConfigError

DEFAULT_BODY = 1024 * 1024
DEFAULT_HEADER = 8192
"""Pulsar's default ``httpMaxRequestHeaderSize``."""
DEFAULT_JSON_DEPTH: int = KEY_BY_NAME["webServiceMaxJsonDepth"].default


@dataclass(frozen=True, slots=True)
class WebLimits:
    """The limits of one request."""

    max_body: int = DEFAULT_BODY
    max_header: int = DEFAULT_HEADER
    max_json_depth: int = DEFAULT_JSON_DEPTH

    @classmethod
    def from_pairs(cls, pairs: Mapping[str, str]) -> WebLimits:
        body = _int(pairs, "httpMaxRequestSize", DEFAULT_BODY)
        return cls(max_body=body if body > 0 else DEFAULT_BODY,
                   max_header=_positive(pairs, "httpMaxRequestHeaderSize", DEFAULT_HEADER),
                   max_json_depth=KEY_BY_NAME["webServiceMaxJsonDepth"].parse(
                       "webServiceMaxJsonDepth", pairs.get("webServiceMaxJsonDepth") or DEFAULT_JSON_DEPTH))


def _int(pairs: Mapping[str, str], key: str, default: int) -> int:
    raw = (pairs.get(key) or "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw}: expected an integer", key=key, value=raw) from None


def _positive(pairs: Mapping[str, str], key: str, default: int) -> int:
    value = _int(pairs, key, default)
    if value < 1:
        raise ConfigError(f"{key}={value}: expected a positive integer", key=key, value=value)
    return value
