"""``lbctl decide accept``: whether the ownership state machine takes each record (behaviour §6.1).

Invariants: every case names its mode (``compacted`` or ``strict``) and both ``current`` and
``incoming`` (null = no record / a tombstone); a record is ``{state, dst, src, version, force}``
(``force`` and ``timestamp`` optional); anything else is rejected naming the case and the field.
"""

from __future__ import annotations

from typing import Any

from balancer.errors import InvalidInput, MalformedInput
from balancer.ownership import AcceptMode, BundleState, OwnershipRecord, accept
from lbctl.decide.inputs import integer, known_keys, mapping

_RECORD_KEYS = frozenset({"state", "dst", "src", "version", "force", "timestamp"})


def run(document: dict[str, Any]) -> dict[str, Any]:
    known_keys(document, ("cases",), "")
    cases = document.get("cases")
    if not isinstance(cases, list):
        raise MalformedInput(f"cases: expected a list, got {cases!r}", value="cases")
    return {"results": [_one_case(case, f"cases[{i}]") for i, case in enumerate(cases)]}


def _one_case(raw: Any, where: str) -> bool:
    case = mapping(raw, where, ("case", "mode", "current", "incoming"))
    for key in ("mode", "current", "incoming"):
        if key not in case:
            raise MalformedInput(f"{where}: missing {key!r}", value=key)
    mode_text = case["mode"]
    if not isinstance(mode_text, str):
        raise MalformedInput(f"{where}.mode: expected compacted or strict, got {mode_text!r}", value=mode_text)
    try:
        mode = AcceptMode.parse(mode_text)
    except InvalidInput as exc:
        raise MalformedInput(f"{where}.mode: {exc.message}", value=mode_text) from None
    current = _record(case["current"], f"{where}.current")
    incoming = _record(case["incoming"], f"{where}.incoming")
    return accept(current, incoming, mode)


def _record(raw: Any, where: str) -> OwnershipRecord | None:
    if raw is None:
        return None
    record = mapping(raw, where, _RECORD_KEYS)
    state = record.get("state")
    if not isinstance(state, str) or state not in set(BundleState):
        raise MalformedInput(f"{where}.state: unknown state {state!r}; accepted: {', '.join(BundleState)}",
                             value=state)
    dst, src, force = record.get("dst"), record.get("src"), record.get("force", False)
    for name, value in (("dst", dst), ("src", src)):
        if value is not None and not isinstance(value, str):
            raise MalformedInput(f"{where}.{name}: expected a broker id or null, got {value!r}", value=value)
    if not isinstance(force, bool):
        raise MalformedInput(f"{where}.force: expected true or false, got {force!r}", value=force)
    if "version" not in record:
        raise MalformedInput(f"{where}: missing 'version'", value="version")
    version = integer(record["version"], f"{where}.version")
    timestamp = integer(record.get("timestamp", 0), f"{where}.timestamp")
    try:
        return OwnershipRecord(BundleState(state), dst, src, force=force, timestamp_ms=timestamp,
                               version=version)
    except InvalidInput as exc:
        raise MalformedInput(f"{where}: {exc.message}", value=exc.details.get("value")) from None
