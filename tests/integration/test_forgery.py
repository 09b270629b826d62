"""Forged ownership: events appended by a writer that was not entitled to them. Once,
a ``BundleAssigned(force=True)`` + ``BundleOwned(owner="broker-evil")`` from any writer moved a
bundle, and a ``BrokerRegistered`` under an unrelated key redirected every lookup. Each forgery
here leaves the views as they were and is an anomaly named with its offset.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.body import Follower
from balancer.config import LoadBalancerConfig
from balancer.errors import WriterFenced
from events.catalog import (
    BrokerRegistered,
    BundleAssigned,
    BundleOwned,
    LeaderElected,
    LoadReported,
    Message,
    NamespaceCreated,
    NamespacePolicySet,
)
from events.codec import encode
from events.envelope import Stamper, seal
from events.log.local import LocalEventLog
from lbctl.main import main
from projections.load import LoadProjection
from projections.ownership import OwnershipProjection
from projections.runner import ProjectionRunner

NS = "public/default"
BUNDLE = f"{NS}/0x00000000_0xffffffff"


async def _legit(log: LocalEventLog) -> None:
    await log.append("_leader", [LeaderElected(leader_id="leader", epoch=1)], epoch=1)
    await log.append("broker-1", [BrokerRegistered(broker_id="broker-1", url="pulsar://good:6650")], epoch=1)
    await log.append(NS, [NamespaceCreated(namespace=NS, boundaries=[0, 0xFFFFFFFF])], epoch=1)
    await log.append(NS, [BundleAssigned(bundle=BUNDLE, dst="broker-1"),
                          BundleOwned(bundle=BUNDLE, owner="broker-1")], epoch=1)


FORGERIES: dict[str, tuple[str, int, list[Message]]] = {
    "force from a broker key": ("broker-2", 1, [
        BundleAssigned(bundle=BUNDLE, dst="broker-evil", src="broker-1", reason="admin", force=True),
        BundleOwned(bundle=BUNDLE, owner="broker-evil", src="broker-1")]),
    "force at an epoch never elected": (NS, 7, [
        BundleAssigned(bundle=BUNDLE, dst="broker-evil", src="broker-1", reason="admin", force=True),
        BundleOwned(bundle=BUNDLE, owner="broker-evil", src="broker-1")]),
    "another namespace's key": ("public/other", 1, [
        BundleAssigned(bundle=BUNDLE, dst="broker-evil", src="broker-1", reason="admin", force=True)]),
    "an election under another key": ("broker-2", 9, [LeaderElected(leader_id="evil", epoch=9)]),
}


async def _forge(log: LocalEventLog, key: str, epoch: int, messages: list[Message]) -> None:
    """Write as a hostile process would: well-formed envelopes, the next seqs, any epoch,
    straight into the log (``append`` itself refuses an epoch no election established)."""
    seq, _ = await log.head(key)
    await log.append_raw(key, [encode(seal(m, key=key, seq=seq + i, epoch=epoch))
                               for i, m in enumerate(messages, start=1)])


async def _fold(directory: Path) -> tuple[OwnershipProjection, Follower, LoadProjection]:
    log = LocalEventLog(directory)
    try:
        runner = ProjectionRunner(log, OwnershipProjection())
        await runner.catch_up()
        follower, load = Follower(LoadBalancerConfig()), LoadProjection()
        for record in (await log.read()).records:
            follower.fold(record)
            load.apply(record.offset, record.envelope)
        assert isinstance(runner.projection, OwnershipProjection)
        return runner.projection, follower, load
    finally:
        await log.close()


@pytest.mark.parametrize("case", list(FORGERIES))
async def test_a_forged_ownership_change_changes_no_view_and_is_named(tmp_path: Path, case: str) -> None:
    log = LocalEventLog(tmp_path / "log")
    await _legit(log)
    first = (await log.end_offsets())[0]
    key, epoch, messages = FORGERIES[case]
    await _forge(log, key, epoch, messages)
    await log.close()

    view, follower, _ = await _fold(tmp_path / "log")
    assert view.owner(BUNDLE) == "broker-1" and str(view.state(BUNDLE)) == "Owned"
    assert follower.epoch == 1 and follower.leader_id == "leader"
    flagged = {a.offset for a in view.anomalies if a.kind in ("unauthorized", "unelected_epoch")}
    assert first in flagged


async def test_a_forged_broker_registration_does_not_redirect_lookups(tmp_path: Path) -> None:
    log = LocalEventLog(tmp_path / "log")
    await _legit(log)
    forged = (await log.end_offsets())[0]
    await _forge(log, "broker-9", 1, [BrokerRegistered(broker_id="broker-1", url="pulsar://evil:6650"),
                                      LoadReported(broker_id="broker-1", broker_load={})])
    await log.close()
    _, follower, load = await _fold(tmp_path / "log")
    assert follower.brokers["broker-1"].url == "pulsar://good:6650"
    assert load.brokers["broker-1"].url == "pulsar://good:6650"
    assert {a.offset for a in load.anomalies if a.kind == "unauthorized"} == {forged, forged + 1}


async def test_an_epoch_jump_without_an_election_fences_no_one(tmp_path: Path) -> None:
    log = LocalEventLog(tmp_path / "log")
    await _legit(log)
    jump = (await log.end_offsets())[0]
    jump_event = BundleAssigned(bundle=BUNDLE, dst="broker-evil", src="broker-1", reason="admin", force=True)
    with pytest.raises(WriterFenced, match="no election established"):
        await log.append(NS, [jump_event], epoch=99)
    await _forge(log, NS, 99, [jump_event])
    # The real writers go on at the elected epochs: the forged epoch fenced no one.
    await log.append("_leader", [LeaderElected(leader_id="leader-2", epoch=2)], epoch=2)
    await log.append(NS, [NamespacePolicySet(namespace=NS, anti_affinity_group="g")], epoch=2)
    await log.close()
    view, _, _ = await _fold(tmp_path / "log")
    assert view.owner(BUNDLE) == "broker-1"
    assert view.tracker.positions[NS][1] == 2, "the key's epoch is the elected one"
    assert view.namespaces[NS].anti_affinity_group == "g"
    assert [(a.kind, a.offset) for a in view.anomalies if a.offset == jump] == [("unauthorized", jump)]


async def test_a_record_of_another_cluster_changes_no_view_and_is_named(tmp_path: Path) -> None:
    log = LocalEventLog(tmp_path / "log", stamper=Stamper(cluster_id="east"))
    await _legit(log)
    stray = (await log.end_offsets())[0]
    west = Stamper(cluster_id="west")
    seq, _ = await log.head(NS)
    await log.append_raw(NS, [encode(west.seal(BundleOwned(bundle=BUNDLE, owner="broker-evil"),
                                               key=NS, seq=seq + 1, epoch=1))])
    await log.append_raw("broker-9", [encode(west.seal(
        BrokerRegistered(broker_id="broker-9", url="pulsar://west:6650"), key="broker-9", seq=1, epoch=1))])
    await log.close()
    view, follower, _ = await _fold(tmp_path / "log")
    assert view.cluster_id == "east" and view.owner(BUNDLE) == "broker-1"
    assert "broker-9" not in follower.brokers
    named = [a for a in view.anomalies if a.offset == stray]
    assert named and "cluster 'west' in the log of cluster 'east'" in named[0].detail


def test_lbctl_names_the_forgery(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    async def write() -> int:
        log = LocalEventLog(tmp_path / "log")
        await _legit(log)
        at = (await log.end_offsets())[0]
        key, epoch, messages = FORGERIES["force from a broker key"]
        await _forge(log, key, epoch, messages)
        await log.close()
        return at

    at = asyncio.run(write())
    assert main(["log", "ownership", "--log-dir", str(tmp_path / "log"), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["bundle"], r["owner"]) for r in rows] == [(BUNDLE, "broker-1")]
    assert main(["log", "anomalies", "--log-dir", str(tmp_path / "log"), "--json"]) == 0
    found = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {(a["kind"], a["offset"]) for a in found} >= {("unauthorized", at), ("unauthorized", at + 1)}
