"""One cluster per log directory: a cluster started on an embedded log another lbctl process is
using is refused by name, on the Ray host as on the in-process one (two
`lbctl run --host ray --keep` once wrote one log)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from actors.api import Cluster
from actors.cluster.kept import LOG_SUBDIR
from actors.cluster.lock import lock_directory
from balancer.errors import Unavailable
from events.log.local import LocalEventLog
from events.log.port import Record
from lbctl.main import main

CONF = str(Path(__file__).resolve().parents[2] / "conf" / "broker.conf")


@pytest.mark.parametrize("host", ["ray", "inproc"])
async def test_a_second_cluster_on_a_used_log_directory_is_refused_by_name(tmp_path: Path, host: str) -> None:
    log_dir = (tmp_path / LOG_SUBDIR).resolve()
    held = lock_directory(log_dir)  # the first `lbctl run --keep`
    try:
        with pytest.raises(Unavailable, match=str(log_dir)):
            await Cluster.start(brokers=1, host=host, log_dir=log_dir)
    finally:
        os.close(held)


def _kept(state: Path) -> None:
    assert main(["run", "--host", "inproc", "--conf", CONF, "--plain", "--topics", "50", "--bundles", "4",
                 "--minutes", "1", "--speed", "0", "--keep", "--state-dir", str(state)]) == 0


def test_a_kept_cluster_refuses_the_log_of_another_cluster_by_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    east, west = tmp_path / "east", tmp_path / "west"
    _kept(east)
    _kept(west)
    ids = {name: json.loads((tmp_path / name / "cluster.json").read_text())["cluster_id"]
           for name in ("east", "west")}
    assert ids["east"] and ids["east"] != ids["west"]
    records = asyncio.run(_read(east / LOG_SUBDIR))
    assert records and {r.envelope.cluster_id for r in records} == {ids["east"]}
    capsys.readouterr()
    shutil.rmtree(east / LOG_SUBDIR)
    shutil.copytree(west / LOG_SUBDIR, east / LOG_SUBDIR)  # east's state, west's log
    assert main(["namespaces", "bundles", "public/default", "--state-dir", str(east)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"belongs to cluster {ids['west']!r}" in err and f"not to cluster {ids['east']!r}" in err


async def _read(log_dir: Path) -> list[Record]:
    log = LocalEventLog(log_dir)
    try:
        return (await log.read()).records
    finally:
        await log.close()
