"""The reader's side of signed appends: which records a signed log's writers really wrote, and
whether each writer was entitled to write it.

Invariants:
- a log is *signed* from its first signed record on: that record's root key becomes the log's
  (``root``; a reader that knows the cluster's root pins it instead), and from then on every
  record must be the signed first record of an append by an identity that root certified, or a
  later record of such an append (its digest one of those the first listed, in order): anything
  else is ``forged``, whatever its key, seq or epoch;
- a genuine record must also be its signer's to write (``events.authority.may_write``), else it
  is ``unauthorized``;
- ``admit`` decides each record once per reader, in log order; its state (the root, per key the
  signer and digests of the append still being read) is plain data, saved with the view, so a
  view restored from a snapshot decides the tail the same way;
- what is costly is done once per record per process, whichever view asks: a signed record's
  verification (or why it failed) and a record's digest are kept in the envelope's instance
  dict; a reader that decodes in several processes (Spark) verifies there (``precheck``) and
  hands the result to the process that folds (``seed``), so each record is verified once;
- before a log's first signed record (logs written before signing, imports, tests) nothing is
  checked here.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.errors import ConfigError, ForeignCluster
from events.authority import may_write
from events.envelope import Envelope
from events.signing import Forged, digest, signature_parts, unsigned_bytes, verify

ROOT_KEY_BYTES = 32
_SIGNED = "signed"
_DIGEST = "digest"


@dataclass(slots=True)
class Trust:
    """One reader's state of a signed log."""

    root: bytes | None = None
    """The root key whose identities write this log (None: no signed record read yet)."""
    pinned: bool = False
    """``root`` was given by the reader (the cluster's own), not taken from the log."""
    expected: dict[str, tuple[str, list[bytes]]] = field(default_factory=dict)
    """Key -> (signer, digests of the append's records not read yet)."""
    founder: bytes | None = None
    """The root the log's first signed record names (a pinned reader refuses a log founded
    under another: ``check_pinned``)."""

    def admit(self, envelope: Envelope, elected: int | None,
              leaders: Mapping[int, str]) -> tuple[str, str] | None:
        """None if ``envelope`` was written by an identity entitled to it; else (anomaly kind,
        why). Called once per record, in log order, before the record is folded; ``elected``
        and ``leaders`` (epoch -> the leader its election named) are the view's so far."""
        signer = self._signer(envelope)
        if signer is None or signer[0] == "":
            return None if signer is None else ("forged", signer[1])
        why = may_write(signer[0], envelope[3], envelope[1], envelope[9], envelope[5], elected, leaders)
        return None if why is None else ("unauthorized", f"{envelope[1]} signed by {signer[0]}: {why}")

    def _signer(self, envelope: Envelope) -> tuple[str, str] | None:
        """(signer, "") for a genuine record, ("", why) for a forged one, None in an unsigned log."""
        key = envelope[3]
        if envelope[11] is None:
            if self.root is None:
                return None
            pending = self.expected.get(key)
            if pending is None:
                return "", f"{envelope[1]} is not signed, in a signed log"
            mine = _digest(envelope)
            signer, digests = pending
            if mine not in digests:
                return "", f"{envelope[1]} is not signed, nor one of the append {signer} signed"
            del digests[:digests.index(mine) + 1]  # any skipped were lost (dead letters)
            if not digests:
                del self.expected[key]
            return signer, ""
        if self.founder is None:
            try:
                self.founder = signature_parts(envelope[11])[3]
            except Forged as exc:
                return "", f"{envelope[1]}: {exc}"
            if self.root is None:
                self.root = self.founder
        try:
            signer, others = _verified(envelope, self.root or b"")  # set above, with the founder
        except Forged as exc:
            return "", f"{envelope[1]}: {exc}"
        if others:
            self.expected[key] = (signer, list(others))
        else:
            self.expected.pop(key, None)
        return signer, ""

    # -- snapshots ------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return {"root": self.root, "pinned": self.pinned, "founder": self.founder,
                "expected": {k: [s, list(d)] for k, (s, d) in self.expected.items()}}

    @classmethod
    def restore(cls, data: Mapping[str, Any]) -> Trust:
        return cls(root=data.get("root"), pinned=bool(data.get("pinned")),
                   founder=data.get("founder", data.get("root")),
                   expected={str(k): (str(s), list(d)) for k, (s, d) in data.get("expected", {}).items()})


Verified = tuple[bytes, str | None, list[bytes] | str]
"""A signed record checked against a root: (root, signer, the append's other digests), or
(root, None, why the signature does not hold)."""


def check_pinned(trust: Trust | None, pin: bytes | None, source: str) -> None:
    """``ForeignCluster`` naming ``source`` if a reader pinned the cluster's root (``pin``) and
    the log it read was founded under another (its first signed record names another root)."""
    if pin is None or trust is None or trust.founder is None or trust.founder == pin:
        return
    raise ForeignCluster(f"{source}: the log was founded under root key {key_text(trust.founder)}, "
                         f"not the pinned {key_text(pin)}", value=key_text(trust.founder))


def key_text(key: bytes) -> str:
    """A root's public key as it is written in settings and flags (base64)."""
    return base64.b64encode(key).decode("ascii")


def parse_key(text: str, source: str) -> bytes:
    """A root public key from its base64 text (``ConfigError`` naming ``source`` if it is not one)."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except ValueError:
        key = b""
    if len(key) != ROOT_KEY_BYTES:
        raise ConfigError(f"{source}={text!r}: not a root public key (base64 of {ROOT_KEY_BYTES} bytes)",
                          value=text)
    return key


def _verified(envelope: Envelope, root: bytes) -> tuple[str, list[bytes]]:
    marks = envelope.__dict__
    found: Verified | None = marks.get(_SIGNED)
    if found is None or found[0] != root:
        try:
            found = (root, *verify(envelope, root))
        except Forged as exc:
            marks[_SIGNED] = (root, None, str(exc))
            raise
        marks[_SIGNED] = found
    name, others = found[1], found[2]
    if name is None or isinstance(others, str):
        raise Forged(str(others))
    return name, others


def precheck(envelope: Envelope) -> Verified | None:
    """The costly part of ``admit`` for one record, done wherever it is decoded (a Spark worker,
    in parallel): a signed record verified against the root its own signature names. None for
    an unsigned record or a malformed signature (``admit`` names those itself, cheaply). The
    reader hands the result to ``seed`` on the envelope it folds; ``admit`` then decides the
    log's root and every rule as always, verifying again only under another root."""
    if envelope[11] is None:
        return None
    try:
        root = signature_parts(envelope[11])[3]
    except Forged:
        return None
    try:
        signer, others = _verified(envelope, root)
    except Forged as exc:
        return root, None, str(exc)
    return root, signer, others


def seed(envelope: Envelope, found: Verified | None) -> None:
    """Give ``envelope`` the verification ``precheck`` made of it in another process."""
    if found is not None:
        envelope.__dict__[_SIGNED] = found


def _digest(envelope: Envelope) -> bytes:
    marks = envelope.__dict__
    found: bytes | None = marks.get(_DIGEST)
    if found is None:
        found = marks[_DIGEST] = digest(unsigned_bytes(envelope))
    return found
