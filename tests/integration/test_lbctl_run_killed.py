"""A real ``lbctl run --host inproc --keep`` killed with SIGKILL before its summary leaves a cluster
that reopens: every verb finds it, and ``run --keep`` on the same state directory resumes it.

What a user notices: no "no cluster.json", no "already holds a cluster log"; the namespace the
killed run created is still there, owned by the same brokers, and the resumed run goes on
from the log (its leader at a later epoch).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from events.log.local import LocalEventLog

ROOT = Path(__file__).resolve().parents[2]
CONF = str(ROOT / "conf" / "broker.conf")
LBCTL = [sys.executable, "-m", "lbctl"]


def _lbctl(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LBCTL, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def _run_until(state: Path, stage: str) -> list[str]:
    """Start a long ``run --keep``, SIGKILL it at ``stage`` ("start": as soon as its log holds
    a record; "moving": after its live view showed two progress lines); what it printed."""
    proc = subprocess.Popen(
        [*LBCTL, "run", "--host", "inproc", "--conf", CONF, "--plain", "--topics", "300",
         "--minutes", "600", "--speed", "0", "--keep", "--state-dir", str(state)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines: list[str] = []
    assert proc.stdout is not None
    out = proc.stdout
    threading.Thread(target=lambda: lines.extend(out), daemon=True).start()
    deadline = time.monotonic() + 240
    try:
        while not _ready(state, stage, lines):
            assert proc.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.005 if stage == "start" else 0.05)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert not any(line.startswith("summary:") for line in lines), "killed too late"
    return lines


def _ready(state: Path, stage: str, lines: list[str]) -> bool:
    if stage == "moving":
        return sum(1 for line in lines if line.startswith("[0")) >= 2
    data = state / "log" / f"{0:020d}.log"
    return data.exists() and data.stat().st_size > 0


def test_a_run_killed_before_its_summary_reopens_with_any_verb(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _run_until(state, "moving")
    spec = json.loads((state / "cluster.json").read_text())
    assert spec["host"] == "inproc" and spec["cluster_id"]
    listed = _lbctl("namespaces", "bundles", "public/default", "--state-dir", str(state))
    assert listed.returncode == 0, listed.stderr
    rows = [line for line in listed.stdout.splitlines() if line.startswith("0x")]
    assert len(rows) >= 16 and any(" Owned " in row for row in rows), listed.stdout
    brokers = _lbctl("brokers", "list", "--state-dir", str(state))
    assert brokers.returncode == 0 and "broker-1" in brokers.stdout, brokers.stderr


def test_a_run_killed_at_its_first_record_reopens_with_run(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _run_until(state, "start")
    assert (state / "cluster.json").is_file(), "cluster.json was not written before the first record"
    again = _lbctl("run", "--host", "inproc", "--conf", CONF, "--plain", "--topics", "300",
                   "--minutes", "2", "--speed", "0", "--keep", "--state-dir", str(state))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming the cluster kept in" in again.stderr
    assert "summary:" in again.stdout and "kept:" in again.stdout
    listed = _lbctl("namespaces", "bundles", "public/default", "--state-dir", str(state))
    assert listed.returncode == 0, listed.stderr


async def test_a_resumed_run_goes_on_from_the_log(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _run_until(state, "moving")
    log = LocalEventLog(state / "log")
    try:
        before = (await log.end_offsets())[0]
    finally:
        await log.close()
    again = _lbctl("run", "--host", "inproc", "--conf", CONF, "--plain", "--topics", "300",
                   "--minutes", "2", "--speed", "0", "--keep", "--state-dir", str(state),
                   "--brokers", "5")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "--brokers 5 ignored" in again.stderr
    log = LocalEventLog(state / "log")
    try:
        result = await log.read()
        assert result.dead_letters == []
        assert result.records[-1].offset >= before
        elections = [r.envelope.epoch for r in result.records if r.envelope.type == "LeaderElected"]
        assert len(elections) >= 2 and elections == sorted(elections)
    finally:
        await log.close()
