"""Token auth for tests of the web service: a secret key made with ``lbctl tokens``, the
``WebAuth`` broker.conf would give with ``ops-admin`` as the only super-user, and the headers of
a super-user's token and of an ordinary role's."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from web.auth import TOKEN_PROVIDER, WebAuth

LBCTL = str(Path(sys.executable).parent / "lbctl")
SUPER_USER = "ops-admin"


def lbctl(*argv: str) -> str:
    return subprocess.run([LBCTL, *argv], check=True, capture_output=True, text=True).stdout.strip()


@dataclass(frozen=True)
class Tokens:
    auth: WebAuth | None
    admin: dict[str, str]
    """The super-user's ``Authorization`` header."""
    app: dict[str, str]
    """An ordinary role's (``app``) header."""


def super_user_tokens(tmp_path: Path) -> Tokens:
    key = tmp_path / "secret.key"
    lbctl("tokens", "create-secret-key", "--output", str(key))
    auth = WebAuth.from_broker_conf({
        "authenticationEnabled": "true", "authorizationEnabled": "true",
        "authenticationProviders": TOKEN_PROVIDER, "superUserRoles": SUPER_USER,
        "tokenSecretKey": f"file://{key}"})

    def header(role: str) -> dict[str, str]:
        return {"Authorization": "Bearer " + lbctl("tokens", "create", "-sk", f"file://{key}", "-s", role)}

    return Tokens(auth, header(SUPER_USER), header("app"))
