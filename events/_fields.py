"""Type and bound checks of payload fields, built once per event from its annotations.

Invariants:
- a check returns None for a value of the field's declared type, else a short reason; it never
  raises: the codec turns a reason into a ``bad_payload`` dead letter;
- ints are int64 (not bool), floats are finite; ``Any`` inside a dict or list is any plain
  value that itself holds only int64 ints and finite floats, so no stored value can overflow a
  later encoder or poison arithmetic (``nan`` compares false with everything);
- lengths are bounded by the log format, the same in every process that reads it: no string or
  bytes value longer than ``MAX_TEXT`` bytes, no list or map of more than ``MAX_ITEMS`` (the codec
  has msgpack refuse them as it unpacks). They are constants, not settings: a reader configured
  tighter than the writer would dead-letter what every other reader folds, and the views of one
  log would differ. Admin input has its own, smaller limits (broker.conf, ``balancer.limits``),
  so whatever an admin command makes decodes everywhere;
- an annotation this module does not know is a programming error, found at import time;
- ``fields_check`` compiles a payload's checks into one function (the codec's hot path) that
  accepts exactly what the checks accept; the checks still give the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Check = Callable[[Any], "str | None"]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_TEXT = 65_536
"""Bytes of UTF-8 in one string (or bytes) of a record: names, URLs, reasons, messages."""
MAX_ITEMS = 131_072
"""Items of one list or map of a record: the 65,537 boundaries of a namespace of 65,536 bundles
fit twice."""


_SCALARS = frozenset((str, bool, bytes, type(None)))


def _plain(value: Any, depth: int = 0) -> str | None:
    kind = type(value)
    if kind is int:
        return None if INT64_MIN <= value <= INT64_MAX else f"{value} is outside int64"
    if kind is float:
        return None if math.isfinite(value) else f"{value} is not a finite number"
    if kind in _SCALARS:
        return None
    if depth > 32:
        return "nested more than 32 levels deep"
    # The items that are plain scalars (most of a load report) pass inline, without a call each.
    if kind is list:
        for v in value:
            inner = type(v)
            if not (inner in _SCALARS or (inner is float and math.isfinite(v))
                    or (inner is int and INT64_MIN <= v <= INT64_MAX)):
                problem = _plain(v, depth + 1)
                if problem:
                    return problem
        return None
    if kind is dict:
        for k, v in value.items():
            inner = type(v)
            if not (type(k) is str and (inner in _SCALARS or (inner is float and math.isfinite(v))
                                        or (inner is int and INT64_MIN <= v <= INT64_MAX))):
                problem = _plain(k, depth + 1) or _plain(v, depth + 1)
                if problem:
                    return problem
        return None
    return f"a {kind.__name__} is not plain data"


def _int(value: Any) -> str | None:
    if type(value) is not int:
        return f"expected an int, got {_show(value)}"
    return None if INT64_MIN <= value <= INT64_MAX else f"{value} is outside int64"


def _float(value: Any) -> str | None:
    if type(value) is int:
        return _int(value)
    if type(value) is not float:
        return f"expected a number, got {_show(value)}"
    return None if math.isfinite(value) else f"{value} is not a finite number"


def _exactly(kind: type) -> Check:
    def check(value: Any) -> str | None:
        return None if type(value) is kind else f"expected a {kind.__name__}, got {_show(value)}"
    return check


def _any(value: Any) -> str | None:
    return _plain(value)


def _list_of(inner: Check) -> Check:
    def check(value: Any) -> str | None:
        if type(value) is not list:
            return f"expected a list, got {_show(value)}"
        for i, item in enumerate(value):
            problem = inner(item)
            if problem:
                return f"[{i}]: {problem}"
        return None
    return check


def _dict_of(key: Check, inner: Check) -> Check:
    def check(value: Any) -> str | None:
        if type(value) is not dict:
            return f"expected a map, got {_show(value)}"
        for k, v in value.items():
            problem = key(k) or inner(v)
            if problem:
                return f"[{k!r:.20}]: {problem}"
        return None
    return check


def _optional(inner: Check) -> Check:
    def check(value: Any) -> str | None:
        return None if value is None else inner(value)
    return check


def _show(value: Any) -> str:
    return f"{type(value).__name__} {value!r:.40}"


_SIMPLE: dict[str, Check] = {
    "str": _exactly(str), "bool": _exactly(bool), "int": _int, "float": _float, "Any": _any,
}


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char == "["
        depth -= char == "]"
        if depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i].strip())
            start = i + len(sep)
    return [*parts, text[start:].strip()]


def check_for(annotation: str) -> Check:
    """The check of one field annotation (``int``, ``str | None``, ``list[dict[str, Any]]``...)."""
    options = _split_top(annotation, "|")
    if len(options) > 1:
        rest = [o for o in options if o != "None"]
        inner = check_for(" | ".join(rest))
        return _optional(inner) if "None" in options else inner
    text = options[0]
    if text in _SIMPLE:
        return _SIMPLE[text]
    if text.startswith("list[") and text.endswith("]"):
        return _list_of(check_for(text[5:-1]))
    if text.startswith("dict[") and text.endswith("]"):
        key, value = _split_top(text[5:-1], ",")
        return _dict_of(check_for(key), check_for(value))
    raise TypeError(f"no payload check for the annotation {annotation!r}")


_INLINE: dict[str, str] = {
    "str": "type(v) is str",
    "bool": "type(v) is bool",
    "int": f"type(v) is int and {INT64_MIN} <= v <= {INT64_MAX}",
    "float": f"(type(v) is float and isfinite(v)) or (type(v) is int and {INT64_MIN} <= v <= {INT64_MAX})",
}
"""The plain kinds checked inline (the same rules as their ``Check``)."""
_ABSENT = object()

FieldsCheck = Callable[[Mapping[str, Any]], "str | None"]


def fields_check(annotated: Sequence[tuple[str, str]]) -> FieldsCheck:
    """One function checking every ``(field, annotation)`` a payload holds: the name of the first
    field whose value fails its check, or None. The plain kinds are tested inline, the rest by
    their ``check_for``; it agrees with those checks on every value (a decoder runs it on every
    record, and asks the field's own check for the reason only when it names a field)."""
    lines = ["def check_fields(p):", "    get = p.get"]
    scope: dict[str, Any] = {"isfinite": math.isfinite, "ABSENT": _ABSENT}
    for i, (name, annotation) in enumerate(annotated):
        options = _split_top(annotation, "|")
        inline = _INLINE.get(" | ".join(o for o in options if o != "None"))
        lines.append(f"    v = get({name!r}, ABSENT)")
        if inline is None:
            scope[f"check_{i}"] = check_for(annotation)
            lines.append(f"    if v is not ABSENT and check_{i}(v) is not None: return {name!r}")
        else:
            accepted = f"v is None or {inline}" if "None" in options else inline
            lines.append(f"    if v is not ABSENT and not ({accepted}): return {name!r}")
    lines.append("    return None")
    exec("\n".join(lines), scope)  # the source: literals and names from annotations, built above
    compiled: FieldsCheck = scope["check_fields"]
    return compiled
