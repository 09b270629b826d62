"""Poisoned records through the normal log, on a cluster kept by ``lbctl run --host inproc
--keep``: each is well framed but not an event this code may trust (a string epoch, a load
report whose bundles are not maps, a seq or an epoch of 2^64-1). Each one once broke
every later resume or verb for good. Now the cluster resumes, lookups answer, the record is a
dead letter named by its offset, and a namespace key's view says it is degraded.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import msgpack
import pytest

from events.log.local import LocalEventLog
from lbctl.main import main

CONF = str(Path(__file__).resolve().parents[2] / "conf" / "broker.conf")
HUGE = 2**64 - 1


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    state = tmp_path_factory.mktemp("kept")
    code = main(["run", "--host", "inproc", "--conf", CONF, "--plain", "--topics", "200",
                 "--minutes", "1", "--speed", "0", "--keep", "--state-dir", str(state)])
    assert code == 0
    return state


def _envelope(kind: str, key: str, seq: int, epoch: int, payload: dict[str, Any]) -> bytes:
    fields = [str(uuid.uuid4()), kind, 1, key, seq, epoch, 1_700_000_100_000, None, None, payload]
    data: bytes = msgpack.packb(fields, use_bin_type=True)
    return data


def _poisons(namespace: str) -> dict[str, tuple[str, bytes]]:
    bundle = f"{namespace}/0x00000000_0x10000000"
    return {
        "string epoch": ("_leader", _envelope("LeaderElected", "_leader", 50, 2,
                                              {"leader_id": "x", "epoch": "oops"})),
        "bundles not maps": ("broker-1", _envelope("LoadReported", "broker-1", 10_000, 1,
                                                   {"broker_id": "broker-1", "broker_load": {},
                                                    "bundles": ["x"]})),
        "seq 2^64-1": (namespace, _envelope("BundleOwned", namespace, HUGE, 1,
                                            {"bundle": bundle, "owner": "broker-evil"})),
        "epoch 2^64-1": (namespace, _envelope("BundleOwned", namespace, 10_000, HUGE,
                                              {"bundle": bundle, "owner": "broker-evil"})),
    }


async def _poison(log_dir: Path, key: str, raw: bytes) -> int:
    log = LocalEventLog(log_dir)
    try:
        offset = (await log.end_offsets())[0]
        await log.append_raw(key, [raw])
        return offset
    finally:
        await log.close()


@pytest.mark.parametrize("case", ["string epoch", "bundles not maps", "seq 2^64-1", "epoch 2^64-1"])
def test_a_poisoned_record_is_named_and_the_cluster_keeps_answering(
        kept: Path, tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    shutil.copytree(kept, state)
    namespace = json.loads((state / "cluster.json").read_text())["namespace"]
    key, raw = _poisons(namespace)[case]
    offset = asyncio.run(_poison(state / "log", key, raw))
    capsys.readouterr()

    assert main(["log", "dead-letters", "--log-dir", str(state / "log")]) == 0
    out = capsys.readouterr().out
    assert f"0:{offset}\tbad_" in out, out

    assert main(["namespaces", "bundles", namespace, "--state-dir", str(state)]) == 0
    listed = capsys.readouterr()
    assert "Owned" in listed.out
    if key == namespace:
        assert "DEGRADED" in listed.out and f"offset {offset}" in listed.err

    assert main(["topics", "lookup", f"persistent://{namespace}/t-1", "--state-dir", str(state)]) == 0
    assert "broker-" in capsys.readouterr().out

    assert main(["log", "anomalies", "--log-dir", str(state / "log"), "--json"]) == 0
    anomalies = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert any(a["kind"] == "dead_letter" and a["offset"] == offset for a in anomalies)
