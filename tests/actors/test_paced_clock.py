"""The paced clock (``actors.runtime.paced``): cluster time stands still for a late member and
goes on from where it stood, never jumps nor goes back; a dead or long-silent member is not
waited for. The pure pacer first, then the real file, heartbeats and thread in one process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actors.runtime.paced import (
    PACER,
    Heartbeat,
    PacedClock,
    Pacer,
    Pacing,
    PacingSpec,
    Schedule,
    member_beats,
)

SPEED = 60.0
LEASE = 0.1


def pacing(max_wait_s: float = 30.0) -> Pacing:
    return Pacing(Schedule(0.0, 0.0, SPEED, LEASE), LEASE, max_wait_s)


def test_time_runs_at_speed_while_every_member_beats() -> None:
    p = pacing()
    for step in range(1, 101):  # 1 s of wall time, beats every 10 ms
        now = step * 0.01
        p.step(now, {"leader": now, "broker:broker-1": now - 0.005})
    assert p.schedule.at(1.0) == pytest.approx(60_000.0)
    assert p.report().stops == 0 and p.report().stood_s == 0.0


def test_a_late_member_stops_time_which_resumes_where_it_stood() -> None:
    p = pacing()
    for step in range(1, 51):
        p.step(step * 0.01, {"leader": step * 0.01, "broker:broker-2": step * 0.01})
    # broker-2 falls silent at 0.5 s; the others go on beating for 2 s
    for step in range(51, 251):
        now = step * 0.01
        p.step(now, {"leader": now, "broker:broker-2": 0.5})
    stood_at = p.schedule.at(2.5)
    assert stood_at == pytest.approx((0.5 + LEASE) * SPEED * 1000)  # stopped one lease after its last beat
    assert p.schedule.at(2.4) == stood_at
    p.step(2.5, {"leader": 2.5, "broker:broker-2": 2.5})  # it beats again
    assert p.schedule.at(2.5) == stood_at  # no jump
    assert p.schedule.at(2.6) == pytest.approx(stood_at + 0.1 * SPEED * 1000)  # and time runs again
    report = p.report()
    assert report.stops == 1 and abs(report.stood_s - (2.5 - 0.6)) < 1e-9
    assert set(report.waited) == {"broker:broker-2"}
    assert "broker:broker-2 1.9 s" in report.describe()


def test_a_late_pacer_is_named_not_a_member() -> None:
    p = pacing()
    p.step(1.0, {"leader": 0.99})  # the pacer looked last at 0 s: time stood from 0.1 s
    assert p.report().waited == {PACER: pytest.approx(0.9)}
    assert p.schedule.at(1.0) == pytest.approx(LEASE * SPEED * 1000)


def test_a_member_silent_past_max_wait_is_no_longer_waited_for() -> None:
    p = pacing(max_wait_s=1.0)
    p.step(0.05, {"broker:broker-3": 0.05})
    assert p.report().stops == 0
    p.step(1.0, {"broker:broker-3": 0.05})
    assert p.schedule.at(1.0) == pytest.approx((0.05 + LEASE) * SPEED * 1000)  # still waiting
    p.step(1.2, {"broker:broker-3": 0.05})  # silent 1.15 s > 1 s
    assert p.report().gave_up == ["broker:broker-3"]
    assert p.schedule.at(1.25) > p.schedule.at(1.2)  # time goes on without it


def test_a_member_whose_process_is_gone_is_left_out(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "broker:broker-1").write_text(gone)
    (tmp_path / "leader").write_text(str(os.getpid()))
    now = time.time() + 5.0  # both silent for 5 s
    assert set(member_beats(tmp_path, now, LEASE)) == {"leader"}


async def test_a_stalled_event_loop_stops_the_shared_clock_for_every_reader(tmp_path: Path) -> None:
    origin = int(time.time() * 1000)
    pacer = Pacer(PacingSpec(str(tmp_path / "clock"), LEASE, LEASE / 4), origin, SPEED)
    try:
        member = Heartbeat(pacer.spec, "broker:broker-1")
        member.start()
        reader = PacedClock(pacer.spec, SPEED, origin)
        await asyncio.sleep(0.3)
        first = reader.now_ms()
        assert first > origin  # time runs
        before = reader.now_ms()
        time.sleep(1.0)  # the member's loop stalls for 60 s of cluster time on the wall clock
        during = PacedClock(pacer.spec, SPEED, origin).now_ms()  # a fresh reader agrees
        assert during - before <= LEASE * SPEED * 1000 + 1  # stood still a lease after its last beat
        await asyncio.sleep(0.3)  # it beats again: time goes on from where it stood
        after = reader.now_ms()
        assert during <= after < during + 1.0 * SPEED * 1000
        report = pacer.report()
        assert report.stops >= 1 and report.waited.get("broker:broker-1", 0.0) > 0.5
        await member.stop()
        assert not member.path.exists()
    finally:
        pacer.close()
    assert not (tmp_path / "clock").exists()
