"""``LiveHost`` without Ray: the bodies of a small cluster, each in its own host, share one
embedded log directory (a handle each, as separate processes would) and reach each other through
an in-process transport. Real time, short timers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from actors.body import Follower
from actors.client import ClientView
from actors.effects import Effects, Receipt, appending
from actors.runtime.bodies import BodySpec
from actors.runtime.cursor import LogCursor
from actors.runtime.realtime import Answer, LiveHost
from actors.runtime.specs import Clock, LogSpec
from actors.settings import LEADER, ActorSettings
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput, Unavailable, UnknownNamespace, WriterFenced
from balancer.ownership import BundleState
from events.catalog import (
    Command,
    CreateNamespace,
    Event,
    LeaderElected,
    LookupBundle,
    SheddingSkipped,
    UnloadBundle,
)
from events.log.memory import MemoryEventLog
from events.log.port import Offsets

SETTINGS = ActorSettings(session_timeout_ms=3_000, heartbeat_ms=500, retry_ms=300, sweep_ms=100)
CONFIG = LoadBalancerConfig.from_mapping({"loadBalancerReportUpdateMinIntervalMillis": 200,
                                          "loadBalancerSheddingEnabled": False,
                                          "loadBalancerAutoBundleSplitEnabled": False})


class LocalTransport:
    """Delivers to the hosts of this process, fire-and-forget, like ``RayTransport``."""

    def __init__(self) -> None:
        self.hosts: dict[str, LiveHost] = {}
        self.tasks: set[asyncio.Task[Answer]] = set()

    def send(self, target: str, command: Command, after: Offsets | None = None) -> None:
        host = self.hosts.get(target)
        if host is not None:
            task = asyncio.get_running_loop().create_task(host.command(command, after))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def call(self, target: str, command: Command, after: Offsets | None = None) -> Answer:
        return await self.hosts[target].command(command, after)

    async def close(self) -> None:
        return None


class Rig:
    def __init__(self, directory: Path) -> None:
        self.spec = LogSpec(directory=str(directory), fsync=False)
        self.clock = Clock.starting_now()
        self.transport = LocalTransport()
        self.view = ClientView(CONFIG, self.spec.open(self.clock), poll_s=0.005)
        self.ids = 0

    def body(self, kind: str, broker_id: str | None = None) -> BodySpec:
        return BodySpec(kind, CONFIG, SETTINGS, broker_id=broker_id)  # type: ignore[arg-type]

    async def host(self, spec: BodySpec) -> LiveHost:
        host = LiveHost(spec.build(), self.spec.open(self.clock), self.clock, self.transport,
                        tick_s=0.02, poll_s=0.005)
        await host.start()
        self.transport.hosts[spec.name] = host
        return host

    async def call(self, target: str, cls: type[Command], **fields: object) -> Receipt:
        self.ids += 1
        command = cls(command_id=f"t-{self.ids}", epoch=self.view.epoch, **fields)
        reply, error = await self.transport.call(target, command, dict(self.view.cursor.seen))
        if error is not None:
            raise error
        assert isinstance(reply, Receipt)
        await self.view.catch_up()
        return reply

    async def close(self) -> None:
        for host in list(self.transport.hosts.values()):
            await host.close()
        await self.view.close()


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    made = Rig(tmp_path / "log")
    await made.view.start()
    for spec in (made.body("namespace"), made.body("leader"), made.body("broker", "broker-1"),
                 made.body("broker", "broker-2")):
        await made.host(spec)
    assert await made.view.wait_for(lambda: made.view.leader_id is not None
                                    and len(made.view.brokers) == 2, 10)
    yield made
    await made.close()


async def test_a_lookup_assigns_through_the_hosts_and_every_view_agrees(rig: Rig) -> None:
    await rig.call("ns:0", CreateNamespace, namespace="t/a", bundles=4)
    bundle = next(rig.view.ownership.bundles("t/a")).bundle
    reply = await rig.call(LEADER, LookupBundle, bundle=bundle)
    assert reply.detail["dst"] in ("broker-1", "broker-2")
    assert await rig.view.wait_for(lambda: rig.view.ownership.state(bundle) is BundleState.OWNED, 5)
    position = dict(rig.view.cursor.position)
    for host in rig.transport.hosts.values():
        snapshot = await host.snapshot(position)
        assert snapshot["position"][0] >= position[0]
        assert snapshot["ownership"]["records"][bundle] == rig.view.ownership.snapshot()["records"][bundle]


async def test_a_command_never_overtakes_what_its_sender_had_seen(rig: Rig) -> None:
    for i in range(10):  # the leader's subscription polls every 5 ms: it would lag without ``after``
        await rig.call("ns:0", CreateNamespace, namespace=f"t/n{i}", bundles=1)
        bundle = next(rig.view.ownership.bundles(f"t/n{i}")).bundle
        reply = await rig.call(LEADER, LookupBundle, bundle=bundle)
        assert reply.detail["dst"] in ("broker-1", "broker-2")


async def test_a_reply_comes_after_the_writer_folded_what_it_wrote(rig: Rig) -> None:
    await rig.call("ns:0", CreateNamespace, namespace="t/b", bundles=2)
    namespace_host = rig.transport.hosts["ns:0"]
    assert "t/b" in namespace_host.body.ownership.namespaces  # type: ignore[attr-defined]
    with pytest.raises(UnknownNamespace):
        await rig.call("ns:0", UnloadBundle, bundle="t/nope/0x00000000_0xffffffff")


async def test_a_fresh_host_recovers_the_same_view_from_the_log(rig: Rig) -> None:
    await rig.call("ns:0", CreateNamespace, namespace="t/c", bundles=2)
    old = rig.transport.hosts.pop("broker:broker-1")
    await old.close()
    again = await rig.host(rig.body("broker", "broker-1"))
    await again.sync()
    assert again.body.ownership.state_equals(rig.view.ownership)  # type: ignore[attr-defined]
    assert again.body.registered  # type: ignore[attr-defined]


async def test_a_failed_append_is_the_commands_error() -> None:
    log = MemoryEventLog()
    await log.append("_leader", [LeaderElected(leader_id="x", epoch=5)], epoch=5)
    host = LiveHost(BodySpec("namespace", CONFIG, SETTINGS).build(), log, Clock.starting_now(),
                    LocalTransport(), tick_s=0.05)
    await host.start()
    try:
        # A command claiming epoch 7, which no election established: the log refuses the
        # append (epochs rise only through elections), and that is the command's error.
        reply, error = await host.command(CreateNamespace(command_id="c0", epoch=7, namespace="t/d"))
        assert isinstance(error, WriterFenced) and "no election established" in error.message
        assert host.status()["counts"]["appends"] == 0
        reply, error = await host.command(CreateNamespace(command_id="c1", epoch=5, namespace="t/d"))
        assert error is None and isinstance(reply, Receipt)
        assert host.status()["counts"]["appends"] == 1
        with pytest.raises(InvalidInput):
            await host.act("shutdown")  # only brokers shut down
    finally:
        await host.close()


class _FlakyLog(MemoryEventLog):
    """Refuses appends while ``down`` (a log outage)."""

    down = False

    async def append(self, key: str, messages: Sequence[Event], **options: Any) -> Any:
        if self.down:
            raise Unavailable("the log is down")
        return await super().append(key, messages, **options)


class _Watcher(Follower):
    """Appends one event per command and records what the host tells it of the log's health."""

    name = "watcher"

    def __init__(self) -> None:
        super().__init__(CONFIG)
        self.health: list[bool] = []

    def on_log_health(self, healthy: bool, now_ms: int) -> None:
        self.health.append(healthy)

    def on_command(self, command: Command, now_ms: int) -> Effects:
        return appending("k", [SheddingSkipped(strategy="s", reason="r")], epoch=0)


async def test_the_host_tells_the_body_when_the_log_stops_and_starts_answering() -> None:
    log, body = _FlakyLog(), _Watcher()
    host = LiveHost(body, log, Clock.starting_now(), LocalTransport(), tick_s=0.05)
    await host.start()
    try:
        log.down = True
        for i in range(2):
            _, error = await host.command(CreateNamespace(command_id=f"c{i}", epoch=0, namespace="t/d"))
            assert isinstance(error, Unavailable)
        log.down = False
        _, error = await host.command(CreateNamespace(command_id="c9", epoch=0, namespace="t/d"))
        assert error is None
        assert body.health == [False, True]  # changes only
    finally:
        await host.close()


def test_the_clock_runs_faster_by_the_compression_factor() -> None:
    clock = Clock(int(time.time() * 1000) - 1_000, speed=60.0)
    assert 59_000 <= clock.now_ms() - clock.origin_ms <= 62_000
    assert clock.wall_s(60_000) == pytest.approx(1.0)
    with pytest.raises(InvalidInput):
        Clock.starting_now(0)


async def test_the_cursor_takes_each_record_once_in_order() -> None:
    log = MemoryEventLog()
    for e in (1, 2, 3):  # each election's payload epoch is its envelope's
        await log.append("_leader", [LeaderElected(leader_id="x", epoch=e)], epoch=e)
    items = (await log.read()).items
    cursor = LogCursor()
    assert [r.envelope.seq for r in map(cursor.take, items) if r is not None] == [1, 2, 3]
    assert [cursor.take(item) for item in items] == [None, None, None]  # a redelivery
    assert cursor.reached({0: 3}) and not cursor.reached({0: 4})
