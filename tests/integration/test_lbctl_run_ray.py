"""``lbctl run`` on real Ray (a subprocess, as ``make run`` starts it): a short run prints its
summary with the peak memory of all its processes, ``--keep`` serves the admin verbs from other
processes, and SIGTERM stops the cluster cleanly."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.ray_scenarios import read_until_kept

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
LBCTL = str(Path(sys.executable).parent / "lbctl")
CONF = str(ROOT / "conf" / "broker.conf")


def lbctl(state: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LBCTL, *argv, "--state-dir", str(state)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_a_short_ray_run_with_keep_serves_the_verbs(tmp_path: Path) -> None:
    state = tmp_path / "state"
    run = subprocess.Popen([LBCTL, "run", "--host", "ray", "--conf", CONF, "--minutes", "3",
                            "--topics", "300", "--keep", "--state-dir", str(state), "--plain"],
                           stdout=subprocess.PIPE, stderr=(tmp_path / "run.err").open("w"), text=True, cwd=ROOT)
    try:
        out = read_until_kept(run)
        assert "kept:" in out, out + (tmp_path / "run.err").read_text()[-3000:]
        assert "summary: 3 brokers on ray" in out and "simulated 00:03:00" in out
        assert "moves by reason:" in out and "unloads/h:" in out
        peak = re.search(r"peak memory: ([\d.]+) (MiB|GiB) PSS, .* across (\d+) process", out)
        assert peak is not None, out
        pss_gib = float(peak[1]) / (1024 if peak[2] == "MiB" else 1)
        assert 0 < pss_gib < 2.0 and int(peak[3]) > 3  # the driver, Ray's daemons, the actors

        shown = lbctl(state, "namespaces", "bundles", "public/default", "--json")
        assert shown.returncode == 0, shown.stderr
        owned = next(b for b in json.loads(shown.stdout)["bundles"] if b["state"] == "Owned")
        dst = next(b for b in ("broker-1", "broker-2", "broker-3") if b != owned["owner"])
        moved = lbctl(state, "namespaces", "unload", "public/default", "-b", owned["range"], "-d", dst)
        assert moved.returncode == 0, moved.stderr
        assert moved.stdout.strip().endswith(f"from {owned['owner']} to {dst}")
        again = lbctl(state, "namespaces", "unload", "public/default", "-b", owned["range"], "-d", dst)
        assert again.returncode == 2 and again.stdout == ""
        assert len(again.stderr.splitlines()) == 1 and dst in again.stderr
    finally:
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == 0
    assert not (state / "cluster.json").exists()
