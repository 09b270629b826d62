"""Retention of the embedded log: whole sealed segments below a floor dropped.

What a user notices: after retention the log opens, reads from its first held record and says
that the ones before it were dropped (never a silent jump); appends go on with the right seq and
the same fencing (a stale epoch and a wrong expected seq are still refused); the active segment
is never dropped; a crash at any step of a retain leaves a log that opens, reads and appends.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from balancer.errors import StateConflict, WriterFenced
from events.catalog import BundleAssigned, LeaderElected
from events.log.local import HEADS_FILE, LocalEventLog, LocalStore

NS = "public/default"
SEGMENT_BYTES = 4_000


def assigned(i: int) -> BundleAssigned:
    return BundleAssigned(bundle=f"{NS}/0x{i:08x}_0x{i + 1:08x}", dst=f"broker-{i % 5}")


async def _written(directory: Path, appends: int = 120) -> LocalEventLog:
    """A log of several segments: an election at epoch 3, then ``appends`` appends under NS
    and "t/old" (written only at the start, so its head lies in a dropped segment)."""
    log = LocalEventLog(directory, fsync=False, segment_bytes=SEGMENT_BYTES)
    await log.append("_leader", [LeaderElected(leader_id="leader", epoch=3)], epoch=3)
    await log.append("t/old", [assigned(0), assigned(1)], epoch=2)
    for i in range(appends):
        await log.append(NS, [assigned(i)], epoch=3)
    return log


def _segments(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.log"))


async def test_retain_then_reopen_then_append_keeps_seq_and_fencing(tmp_path: Path) -> None:
    log = await _written(tmp_path)
    end = (await log.end_offsets())[0]
    before = _segments(tmp_path)
    assert len(before) >= 4
    dropped = log.store.retain(end - 10)
    await log.close()
    assert dropped and _segments(tmp_path) == before[len(dropped):]
    assert all(d.records > 0 and d.bytes > 0 for d in dropped)
    start = dropped[-1].first + dropped[-1].records

    reopened = LocalEventLog(tmp_path, fsync=False, segment_bytes=SEGMENT_BYTES)
    assert await reopened.start_offsets() == {0: start}
    result = await reopened.read()
    assert result.dropped == {0: start} and result.items[0].offset == start
    assert await reopened.head(NS) == (120, 3) and await reopened.head("t/old") == (2, 2)
    with pytest.raises(WriterFenced):  # an epoch older than the key's newest, written before the floor
        await reopened.append("t/old", [assigned(9)], epoch=1)
    with pytest.raises(WriterFenced):  # an epoch no election established
        await reopened.append(NS, [assigned(9)], epoch=4)
    with pytest.raises(StateConflict):
        await reopened.append(NS, [assigned(9)], epoch=3, expected_seq=119)
    taken = await reopened.append(NS, [assigned(9)], epoch=3, expected_seq=120)
    assert taken[0].seq == 121 and taken[0].offset == end
    old = await reopened.append("t/old", [assigned(9)], epoch=2)
    assert old[0].seq == 3
    assert (await reopened.read({0: start})).dropped == {}
    await reopened.close()


async def test_the_active_segment_is_never_dropped(tmp_path: Path) -> None:
    log = await _written(tmp_path)
    end = (await log.end_offsets())[0]
    log.store.retain(end + 1_000)
    assert len(_segments(tmp_path)) == 1
    assert (await log.read()).records[-1].offset == end - 1
    appended = await log.append(NS, [assigned(7)], epoch=3)
    assert appended[0].seq == 121
    await log.close()


async def test_a_dry_run_drops_nothing(tmp_path: Path) -> None:
    log = await _written(tmp_path)
    before = _segments(tmp_path)
    planned = log.store.retain(10_000, dry_run=True)
    assert len(planned) == len(before) - 1
    assert _segments(tmp_path) == before and not (tmp_path / HEADS_FILE).exists()
    assert (await log.start_offsets()) == {0: 0}
    await log.close()


async def test_a_reader_open_before_retain_sees_the_new_start_and_says_so(tmp_path: Path) -> None:
    log = await _written(tmp_path)
    reader = LocalEventLog(tmp_path, fsync=False)
    assert (await reader.read()).items[0].offset == 0
    dropped = log.store.retain(50)
    start = dropped[-1].first + dropped[-1].records
    again = await reader.read()
    assert again.dropped == {0: start} and again.items[0].offset == start
    assert (await reader.read({0: start + 3})).items[0].offset == start + 3
    await reader.close()
    await log.close()


async def test_a_writer_open_before_retain_takes_the_saved_heads(tmp_path: Path) -> None:
    """Another process's writer whose heads lag behind the dropped records reloads them."""
    log = await _written(tmp_path)
    other = LocalEventLog(tmp_path, fsync=False, segment_bytes=SEGMENT_BYTES)
    await other.append("t/x", [assigned(1)], epoch=3)  # its heads stand here
    for i in range(60):
        await log.append(NS, [assigned(i)], epoch=3)
    log.store.retain((await log.end_offsets())[0] - 5)
    taken = await other.append(NS, [assigned(5)], epoch=3, expected_seq=180)
    assert taken[0].seq == 181
    await other.close()
    await log.close()


@pytest.mark.parametrize("step", ["heads_only", "one_data_file", "data_without_index", "index_without_data"])
async def test_a_crash_between_the_steps_of_retain_leaves_a_log_that_opens(tmp_path: Path, step: str) -> None:
    """Each state a crash can leave, made by doing the steps partially, by hand."""
    log = await _written(tmp_path)
    end = (await log.end_offsets())[0]
    records = (await log.read()).records
    store: LocalStore = log.store
    with store.locked():
        store._save_heads()  # step 1 of retain
    await log.close()
    segments = _segments(tmp_path)
    first, second = (tmp_path / name for name in segments[:2])
    if step == "one_data_file":
        first.unlink()
        first.with_suffix(".idx").unlink()
    elif step == "data_without_index":
        first.with_suffix(".idx").unlink()
    elif step == "index_without_data":
        first.unlink()  # its index stays behind; the second segment untouched
    reopened = LocalEventLog(tmp_path, fsync=False, segment_bytes=SEGMENT_BYTES)
    result = await reopened.read()
    start = 0 if step in ("heads_only", "data_without_index") else int(second.stem)
    assert [r.envelope for r in result.records] == [r.envelope for r in records[start:]]
    assert result.dead_letters == []
    taken = await reopened.append(NS, [assigned(1)], epoch=3, expected_seq=120)
    assert taken[0].offset == end and taken[0].seq == 121
    reopened.store.retain(end)  # the next retain finishes the job and sweeps the orphan index
    assert not [p for p in tmp_path.glob("*.idx") if not p.with_suffix(".log").exists()]
    assert await reopened.head(NS) == (121, 3)
    await reopened.close()


async def test_without_a_heads_checkpoint_a_retained_log_opens_and_names_what_it_lost(tmp_path: Path) -> None:
    log = await _written(tmp_path)
    log.store.retain(60)
    await log.close()
    os.remove(tmp_path / HEADS_FILE)
    reopened = LocalEventLog(tmp_path, fsync=False)
    assert await reopened.head("t/old") == (0, 0)
    assert any("dropped by retention" in note and HEADS_FILE in note for note in reopened.store.notes)
    await reopened.close()
