"""``lbctl tokens``: keys and JWTs for the web service's token authentication, as ``pulsar tokens``
makes them.

    lbctl tokens create-secret-key [--output FILE] [-a HS256]        raw key to FILE, else base64 on stdout
    lbctl tokens create-key-pair --output-private-key F --output-public-key F [-a RS256]
    lbctl tokens create (--secret-key KEY | --private-key KEY) --subject ROLE [--expiry-time 1d] [-a ALG]
    lbctl tokens show TOKEN                                           the claims, unverified

Invariants: files are written as Pulsar writes them (a secret key as raw bytes, a private key as
PKCS#8 DER, a public key as X.509 DER) and read as broker.conf's ``tokenSecretKey`` /
``tokenPublicKey`` values are (``data:;base64,...``, ``file:///path``, ``env:VAR``, bare base64:
``web.keys``); the token carries the role in ``sub`` and, with ``--expiry-time``, an ``exp``;
a bad key, algorithm or duration is one line naming it (exit 2); no key material is printed
unless asked for (``create-secret-key`` without ``--output``).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import secrets
import time
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from balancer.errors import MalformedInput
from web.keys import private_key, read_key

HMAC = {"HS256": 32, "HS384": 48, "HS512": 64}
RSA = ("RS256", "RS384", "RS512")
UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tokens = sub.add_parser("tokens", help="keys and tokens for the web service's authentication",
                            description="Keys and JWTs for the web service's token authentication "
                                        "(broker.conf: tokenSecretKey or tokenPublicKey).")
    verbs = tokens.add_subparsers(dest="tokens_verb", metavar="VERB")
    verbs.required = True
    secret = verbs.add_parser("create-secret-key", help="a new HMAC secret key")
    secret.add_argument("-a", "--signature-algorithm", default="HS256", choices=sorted(HMAC))
    secret.add_argument("-o", "--output", default=None, help="write the raw key here")
    secret.add_argument("-b", "--base64", action="store_true", help="print it base64 (the default without -o)")
    secret.set_defaults(handler=_secret_key)
    pair = verbs.add_parser("create-key-pair", help="a new RSA key pair")
    pair.add_argument("-a", "--signature-algorithm", default="RS256", choices=RSA)
    pair.add_argument("--output-private-key", required=True, help="PKCS#8 DER file")
    pair.add_argument("--output-public-key", required=True, help="X.509 DER file")
    pair.set_defaults(handler=_key_pair)
    create = verbs.add_parser("create", help="a signed token for a role")
    keys = create.add_mutually_exclusive_group(required=True)
    keys.add_argument("-sk", "--secret-key", help="data:;base64,..., file:///path, env:VAR or base64")
    keys.add_argument("-pk", "--private-key", help="data:;base64,..., file:///path, env:VAR or base64")
    create.add_argument("-s", "--subject", required=True, help="the role (the sub claim)")
    create.add_argument("-e", "--expiry-time", default=None, help="e.g. 30m, 1d, 1y (default: never)")
    create.add_argument("-a", "--signature-algorithm", default=None,
                        help="HS256 with a secret key, RS256 with a private key (defaults)")
    create.set_defaults(handler=_create)
    show = verbs.add_parser("show", help="a token's header and claims (not verified)")
    show.add_argument("token")
    show.set_defaults(handler=_show)


def _secret_key(args: argparse.Namespace) -> int:
    key = secrets.token_bytes(HMAC[args.signature_algorithm])
    if args.output is None:
        print(base64.b64encode(key).decode())
        return 0
    _write_private(Path(args.output), key)
    return 0


def _key_pair(args: argparse.Namespace) -> int:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_private(Path(args.output_private_key), key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    Path(args.output_public_key).write_bytes(key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))
    return 0


def _create(args: argparse.Namespace) -> int:
    claims: dict[str, object] = {"sub": args.subject}
    if args.expiry_time is not None:
        claims["exp"] = int(time.time()) + duration_s(args.expiry_time)
    if args.secret_key is not None:
        algorithm = args.signature_algorithm or "HS256"
        if algorithm not in HMAC:
            raise MalformedInput(f"-a {algorithm}: a secret key signs with {', '.join(HMAC)}", value=algorithm)
        print(jwt.encode(claims, read_key("--secret-key", args.secret_key), algorithm=algorithm))
        return 0
    algorithm = args.signature_algorithm or "RS256"
    if algorithm not in RSA:
        raise MalformedInput(f"-a {algorithm}: a private key signs with {', '.join(RSA)}", value=algorithm)
    key = private_key("--private-key", read_key("--private-key", args.private_key))
    print(jwt.encode(claims, key, algorithm=algorithm))
    return 0


def _show(args: argparse.Namespace) -> int:
    try:
        header = jwt.get_unverified_header(args.token)
        claims = jwt.decode(args.token, options={"verify_signature": False})
    except jwt.InvalidTokenError as exc:
        raise MalformedInput(f"token: not a JWT ({exc})", value="token") from None
    print(json.dumps({"header": header, "claims": claims}, sort_keys=True))
    return 0


def duration_s(text: str) -> int:
    """Seconds of ``30m``, ``1d``, ``2w``, ``1y`` (Pulsar's relative time units; bare: seconds)."""
    match = re.fullmatch(r"(\d+)([smhdwy]?)", text.strip())
    if match is None or int(match[1]) <= 0:
        raise MalformedInput(f"--expiry-time {text!r}: expected a positive count with s, m, h, d, "
                             "w or y, e.g. 1d", value=text)
    return int(match[1]) * UNITS_S[match[2] or "s"]


def _write_private(path: Path, data: bytes) -> None:
    """Key material readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
