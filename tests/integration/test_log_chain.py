"""Attacks on the files of the embedded log other than a record's bytes: a stray or copied
segment, a missing data file, a lost index with a lost page, a stray ``heads.json``.

What a user notices after each: every committed record reads back at the offset it had (a
pristine copy says which), a record that cannot be read is a dead letter in its place, what is
not part of the log is named, and lbctl's reader (``LocalEventLog``) and the Spark reader's code
(``spark_replay.sources``: the segments it lists, the rows each task reads) see the same log
or refuse it with the same named error. A writer then carries on after the last record, with
every key's next seq, never reusing an offset.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from balancer.errors import LogDamaged
from events.catalog import BundleAssigned, BundleOwned, LeaderElected
from events.log._segment import INDEX, Segment
from events.log._store import Entry
from events.log.local import LocalEventLog
from events.log.port import Record
from spark_replay.sources import segment_rows, segments

SEGMENT = "00000000000000000000"
NS = "public/default"
Row = tuple[int, str | None, int | None]  # offset, key, seq (None, None for a dead letter)


async def _write(directory: Path, appends: int, segment_bytes: int = 64 * 1024 * 1024) -> None:
    log = LocalEventLog(directory, segment_bytes=segment_bytes)
    try:
        for i in range(appends):
            key = f"public/ns{i % 3}"
            bundle = f"{key}/0x{i:08x}_0x{i + 1:08x}"
            await log.append(key, [BundleAssigned(bundle=bundle, dst="broker-1", reason="lookup"),
                                   BundleOwned(bundle=bundle, owner="broker-1")], epoch=1)
    finally:
        await log.close()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """140 records in one segment, as `lbctl run --minutes 3 --keep` leaves them."""
    directory = tmp_path_factory.mktemp("pristine") / "log"
    asyncio.run(_write(directory, 70))
    return directory


@pytest.fixture(scope="module")
def chained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """140 records in several segments of about 4 KiB."""
    directory = tmp_path_factory.mktemp("chained") / "log"
    asyncio.run(_write(directory, 70, segment_bytes=4096))
    return directory


def _copy(source: Path, tmp_path: Path, name: str = "log") -> Path:
    target = tmp_path / name
    shutil.copytree(source, target)
    return target


async def _lbctl(directory: Path) -> tuple[list[Row], list[str]]:
    log = LocalEventLog(directory)
    try:
        items = (await log.read()).items
        rows: list[Row] = [(i.offset, i.envelope.key, i.envelope.seq) if isinstance(i, Record) else (i.offset, None, None)
                for i in items]
        return rows, list(log.store.notes)
    finally:
        await log.close()


def _spark(directory: Path) -> list[Row]:
    """What the Spark reader's tasks read: each listed segment's rows, in offset order."""
    rows: list[Row] = []
    for base, data, index in segments(directory):
        for row in segment_rows(data, index, base, "events"):
            dead = row.get("error") is not None
            rows.append((row["offset"], None if dead else row["key"], None if dead else row["seq"]))
    return sorted(rows)


async def _read(directory: Path) -> tuple[list[Row], list[str]]:
    """lbctl's reader, checked against the Spark reader (they agree) and against a re-read
    (a reader writes nothing)."""
    before = {p.name: p.read_bytes() for p in directory.rglob("*") if p.is_file()}
    rows, notes = await _lbctl(directory)
    assert _spark(directory) == rows, "lbctl's reader and the Spark reader disagree"
    assert {p.name: p.read_bytes() for p in directory.rglob("*") if p.is_file()} == before, \
        "a reader changed the files"
    return rows, notes


async def _append(directory: Path, key: str = "public/ns0") -> tuple[Record, list[str]]:
    log = LocalEventLog(directory)
    try:
        (record,) = await log.append(key, [BundleOwned(bundle=f"{key}/0x00000000_0xffffffff",
                                                       owner="broker-2")], epoch=1)
        return record, list(log.store.notes)
    finally:
        await log.close()


async def _refused(directory: Path, *named: str) -> None:
    """Every reader and the writer refuse the log, naming ``named``; nothing is written."""
    before = {p.name: p.read_bytes() for p in directory.rglob("*") if p.is_file()}
    for read in (lambda: _lbctl(directory), lambda: asyncio.to_thread(_spark, directory),
                 lambda: _append(directory)):
        with pytest.raises(LogDamaged) as refused:
            await read()
        for name in named:
            assert name in refused.value.message, refused.value.message
    assert {p.name: p.read_bytes() for p in directory.rglob("*") if p.is_file()} == before


async def _carries_on(directory: Path, want: list[Row]) -> list[str]:
    """A writer appends after the last record with the key's next seq, and nothing moved."""
    last = max(seq for _, key, seq in want if key == "public/ns0" and seq is not None)
    record, notes = await _append(directory)
    assert (record.offset, record.seq) == (len(want), last + 1)
    rows, _ = await _read(directory)
    assert rows == [*want, (len(want), "public/ns0", last + 1)]
    return notes


# -- segments that are no part of the chain ----------------------------------------------------


async def test_an_empty_stray_segment_inside_the_log_hides_nothing(pristine: Path, tmp_path: Path) -> None:
    want, _ = await _read(pristine)
    copy = _copy(pristine, tmp_path)
    stray = copy / "00000000000000000070.log"
    stray.touch()
    got, notes = await _read(copy)
    assert got == want and len(got) == 140
    assert any(str(stray) in n and "not part of the log" in n for n in notes), notes
    notes = await _carries_on(copy, want)
    assert not stray.exists(), "the writer left the stray where the next segment would go"
    assert any(str(stray) in n and "quarantine" in n for n in notes), notes


async def test_a_stray_segment_past_the_end_is_named_not_fatal(pristine: Path, tmp_path: Path) -> None:
    want, _ = await _read(pristine)
    copy = _copy(pristine, tmp_path)
    stray = copy / "00000000000000000500.log"
    stray.touch()
    got, notes = await _read(copy)
    assert got == want
    assert any(str(stray) in n for n in notes), notes
    await _carries_on(copy, want)


async def test_a_copy_of_a_segment_under_an_overlapping_base_doubles_nothing(
        pristine: Path, tmp_path: Path) -> None:
    want, _ = await _read(pristine)
    copy = _copy(pristine, tmp_path)
    for suffix in (".log", ".idx"):
        shutil.copy(copy / f"{SEGMENT}{suffix}", copy / f"00000000000000000100{suffix}")
    got, notes = await _read(copy)
    assert got == want
    assert any("00000000000000000100.log" in n and "copy" in n for n in notes), notes
    await _carries_on(copy, want)
    assert not (copy / "00000000000000000100.log").exists()


async def test_a_copy_of_a_segment_right_after_the_end_doubles_nothing(pristine: Path, tmp_path: Path) -> None:
    want, _ = await _read(pristine)
    copy = _copy(pristine, tmp_path)
    shutil.copy(copy / f"{SEGMENT}.log", copy / "00000000000000000140.log")
    got, _ = await _read(copy)
    assert got == want
    await _carries_on(copy, want)


# -- files that leave no single history: refused ------------------------------------------------


async def test_other_records_under_an_overlapping_base_are_refused(pristine: Path, tmp_path: Path) -> None:
    copy = _copy(pristine, tmp_path)
    other = Segment(copy, 100, create=True)  # another history for offsets 100..
    other.append([[Entry(b"\x91\x00", "public/ns0", 1)] * 5], fsync=False)
    other.close()
    await _refused(copy, f"{SEGMENT}.log", "00000000000000000100.log", "offsets 100")


async def test_a_missing_middle_segment_is_refused_by_every_reader(chained: Path, tmp_path: Path) -> None:
    copy = _copy(chained, tmp_path)
    bases = sorted(int(p.stem) for p in copy.glob("*.log"))
    assert len(bases) >= 3
    gone = copy / f"{bases[1]:020d}.log"
    gone.unlink()
    (copy / f"{bases[1]:020d}.idx").unlink()
    await _refused(copy, f"offsets {bases[1]} to {bases[2] - 1}", "missing")


async def test_a_removed_data_file_is_named_not_an_empty_log(pristine: Path, tmp_path: Path) -> None:
    copy = _copy(pristine, tmp_path)
    (copy / f"{SEGMENT}.log").unlink()
    await _refused(copy, f"{SEGMENT}.log", "missing")


async def test_a_removed_last_data_file_is_named(chained: Path, tmp_path: Path) -> None:
    copy = _copy(chained, tmp_path)
    last = max(copy.glob("*.log"))
    last.unlink()
    await _refused(copy, last.name, "missing")


# -- offsets never shift ------------------------------------------------------------------------


async def test_a_lost_index_and_a_lost_page_keep_every_later_offset(pristine: Path, tmp_path: Path) -> None:
    """The index is not fsynced: a power cut can take it with a page of the data. The records of
    the page are dead letters at their own offsets; every later record keeps its offset, so a
    follower that checkpointed past the page reads on from where it was."""
    want, _ = await _read(pristine)
    copy = _copy(pristine, tmp_path)
    raw = bytearray((copy / f"{SEGMENT}.log").read_bytes())
    index = (copy / f"{SEGMENT}.idx").read_bytes()
    starts = [INDEX.unpack_from(index, i * INDEX.size)[0] for i in range(len(index) // INDEX.size)]
    assert len(raw) > 3 * 4096
    raw[4096:8192] = bytes(4096)  # the second page reads back as zeros
    (copy / f"{SEGMENT}.log").write_bytes(bytes(raw))
    (copy / f"{SEGMENT}.idx").unlink()
    lost = {i for i, at in enumerate(starts)
            if at < 8192 and (starts[i + 1] if i + 1 < len(starts) else len(raw)) > 4096}
    assert len(lost) > 10
    expected = [(o, None, None) if o in lost else row for o, key, seq in want for row in [(o, key, seq)]]
    got, notes = await _read(copy)
    assert got == expected
    assert any("no frame" in n for n in notes), notes
    log = LocalEventLog(copy)  # a follower that checkpointed at offset 100
    try:
        later = (await log.read({0: 100})).records
        assert [(r.offset, r.key, r.seq) for r in later] == want[100:]
    finally:
        await log.close()
    await _carries_on(copy, expected)
    got, _ = await _read(copy)  # the index the writer rebuilt keeps them too
    assert got[:140] == expected


# -- side files ----------------------------------------------------------------------------------


async def test_a_stray_heads_file_resets_no_key(pristine: Path, tmp_path: Path) -> None:
    """A ``heads.json`` that says every key is at seq 0 (from another log, or written by hand)
    must not make a writer reuse seqs: the records say where each key is."""
    want, _ = await _read(pristine)
    copy = _copy(pristine, tmp_path)
    (copy / "heads.json").write_bytes(orjson.dumps({"heads": {}, "elected": None, "at": {"0": 140}}))
    for key in ("public/ns0", "public/ns1", "public/ns2"):
        last = max(seq for _, k, seq in want if k == key and seq is not None)
        record, _ = await _append(copy, key)
        assert record.seq == last + 1, f"{key}: seq {record.seq} after {last}"


async def _retained(directory: Path, mixed: bool = False) -> int:
    """A log of several small segments, its first ones dropped by retention (``heads.json``
    written): an election, then 120 appends under NS (``mixed``: half of them under another
    key); the log's end."""
    log = LocalEventLog(directory, segment_bytes=4000)
    try:
        await log.append("_leader", [LeaderElected(leader_id="leader", epoch=3)], epoch=3)
        for i in range(120):
            key = "public/other" if mixed and i % 2 else NS
            await log.append(key, [BundleAssigned(bundle=f"{key}/0x{i:08x}_0x{i + 1:08x}", dst="b")],
                             epoch=3)
        end = (await log.end_offsets())[0]
        assert log.store.retain(end - 10)
        return end
    finally:
        await log.close()


def _stray_heads(tmp_path: Path, end: int) -> bytes:
    return orjson.dumps({"heads": {}, "elected": None, "at": {"0": end}})


def _edited_heads(tmp_path: Path, end: int) -> bytes:
    found = orjson.loads((tmp_path / "log" / "heads.json").read_bytes())
    found["heads"][NS] = [3, 3]
    return orjson.dumps(found)


def _heads_of_another_log(tmp_path: Path, end: int) -> bytes:
    other = tmp_path / "other"
    assert asyncio.run(_retained(other, mixed=True)) == end
    return (other / "heads.json").read_bytes()


@pytest.mark.parametrize("forge", [_stray_heads, _edited_heads, _heads_of_another_log])
def test_a_heads_file_that_does_not_check_is_not_trusted_on_a_retained_log(
        tmp_path: Path, forge: Callable[[Path, int], bytes]) -> None:
    directory = tmp_path / "log"
    end = asyncio.run(_retained(directory))
    (directory / "heads.json").write_bytes(forge(tmp_path, end))

    async def append() -> tuple[Record, list[str]]:
        log = LocalEventLog(directory)
        try:
            (record,) = await log.append(NS, [BundleOwned(bundle=f"{NS}/0x00000000_0xffffffff",
                                                          owner="b")], epoch=3)
            return record, list(log.store.notes)
        finally:
            await log.close()

    record, notes = asyncio.run(append())
    assert (record.offset, record.seq) == (end, 121), "the writer reused a seq"
    assert any("heads.json: not used" in n for n in notes), notes


async def test_a_stale_heads_file_of_the_same_log_still_holds(tmp_path: Path) -> None:
    """An older ``heads.json`` of this log (from an earlier retain) is exact below its own
    offset: the records after it bring the heads up to date."""
    directory = tmp_path / "log"
    log = LocalEventLog(directory, segment_bytes=4000)
    for i in range(60):
        await log.append(NS, [BundleAssigned(bundle=f"{NS}/0x{i:08x}_0x{i + 1:08x}", dst="b")], epoch=3)
    assert log.store.retain(50)
    older = (directory / "heads.json").read_bytes()
    for i in range(60, 120):
        await log.append(NS, [BundleAssigned(bundle=f"{NS}/0x{i:08x}_0x{i + 1:08x}", dst="b")], epoch=3)
    assert log.store.retain(100)
    await log.close()
    (directory / "heads.json").write_bytes(older)
    reopened = LocalEventLog(directory)
    try:
        assert await reopened.head(NS) == (120, 3)
        (record,) = await reopened.append(NS, [BundleOwned(bundle=f"{NS}/0x00000000_0xffffffff",
                                                           owner="b")], epoch=3)
        assert record.seq == 121
    finally:
        await reopened.close()


async def test_a_segment_removed_under_an_open_reader_is_named(chained: Path, tmp_path: Path) -> None:
    """A reader that saw the last segment's records never reads on as if they had not been."""
    copy = _copy(chained, tmp_path)
    log = LocalEventLog(copy)
    try:
        assert len((await log.read()).items) == 140
        last = max(copy.glob("*.log"))
        last.unlink()
        last.with_suffix(".idx").unlink()
        for _ in range(2):
            with pytest.raises(LogDamaged, match=f"{last.name} vanished"):
                await log.read()
    finally:
        await log.close()
