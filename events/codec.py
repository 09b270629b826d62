"""Wire format (msgpack), JSON export (orjson) and upcasting of old payload versions.

Invariants:
- wire format 1: the envelope as a msgpack array in ``envelope.FIELDS`` order, with
  ``use_bin_type`` (str and bytes stay distinct): 12 elements on a signed append's first record,
  11 without a signature, the first 10 without a cluster id either (what every record written
  before the cluster id existed is, and still reads as); a msgpack map with the same field names
  is also read, so hand-made or foreign records decode too;
- ``decode`` either returns an envelope whose payload matches the *current* version of its type
  (known type, required fields present, no unknown field) or raises ``DecodeError`` whose
  ``details["reason"]`` is one of ``REASONS``; it never returns something half-valid;
- old versions are read through ``UPCASTERS[(type, version)]``, each turning a payload of
  ``version`` into ``version + 1``; a version newer than the code knows is a dead letter,
  never guessed at;
- map keys may be ints (bundle boundaries): ``strict_map_key=False``;
- bounded: seq and epoch are 0..2^63-1 and ts_ms an instant ISO-8601 prints
  (``events.bounds``); no string or bytes value is longer than ``MAX_TEXT`` bytes and no list or
  map holds more than ``MAX_ITEMS`` (``events._fields``), checked by msgpack as it unpacks, so a
  forged record cannot make a reader build a huge value before it is refused (``bad_payload``);
- ``to_json`` is byte-for-byte deterministic: sorted keys, bytes as base64 text, int map keys as
  strings, one line.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from typing import Any

import msgpack
import orjson

from balancer.errors import DecodeError
from events._fields import MAX_ITEMS, MAX_TEXT
from events.bounds import TS_MAX, TS_MIN
from events.catalog import SCHEMAS, Message, Schema
from events.envelope import FIELDS, Envelope

Payload = dict[str, Any]
Upcaster = Callable[[Payload], Payload]

REASONS = (
    "corrupt", "bad_envelope", "unknown_type", "future_version", "missing_fields",
    "unknown_fields", "upcast_failed", "bad_payload",
)

_N_FIELDS = len(FIELDS)
_N_STAMPED = _N_FIELDS - 1  # without a signature
_N_LEGACY = _N_FIELDS - 2  # before cluster_id
_unpackb = msgpack.unpackb
_packb = msgpack.packb
_new_envelope = tuple.__new__


def _broker_left_v1(payload: Payload) -> Payload:
    # v1 stored a flag; v2 names the reason so graceful and expired departures read alike.
    out = {k: v for k, v in payload.items() if k != "expired"}
    out["reason"] = "expired" if payload.get("expired") else "graceful"
    return out


def _shedding_skipped_v1(payload: Payload) -> Payload:
    # v1 did not say how much of the log the run had seen: a replay falls back to its time.
    return {**payload, "folded": None}


def _bundle_assigned_v1(payload: Payload) -> Payload:
    # v1 did not keep why the leader chose the broker: no placement to show.
    return {**payload, "decision": {}}


def _assign_bundle_v1(payload: Payload) -> Payload:
    return {**payload, "decision": None}


def _no_principal_v1(payload: Payload) -> Payload:
    # v1 of an admin write did not record who asked for it: no principal is named. A v1 payload
    # that holds one anyway was not written by v1 code: named (upcast_failed), never taken.
    if "by" in payload:
        raise ValueError("v1 has no field by")
    return {**payload, "by": None}


PRINCIPAL_ADDED = ("NamespaceCreated", "NamespacePolicySet", "FailureDomainSet", "SplitRequested",
                   "SplitCompleted", "CreateNamespace", "SetNamespacePolicy", "SetFailureDomain",
                   "SplitBundle", "UnloadNamespace")
"""The admin writes (and their events) whose v2 added ``by``, the principal who asked."""

def _no_proposal_v2(payload: Payload) -> Payload:
    # v2 of a split did not name the leader's proposal it carried out: none is named.
    if "proposal" in payload:
        raise ValueError("v2 has no field proposal")
    return {**payload, "proposal": None}


PROPOSAL_ADDED = ("SplitRequested", "SplitBundle")
"""The splits whose v3 added ``proposal``, the leader's proposal a split carries out."""

UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("BrokerLeft", 1): _broker_left_v1,
    ("SheddingSkipped", 1): _shedding_skipped_v1,
    ("BundleAssigned", 1): _bundle_assigned_v1,
    ("AssignBundle", 1): _assign_bundle_v1,
    **{(name, 1): _no_principal_v1 for name in PRINCIPAL_ADDED},
    **{(name, 2): _no_proposal_v2 for name in PROPOSAL_ADDED},
}


def encode(envelope: Envelope) -> bytes:
    """The wire bytes of an envelope."""
    if envelope[_N_STAMPED] is not None:
        data: bytes = _packb(envelope, use_bin_type=True)
    else:
        data = _packb(envelope[:_N_STAMPED] if envelope[_N_LEGACY] is not None else envelope[:_N_LEGACY],
                      use_bin_type=True)
    return data


def encode_message(message: Message) -> bytes:
    """A bare payload, for tools that store messages without an envelope."""
    data: bytes = _packb(message.to_payload(), use_bin_type=True)
    return data


def decode(raw: bytes) -> Envelope:
    """Wire bytes -> a validated, current-version envelope; anything else raises DecodeError."""
    try:
        obj = _unpack(raw)
    except Exception as exc:  # msgpack raises several unrelated types for bad bytes
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if isinstance(exc, ValueError) and " exceeds max_" in detail:
            raise DecodeError(f"a value past the log format's limits ({MAX_TEXT} bytes a string, "
                              f"{MAX_ITEMS} items a list or map): {exc}", reason="bad_payload") from None
        raise DecodeError(f"not msgpack ({len(raw)} bytes): {detail}", reason="corrupt") from None
    if type(obj) is list and len(obj) == _N_STAMPED:
        obj.append(None)
        envelope: Envelope = _new_envelope(Envelope, obj)
    elif type(obj) is list and len(obj) == _N_LEGACY:
        obj.append(None)
        obj.append(None)
        envelope = _new_envelope(Envelope, obj)
    elif type(obj) is list and len(obj) == _N_FIELDS:
        envelope = _new_envelope(Envelope, obj)
    elif isinstance(obj, dict):
        envelope = _from_map(obj)
    else:
        raise DecodeError(f"not an envelope: {_describe(obj)}", reason="bad_envelope")
    _check_envelope(envelope)
    return _check_payload(envelope)


_SHORT = min(MAX_TEXT, MAX_ITEMS)


def _unpack(raw: bytes) -> Any:
    """``raw`` unpacked within the log format's limits. For a record no longer than the
    shortest limit, msgpack's own limits (the record's length) are as strict, and naming them
    costs time on every record: a failure there is raised again with the format's limits, so
    it reads the same either way."""
    if len(raw) <= _SHORT:
        try:
            return _unpackb(raw, raw=False, strict_map_key=False)
        except Exception:  # raised again below, under the format's limits
            pass
    return _unpackb(raw, raw=False, strict_map_key=False, max_str_len=MAX_TEXT,
                    max_bin_len=MAX_TEXT, max_array_len=MAX_ITEMS, max_map_len=MAX_ITEMS)


def decode_message(raw: bytes) -> Message:
    """Wire bytes -> the typed event or command."""
    return decode(raw).message()


def _describe(obj: Any) -> str:
    if isinstance(obj, list):
        return f"an array of {len(obj)} elements, expected {_N_LEGACY} to {_N_FIELDS}"
    return f"a {type(obj).__name__}"


def _from_map(obj: dict[Any, Any]) -> Envelope:
    missing = [name for name in FIELDS[:_N_LEGACY] if name not in obj]
    if missing:
        raise DecodeError(f"envelope lacks {', '.join(missing)}", reason="bad_envelope")
    values: list[Any] = [obj.get(name) for name in FIELDS]
    return Envelope(*values)


_OPTIONAL_STR = (str, type(None))
_OPTIONAL_LIST = (list, type(None))
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def check_header(env: Envelope) -> bool:
    """Whether every field but the payload is what ``decode`` accepts (types and bounds)."""
    # type() checks, not isinstance: a bool is not a seq number.
    return (
        type(env[0]) is str and type(env[1]) is str and type(env[2]) is int
        and type(env[3]) is str and type(env[4]) is int and type(env[5]) is int
        and type(env[6]) is int and type(env[7]) in _OPTIONAL_STR
        and type(env[8]) in _OPTIONAL_STR and type(env[10]) in _OPTIONAL_STR
        and (env[11] is None or type(env[11]) is list)
        and 0 <= env[4] <= _INT64_MAX and 0 <= env[5] <= _INT64_MAX and TS_MIN <= env[6] <= TS_MAX
    )


def _check_envelope(env: Envelope) -> None:
    if type(env[9]) is dict and check_header(env):
        return
    if all(_field_checks(env)):
        raise DecodeError(f"envelope out of bounds: seq={env[4]}, epoch={env[5]}, ts_ms={env[6]} "
                          f"(seq and epoch are 0..2^63-1, ts_ms {TS_MIN}..{TS_MAX}: years 1 to 9999)",
                          reason="bad_envelope")
    bad = [
        f"{name}={value!r:.40}" for name, value, ok in zip(FIELDS, env, _field_checks(env), strict=True)
        if not ok
    ]
    raise DecodeError(f"bad envelope field(s): {', '.join(bad)}", reason="bad_envelope")


def _field_checks(env: Envelope) -> list[bool]:
    kinds = (str, str, int, str, int, int, int, _OPTIONAL_STR, _OPTIONAL_STR, dict, _OPTIONAL_STR,
             _OPTIONAL_LIST)
    return [
        type(value) in kind if isinstance(kind, tuple) else type(value) is kind
        for value, kind in zip(env, kinds, strict=True)
    ]


def _check_payload(env: Envelope) -> Envelope:
    schema = SCHEMAS.get(env.type)
    if schema is None:
        raise DecodeError(f"unknown type {env.type!r} (version {env.version})", reason="unknown_type")
    if env.version != schema.version:
        env = upcast(env, schema.version)
    keys = env.payload.keys()
    if keys >= schema.required and keys <= schema.allowed:
        return _check_values(env, schema)
    missing = sorted(schema.required - keys)
    if missing:
        raise DecodeError(f"{env.type} v{env.version}: missing field(s) {', '.join(missing)}",
                          reason="missing_fields")
    unknown = sorted(str(k) for k in keys - schema.allowed)
    raise DecodeError(f"{env.type} v{env.version}: unknown field(s) {', '.join(unknown)}",
                      reason="unknown_fields")


def _check_values(env: Envelope, schema: Schema) -> Envelope:
    payload = env.payload
    failed = schema.check_fields(payload) if schema.check_fields is not None else _first_failing(payload, schema)
    if failed is not None:
        problem = dict(schema.checks)[failed](payload[failed])
        raise DecodeError(f"{env.type} v{env.version}: field {failed}: {problem}", reason="bad_payload")
    if schema.epoch_field and payload["epoch"] != env.epoch:
        raise DecodeError(f"{env.type} v{env.version}: payload epoch {payload['epoch']} is not the "
                          f"envelope's {env.epoch}", reason="bad_payload")
    return env


def _first_failing(payload: dict[str, Any], schema: Schema) -> str | None:
    return next((name for name, check in schema.checks
                 if name in payload and check(payload[name]) is not None), None)


def upcast(env: Envelope, target: int) -> Envelope:
    """Step an old payload up to ``target`` one version at a time."""
    if env.version > target:
        raise DecodeError(
            f"{env.type} version {env.version} is newer than this code reads (up to {target})",
            reason="future_version",
        )
    payload, version = env.payload, env.version
    while version < target:
        step = UPCASTERS.get((env.type, version))
        if step is None:
            raise DecodeError(f"no upcaster for {env.type} v{version}", reason="upcast_failed")
        try:
            payload = step(payload)
        except Exception as exc:  # an upcaster meeting a malformed old payload
            raise DecodeError(f"upcasting {env.type} v{version} failed: {exc}",
                              reason="upcast_failed") from None
        version += 1
    current = env._replace(version=version, payload=payload)
    current.__dict__["stored"] = env.__dict__.get("stored", env)  # what a signature covers
    return current


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"not JSON-exportable: {type(value).__name__}")


_JSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def to_json(envelope: Envelope) -> bytes:
    """One envelope as deterministic JSON bytes (sorted keys, no trailing newline)."""
    return orjson.dumps(envelope.to_dict(), default=_json_default, option=_JSON_OPTIONS)


def to_json_value(value: Any) -> bytes:
    """Any plain value as deterministic JSON bytes (used for dead letters and tables)."""
    return orjson.dumps(value, default=_json_default, option=_JSON_OPTIONS)


def export_jsonl(envelopes: Iterable[Envelope]) -> bytes:
    """Envelopes as JSON lines, each line ``to_json``, newline-terminated."""
    return b"".join(to_json(env) + b"\n" for env in envelopes)


def reason_of(error: DecodeError) -> str:
    """The dead-letter reason of a decode error (``corrupt`` when none was recorded)."""
    reason = error.details.get("reason")
    return reason if isinstance(reason, str) else "corrupt"
