"""Signed appends: every writer signs what it appends, so a reader knows who wrote each record.

Invariants:
- a cluster has one *root* key (``Root``), held by whoever founds and deploys the cluster, never
  by a reader; it issues each writer an ``Identity``: a name (``leader``, ``leader:<candidate>``,
  ``namespace``, ``namespace:<shard>/<shards>``, ``broker``, ``broker:<id>``, ``admin:<who>``;
  ``events.authority`` says what each may write), an Ed25519 key, and a certificate: the root's
  signature over the name and the identity's public key;
- an append is signed once, however many records it holds: its first record carries ``sig`` =
  [name, public key, certificate, root public key, signature, digests of the append's other
  records], and the signature covers the first record's own wire bytes (without ``sig``) and
  those digests; each later record of the append is then checked by its digest alone;
- a reader holds public keys only (the root's, named by the log's first signed record, and the
  writers', each certified by it): whoever can verify cannot sign, which an HMAC would not give;
- ``verify`` is a pure function of the record and the root; verifying keys loaded and
  certificates verified once per process are remembered, and so are the appends this process
  signed itself (a reader in the writer's own process then compares bytes instead of verifying
  its own signature again).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from balancer.errors import ConfigError
from events.codec import encode
from events.envelope import Envelope

_CERT = b"bundle-balancer certificate v1\0"
_UNIT = b"bundle-balancer append v1\0"
DIGEST_BYTES = 16
SIG_FIELDS = 6
"""[name, public key, certificate, root, signature, digests]."""
_REMEMBERED = 65_536


class Forged(Exception):
    """A record whose signature does not hold (or that has none where one is due)."""


def digest(raw: bytes) -> bytes:
    """The digest of one record's wire bytes (without ``sig``) that an append's signature covers."""
    return hashlib.blake2b(raw, digest_size=DIGEST_BYTES).digest()


UNSIGNED = "unsigned"
"""The mark of a record whose signed bytes were cut from its stored bytes (a skimmed record,
``events.skim``: its payload was never decoded to encode again)."""


def unsigned_bytes(envelope: Envelope) -> bytes:
    """The wire bytes the writer signed for ``envelope``: without ``sig``, and as written (a
    record read through an upcaster keeps its stored form as ``stored``)."""
    marks = envelope.__dict__
    cut: bytes | None = marks.get(UNSIGNED)
    if cut is not None:
        return cut
    stored = marks.get("stored", envelope)
    if stored[11] is not None:
        stored = stored._replace(sig=None)
    return encode(stored)


def _seed_key(seed: bytes) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(seed)


def _raw_public(key: Ed25519PrivateKey) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def _raw_private(key: Ed25519PrivateKey) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    return key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())


class Root:
    """The cluster's root key: issues identities; never given to a body or a reader."""

    def __init__(self, seed: bytes | None = None) -> None:
        self._key = _seed_key(seed) if seed is not None else Ed25519PrivateKey.generate()
        self.public = _raw_public(self._key)

    def seed(self) -> bytes:
        return _raw_private(self._key)

    def issue(self, name: str) -> Identity:
        """Identity ``name``, certified by this root. Its key is derived from the root's and the
        name (whoever holds the root could certify any key anyway), so a root issues the same
        identity every time: a restarted writer signs as before, and a seeded run's log is the
        same bytes every time."""
        key = _seed_key(hashlib.blake2b(name.encode("utf-8"), key=self.seed(), digest_size=32,
                                        person=b"bb-identity-v1").digest())
        public = _raw_public(key)
        return Identity(name, key, self._key.sign(_cert_message(name, public)), self.public)


def _cert_message(name: str, public: bytes) -> bytes:
    return _CERT + name.encode("utf-8") + b"\0" + public


class Identity:
    """A writer's name, key and certificate; ``sign_append`` signs one append."""

    __slots__ = ("_key", "cert", "name", "public", "root")

    def __init__(self, name: str, key: Ed25519PrivateKey, cert: bytes, root: bytes) -> None:
        self.name, self._key, self.cert, self.root = name, key, cert, root
        self.public = _raw_public(key)

    def __repr__(self) -> str:
        return f"Identity({self.name!r})"  # never the key

    def sign_append(self, envelopes: Sequence[Envelope], raws: Sequence[bytes]) -> tuple[list[Envelope], list[bytes]]:
        """The append with its first record signed: (envelopes, their wire bytes)."""
        envelopes, raws = list(envelopes), list(raws)
        if not envelopes:
            return envelopes, raws
        others = [digest(raw) for raw in raws[1:]]
        message = _UNIT + digest(raws[0]) + b"".join(others)
        signature = self._key.sign(message)
        _remember(signature, message)
        first = envelopes[0]._replace(sig=[self.name, self.public, self.cert, self.root, signature, others])
        envelopes[0], raws[0] = first, encode(first)
        return envelopes, raws

    # -- files: one identity per file, readable by its owner only ------------------------------
    def to_json(self) -> bytes:
        raw = {"key": _raw_private(self._key), "cert": self.cert, "root": self.root}
        fields = {"name": self.name, **{k: base64.b64encode(v).decode("ascii") for k, v in raw.items()}}
        return json.dumps(fields, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, source: str = "identity") -> Identity:
        try:
            fields: dict[str, Any] = json.loads(data)
            raw = {k: base64.b64decode(fields[k], validate=True) for k in ("key", "cert", "root")}
            identity = cls(str(fields["name"]), _seed_key(raw["key"]), raw["cert"], raw["root"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{source}: not a signing identity ({type(exc).__name__}: {exc})",
                              value=source) from None
        if not _verified_cert(identity.name, identity.public, identity.cert, identity.root):
            raise ConfigError(f"{source}: the certificate of {identity.name!r} does not hold",
                              value=source)
        return identity

    def save(self, path: Path) -> None:
        """Write to ``path`` (created 0600: it holds the private key)."""
        _private_write(path, self.to_json())

    @classmethod
    def load(cls, path: Path) -> Identity:
        return cls.from_json(path.read_bytes(), str(path))


# -- verification ---------------------------------------------------------------------------

_CERTS: OrderedDict[tuple[str, bytes, bytes, bytes], bool] = OrderedDict()
_SIGNED: OrderedDict[bytes, bytes] = OrderedDict()


def _remember(signature: bytes, message: bytes) -> None:
    _SIGNED[signature] = message
    if len(_SIGNED) > _REMEMBERED:
        _SIGNED.popitem(last=False)


def _verified_cert(name: str, public: bytes, cert: bytes, root: bytes) -> bool:
    token = (name, public, cert, root)
    known = _CERTS.get(token)
    if known is None:
        known = _holds(root, cert, _cert_message(name, public))
        _CERTS[token] = known
        if len(_CERTS) > _REMEMBERED:
            _CERTS.popitem(last=False)
    return known


_KEYS: dict[bytes, Ed25519PublicKey] = {}


def _public_key(public: bytes) -> Ed25519PublicKey:
    """The verifying key of ``public``, loaded once per process (a log has a few writers)."""
    key = _KEYS.get(public)
    if key is None:
        if len(_KEYS) >= _REMEMBERED:
            _KEYS.clear()
        key = _KEYS[public] = Ed25519PublicKey.from_public_bytes(public)
    return key


def _holds(public: bytes, signature: bytes, message: bytes) -> bool:
    try:
        _public_key(public).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def signature_parts(sig: object) -> tuple[str, bytes, bytes, bytes, bytes, list[bytes]]:
    """The six parts of a ``sig`` field, or ``Forged`` naming what is malformed."""
    if not isinstance(sig, list) or len(sig) != SIG_FIELDS:
        raise Forged(f"a malformed signature ({type(sig).__name__} of "
                     f"{len(sig) if isinstance(sig, list) else '?'} parts, {SIG_FIELDS} expected)")
    name, public, cert, root, signature, others = sig
    if not (isinstance(name, str) and all(isinstance(b, bytes) for b in (public, cert, root, signature))
            and isinstance(others, list) and all(isinstance(d, bytes) and len(d) == DIGEST_BYTES for d in others)):
        raise Forged("a malformed signature (wrong types)")
    return name, public, cert, root, signature, others


def verify(envelope: Envelope, root: bytes) -> tuple[str, list[bytes]]:
    """The signer of the signed first record of an append, and the digests of the append's
    other records; ``Forged`` if it is not signed by an identity ``root`` certified."""
    name, public, cert, signer_root, signature, others = signature_parts(envelope[11])
    if signer_root != root:
        raise Forged(f"signed by {name!r} under another root key")
    if not _verified_cert(name, public, cert, root):
        raise Forged(f"the certificate of {name!r} was not issued by this cluster's root key")
    message = _UNIT + digest(unsigned_bytes(envelope)) + b"".join(others)
    if _SIGNED.get(signature) != message and not _holds(public, signature, message):
        raise Forged(f"the signature of {name!r} does not hold over this record")
    return name, list(others)


# -- a keyring directory: the root and each writer's identity, one file each ------------------

ROOT_FILE = "root.key"


def identity_file(directory: Path, name: str) -> Path:
    """Where identity ``name`` is kept in a keyring directory."""
    return directory / (name.replace("/", "-of-").replace(":", "@") + ".key")


def _private_write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def keyring_root(directory: Path) -> Root:
    """The root key kept in ``directory`` (made, 0600, when there is none): a cluster that
    resumes on its log signs under the root its log was founded with."""
    path = directory / ROOT_FILE
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        _private_write(path, Root().seed())
    seed = path.read_bytes()
    if len(seed) != 32:
        raise ConfigError(f"{path}: not a root key (32 bytes expected, {len(seed)} found)", value=str(path))
    return Root(seed)


def issue_file(directory: Path, name: str) -> Path:
    """Identity ``name`` issued from the root in ``directory`` and kept there (0600)."""
    path = identity_file(directory, name)
    if not path.exists():
        keyring_root(directory).issue(name).save(path)
    return path


def load_identity(directory: Path, name: str) -> Identity:
    """Identity ``name`` from a keyring directory, or ``ConfigError`` naming the file."""
    path = identity_file(directory, name)
    if not path.is_file():
        raise ConfigError(f"no signing identity {name!r}: {path} does not exist", value=str(path))
    return Identity.load(path)
