"""A reader pinned to the cluster's root key (``--root-key``, broker.conf's
``bundleBalancerRootKey``) refuses a log founded under another root in one line naming both
keys (exit 2); pinned to the right one, it reads the log as before; without a pin, a log's
first signed record names its root (trust on first use)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from events.signing import Root
from lbctl.main import main
from projections.authority import key_text
from tests.integration.test_authority import Writers, signed_legit


def _signed_log(directory: Path) -> Root:
    async def write() -> Root:
        w = Writers(directory)
        await signed_legit(w)
        await w.log.close()
        return w.root

    return asyncio.run(write())


def test_a_pinned_reader_refuses_a_log_founded_under_another_root(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _signed_log(tmp_path / "log")
    log = ["--log-dir", str(tmp_path / "log")]
    assert main(["log", "root", *log]) == 0
    assert capsys.readouterr().out.strip() == key_text(root.public)

    assert main(["log", "anomalies", *log, "--json", "--root-key", key_text(root.public)]) == 0
    assert capsys.readouterr().out == ""  # the right root: an honest log, nothing named

    foreign = key_text(Root().public)
    assert main(["log", "ownership", *log, "--root-key", foreign]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "founded under root key" in err[0]
    assert key_text(root.public) in err[0] and foreign in err[0]

    conf = tmp_path / "broker.conf"
    conf.write_text(f"bundleBalancerRootKey={foreign}\n")
    assert main(["log", "anomalies", *log, "--conf", str(conf)]) == 2
    assert "founded under root key" in capsys.readouterr().err


def test_a_pin_that_is_no_key_is_refused_before_anything_is_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _signed_log(tmp_path / "log")
    assert main(["log", "anomalies", "--log-dir", str(tmp_path / "log"), "--root-key", "not-a-key"]) == 2
    assert "--root-key='not-a-key': not a root public key" in capsys.readouterr().err
    # The replay checks it before Spark starts (this test starts no JVM).
    assert main(["replay", "audit", str(tmp_path / "log"), "--root-key", "c2hvcnQ="]) == 2
    assert "not a root public key" in capsys.readouterr().err


def test_a_pinned_reader_names_every_record_of_an_unsigned_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from events.catalog import LeaderElected
    from events.log.local import LocalEventLog

    async def write() -> None:
        async with LocalEventLog(tmp_path / "log") as log:
            await log.append("_leader", [LeaderElected(leader_id="leader-1", epoch=1)], epoch=1)

    asyncio.run(write())
    pin = key_text(Root().public)
    assert main(["log", "anomalies", "--log-dir", str(tmp_path / "log"), "--json", "--root-key", pin]) == 0
    found = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(a["kind"], a["offset"]) for a in found] == [("forged", 0)]
