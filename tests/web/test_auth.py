"""Token authentication and authorisation of the web service, Pulsar's way: broker.conf's keys,
401 without a (valid) token, 403 for a role that is not a super-user, HS256 and RS256 keys as
``lbctl tokens`` writes them; a bad setting is one line naming the key."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from actors.api import Cluster
from balancer.errors import ConfigError
from web.app import create_app
from web.auth import TOKEN_PROVIDER, WebAuth

LBCTL = str(Path(sys.executable).parent / "lbctl")


def lbctl(*argv: str) -> str:
    return subprocess.run([LBCTL, *argv], check=True, capture_output=True, text=True).stdout.strip()


def settings(**keys: str) -> dict[str, str]:
    return {"authenticationEnabled": "true", "authorizationEnabled": "true",
            "authenticationProviders": TOKEN_PROVIDER, "superUserRoles": "admin", **keys}


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with Cluster.start(brokers=1, host="inproc") as started:
        await started.wait_ready(1)
        yield started


async def answers(cluster: Cluster, auth: WebAuth, tokens: dict[str, str | None]) -> dict[str, int]:
    async with TestClient(TestServer(create_app(cluster, auth=auth))) as client:
        found = {}
        for name, token in tokens.items():
            headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
            reply = await client.get("/admin/v2/clusters", headers=headers)
            found[name] = reply.status
            if reply.status != 200:
                assert "reason" in await reply.json()
        return found


async def test_hs256_secret_key(cluster: Cluster, tmp_path: Path) -> None:
    key = tmp_path / "secret.key"
    lbctl("tokens", "create-secret-key", "--output", str(key))
    auth = WebAuth.from_broker_conf(settings(tokenSecretKey=f"file://{key}"))
    assert auth is not None
    other = base64.b64encode(b"k" * 32).decode()
    status = await answers(cluster, auth, {
        "admin": lbctl("tokens", "create", "-sk", f"file://{key}", "-s", "admin"),
        "app": lbctl("tokens", "create", "-sk", f"file://{key}", "-s", "app"),
        "none": None, "garbage": "not.a.jwt",
        "forged": lbctl("tokens", "create", "-sk", other, "-s", "admin"),
    })
    assert status == {"admin": 200, "app": 403, "none": 401, "garbage": 401, "forged": 401}


async def test_rs256_public_key(cluster: Cluster, tmp_path: Path) -> None:
    private, public = tmp_path / "private.key", tmp_path / "public.key"
    lbctl("tokens", "create-key-pair", "--output-private-key", str(private),
          "--output-public-key", str(public))
    data_url = "data:;base64," + base64.b64encode(public.read_bytes()).decode()
    auth = WebAuth.from_broker_conf(settings(tokenPublicKey=data_url))
    assert auth is not None
    status = await answers(cluster, auth, {
        "admin": lbctl("tokens", "create", "-pk", f"file://{private}", "-s", "admin", "-e", "1h"),
        "app": lbctl("tokens", "create", "-pk", f"file://{private}", "-s", "app"),
    })
    assert status == {"admin": 200, "app": 403}


@pytest.mark.parametrize(("keys", "named"), [
    ({"authenticationProviders": "org.example.Basic", "tokenSecretKey": "a2V5"}, "authenticationProviders"),
    ({}, "tokenSecretKey"),
    ({"tokenSecretKey": "file:///no/such/key"}, "/no/such/key"),
    ({"tokenSecretKey": "a2V5", "authenticationEnabled": "maybe"}, "maybe"),
])
def test_bad_settings_name_the_key(keys: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as refused:
        WebAuth.from_broker_conf(settings(**keys))
    assert named in refused.value.message


def test_no_auth_without_the_switches() -> None:
    assert WebAuth.from_broker_conf({"superUserRoles": "admin"}) is None
