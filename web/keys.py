"""Key material the way Pulsar's token provider reads it (``tokenSecretKey``, ``tokenPublicKey``).

A value is ``data:;base64,<b64>``, ``file:///path`` (or ``file:/path``), ``env:VAR`` (the
variable holds base64), or the key itself in base64. A secret key is raw bytes (HS256); a public
or private key is DER (X.509 / PKCS#8, what ``pulsar tokens create-key-pair`` writes) or PEM.

Invariants: an unreadable or malformed value is one ``ConfigError`` naming the key and value;
nothing here logs or prints key material.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization

from balancer.errors import ConfigError


def read_key(name: str, value: str) -> bytes:
    """The bytes a Pulsar key URL names; ``name`` is the setting, for the error line."""
    try:
        if value.startswith("data:"):
            head, _, body = value.partition(",")
            return base64.b64decode(body) if head.endswith(";base64") else body.encode()
        if value.startswith("file:"):
            path = value.removeprefix("file://") if value.startswith("file://") else value[5:]
            return Path(path).read_bytes()
        if value.startswith("env:"):
            found = os.environ.get(value[4:])
            if found is None:
                raise ConfigError(f"{name}={value}: the variable {value[4:]} is not set",
                                  key=name, value=value)
            return base64.b64decode(found)
        return base64.b64decode(value, validate=True)
    except OSError as exc:
        raise ConfigError(f"{name}={value}: cannot read it ({exc.strerror})", key=name,
                          value=value) from None
    except (binascii.Error, ValueError):
        raise ConfigError(f"{name}={value}: not base64 (expected data:;base64,..., file:///path "
                          "or env:VAR)", key=name, value=value) from None


def public_key(name: str, raw: bytes) -> Any:
    """An RSA (or EC) public key from DER or PEM bytes."""
    try:
        if raw.lstrip().startswith(b"-----BEGIN"):
            return serialization.load_pem_public_key(raw)
        return serialization.load_der_public_key(raw)
    except ValueError:
        raise ConfigError(f"{name}: not a public key (expected X.509 DER or PEM)", key=name,
                          value=None) from None


def private_key(name: str, raw: bytes) -> Any:
    """An RSA (or EC) private key from PKCS#8 DER or PEM bytes."""
    try:
        if raw.lstrip().startswith(b"-----BEGIN"):
            return serialization.load_pem_private_key(raw, password=None)
        return serialization.load_der_private_key(raw, password=None)
    except (ValueError, TypeError):
        raise ConfigError(f"{name}: not a private key (expected PKCS#8 DER or PEM)", key=name,
                          value=None) from None
