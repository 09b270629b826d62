"""The projection runner over every log adapter (memory, local, a real Kafka broker): restore =
snapshot + tail, dead letters counted, time travel by offset and by timestamp."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from events.catalog import BundleAssigned, BundleOwned, NamespaceCreated
from events.log.kafka_topics import OwnershipSnapshots
from events.log.port import EventLog
from projections.ownership import OwnershipProjection
from projections.runner import (
    FileSnapshotStore,
    KafkaSnapshotStore,
    ProjectionRunner,
    SnapshotStore,
    view_as_of,
)
from tests.contracts.conftest import LogFactory

NS = "p/d"
BUNDLE = "p/d/0x00000000_0x80000000"


@pytest.fixture
async def log(logs: LogFactory) -> AsyncIterator[EventLog]:
    yield await logs.open()


@pytest.fixture
async def store(logs: LogFactory, tmp_path: Path) -> AsyncIterator[SnapshotStore]:
    if logs.kind != "kafka":
        yield FileSnapshotStore(tmp_path / "snapshots")
        return
    snapshots = OwnershipSnapshots(logs._bootstrap(), cluster=logs.cluster)
    await snapshots.start()
    yield KafkaSnapshotStore(snapshots)
    await snapshots.close()


async def _history(log: EventLog) -> None:
    await log.append(NS, [NamespaceCreated(namespace=NS, boundaries=[0, 0x80000000, 0xFFFFFFFF])], epoch=1)
    await log.append(NS, [BundleAssigned(bundle=BUNDLE, dst="b1")], epoch=1)
    await log.append(NS, [BundleOwned(bundle=BUNDLE, owner="b1")], epoch=1)


async def test_restore_is_snapshot_plus_tail(log: EventLog, store: SnapshotStore) -> None:
    await _history(log)
    runner = ProjectionRunner(log, OwnershipProjection(), store=store,
                              restore=OwnershipProjection.restore)
    await runner.catch_up()
    await runner.snapshot()
    await log.append(NS, [BundleAssigned(bundle="p/d/0x80000000_0xffffffff", dst="b2")], epoch=1)

    again = ProjectionRunner(log, OwnershipProjection(), store=store,
                             restore=OwnershipProjection.restore)
    assert await again.restore()
    assert await again.catch_up() == 1  # only the tail is read
    fresh = ProjectionRunner(log, OwnershipProjection())
    await fresh.catch_up()
    assert again.projection.state_equals(fresh.projection)  # type: ignore[attr-defined]
    assert again.projection.owner(BUNDLE) == "b1"  # type: ignore[attr-defined]


async def test_dead_letters_are_counted_and_skipped(log: EventLog) -> None:
    await _history(log)
    await log.append_raw(NS, [b"\xc1 not msgpack"])
    await log.append(NS, [BundleAssigned(bundle="p/d/0x80000000_0xffffffff", dst="b2")], epoch=1)
    runner = ProjectionRunner(log, OwnershipProjection())
    await runner.catch_up()
    kinds = [a.kind for a in runner.projection.anomalies]
    assert kinds == ["dead_letter"]
    assert runner.projection.state("p/d/0x80000000_0xffffffff") == "Assigning"  # type: ignore[attr-defined]


async def test_time_travel_by_offset_and_timestamp(log: EventLog) -> None:
    await _history(log)
    records = (await log.read()).records
    assigned_at = records[1]
    by_offset = await view_as_of(log, OwnershipProjection(),
                                 offsets={assigned_at.partition: assigned_at.offset + 1})
    assert by_offset.state(BUNDLE) == "Assigning"  # type: ignore[attr-defined]
    by_time = await view_as_of(log, OwnershipProjection(), ts_ms=assigned_at.envelope.ts_ms)
    assert by_time.state(BUNDLE) == "Assigning"  # type: ignore[attr-defined]
    now = await view_as_of(log, OwnershipProjection())
    assert now.state(BUNDLE) == "Owned"  # type: ignore[attr-defined]
