"""The embedded log survives ``kill -9`` of a writer process in the middle of an append.

What a user notices: after the crash the log opens, every append that returned is there, no
append is half there, nothing undecodable appears, and the next writer carries on with the
next seq. A reader leaves the torn bytes a dead writer left where they are; the next writer
moves them to ``quarantine/`` and says so.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from events.catalog import BundleAssigned
from events.log.local import INDEX, LocalEventLog

ROOT = Path(__file__).resolve().parents[2]
BATCH = 50
KEYS = ("t/a", "t/b", "t/c")

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from events.catalog import BundleAssigned
    from events.log.local import LocalEventLog

    async def main(directory, progress):
        log = LocalEventLog(directory, fsync=False)
        keys = ("t/a", "t/b", "t/c")
        n = 0
        while True:
            key = keys[n % 3]
            events = [BundleAssigned(bundle=key + "/0x00000000_0x00000001", dst="b" + str(i))
                      for i in range(50)]
            records = await log.append(key, events, epoch=1)
            with open(progress, "a") as out:
                out.write(key + " " + str(records[-1].seq) + "\\n")
            n += 1

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)

TORN = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    import events.log._segment as segment
    import events.log.local as local
    from events.catalog import BundleAssigned

    stage = sys.argv[2]
    real_write = segment.write_all

    def dying_write(fd, data, offset):
        is_index = fd == log.store._segments[-1].index_fd
        if stage == "data" and not is_index:
            real_write(fd, data[: len(data) // 2], offset)   # half the frames reach the file
            os.kill(os.getpid(), signal.SIGKILL)
        if stage == "index" and is_index:
            real_write(fd, data[: len(data) - 20], offset)   # the last entries are torn
            os.kill(os.getpid(), signal.SIGKILL)
        real_write(fd, data, offset)

    async def main():
        global log
        log = local.LocalEventLog(sys.argv[1], fsync=False)
        segment.write_all = dying_write
        await log.append("t/a", [BundleAssigned(bundle="t/a/0x00000000_0x00000001", dst="x")] * 40, epoch=1)

    asyncio.run(main())
    """
)


def _run(script: str, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _acknowledged(progress: Path) -> dict[str, int]:
    acked: dict[str, int] = {}
    if progress.exists():
        for line in progress.read_text().splitlines():
            key, seq = line.split()
            acked[key] = int(seq)
    return acked


def _appends(progress: Path) -> int:
    return len(progress.read_text().splitlines()) if progress.exists() else 0


async def _check_log(directory: Path, acked: dict[str, int]) -> dict[str, int]:
    log = LocalEventLog(directory, fsync=False)
    try:
        result = await log.read()
        assert result.dead_letters == []
        seqs: dict[str, list[int]] = {}
        for record in result.records:
            seqs.setdefault(record.key, []).append(record.seq)
        for key, got in seqs.items():
            assert got == list(range(1, len(got) + 1)), f"{key}: gap or duplicate"
            assert len(got) % BATCH == 0, f"{key}: half an append is visible"
        for key, seq in acked.items():
            assert len(seqs.get(key, [])) >= seq, f"{key}: an acknowledged append was lost"
        return {key: len(got) for key, got in seqs.items()}
    finally:
        await log.close()


def _sizes(directory: Path) -> tuple[int, int]:
    return (sum(p.stat().st_size for p in directory.glob("*.log")),
            sum(p.stat().st_size for p in directory.glob("*.idx")))


async def test_kill_9_mid_append_loses_nothing_acknowledged_and_shows_no_half_append(tmp_path: Path) -> None:
    directory, progress = tmp_path / "log", tmp_path / "progress"
    counts: dict[str, int] = {}
    for round_ in range(3):
        writer = _run(WRITER, str(directory), str(progress))
        deadline = time.monotonic() + 20
        target = sum(counts.values()) // BATCH + 20 * (round_ + 1)
        while len(_acknowledged(progress)) < 3 or sum(_acknowledged(progress).values()) // BATCH < target:
            assert writer.poll() is None, writer.stderr.read() if writer.stderr else ""
            assert time.monotonic() < deadline, "writer made no progress"
            await asyncio.sleep(0.01)
        writer.send_signal(signal.SIGKILL)
        writer.wait(10)
        counts = await _check_log(directory, _acknowledged(progress))
    assert sum(counts.values()) >= 60 * BATCH


async def test_two_writer_processes_share_one_log_without_losing_or_reusing_a_seq(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    progress = [tmp_path / "progress-1", tmp_path / "progress-2"]
    writers = [_run(WRITER, str(directory), str(p)) for p in progress]
    deadline = time.monotonic() + 20
    while min(_appends(p) for p in progress) < 20:  # both writers well under way
        assert all(w.poll() is None for w in writers), "a writer died"
        assert time.monotonic() < deadline, "writers made no progress"
        await asyncio.sleep(0.02)
    for writer in writers:
        writer.send_signal(signal.SIGKILL)
        writer.wait(10)
    acked = {key: max(_acknowledged(p).get(key, 0) for p in progress) for key in KEYS}
    counts = await _check_log(directory, acked)
    assert sum(counts.values()) >= BATCH * sum(_appends(p) for p in progress)


async def test_a_torn_tail_is_kept_by_readers_and_moved_aside_by_the_next_writer(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    seed = LocalEventLog(directory, fsync=False)
    await seed.append("t/a", [BundleAssigned(bundle="t/a/0x00000000_0x00000001", dst="x")] * 10, epoch=1)
    await seed.close()
    committed = _sizes(directory)
    # data: half the frames of an append reach the file, so it never committed;
    # index: every frame reached the data file (committed), the index entries are torn.
    for stage, seqs in (("data", 10), ("index", 50)):
        crashed = _run(TORN, str(directory), stage)
        assert crashed.wait(30) == -signal.SIGKILL
        torn = _sizes(directory)
        assert torn[0] > committed[0], "the dying writer left bytes behind"
        log = LocalEventLog(directory, fsync=False)
        assert [r.seq for r in (await log.read()).records] == list(range(1, seqs + 1))
        assert _sizes(directory) == torn, "a reader changed the files"
        await log.close()
    log = LocalEventLog(directory, fsync=False)
    more = await log.append("t/a", [BundleAssigned(bundle="t/a/0x00000000_0x00000001", dst="y")], epoch=1)
    assert (more[0].seq, more[0].offset) == (51, 50)
    assert _sizes(directory)[1] == 51 * INDEX.size
    moved = list((directory / "quarantine").iterdir())
    assert len(moved) == 2  # the torn data of the first crash, the torn index of the second
    assert any("moved to" in note and str(moved[0].parent) in note for note in log.store.notes)
    await log.close()
