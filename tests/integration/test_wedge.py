"""One well-formed record must not wedge the cluster: the records that did, appended to a real
log (``lbctl run --host inproc --keep``), then the verbs a user runs.

Each record decodes (its fields are in the wire's range) but pushed a key, the time or the
election to the end of what every reader decodes, or holds a map no fold could use: a seq of
2^63-1 under a namespace key or a broker key (the key's next seq, 2^63, could never be read: every
later record of the key was a dead letter and unloads hung), a time of 2^63-1 or of the last
instant ISO-8601 prints (every verb failed with ``struct.error``, ``log tail`` on the date), a
load report whose bundle names no bundle (``KeyError`` in every verb), an election at epoch
2^63-1 naming an unknown leader (the next election could never be written). Now the record is
named (``out_of_range``, ``bad_event`` or a dead letter) at its offset, moves no key, and every
verb, unload and lookup goes on; no record written after it is a dead letter.
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

from actors.deploy import SIGNING_SUBDIR
from actors.runtime.signers import Keyring
from events.bounds import TS_MAX
from events.codec import decode, encode
from events.log.local import LocalEventLog
from events.signing import keyring_root
from lbctl.main import main

CONF = str(Path(__file__).resolve().parents[2] / "conf" / "broker.conf")
TOP = 2**63 - 1


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    state = tmp_path_factory.mktemp("kept")
    assert main(["run", "--host", "inproc", "--conf", CONF, "--plain", "--topics", "200",
                 "--minutes", "3", "--speed", "0", "--keep", "--state-dir", str(state)]) == 0
    return state


def _raw(kind: str, key: str, seq: int, epoch: int, payload: dict[str, Any], cluster: str,
         ts_ms: int = 1_700_000_100_000) -> bytes:
    fields = [str(uuid.uuid4()), kind, 1, key, seq, epoch, ts_ms, None, None, payload, cluster]
    data: bytes = msgpack.packb(fields, use_bin_type=True)
    return data


async def _heads(log_dir: Path, *keys: str) -> dict[str, tuple[int, int]]:
    log = LocalEventLog(log_dir)
    try:
        return {key: await log.head(key) for key in keys}
    finally:
        await log.close()


async def _signer_of(log_dir: Path, key: str) -> str:
    """The identity that signed the key's appends (the attacker holds that writer's key: an
    unsigned record in a signed log is only ``forged``, and never reaches the bounds)."""
    log = LocalEventLog(log_dir)
    try:
        signed = [r.envelope.sig[0] for r in (await log.read()).records
                  if r.envelope.key == key and r.envelope.sig is not None]
    finally:
        await log.close()
    return str(signed[-1])


def _signed(log_dir: Path, key: str, raw: bytes) -> bytes:
    envelope = decode(raw)
    signer = Keyring(keyring_root(log_dir / SIGNING_SUBDIR)).identity(asyncio.run(_signer_of(log_dir, key)))
    return signer.sign_append([envelope], [encode(envelope)])[1][0]


async def _append(log_dir: Path, key: str, raw: bytes) -> int:
    log = LocalEventLog(log_dir)
    try:
        offset = (await log.end_offsets())[0]
        await log.append_raw(key, [raw])
        return offset
    finally:
        await log.close()


def _record(state: Path, case: str) -> tuple[str, bytes]:
    spec = json.loads((state / "cluster.json").read_text())
    ns, cluster = spec["namespace"], spec["cluster_id"]
    heads = asyncio.run(_heads(state / "log", ns, "broker-1", "_leader"))
    (_, ns_epoch), (b_seq, b_epoch), (l_seq, _) = heads[ns], heads["broker-1"], heads["_leader"]
    report = {"broker_id": "broker-1", "broker_load": {}, "bundles": []}
    return {
        "namespace seq 2^63-1": (ns, _raw("NamespacePolicySet", ns, TOP, ns_epoch, {
            "namespace": ns, "anti_affinity_group": None, "isolation": None}, cluster)),
        "broker seq 2^63-1": ("broker-1", _raw("LoadReported", "broker-1", TOP, b_epoch, report, cluster)),
        "time 2^63-1": ("broker-1", _raw("LoadReported", "broker-1", b_seq + 1, b_epoch, report, cluster,
                                         ts_ms=TOP)),
        "time 9999-12-31": ("broker-1", _raw("LoadReported", "broker-1", b_seq + 1, b_epoch, report,
                                             cluster, ts_ms=TS_MAX)),
        "bundle naming no bundle": ("broker-1", _raw("LoadReported", "broker-1", b_seq + 1, b_epoch, {
            **report, "bundles": [{}]}, cluster)),
        "election at epoch 2^63-1": ("_leader", _raw("LeaderElected", "_leader", l_seq + 1, TOP, {
            "leader_id": "nobody", "epoch": TOP}, cluster)),
    }[case]


NAMED = {
    "namespace seq 2^63-1": "out_of_range", "broker seq 2^63-1": "out_of_range",
    "time 2^63-1": "dead_letter", "time 9999-12-31": None, "bundle naming no bundle": "bad_event",
    # Signed by the elected leader's own identity, an election of anyone at a jumped epoch is
    # refused by who may elect (one epoch above the newest, a candidate electing itself) before
    # its reach is read; the store's elections are fenced the same way.
    "election at epoch 2^63-1": "unauthorized",
}


def _verb(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out = capsys.readouterr()
    assert code == 0, (argv, out.err[-2000:])
    return out.out


@pytest.mark.parametrize("case", list(NAMED))
def test_one_record_at_the_end_of_a_range_wedges_nothing(
        kept: Path, tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    shutil.copytree(kept, state)
    ns = json.loads((state / "cluster.json").read_text())["namespace"]
    key, raw = _record(state, case)
    if NAMED[case] != "dead_letter":  # a record that does not decode cannot be signed either
        raw = _signed(state / "log", key, raw)
    offset = asyncio.run(_append(state / "log", key, raw))
    capsys.readouterr()
    where = ("--state-dir", str(state))
    logged = ("--log-dir", str(state / "log"))

    owned = [line.split()[0] for line in _verb(capsys, "namespaces", "bundles", ns, *where).splitlines()
             if " Owned " in f" {line} "]
    assert owned, "the view lists the namespace's bundles"
    assert "unloaded" in _verb(capsys, "namespaces", "unload", ns, "-b", owned[0], *where)
    # The bundle is unowned now: its lookup needs the leader to place it.
    topic = _topic_in(state, ns, owned[0])
    assert "broker-" in _verb(capsys, "topics", "lookup", topic, *where)
    leader = _verb(capsys, "brokers", "list", "--table", *where).splitlines()[-1]
    assert "leader: leader (epoch" in leader and str(TOP) not in leader
    assert "DEAD" not in _verb(capsys, "log", "tail", *logged).replace(f"DEAD 0:{offset}\t", "")

    letters = [json.loads(line) for line in _verb(capsys, "log", "dead-letters", *logged, "--json").splitlines()]
    assert [letter["offset"] for letter in letters] == ([offset] if NAMED[case] == "dead_letter" else [])
    anomalies = [json.loads(line) for line in _verb(capsys, "log", "anomalies", *logged, "--json").splitlines()]
    if NAMED[case] is not None:
        assert NAMED[case] in {a["kind"] for a in anomalies if a["offset"] == offset}, anomalies


def _topic_in(state: Path, ns: str, bundle_range: str) -> str:
    from balancer.bundles import HashRange, topic_hash

    hash_range = HashRange.parse(bundle_range)
    for i in range(100_000):
        topic = f"persistent://{ns}/probe-{i}"
        if hash_range.lower <= topic_hash(topic) < hash_range.upper:
            return topic
    raise AssertionError(f"no topic hashes into {bundle_range}")
