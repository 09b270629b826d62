"""Kafka-hosted bodies restart from a snapshot on their node's disk plus the tail of the topic.

On a real Kafka (the session fixture) with ``LiveHost`` (no Ray: what is under test is the host,
the log and the store): a body restarted after a long history restores its snapshot and folds
only the records after it, into the state a fold from offset 0 gives; and each hazard of a
snapshot kept outside the log is named in the body's status, never folded over in silence: a
topic deleted and re-created under it, records deleted by retention before or after it.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.structs import TopicPartition

from actors.body import Follower
from actors.runtime.bodies import BodySpec
from actors.runtime.realtime import LiveHost
from actors.runtime.specs import Clock, LogSpec
from actors.snapshots import SnapshotPolicy
from balancer.config import LoadBalancerConfig
from balancer.errors import HistoryMissing
from events.catalog import CreateNamespace
from tests.actors.test_body_snapshots import folded
from tests.kafka_server import KafkaHandle

pytestmark = pytest.mark.kafka

NAMESPACE = BodySpec("namespace", LoadBalancerConfig())
POLICY = SnapshotPolicy(min_records=40, per_state=1.0)


class _NoTransport:
    def send(self, target: str, command: Any, after: Any = None) -> None:
        raise AssertionError("a namespace shard sends nothing here")

    async def close(self) -> None:
        return None


def _log(kafka: KafkaHandle, snapshot_dir: Path, prefix: str, cluster_id: str) -> LogSpec:
    return LogSpec(bootstrap=kafka.bootstrap_servers, cluster=prefix, partitions=2, replication_factor=1,
                   cluster_id=cluster_id, snapshot_dir=str(snapshot_dir))


async def _host(spec: LogSpec, clock: Clock) -> LiveHost:
    host = LiveHost(NAMESPACE.build(), spec.open(clock, writer=NAMESPACE.name), clock, _NoTransport(),
                    snapshots=spec.snapshots(), rebuild=NAMESPACE.build, snapshot_policy=POLICY)
    await host.start()
    return host


async def _create(host: LiveHost, names: range) -> None:
    for i in names:
        _, error = await host.command(CreateNamespace(command_id=f"c{i}-{uuid.uuid4().hex[:6]}", epoch=0,
                                                      namespace=f"t/n{i}", bundles=2))
        assert error is None, error


async def _from_offset_0(spec: LogSpec, clock: Clock) -> Follower:
    scratch = NAMESPACE.build()
    scratch.ownership.ordered = spec.partitions == 1  # type: ignore[attr-defined]  # as LiveHost sets it
    log = spec.open(clock)
    try:
        scratch.recover((await log.read()).records)
    finally:
        await log.close()
    assert isinstance(scratch, Follower)
    return scratch


async def _admin(kafka: KafkaHandle) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    await admin.start()
    return admin


async def _delete_records_before(kafka: KafkaHandle, topic: str, before: dict[int, int]) -> None:
    """Move each partition's log start to ``before[p]``, as retention would."""
    admin = await _admin(kafka)
    try:
        await admin.delete_records({TopicPartition(topic, p): RecordsToDelete(o) for p, o in before.items()})
    finally:
        await admin.close()


@pytest.fixture
def cluster(kafka: KafkaHandle, tmp_path: Path) -> tuple[LogSpec, Clock]:
    return _log(kafka, tmp_path / "state", f"snap{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:12]), \
        Clock.starting_now()


async def _long_history(spec: LogSpec, clock: Clock, commands: int) -> tuple[LiveHost, Any]:
    """A namespace shard that wrote ``commands`` namespaces, closed; (the host, its folded state)."""
    host = await _host(spec, clock)
    await _create(host, range(commands))
    await host.sync()
    state = folded(host.body)  # type: ignore[arg-type]
    await host.close()
    assert host.counts["snapshots"] >= commands // 50, host.counts
    return host, state


async def test_a_restarted_body_restores_its_snapshot_and_folds_only_the_tail(
        cluster: tuple[LogSpec, Clock]) -> None:
    spec, clock = cluster
    first, _ = await _long_history(spec, clock, 150)
    folder = spec.snapshot_folder()
    assert folder is not None and spec.cluster in folder and str(spec.cluster_id) in folder

    again = await _host(spec, clock)
    start = again.status()["start"]
    assert start["from_snapshot"] >= 100, start
    assert start["from_snapshot"] + start["folded"] == first.counts["records"]
    assert start["folded"] < POLICY.min_records + 10, start  # the tail, not the history
    assert start["snapshot_position"] and not start["notes"]
    assert folded(again.body) == folded(await _from_offset_0(spec, clock))  # type: ignore[arg-type]
    await _create(again, range(150, 160))  # and it goes on: its next records continue the log
    await again.sync()
    assert folded(again.body) == folded(await _from_offset_0(spec, clock))  # type: ignore[arg-type]
    await again.close()


async def test_a_node_without_the_snapshot_folds_the_whole_topic_and_says_so(
        cluster: tuple[LogSpec, Clock]) -> None:
    spec, clock = cluster
    first, _ = await _long_history(spec, clock, 60)
    shutil.rmtree(str(spec.snapshot_folder()))  # another node: its disk holds no snapshot
    again = await _host(spec, clock)
    start = again.status()["start"]
    assert (start["from_snapshot"], start["folded"]) == (0, first.counts["records"])
    assert any("no usable snapshot" in note and "whole log" in note for note in start["notes"]), start
    await again.close()


async def test_a_snapshot_of_a_deleted_and_recreated_topic_is_refused(
        kafka: KafkaHandle, cluster: tuple[LogSpec, Clock]) -> None:
    spec, clock = cluster
    await _long_history(spec, clock, 60)
    admin = await _admin(kafka)
    try:
        await admin.delete_topics([f"{spec.cluster}-events"])
    finally:
        await admin.close()
    again = None
    for _ in range(40):  # the broker finishes the deletion in the background
        try:
            again = await _host(spec, clock)
            break
        except Exception:  # "marked for deletion" while it does
            await asyncio.sleep(0.5)
    assert again is not None
    start = again.status()["start"]
    assert (start["from_snapshot"], start["folded"]) == (0, 0), start
    refused = [note for note in start["notes"] if "snapshot refused" in note]
    assert refused and "the log ends at 0" in refused[0] and f"{spec.cluster}-events" in refused[0]
    fresh = NAMESPACE.build()
    fresh.ownership.ordered = False  # type: ignore[attr-defined]  # two partitions, as LiveHost sets it
    assert folded(again.body) == folded(fresh)  # type: ignore[arg-type]
    await again.close()


async def test_retention_before_the_snapshot_leaves_a_whole_base(
        kafka: KafkaHandle, cluster: tuple[LogSpec, Clock]) -> None:
    spec, clock = cluster
    first, state = await _long_history(spec, clock, 150)
    snapshot = spec.snapshots().newest(NAMESPACE.name, first.body.snapshot_identity())  # type: ignore[union-attr, attr-defined]
    assert snapshot is not None
    # Retention deletes everything the snapshot holds (and no more).
    await _delete_records_before(kafka, f"{spec.cluster}-events", dict(snapshot.position))
    again = await _host(spec, clock)
    assert again.status()["start"]["from_snapshot"] == snapshot.records
    assert folded(again.body) == state  # type: ignore[arg-type]
    await again.close()


async def test_retention_past_the_base_refuses_the_start_naming_what_is_missing(
        kafka: KafkaHandle, cluster: tuple[LogSpec, Clock]) -> None:
    spec, clock = cluster
    first, _ = await _long_history(spec, clock, 150)
    ends = first.cursor.position
    partition = max(ends, key=lambda p: ends[p])
    snapshot = spec.snapshots().newest(NAMESPACE.name, first.body.snapshot_identity())  # type: ignore[union-attr, attr-defined]
    assert snapshot is not None and snapshot.position[partition] < ends[partition]
    cut = ends[partition]  # every record of that partition, the snapshot's tail included
    await _delete_records_before(kafka, f"{spec.cluster}-events", {partition: cut})

    with pytest.raises(HistoryMissing) as lost:  # the snapshot's tail is gone
        await _host(spec, clock)
    assert f"partition {partition}: the snapshot's position {snapshot.position[partition]}, " \
           f"log start {cut}" in lost.value.message

    shutil.rmtree(str(spec.snapshot_folder()))
    with pytest.raises(HistoryMissing) as none:  # and with no snapshot, the whole history is
        await _host(spec, clock)
    assert f"partition {partition}: no snapshot: offset 0, log start {cut}" in none.value.message
