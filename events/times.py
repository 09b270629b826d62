"""Instants as people read and type them: ISO-8601 UTC in, ISO-8601 UTC out; epoch ms inside.

Invariants: every event's ``ts_ms`` stays epoch milliseconds (the log's unit); ``iso`` renders
one as ``2026-11-25T10:00:00.000Z`` (UTC, millisecond precision, so it round-trips exactly);
any int prints: one outside years 1 to 9999 (which no decoded record holds) prints as the nearest
instant that has a date, with the raw milliseconds beside it; ``parse_instant`` takes that form, any ISO-8601 with an offset or ``Z`` (a naive one is read as
UTC), or plain epoch milliseconds, and names the text it cannot read. No clock is read here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from balancer.errors import InvalidInput
from events.bounds import clamp_ts

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso(ts_ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC with milliseconds."""
    clamped = clamp_ts(ts_ms)
    moment = _EPOCH + timedelta(milliseconds=clamped)
    text = f"{moment.year:04d}" + moment.strftime("-%m-%dT%H:%M:%S.") + f"{clamped % 1000:03d}Z"
    return text if clamped == ts_ms else f"{text} (out of range: {ts_ms} ms)"


def parse_instant(text: str) -> int:
    """ISO-8601 (``Z`` or an offset; naive means UTC) or epoch milliseconds -> epoch ms."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    try:
        moment = datetime.fromisoformat(stripped.replace("z", "Z"))
    except ValueError:
        raise InvalidInput(f"time {text!r}: expected ISO-8601 (2026-11-25T10:00:00Z) or epoch "
                           "milliseconds", value=text) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)
