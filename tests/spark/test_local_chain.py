"""Spark reads an attacked embedded log as lbctl reads it: a stray empty segment and a copy of a
segment are skipped, records lost with a page of the data (the index gone too) are dead letters
at their own offsets, and a log whose files are no single history is refused with the same
named error.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from balancer.errors import LogDamaged
from events.log.local import LocalEventLog
from events.log.port import Record
from spark_replay.sources import read_local
from tests.integration.test_log_chain import SEGMENT, _write

pytestmark = [pytest.mark.spark, pytest.mark.slow]


async def _lbctl(directory: Path) -> list[tuple[int, str | None, int | None]]:
    log = LocalEventLog(directory)
    try:
        return [(i.offset, i.envelope.key, i.envelope.seq) if isinstance(i, Record) else (i.offset, None, None)
                for i in (await log.read()).items]
    finally:
        await log.close()


def test_spark_and_lbctl_read_an_attacked_log_alike(spark: Any, tmp_path: Path) -> None:
    directory = tmp_path / "log"
    asyncio.run(_write(directory, 70))
    pristine = asyncio.run(_lbctl(directory))
    raw = bytearray((directory / f"{SEGMENT}.log").read_bytes())
    raw[4096:8192] = bytes(4096)
    (directory / f"{SEGMENT}.log").write_bytes(bytes(raw))
    (directory / f"{SEGMENT}.idx").unlink()
    (directory / "00000000000000000070.log").touch()
    shutil.copy(directory / f"{SEGMENT}.log", directory / "00000000000000000100.log")

    lbctl = asyncio.run(_lbctl(directory))
    rows = read_local(spark, directory).orderBy("offset").collect()
    spark_rows = [(r["offset"], None, None) if r["error"] else (r["offset"], r["key"], r["seq"]) for r in rows]
    assert spark_rows == lbctl
    assert len(lbctl) == 140 and [o for o, _, _ in lbctl] == list(range(140))
    lost = [o for o, key, _ in lbctl if key is None]
    assert len(lost) > 10
    assert [row for row in lbctl if row[1] is not None] == [row for row in pristine if row[0] not in lost]
    assert all("offset" in r["error"] for r in rows if r["error"])

    for data in directory.glob("*.log"):
        data.unlink()
    (directory / f"{SEGMENT}.idx").write_bytes(b"\x00" * 24 * 5)  # an index whose data file is gone
    with pytest.raises(LogDamaged, match=f"{SEGMENT}.log is missing"):
        read_local(spark, directory)
