"""Retention and the log's readers: what is dropped is what every reader holds.

What a user notices: after `lbctl log retain --apply` (or a cluster that retains by itself) every
body restarted from its snapshot and the records left is the body a fold from offset 0 gave, the
client's view after a new connect is the view folded from offset 0, the floor is the lowest
position any reader would restart from (a reader without a snapshot holds it at 0), and the
commands that read the whole log name the records that are gone.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from random import Random
from typing import Any

import pytest

from actors.body import Follower
from actors.client import ClientView
from actors.retention import SNAPSHOT_DIR, RetainingSnapshots, retain
from actors.runtime import InProcessHost, build_cluster, wait_ready
from actors.runtime.bodies import BodySpec
from actors.runtime.realtime import LiveHost
from actors.runtime.specs import Clock, LogSpec
from actors.settings import ActorSettings
from actors.snapshots import BodySnapshot, DirectorySnapshots, SnapshotPolicy
from actors.workload import Workload
from balancer.config import LoadBalancerConfig
from balancer.errors import HistoryMissing
from events.catalog import CreateNamespace
from events.codec import encode
from events.log.local import LocalEventLog, LocalStore
from events.log.memory import MemoryEventLog
from events.log.port import Record
from lbctl.main import main
from tests.actors.test_body_snapshots import canonical, folded

SEGMENT_BYTES = 20_000


def _history(records: int) -> InProcessHost:
    """A 4-broker cluster with splits, shedding and heartbeats, run to ``records`` records."""
    workload = Workload.zipf(Random(3), ["t/ns"], topics_per_namespace=200, total_msg_rate=5_000.0)
    host = build_cluster(4, workload=workload, clients=True, snapshot_policy=None,
                         settings=ActorSettings(heartbeat_ms=1_000))
    assert wait_ready(host, 4)
    host.call(CreateNamespace(command_id="ns", epoch=host.epoch, namespace="t/ns", bundles=32))
    while len(host.records) < records:
        host.advance(10_000)
    return host


async def _copy(records: list[Record], directory: Path) -> None:
    """The records, byte for byte and at the same offsets, in a log of small segments."""
    log = LocalEventLog(directory, fsync=False, segment_bytes=SEGMENT_BYTES)
    for record in records:
        await log.append_raw(record.key, [encode(record.envelope)], ts_ms=record.envelope.ts_ms)
    await log.close()


@pytest.fixture(scope="module")
def cluster() -> InProcessHost:
    return _history(1_500)


async def test_every_body_restarted_after_retention_equals_one_folded_from_offset_0(
        cluster: InProcessHost, tmp_path: Path) -> None:
    records = list(cluster.records)
    await _copy(records, tmp_path)
    store = DirectorySnapshots(tmp_path / SNAPSHOT_DIR)
    names = sorted(cluster._factories)
    at = {name: len(records) // 2 + 97 * i for i, name in enumerate(names)}
    for name in names:
        body = cluster._factories[name]()
        assert isinstance(body, Follower)
        body.recover(records[:at[name]])
        store.save(BodySnapshot(name, body.snapshot_identity(), {0: at[name]}, at[name], body.snapshot_state()))

    report = retain(tmp_path, apply=True)
    assert report.floor == min(at.values()) and report.dropped
    assert 0 < report.start <= report.floor
    assert [h.reader for h in report.held_by()] == [f"snapshot:{names[0].replace(':', '_')}"]

    log = LocalEventLog(tmp_path, fsync=False)
    assert (await log.read()).dropped == {0: report.start}
    for name in names:
        restarted, scratch = cluster._factories[name](), cluster._factories[name]()
        assert isinstance(restarted, Follower) and isinstance(scratch, Follower)
        snapshot = store.newest(name, restarted.snapshot_identity())
        assert snapshot is not None
        restarted.restore_state(snapshot.state)
        restarted.recover((await log.read(snapshot.position)).records)
        scratch.recover(records)
        assert folded(restarted) == folded(scratch), name
    await log.close()


def _client_state(view: ClientView) -> Any:
    return (canonical(view.snapshot_state()), view.leader_id, view.epoch, view.broker_statuses(),
            {b: view.load_report(b) for b in view.brokers})


async def test_the_client_view_after_retention_equals_the_one_folded_from_offset_0(
        cluster: InProcessHost, tmp_path: Path) -> None:
    records = list(cluster.records)
    config = cluster.config
    half = len(records) // 2
    await _copy(records[:half], tmp_path)
    policy = SnapshotPolicy(min_records=100, per_state=0.1)
    first = ClientView(config, LocalEventLog(tmp_path, fsync=False),
                       snapshots=DirectorySnapshots(tmp_path / SNAPSHOT_DIR), snapshot_policy=policy)
    await first.start()  # folds the half from offset 0 and writes its snapshot there
    await first.close()
    tail = LocalEventLog(tmp_path, fsync=False, segment_bytes=SEGMENT_BYTES)
    for record in records[half:]:
        await tail.append_raw(record.key, [encode(record.envelope)], ts_ms=record.envelope.ts_ms)
    await tail.close()

    report = retain(tmp_path, apply=True)
    assert report.floor == half and report.dropped and report.held_by()[0].reader == "snapshot:client"

    scratch = ClientView(config, MemoryEventLog())
    scratch.take(records)
    again = ClientView(config, LocalEventLog(tmp_path, fsync=False),
                       snapshots=DirectorySnapshots(tmp_path / SNAPSHOT_DIR), snapshot_policy=policy)
    await again.start()
    assert again.started == (half, len(records) - half)
    assert _client_state(again) == _client_state(scratch)
    assert again.ownership.snapshot() == scratch.ownership.snapshot()

    replayed = await again.replay()  # names what is gone instead of pretending
    assert replayed.anomalies[0].kind == "retained"
    assert f"records before offset {report.start} were dropped by retention" in replayed.anomalies[0].detail
    await again.close()


async def test_a_reader_without_a_snapshot_holds_the_floor_at_0(cluster: InProcessHost, tmp_path: Path) -> None:
    records = list(cluster.records)
    await _copy(records, tmp_path)
    store = DirectorySnapshots(tmp_path / SNAPSHOT_DIR)
    assert store.newest("broker:broker-9", "any") is None  # a body that started, no snapshot yet
    report = retain(tmp_path, apply=True)
    assert report.floor == 0 and report.dropped == [] and report.start == 0
    assert report.held_by()[0].why == "registered, no usable snapshot yet"
    log = LocalEventLog(tmp_path, fsync=False)
    await log.save_checkpoint("audit", {0: 500})
    ignored = retain(tmp_path, apply=True, ignore=["snapshot:broker_broker-9"])
    assert ignored.floor == 500 and ignored.held_by()[0].reader == "checkpoint:audit"
    assert ignored.dropped and ignored.start <= 500
    assert (await log.read({0: 500})).records[0].offset == 500
    await log.close()


def test_no_reader_at_all_drops_nothing(cluster: InProcessHost, tmp_path: Path) -> None:
    asyncio.run(_copy(list(cluster.records), tmp_path))
    report = retain(tmp_path, apply=True)
    assert report.floor == 0 and report.dropped == [] and report.holders == []


def test_lbctl_log_retain_lists_then_drops_and_tail_names_the_gap(
        cluster: InProcessHost, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(_copy(list(cluster.records), tmp_path))
    LocalStore(tmp_path).save_checkpoint("audit", {0: 1_200})
    before = sorted(tmp_path.glob("*.log"))
    assert main(["log", "retain", "--log-dir", str(tmp_path)]) == 0
    planned = capsys.readouterr().out.splitlines()
    assert planned[0] == "floor: offset 1200, held by checkpoint:audit (its checkpoint)"
    assert planned[-1].startswith("would drop (dry run; --apply drops) ")
    assert sorted(tmp_path.glob("*.log")) == before
    assert main(["log", "retain", "--log-dir", str(tmp_path), "--apply"]) == 0
    done = capsys.readouterr().out.splitlines()
    dropped = [line for line in done[1:-1] if line.startswith("dropped ")]
    assert dropped and len(sorted(tmp_path.glob("*.log"))) == len(before) - len(dropped)
    start = int(done[-1].rsplit(" ", 1)[1])
    assert 0 < start <= 1_200 and f"{len(dropped)} segment(s)" in done[-1]

    assert main(["log", "tail", "--log-dir", str(tmp_path), "--limit", "1"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"0:{start}\t")
    assert f"records before offset {start} were dropped by retention" in err
    assert main(["log", "retain", "--log-dir", str(tmp_path), "--ignore", "checkpoint:nope"]) == 2
    assert "--ignore checkpoint:nope: no such reader" in capsys.readouterr().err


class _NoTransport:
    def send(self, target: str, command: Any, after: Any = None) -> None:
        raise AssertionError("a namespace shard sends nothing here")

    async def close(self) -> None:
        return None


async def _namespace_host(log_dir: Path, clock: Clock) -> LiveHost:
    spec = BodySpec("namespace", LoadBalancerConfig())
    log = LocalEventLog(log_dir, fsync=False, segment_bytes=4_000)
    host = LiveHost(spec.build(), log, clock, _NoTransport(), snapshots=RetainingSnapshots(log_dir),
                    rebuild=spec.build, snapshot_policy=SnapshotPolicy(min_records=20, per_state=1.0))
    await host.start()
    return host


async def test_a_cluster_that_retains_by_itself_keeps_its_disk_bounded_and_restarts_equal(tmp_path: Path) -> None:
    """The namespace shard with ``embeddedLogRetentionEnabled``'s snapshot store: every snapshot
    it writes drops what it no longer needs; a reader beside it keeps every record to compare."""
    clock = Clock.starting_now()
    host = await _namespace_host(tmp_path, clock)
    seen: dict[int, Record] = {}
    reader = LocalEventLog(tmp_path, fsync=False)
    segments = []
    for i in range(400):
        _, error = await host.command(CreateNamespace(command_id=f"c{i}", epoch=0, namespace=f"t/n{i}",
                                                      bundles=2))
        assert error is None
        for record in (await reader.read({0: max(seen, default=-1) + 1})).records:
            seen[record.offset] = record
        segments.append(len(list(tmp_path.glob("*.log"))))
    await host.close()
    assert (await reader.start_offsets())[0] > 0
    assert max(segments[100:]) <= 4  # newest snapshots span at most ~2 x 20 records: a few segments
    assert sorted(seen) == list(range(len(seen)))

    again = await _namespace_host(tmp_path, clock)
    scratch = BodySpec("namespace", LoadBalancerConfig()).build()
    scratch.recover(seen[o] for o in sorted(seen))
    assert isinstance(scratch, Follower) and isinstance(again.body, Follower)
    assert folded(again.body) == folded(scratch)
    _, error = await again.command(CreateNamespace(command_id="after", epoch=0, namespace="t/after", bundles=2))
    assert error is None
    await again.close()
    await reader.close()


async def test_a_body_without_a_snapshot_refuses_a_retained_log_by_name(tmp_path: Path) -> None:
    """A new shard on a log that retention cut cannot rebuild the history (``history_missing``,
    naming the partition and the offsets lost); the shard that wrote the snapshots can."""
    clock = Clock.starting_now()
    host = await _namespace_host(tmp_path, clock)
    for i in range(200):
        assert (await host.command(CreateNamespace(command_id=f"c{i}", epoch=0, namespace=f"t/n{i}",
                                                   bundles=2)))[1] is None
    await host.close()
    start = (await LocalEventLog(tmp_path, fsync=False).start_offsets())[0]
    assert start > 0
    spec = BodySpec("namespace", LoadBalancerConfig())
    fresh = LiveHost(spec.build(), LocalEventLog(tmp_path, fsync=False), clock, _NoTransport(),
                     snapshots=DirectorySnapshots(tmp_path / "elsewhere"), rebuild=spec.build)
    with pytest.raises(HistoryMissing, match=f"partition 0: no snapshot: offset 0, log start {start}"):
        await fresh.start()
    again = await _namespace_host(tmp_path, clock)
    assert again.started[0] > 0
    await again.close()


def test_the_broker_conf_key_turns_retention_on_and_keeps_every_snapshot_usable(tmp_path: Path) -> None:
    on = LoadBalancerConfig.from_broker_conf("embeddedLogRetentionEnabled=true")
    off = LoadBalancerConfig()
    assert on.embedded_log_retention_enabled and not off.embedded_log_retention_enabled
    spec = LogSpec(directory=str(tmp_path))
    assert isinstance(spec.snapshots(retain=on.embedded_log_retention_enabled), RetainingSnapshots)
    assert not isinstance(spec.snapshots(retain=off.embedded_log_retention_enabled), RetainingSnapshots)
    # Switching it changes no fold, so a snapshot written with it off is trusted with it on.
    written, read = BodySpec("namespace", off).build(), BodySpec("namespace", on).build()
    assert isinstance(written, Follower) and isinstance(read, Follower)
    assert written.snapshot_identity() == read.snapshot_identity()
