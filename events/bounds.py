"""The ranges every reader decodes, and the reach of one record: no record may wedge a key.

A record's ``seq`` and ``epoch`` are int64 on the wire (``events.codec``); its ``ts_ms`` is an
instant ISO-8601 can print (years 1 to 9999). Those ranges alone do not stop one record from
wedging a key: a record at seq 2^63-1 is well formed, but the next seq of its key is not, so
every later append of the key would be undecodable. A record therefore counts only within
*reach* of its key's head: its seq at most ``STEP_MAX`` past the key's last seq, its epoch at
most ``STEP_MAX`` past the key's newest epoch. A record beyond reach is an anomaly
(``out_of_range``) that moves no head, neither a writer's nor a reader's, so the key's next
append is the one after its last record within reach. Pushing a key to the end of its range then
takes 2^23 forged records, not one.

Invariants:
- a writer refuses (``OutOfRange``, nothing written) to stamp a record any reader would refuse:
  seq or epoch outside 0..2^63-1, a time outside ``TS_MIN..TS_MAX``;
- ``beyond_reach`` is the one rule of reach: the log's writers (``Heads``), the projections'
  seq tracker and the bodies' fold apply the same function to the same heads, so they agree on
  which records count;
- legitimate writers never come near ``STEP_MAX``: seqs and epochs step by one (a key's seq may
  jump by the records a damaged stretch lost, an epoch by the elections between two records of
  a key), and 2^40 is about 35 years of a thousand records a second;
- ``clock_start`` is where a restarted virtual clock may begin after the newest time of a log:
  never later than ``CLOCK_MAX``, so a forged time near the end of the range leaves the clock
  centuries before it; nothing here reads a clock.
"""

from __future__ import annotations

from balancer.errors import OutOfRange

SEQ_MAX = EPOCH_MAX = 2**63 - 1
"""The largest seq and epoch on the wire (int64)."""
STEP_MAX = 2**40
"""How far past its key's head a record's seq or epoch may go and still count."""
TS_MIN = -62_135_596_800_000
"""0001-01-01T00:00:00.000Z: the earliest time ISO-8601 (and Python's datetime) prints."""
TS_MAX = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the latest."""
CLOCK_MAX = 221_845_392_000_000
"""9000-01-01T00:00:00.000Z: the latest start of a restarted virtual clock (a thousand years
before ``TS_MAX``)."""


def check_writable(key: str, seq: int, epoch: int, ts_ms: int) -> None:
    """``OutOfRange`` if a record stamped so would not decode everywhere."""
    if 0 <= seq <= SEQ_MAX and 0 <= epoch <= EPOCH_MAX and TS_MIN <= ts_ms <= TS_MAX:
        return
    raise OutOfRange(f"refusing to append under {key!r}: seq {seq}, epoch {epoch}, time {ts_ms} ms "
                     f"leave the range every reader decodes (seq and epoch 0..{SEQ_MAX}, time "
                     f"{TS_MIN}..{TS_MAX} ms)", key=key, seq=seq, epoch=epoch, ts_ms=ts_ms)


def beyond_reach(last_seq: int, last_epoch: int, seq: int, epoch: int) -> str | None:
    """Why a record at (``seq``, ``epoch``) does not count after its key's (``last_seq``,
    ``last_epoch``) (0, 0 for a key never written), or None if it is within reach."""
    if seq - last_seq > STEP_MAX:
        return f"seq {seq} is more than 2^40 past the key's last seq {last_seq}"
    if epoch - last_epoch > STEP_MAX:
        return f"epoch {epoch} is more than 2^40 past the key's newest epoch {last_epoch}"
    return None


def clamp_ts(ts_ms: int) -> int:
    """``ts_ms`` within ``TS_MIN..TS_MAX``."""
    return TS_MIN if ts_ms < TS_MIN else TS_MAX if ts_ms > TS_MAX else ts_ms


def clock_start(newest_ts_ms: int) -> int:
    """Where a virtual clock resumes after a log whose newest time is ``newest_ts_ms``."""
    return min(clamp_ts(newest_ts_ms), CLOCK_MAX) + 1
