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
  verification and a record's digest are kept in the envelope's instance dict;
- before a log's first signed record (logs written before signing, imports, tests) nothing is
  checked here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from events.authority import may_write
from events.envelope import Envelope
from events.signing import Forged, digest, signature_parts, unsigned_bytes, verify

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
        if self.root is None:
            try:
                self.root = signature_parts(envelope[11])[3]
            except Forged as exc:
                return "", f"{envelope[1]}: {exc}"
        try:
            signer, others = _verified(envelope, self.root)
        except Forged as exc:
            return "", f"{envelope[1]}: {exc}"
        if others:
            self.expected[key] = (signer, list(others))
        else:
            self.expected.pop(key, None)
        return signer, ""

    # -- snapshots ------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return {"root": self.root, "pinned": self.pinned,
                "expected": {k: [s, list(d)] for k, (s, d) in self.expected.items()}}

    @classmethod
    def restore(cls, data: Mapping[str, Any]) -> Trust:
        return cls(root=data.get("root"), pinned=bool(data.get("pinned")),
                   expected={str(k): (str(s), list(d)) for k, (s, d) in data.get("expected", {}).items()})


def _verified(envelope: Envelope, root: bytes) -> tuple[str, list[bytes]]:
    marks = envelope.__dict__
    found: tuple[bytes, str, list[bytes]] | None = marks.get(_SIGNED)
    if found is None or found[0] != root:
        signer, others = verify(envelope, root)
        found = marks[_SIGNED] = (root, signer, others)
    return found[1], found[2]


def _digest(envelope: Envelope) -> bytes:
    marks = envelope.__dict__
    found: bytes | None = marks.get(_DIGEST)
    if found is None:
        found = marks[_DIGEST] = digest(unsigned_bytes(envelope))
    return found
