"""``lbctl run --web-service-port`` (and broker.conf's ``webServicePort``) on the in-process host,
as a user starts it: the service answers while the run goes on and after it, with ``--keep`` the
process stays up until SIGTERM and then exits 0 leaving the log for the verbs; bad ports and
auth settings are one line and exit 2 before anything starts. (On Ray, over Kafka:
tests/integration/test_pulsar_admin.py.)"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from lbctl.main import main
from web.settings import PULSAR_DEFAULT_PORT, WebSettings

ROOT = Path(__file__).resolve().parents[2]
LBCTL = str(Path(sys.executable).parent / "lbctl")
CONF = ROOT / "conf" / "broker.conf"


def get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=60) as reply:
        return json.loads(reply.read())


def test_kept_inproc_service_stays_until_sigterm(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF.read_text() + "webServicePort=0\nclusterName=east\nbrokerServicePort=6650\n")
    err = tmp_path / "run.err"
    run = subprocess.Popen([LBCTL, "run", "--host", "inproc", "--speed", "0", "--minutes", "1",
                            "--topics", "50", "--bundles", "2", "--conf", str(conf), "--keep",
                            "--plain", "--state-dir", str(tmp_path / "state")],
                           stdout=subprocess.PIPE, stderr=err.open("w"), text=True, cwd=ROOT)
    assert run.stdout is not None
    try:
        url = next(line.split()[-1] for line in run.stdout if line.startswith("web service: "))
        kept = next(line for line in run.stdout if line.startswith("kept:"))
        assert f"lbctl --admin-url {url}" in kept
        assert get(url + "/admin/v2/clusters") == ["east"]
        assert get(url + "/admin/v2/brokers/east") == ["broker-1", "broker-2", "broker-3"]
        spec = json.loads((tmp_path / "state" / "cluster.json").read_text())
        assert spec["web_service_url"] == url
    finally:
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == 0
    # The web service applies webServicePort and clusterName: only brokerServicePort is ignored.
    assert "1 key outside load balancing ignored" in err.read_text()
    spec = json.loads((tmp_path / "state" / "cluster.json").read_text())
    assert spec["host"] == "inproc" and spec["web_service_url"] is None  # the log stays, not the service
    shown = subprocess.run([LBCTL, "namespaces", "bundles", "public/default", "--state-dir",
                            str(tmp_path / "state")], capture_output=True, text=True, cwd=ROOT)
    assert shown.returncode == 0 and shown.stdout.startswith("RANGE")  # restarted from the log


@pytest.mark.parametrize(("extra", "argv", "bad"), [
    ("", ["--web-service-port", "70000"], "70000"),
    ("webServicePort=http\n", [], "webServicePort=http"),
    ("authenticationEnabled=true\n", [], "authenticationProviders"),
])
def test_bad_web_settings_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  extra: str, argv: list[str], bad: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF.read_text() + extra)
    try:
        code = main(["run", "--host", "inproc", "--conf", str(conf), *argv])
    except SystemExit as exit_:  # a port out of range ends the parse
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) <= 2 and bad in err


def test_web_settings_read_pulsar_keys() -> None:
    assert WebSettings.from_text("") == WebSettings()
    assert WebSettings.from_text("webServicePort=\n").port == PULSAR_DEFAULT_PORT
    assert WebSettings.from_text("webServicePort=9090\nclusterName=c1\n") == WebSettings(9090, None, "c1")
