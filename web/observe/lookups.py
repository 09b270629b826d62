"""Topic lookups as a Pulsar broker counts and times them (``NamespaceService``'s metrics).

``lookup_timer(stats)`` is an aiohttp middleware that times every request of the lookup path
(``GET /lookup/v2/topic/...``, not its ``/bundle`` read) on the service's monotonic clock and
records it in ``LookupStats``: an answer (200) is ``answers``, a redirect (307) ``redirects``,
anything else that reached the handler ``failures``; every lookup is timed, as Pulsar observes
``pulsar_broker_lookup`` whatever the outcome.

Invariants: ``quantiles`` are over the lookups of the last ``WINDOW_MS`` (Pulsar's summary
rotates its sketch every minute), NaN when there was none, as Pulsar writes an empty sketch;
memory is bounded by ``MAX_RECENT`` timings; a request the auth middleware refused never
reaches this one (it runs inside it).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from web.lookup import TOPIC

WINDOW_MS = 60_000.0
MAX_RECENT = 10_000
QUANTILES = (0.5, 0.99, 0.999, 1.0)
"""``pulsar_broker_lookup``'s quantiles (NamespaceService.java:185-189)."""


class LookupStats:
    """Counts and timings (milliseconds) of the lookups the service answered."""

    def __init__(self) -> None:
        self.answers = self.failures = self.redirects = self.count = 0
        self.sum_ms = 0.0
        self.recent: deque[tuple[float, float]] = deque(maxlen=MAX_RECENT)  # (at_ms, latency_ms)

    def record(self, status: int, latency_ms: float, now_ms: float) -> None:
        if status == 200:
            self.answers += 1
        elif status == 307:
            self.redirects += 1
        else:
            self.failures += 1
        self.count += 1
        self.sum_ms += latency_ms
        self.recent.append((now_ms, latency_ms))

    def quantiles(self, now_ms: float) -> list[tuple[float, float]]:
        """(quantile, latency ms) over the last ``WINDOW_MS`` (nearest rank; NaN: none)."""
        window = sorted(latency for at, latency in self.recent if now_ms - at <= WINDOW_MS)
        if not window:
            return [(q, math.nan) for q in QUANTILES]
        return [(q, window[min(len(window) - 1, max(0, math.ceil(q * len(window)) - 1))]) for q in QUANTILES]


def lookup_timer(stats: LookupStats, clock: Callable[[], float] = time.monotonic) -> Middleware:
    """The middleware that feeds ``stats`` (``clock`` in seconds)."""

    @web.middleware
    async def timed(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method != "GET" or request.match_info.route.resource is None \
                or request.match_info.route.resource.canonical != TOPIC:
            return await handler(request)
        started, status = clock(), 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            now = clock()
            stats.record(status, (now - started) * 1000.0, now * 1000.0)

    return timed
