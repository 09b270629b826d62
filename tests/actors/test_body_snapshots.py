"""Body snapshots: a restart restores the newest snapshot and folds the tail.

What a user notices: a restarted body is the body a fold from offset 0 would give (property,
over the simulator's random histories with crashes, splits, shedding and leader changes); its
restart folds a bounded number of records however long the history; a damaged snapshot is
named and passed over, never trusted.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
from collections.abc import Mapping
from pathlib import Path
from random import Random
from typing import Any

import pytest

from actors.body import Follower
from actors.runtime import InProcessHost, build_cluster, wait_ready
from actors.runtime.bodies import BodySpec
from actors.runtime.realtime import LiveHost
from actors.runtime.sim.run import simulate_on_host
from actors.runtime.sim.scenarios import scenario_for
from actors.runtime.specs import SNAPSHOT_DIR, Clock, LogSpec
from actors.settings import ActorSettings
from actors.snapshots import (
    BodySnapshot,
    DirectorySnapshots,
    MemorySnapshots,
    SnapshotPolicy,
    decode,
    encode,
)
from actors.workload import Workload
from balancer.config import LoadBalancerConfig
from events.catalog import CreateNamespace


def canonical(value: Any, depth: int = 0) -> Any:
    """Plain, order-free data for comparing two bodies' folded state (objects by their fields)."""
    if depth > 40:
        raise RecursionError("state nests deeper than a body's")
    if value is None or isinstance(value, (bool, int, str, bytes, enum.Enum)):
        return value
    if isinstance(value, float):
        return "nan" if math.isnan(value) else value
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        return f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, (Mapping, types.MappingProxyType)):
        return sorted(((repr(canonical(k, depth + 1)), canonical(v, depth + 1)) for k, v in value.items()),
                      key=lambda kv: kv[0])
    if isinstance(value, (set, frozenset)):
        return sorted(repr(canonical(v, depth + 1)) for v in value)
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [canonical(v, depth + 1) for v in value]]
    if dataclasses.is_dataclass(value):  # its own equality: memos and caches do not count
        return [type(value).__qualname__, canonical(
            {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.compare}, depth + 1)]
    fields: dict[str, Any] = dict(getattr(value, "__dict__", {}))
    for klass in type(value).__mro__:
        for slot in getattr(klass, "__slots__", ()):
            if hasattr(value, slot) and slot != "__weakref__":
                fields[slot] = getattr(value, slot)
    return [type(value).__qualname__, canonical(fields, depth + 1)]


def folded(body: Follower) -> Any:
    return canonical(body.snapshot_state())


def restored_and_scratch(host: InProcessHost, name: str) -> tuple[Follower, Follower, int]:
    """Body ``name`` restored from the host's newest snapshot plus the tail, and one folded
    from offset 0; the snapshot's position."""
    factory = host._factories[name]
    restored, scratch = factory(), factory()
    assert isinstance(restored, Follower) and isinstance(scratch, Follower)
    snapshot = host.snapshots.newest(name, restored.snapshot_identity())
    assert snapshot is not None, f"no snapshot of {name}"
    restored.restore_state(snapshot.state)
    at = snapshot.position[0]
    restored.recover(host.records[at:])
    scratch.recover(host.records)
    return restored, scratch, at


@pytest.mark.parametrize("seed", [11, 12, 13, 14, 15, 16, 17, 18, 19])
def test_a_body_restored_from_a_snapshot_and_the_tail_equals_one_folded_from_offset_0(seed: int) -> None:
    # Random histories: each seed is a simulator scenario (crashes, restarts, log outages,
    # splits, unloads, shedding, leader churn) whose bodies were snapshot at random points.
    scenario = scenario_for(seed)
    result, host = simulate_on_host(seed, scenario, 250)
    assert result.ok, result.violation
    compared = 0
    for name in sorted(host._factories):
        restored, scratch, at = restored_and_scratch(host, name)
        assert 0 < at <= len(host.records)
        assert folded(restored) == folded(scratch), f"{scenario.name} seed {seed}: {name} differs"
        compared += 1
    assert compared >= 5


def test_the_simulator_restarts_bodies_from_snapshots() -> None:
    # The 10,000-seed simulation checks restored bodies, not only bodies folded from offset 0.
    restored = 0
    for seed in range(20, 26):
        result, host = simulate_on_host(seed, scenario_for(seed), 250)
        assert result.ok, result.violation
        restored += sum(1 for start, _ in host.started.values() if start > 0)
        assert not host.snapshots.notes
    assert restored > 0


def _busy_cluster(records: int, policy: SnapshotPolicy) -> InProcessHost:
    """A 4-broker cluster run until its log holds at least ``records`` records."""
    workload = Workload.zipf(Random(1), ["t/ns"], topics_per_namespace=200, total_msg_rate=5_000.0)
    # Frequent heartbeats: a history that grows by a few records a second.
    host = build_cluster(4, workload=workload, clients=True, snapshot_policy=policy,
                         settings=ActorSettings(heartbeat_ms=1_000))
    assert wait_ready(host, 4)
    host.call(CreateNamespace(command_id="ns", epoch=host.epoch, namespace="t/ns", bundles=64))
    while len(host.records) < records:
        host.advance(10_000)
    return host


@pytest.mark.parametrize("name", ["broker:broker-2", "leader", "ns:0", "clients"])
def test_a_restart_folds_a_bounded_tail_however_long_the_history(name: str) -> None:
    policy = SnapshotPolicy(min_records=300, per_state=1.0)
    tails = {}
    for records in (1_000, 4_000):
        host = _busy_cluster(records, policy)
        history = len(host.records)
        body = host.restart(name)
        taken, tail = host.started[name]
        assert taken + tail == history
        assert isinstance(body, Follower)
        bound = max(policy.min_records, policy.per_state * body.state_size())
        # A snapshot is checked after each record a body takes in: the tail stays within one
        # policy interval (plus the records of the reactions that finished that step).
        assert tail <= bound + 50, f"{name} folded {tail} of {history} records at restart"
        tails[records] = tail
    assert tails[4_000] <= max(policy.min_records, 200) + 50  # the same bound at 4x the history


def test_without_snapshots_a_restart_folds_the_whole_log() -> None:
    host = _busy_cluster(500, SnapshotPolicy(min_records=10**9))
    host.restart("broker:broker-1")
    assert host.started["broker:broker-1"] == (0, len(host.records))


def _snapshot(position: int, body: str = "broker:b", identity: str = "id") -> BodySnapshot:
    return BodySnapshot(body, identity, {0: position}, position, {"n": position})


def test_a_damaged_snapshot_is_named_and_the_older_one_used(tmp_path: Path) -> None:
    store = DirectorySnapshots(tmp_path, keep=2)
    store.save(_snapshot(100))
    store.save(_snapshot(200))
    newest = store.files("broker:b")[0]
    raw = bytearray(newest.read_bytes())
    raw[-5] ^= 0xFF  # one flipped byte in the payload
    newest.write_bytes(bytes(raw))
    found = store.newest("broker:b", "id")
    assert found is not None and found.position == {0: 100} and found.state == {"n": 100}
    assert len(store.notes) == 1 and str(newest) in store.notes[0] and "checksum" in store.notes[0]


def test_a_torn_or_foreign_snapshot_is_never_restored(tmp_path: Path) -> None:
    store = DirectorySnapshots(tmp_path, keep=3)
    store.save(_snapshot(100))
    store.save(_snapshot(200, identity="another configuration"))
    store.save(_snapshot(300))
    newest = store.files("broker:b")[0]
    newest.write_bytes(newest.read_bytes()[:-10])  # torn
    assert store.newest("broker:b", "id") is not None
    assert store.newest("broker:b", "id").position == {0: 100}  # type: ignore[union-attr]
    assert any("torn" in note for note in store.notes)
    assert any("identity" in note for note in store.notes)
    for path in store.files("broker:b"):
        path.write_bytes(b"garbage")
    store.notes.clear()
    assert store.newest("broker:b", "id") is None
    assert len(store.notes) == 3 and all("not a body snapshot" in note for note in store.notes)


def test_a_store_keeps_the_newest_few() -> None:
    store = MemorySnapshots(keep=2)
    for position in (1, 2, 3):
        store.save(_snapshot(position))
    assert len(store.saved["broker:b"]) == 2
    assert store.newest("broker:b", "id").position == {0: 3}  # type: ignore[union-attr]
    with pytest.raises(Exception, match="body"):
        decode(encode(_snapshot(3)), body="broker:other", identity="id", where="x")


def test_a_damaged_snapshot_in_the_host_falls_back_to_the_whole_log_loudly() -> None:
    host = _busy_cluster(1_000, SnapshotPolicy(min_records=300, per_state=1.0))
    name = "broker:broker-3"
    kept = host.snapshots.saved[name]
    kept[-1] = kept[-1][:-1] + bytes([kept[-1][-1] ^ 1])
    host.restart(name)
    assert host.started[name] == (0, len(host.records))
    assert any(name in note and "checksum" in note for note in host.snapshots.notes)
    host.advance(30_000)  # and it goes on serving: its bundles stay Owned by it
    assert host.body(name).owned()  # type: ignore[attr-defined]


async def _live_namespace_host(log_dir: Path, store: DirectorySnapshots, clock: Clock) -> LiveHost:
    spec = BodySpec("namespace", LoadBalancerConfig())
    host = LiveHost(spec.build(), LogSpec(directory=str(log_dir), fsync=False).open(clock), clock,
                    _NoTransport(), snapshots=store, rebuild=spec.build,
                    snapshot_policy=SnapshotPolicy(min_records=20, per_state=1.0))
    await host.start()
    return host


class _NoTransport:
    def send(self, target: str, command: Any, after: Any = None) -> None:
        raise AssertionError("a namespace shard sends nothing here")

    async def close(self) -> None:
        return None


async def test_a_live_host_restarts_its_body_from_its_snapshot_files(tmp_path: Path) -> None:
    store, clock = DirectorySnapshots(tmp_path / "log" / SNAPSHOT_DIR), Clock.starting_now()
    host = await _live_namespace_host(tmp_path / "log", store, clock)
    for i in range(70):
        _, error = await host.command(CreateNamespace(command_id=f"c{i}", epoch=0, namespace=f"t/n{i}",
                                                      bundles=2))
        assert error is None
    await host.close()
    assert host.counts["snapshots"] >= 2 and len(store.files("ns:0")) == 2

    again = await _live_namespace_host(tmp_path / "log", store, clock)
    taken, tail = again.started
    assert taken >= 40 and taken + tail == 70 and tail < 30
    scratch = BodySpec("namespace", LoadBalancerConfig()).build()
    scratch.recover((await LogSpec(directory=str(tmp_path / "log")).open(clock).read()).records)
    assert isinstance(scratch, Follower) and isinstance(again.body, Follower)
    assert folded(again.body) == folded(scratch)
    await again.close()

    newest = store.files("ns:0")[0]
    newest.write_bytes(newest.read_bytes()[:-3])  # torn: the older one is used, the torn one named
    third = await _live_namespace_host(tmp_path / "log", store, clock)
    assert 0 < third.started[0] < taken
    assert any(str(newest) in note for note in store.notes)
    await third.close()
