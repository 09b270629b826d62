"""A real HTTP server on 127.0.0.1 that answers the admin paths drive mode calls as Pulsar 4.0
answers them: the runtime settings, and unloads and splits of bundles, a bundle another broker
owns answered with a 307 to that broker. What it answers is set per test; every call is kept."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web

from attach.pulsar_admin import PulsarAdmin
from lbctl.admin_http import AdminHttp


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, str]
    body: str
    port: int


@dataclass
class FakePulsar:
    settings: dict[str, str] = field(default_factory=lambda: {"loadBalancerSheddingEnabled": "false",
                                                             "loadBalancerAutoBundleSplitEnabled": "false"})
    status: int = 204
    reason: str = ""
    delay_s: float = 0.0
    redirect: bool = False
    token: str | None = None
    calls: list[Call] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)

    def admin(self, timeout_s: float = 5.0) -> PulsarAdmin:
        return PulsarAdmin(AdminHttp(f"http://127.0.0.1:{self.ports[0]}", self.token), timeout_s)

    def moves(self) -> list[Call]:
        return [c for c in self.calls if c.method == "PUT"]

    async def _settings(self, request: web.Request) -> web.Response:
        if self.token and request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"reason": "Unauthorized"}, status=401)
        tail = request.path.rsplit("/", 1)[-1]
        return web.json_response(self.settings if tail == "runtime" else {})

    async def _move(self, request: web.Request) -> web.Response:
        port = request.url.port or 0
        self.calls.append(Call(request.method, request.path, dict(request.query), await request.text(), port))
        if self.redirect and port == self.ports[0]:
            # Pulsar: "this broker does not own the bundle", to the owner, same method.
            raise web.HTTPTemporaryRedirect(f"http://127.0.0.1:{self.ports[1]}{request.path_qs}")
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.status >= 300:
            return web.json_response({"reason": self.reason}, status=self.status)
        return web.Response(status=self.status)


@asynccontextmanager
async def fake_pulsar(fake: FakePulsar | None = None) -> AsyncIterator[FakePulsar]:
    """Two web services (two brokers) of one fake cluster, on free ports."""
    fake = fake or FakePulsar()
    app = web.Application()
    app.router.add_get("/admin/v2/brokers/configuration/{which}", fake._settings)
    app.router.add_put("/admin/v2/namespaces/{tenant}/{ns}/{bundle}/{verb}", fake._move)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        for _ in range(2):
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            server = site._server
            assert server is not None
            fake.ports.append(server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        yield fake
    finally:
        await runner.cleanup()
