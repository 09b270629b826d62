"""The dashboard with token authentication on, over real HTTP: a browser logs in once with a
token, gets an HTTP-only, SameSite=Strict cookie, and the page, its event feed and its REST calls
accept it; a wrong token is a clear message and no cookie; a session ends (its limit, the
token's expiry, logout); a state-changing request with the cookie from another origin is refused."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient, TestServer

from actors.api import Cluster
from web.app import create_app
from web.auth import TOKEN_PROVIDER, WebAuth
from web.session import COOKIE, Sessions

LBCTL = str(Path(sys.executable).parent / "lbctl")


def lbctl(*argv: str) -> str:
    return subprocess.run([LBCTL, *argv], check=True, capture_output=True, text=True).stdout.strip()


class Clock:
    """The wall clock, moved ahead by ``ahead`` seconds."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "secret.key"
    lbctl("tokens", "create-secret-key", "--output", str(path))
    return path


def token(key: Path, subject: str, *expiry: str) -> str:
    return lbctl("tokens", "create", "-sk", f"file://{key}", "-s", subject, *expiry)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with Cluster.start(brokers=1, host="inproc") as started:
        await started.wait_ready(1)
        yield started


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def client(cluster: Cluster, key: Path, clock: Clock) -> AsyncIterator[TestClient]:
    auth = WebAuth.from_broker_conf({
        "authenticationEnabled": "true", "authorizationEnabled": "true",
        "authenticationProviders": TOKEN_PROVIDER, "superUserRoles": "admin",
        "tokenSecretKey": f"file://{key}"})
    assert auth is not None
    app = create_app(cluster, auth=auth, sessions=Sessions(auth, max_age_s=3600, clock=clock))
    async with TestClient(TestServer(app)) as started:
        yield started


async def login(client: TestClient, given: str, origin: str | None = None) -> ClientResponse:
    headers = {"Origin": origin if origin is not None else str(client.make_url("")).rstrip("/")}
    return await client.post("/login", data={"token": given}, headers=headers, allow_redirects=False)


def cookie_header(reply: ClientResponse) -> str:
    return reply.headers.get("Set-Cookie", "")


async def test_without_a_session_the_page_leads_to_the_login_and_the_feed_is_401(client: TestClient) -> None:
    page = await client.get("/", allow_redirects=False)
    assert (page.status, page.headers["Location"]) == (303, "/login")
    form = await client.get("/login")
    assert form.status == 200 and 'name="token"' in await form.text()
    feed = await client.get("/bb/v1/dashboard/events")
    assert feed.status == 401 and "log in at /login" in (await feed.json())["reason"]


async def test_a_good_token_starts_a_session_the_page_feed_and_rest_calls_accept(
        client: TestClient, key: Path) -> None:
    reply = await login(client, "token:" + token(key, "admin"))  # client.conf's authParams form
    assert (reply.status, reply.headers["Location"]) == (303, "/")
    flags = cookie_header(reply).lower()
    assert f"{COOKIE}=" in flags and "httponly" in flags and "samesite=strict" in flags
    assert "path=/" in flags and "max-age=3600" in flags
    assert "secure" not in flags.replace("samesite", "")  # plain HTTP here: Secure only over TLS
    page = await client.get("/")
    assert page.status == 200 and "Log out" in await page.text()
    state = await client.get("/bb/v1/dashboard/state")
    assert state.status == 200 and (await state.json())["brokers"]
    async with client.get("/bb/v1/dashboard/events") as feed:
        assert feed.status == 200
        first = await feed.content.readuntil(b"\n\n")
        assert first.startswith(b"event: state\n")
    assert (await client.get("/admin/v2/clusters")).status == 200


@pytest.mark.parametrize(("given", "said", "status"), [
    ("not.a.jwt", "does not verify", 401),
    ("", "does not verify", 401),
    ("file:///etc/passwd", "the token itself", 401),
    ("app", "may not use the dashboard", 403),
])
async def test_a_refused_token_says_why_and_sets_no_cookie(client: TestClient, key: Path, given: str,
                                                          said: str, status: int) -> None:
    reply = await login(client, token(key, "app") if given == "app" else given)
    assert reply.status == status and said in await reply.text()
    assert COOKIE not in cookie_header(reply)
    assert (await client.get("/bb/v1/dashboard/state")).status == 401


async def test_a_session_ends_at_its_limit_at_the_token_expiry_and_at_logout(
        client: TestClient, key: Path, clock: Clock) -> None:
    await login(client, token(key, "admin"))
    clock.ahead = 3601  # past the session's limit
    ended = await client.get("/bb/v1/dashboard/state")
    assert ended.status == 401 and "session ended" in (await ended.json())["reason"]
    page = await client.get("/", allow_redirects=False)
    assert page.headers["Location"] == "/login?ended=1"

    clock.ahead = 0
    short = await login(client, token(key, "admin", "-e", "60s"))
    lives = int(re.search(r"max-age=(\d+)", cookie_header(short).lower()).group(1))  # type: ignore[union-attr]
    assert 50 <= lives <= 60  # the token's own 60 s, not the session's hour
    assert (await client.get("/bb/v1/dashboard/state")).status == 200
    origin = str(client.make_url("")).rstrip("/")
    out = await client.post("/logout", headers={"Origin": origin}, allow_redirects=False)
    assert (out.status, out.headers["Location"]) == (303, "/login")
    assert (await client.get("/bb/v1/dashboard/state")).status == 401


async def test_a_state_change_with_the_cookie_must_come_from_the_dashboard_itself(
        client: TestClient, key: Path) -> None:
    await login(client, token(key, "admin"))
    pause = {"for": "5m", "reason": "csrf check"}
    forged = await client.post("/bb/v1/balancer/pause", json=pause, headers={"Origin": "https://evil.example"})
    assert forged.status == 403 and "another origin" in (await forged.json())["reason"]
    bare = await client.post("/bb/v1/balancer/pause", json=pause)  # neither Origin nor Referer
    assert bare.status == 403
    status = await (await client.get("/bb/v1/balancer/status")).json()
    assert status["state"] != "paused"  # nothing happened
    origin = str(client.make_url("")).rstrip("/")
    own = await client.post("/bb/v1/balancer/pause", json=pause, headers={"Origin": origin})
    assert own.status == 200 and (await own.json())["by"] == "admin"
    resumed = await client.post("/bb/v1/balancer/resume", json={}, headers={"Referer": origin + "/"})
    assert resumed.status == 200
    elsewhere = await login(client, token(key, "admin"), origin="https://evil.example")
    assert elsewhere.status == 403 and COOKIE not in cookie_header(elsewhere)


async def test_a_bearer_token_still_works_without_a_cookie(client: TestClient, key: Path) -> None:
    bearer = {"Authorization": f"Bearer {token(key, 'admin')}"}
    assert (await client.get("/bb/v1/dashboard/state", headers=bearer)).status == 200
    assert (await client.get("/", headers=bearer)).status == 200


async def test_without_authentication_the_login_form_leads_to_the_page(cluster: Cluster) -> None:
    async with TestClient(TestServer(create_app(cluster))) as client:
        form = await client.get("/login", allow_redirects=False)
        assert (form.status, form.headers["Location"]) == (303, "/")
        page = await client.get("/")
        assert page.status == 200 and "Log out" not in await page.text()


async def test_behind_a_tls_proxy_the_cookie_is_secure(client: TestClient, key: Path) -> None:
    host = client.make_url("").host, client.make_url("").port
    reply = await client.post("/login", data={"token": token(key, "admin")}, allow_redirects=False,
                              headers={"Origin": f"https://{host[0]}:{host[1]}", "X-Forwarded-Proto": "https"})
    assert reply.status == 303
    assert "; secure" in cookie_header(reply).lower()
