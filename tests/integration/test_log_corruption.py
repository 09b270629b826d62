"""The embedded log is read from its CRC-framed data: whatever happens to its index, its tail or
its directory, every committed record reads back as it was written (a damaged one as a dead
letter in its place), readers change nothing, and the next writer moves what it cannot use
aside, saying which file and byte.

Each test damages a copy of one log the way it was found damaged and compares what is read
back with the pristine log, and with what the Spark reader's code (``spark_replay.sources``: the
segments it lists, the rows each task reads) reads from the same files.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
from pathlib import Path

import pytest

from events.catalog import BundleAssigned, BundleOwned, LoadReported
from events.log._segment import INDEX, frames
from events.log._store import Entry
from events.log.local import LocalEventLog
from events.log.port import DeadLetter, Record
from spark_replay import sources
from spark_replay.sources import segment_rows, segments

SEGMENT = "00000000000000000000"
Seen = list[tuple[int, object]]


async def _write_pristine(directory: Path) -> None:
    log = LocalEventLog(directory)
    for i in range(39):
        key = f"public/ns{i % 3}"
        bundle = f"{key}/0x{i:08x}_0x{i + 1:08x}"
        await log.append(key, [BundleAssigned(bundle=bundle, dst="broker-1", reason="lookup"),
                               BundleOwned(bundle=bundle, owner="broker-1")], epoch=1)
        await log.append(f"broker-{i % 4}", [LoadReported(broker_id=f"broker-{i % 4}", broker_load={"topics": i})], epoch=0)
    await log.close()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import asyncio

    directory = tmp_path_factory.mktemp("pristine") / "log"
    asyncio.run(_write_pristine(directory))
    return directory


async def _read(directory: Path) -> tuple[Seen, list[DeadLetter], list[str]]:
    log = LocalEventLog(directory)
    try:
        result = await log.read()
        seen: Seen = [(i.offset, i.envelope if isinstance(i, Record) else None) for i in result.items]
    finally:
        await log.close()
    lbctl = [(i.offset, (i.envelope.key, i.envelope.seq, i.envelope.type) if isinstance(i, Record) else None)
             for i in result.items]
    assert _spark_rows(directory) == lbctl, "lbctl's reader and the Spark reader disagree"
    return seen, result.dead_letters, list(log.store.notes)


def _spark_rows(directory: Path) -> list[tuple[int, object]]:
    rows = [row for base, data, index in segments(directory) for row in segment_rows(data, index, base, "events")]
    found = sorted((r["offset"], None if r.get("error") else (r["key"], r["seq"], r["type"])) for r in rows)
    # The Spark reader decodes a segment in slices, one task each: together they read the same.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sources, "SLICE", 7)
        sliced = [row for base, data, index in segments(directory)
                  for start, stop in sources.slices(Path(data).parent, base)
                  for row in segment_rows(data, index, base, "events", False, start, stop)]
    assert sorted((r["offset"], None if r.get("error") else (r["key"], r["seq"], r["type"]))
                  for r in sliced) == found
    return found


async def _write_one(directory: Path) -> list[str]:
    log = LocalEventLog(directory)
    try:
        await log.append("public/extra", [BundleAssigned(bundle="public/extra/0x00000000_0xffffffff",
                                                          dst="broker-2")], epoch=1)
        return list(log.store.notes)
    finally:
        await log.close()


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}


async def _check(copy: Path, pristine: Path, *, damaged: int | None = None) -> tuple[list[str], list[str]]:
    """Read the damaged copy (nothing changes on disk, nothing committed is missing), let a
    writer repair it (still nothing missing); the notes of the reader and of the writer."""
    want, _, _ = await _read(pristine)
    before = _files(copy)
    got, dead, read_notes = await _read(copy)
    assert _files(copy) == before, "a reader changed the files"
    expected = [(o, None if o == damaged else env) for o, env in want]
    assert got == expected
    assert [d.offset for d in dead] == ([] if damaged is None else [damaged])
    write_notes = await _write_one(copy)
    got, dead, _ = await _read(copy)
    assert got[:-1] == expected and got[-1][0] == len(want), "the writer lost or moved a record"
    return read_notes, write_notes


@pytest.fixture
def copy(pristine: Path, tmp_path: Path) -> Path:
    target = tmp_path / "log"
    shutil.copytree(pristine, target)
    return target


def _index(copy: Path) -> Path:
    return copy / f"{SEGMENT}.idx"


def _data(copy: Path) -> Path:
    return copy / f"{SEGMENT}.log"


async def test_16_bytes_appended_to_the_index_lose_nothing(copy: Path, pristine: Path) -> None:
    with _index(copy).open("ab") as f:
        f.write(b"\x01" * 16)
    _, notes = await _check(copy, pristine)
    assert any(f"{_index(copy)}: byte {117 * INDEX.size}" in n and "quarantine" in n for n in notes)
    assert _data(copy).stat().st_size > _data(pristine).stat().st_size


async def test_an_index_cut_to_1000_bytes_loses_nothing(copy: Path, pristine: Path) -> None:
    os.truncate(_index(copy), 1000)
    _, notes = await _check(copy, pristine)
    assert any(str(_index(copy)) in n and "index rebuilt from the data" in n for n in notes)


async def test_an_emptied_index_loses_nothing(copy: Path, pristine: Path) -> None:
    os.truncate(_index(copy), 0)
    await _check(copy, pristine)
    assert _index(copy).stat().st_size == 118 * INDEX.size


async def test_a_missing_index_loses_nothing(copy: Path, pristine: Path) -> None:
    _index(copy).unlink()
    await _check(copy, pristine)


@pytest.mark.parametrize("bit", [0, 7, 70, 130, 160, 191])
async def test_a_bit_flipped_in_the_last_index_entry_loses_nothing(copy: Path, pristine: Path, bit: int) -> None:
    raw = bytearray(_index(copy).read_bytes())
    at = len(raw) - INDEX.size + bit // 8
    raw[at] ^= 1 << (bit % 8)
    _index(copy).write_bytes(bytes(raw))
    size = _data(copy).stat().st_size
    read_notes, _ = await _check(copy, pristine)
    assert any(f"{_index(copy)}: byte {len(raw) - INDEX.size} (offset 116)" in n for n in read_notes)
    assert _data(copy).stat().st_size < size + 4096, "the data file grew"


def _frame_span(copy: Path, offset: int) -> tuple[int, int]:
    raw = _index(copy).read_bytes()
    position, size, _, _ = INDEX.unpack_from(raw, offset * INDEX.size)
    return position, size


async def test_a_byte_flipped_inside_a_frame_is_a_dead_letter_named_by_file_and_byte(
        copy: Path, pristine: Path) -> None:
    position, size = _frame_span(copy, 40)
    raw = bytearray(_data(copy).read_bytes())
    raw[position + size // 2] ^= 0x20
    _data(copy).write_bytes(bytes(raw))
    await _check(copy, pristine, damaged=40)
    _, dead, _ = await _read(copy)
    assert dead[0].error == f"{_data(copy)}: byte {position} (offset 40): stored frame fails its crc check"


async def test_a_stray_file_in_the_directory_is_ignored_and_named(copy: Path, pristine: Path) -> None:
    (copy / "notes.log").write_text("my notes\n")
    read_notes, _ = await _check(copy, pristine)
    assert any(f"{copy / 'notes.log'}: not a segment" in n for n in read_notes)


async def test_garbage_after_the_data_is_moved_aside_not_deleted(copy: Path, pristine: Path) -> None:
    garbage = bytes(range(250)) * 2
    end = _data(copy).stat().st_size
    with _data(copy).open("ab") as f:
        f.write(garbage)
    _, notes = await _check(copy, pristine)
    (moved,) = (copy / "quarantine").iterdir()
    assert moved.read_bytes() == garbage
    assert any(f"{_data(copy)}: byte {end} (offset 117): 500 bytes" in n and str(moved) in n for n in notes)


async def test_a_torn_index_entry_at_every_byte_loses_nothing(copy: Path, pristine: Path, tmp_path: Path) -> None:
    size = _index(copy).stat().st_size
    for cut in range(size - INDEX.size, size):
        each = tmp_path / f"cut{cut}"
        shutil.copytree(pristine, each)
        os.truncate(_index(each), cut)
        await _check(each, pristine)


async def test_a_torn_data_frame_at_every_byte_loses_nothing_committed(pristine: Path, tmp_path: Path) -> None:
    torn = b"".join(frames([Entry(b"\x93\x01\x02\x03" * 8, "public/ns0", 1), Entry(b"x" * 20, "public/ns0", 2)]))
    for cut in range(1, len(torn)):
        each = tmp_path / f"cut{cut}"
        shutil.copytree(pristine, each)
        end = _data(each).stat().st_size
        with _data(each).open("ab") as f:
            f.write(torn[:cut])
        _, notes = await _check(each, pristine)
        (moved,) = (each / "quarantine").iterdir()
        assert moved.read_bytes() == torn[:cut]
        assert any(f"{_data(each)}: byte {end} (offset 117): {cut} bytes" in n for n in notes)


async def test_a_byte_flipped_at_every_byte_of_a_frame_without_an_index(pristine: Path, tmp_path: Path) -> None:
    position, size = _frame_span(pristine, 60)
    for at in range(position, position + size):
        each = tmp_path / f"flip{at}"
        shutil.copytree(pristine, each)
        _index(each).unlink()
        raw = bytearray(_data(each).read_bytes())
        raw[at] ^= 0x01
        _data(each).write_bytes(bytes(raw))
        await _check(each, pristine, damaged=60)


async def test_a_reader_never_waits_for_the_writer_lock(copy: Path, pristine: Path) -> None:
    import asyncio

    fd = os.open(copy / "LOCK", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        done = threading.Event()

        def read() -> None:
            asyncio.run(_read(copy))
            done.set()

        threading.Thread(target=read, daemon=True).start()
        assert done.wait(20), "a reader blocked on the writer's lock"
    finally:
        os.close(fd)


async def test_appends_made_together_share_a_commit_and_keep_their_own_seq_and_fencing(tmp_path: Path) -> None:
    import asyncio

    from balancer.errors import WriterFenced

    log = LocalEventLog(tmp_path / "log")
    await log.append("public/a", [BundleOwned(bundle="public/a/0x00000000_0xffffffff", owner="b1")], epoch=3)

    async def one(i: int, epoch: int) -> int:
        records = await log.append("public/a", [BundleOwned(bundle="public/a/0x00000000_0xffffffff",
                                                            owner=f"b{i}")] * 2, epoch=epoch)
        return records[-1].seq

    results = await asyncio.gather(*(one(i, 2 if i == 7 else 3) for i in range(20)), return_exceptions=True)
    assert isinstance(results[7], WriterFenced)
    assert sorted(r for r in results if isinstance(r, int)) == list(range(3, 40, 2))
    await log.close()
    seqs = [r.seq for r in (await LocalEventLog(tmp_path / "log").read()).records]
    assert seqs == list(range(1, 40))
