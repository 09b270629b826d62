"""A SIGTERM'd test run tears its session fixtures down (servers it started do not outlive it)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.patience import patient

ROOT = Path(__file__).resolve().parents[2]

RUN = '''
import time
import pytest

@pytest.fixture(scope="session")
def server(tmp_path_factory):
    yield
    open({stopped!r}, "w").write("torn down")

def test_waits(server):
    open({started!r}, "w").write("started")
    time.sleep(120)
'''


def test_a_sigterm_run_tears_down_its_session_fixtures(tmp_path: Path) -> None:
    started, stopped = tmp_path / "started", tmp_path / "stopped"
    module = tmp_path / "test_waiting.py"
    module.write_text(RUN.format(started=str(started), stopped=str(stopped)))
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.support.interrupt",
         "--rootdir", str(tmp_path), str(module)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + patient(60)
        while not started.exists() and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.1)
        assert started.exists(), run.communicate(timeout=5)[0] if run.poll() is not None else "not started"
        run.send_signal(signal.SIGTERM)
        out = run.communicate(timeout=patient(60))[0]
    finally:
        if run.poll() is None:
            run.kill()
    assert stopped.exists() and stopped.read_text() == "torn down", out
    assert run.returncode != 0 and "SIGTERM" in out, out
