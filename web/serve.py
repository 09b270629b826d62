"""``serve``: the web service on a port for as long as the caller keeps it.

    async with serve(cluster, 8080) as service:    # or: service = await serve(...); ...; await service.close()
        print(service.url)                         # http://127.0.0.1:8080

Invariants: it listens on ``host`` (127.0.0.1 unless told); port 0 takes a free port, and
``url`` names the port actually bound; a port in use is ``Unavailable`` naming it; a request
line or header field longer than ``limits.max_header`` is refused as it is read (400); closing
stops accepting and ends the open requests; the cluster is the caller's and stays open.
"""

from __future__ import annotations

import errno
from collections.abc import Generator
from types import TracebackType
from typing import Any

from aiohttp import web

from actors.api import Cluster
from balancer.errors import Unavailable
from web.admin import DEFAULT_CLUSTER_NAME
from web.app import create_app
from web.auth import WebAuth
from web.limits import WebLimits
from web.observe.settings import ObserveSettings


class WebService:
    """A running (once started) web service over ``cluster``."""

    def __init__(self, cluster: Cluster, port: int, host: str, auth: WebAuth | None,
                 cluster_name: str = DEFAULT_CLUSTER_NAME, limits: WebLimits | None = None,
                 observe_settings: ObserveSettings | None = None) -> None:
        self.cluster, self.port, self.host, self.auth = cluster, port, host, auth
        self.cluster_name = cluster_name
        self.limits = limits or WebLimits()
        self.observe_settings = observe_settings
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> WebService:
        app = create_app(self.cluster, auth=self.auth, cluster_name=self.cluster_name, limits=self.limits,
                         observe_settings=self.observe_settings)
        # The request line and each header field: a longer one is refused (400) as it is read.
        runner = web.AppRunner(app, access_log=None, max_line_size=self.limits.max_header,
                               max_field_size=self.limits.max_header)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            reason = "in use" if exc.errno == errno.EADDRINUSE else exc.strerror
            raise Unavailable(f"web service port {self.host}:{self.port}: {reason}",
                              value=self.port) from None
        if self.port == 0:
            self.port = _bound_port(runner)
        self._runner = runner
        return self

    async def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    def __await__(self) -> Generator[Any, None, WebService]:
        return self.start().__await__()

    async def __aenter__(self) -> WebService:
        return await self.start()

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()


def serve(cluster: Cluster, port: int, *, host: str = "127.0.0.1", auth: WebAuth | None = None,
          cluster_name: str = DEFAULT_CLUSTER_NAME, limits: WebLimits | None = None,
          observe_settings: ObserveSettings | None = None) -> WebService:
    """The web service over ``cluster``, started when awaited or entered."""
    return WebService(cluster, port, host, auth, cluster_name, limits, observe_settings)


def _bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        return int(address[1])
    raise Unavailable("the web service bound no address")
