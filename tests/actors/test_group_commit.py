"""Group commit in ``LiveHost``: the namespace shard decides the commands
queued behind its lock one after another and appends them in one transaction, and the log it
writes and the answers it gives are exactly those of the same commands one by one."""

from __future__ import annotations

import asyncio
from random import Random
from typing import Any

import pytest

from actors.effects import Receipt
from actors.namespace import NamespaceBody
from actors.runtime.realtime import Answer, LiveHost
from actors.runtime.specs import Clock
from balancer.bundles import NamespaceBundles
from balancer.config import LoadBalancerConfig
from events.catalog import (
    LEADER_KEY,
    AssignBundle,
    BrokerRegistered,
    Command,
    ConfirmOwnership,
    CreateNamespace,
    LeaderElected,
    NamespaceCreated,
    UnloadBundle,
)
from events.log.memory import MemoryEventLog
from events.log.port import Offsets

NS = "public/default"
LAYOUT = NamespaceBundles.initial(NS, 8)
BUNDLES = [f"{NS}/{r.name}" for r in LAYOUT]
BROKERS = ["broker-1", "broker-2", "broker-3"]


class _Nowhere:
    def send(self, target: str, command: Command, after: Offsets | None = None) -> None:
        return None

    async def close(self) -> None:
        return None


async def _shard(max_group: int) -> tuple[LiveHost, MemoryEventLog]:
    log = MemoryEventLog()
    await log.start()
    await log.append(LEADER_KEY, [LeaderElected(leader_id="leader", epoch=1)], epoch=1, expected_seq=0)
    for broker in BROKERS:
        await log.append(broker, [BrokerRegistered(broker_id=broker, url=f"pulsar://{broker}:6650")], epoch=1)
    await log.append(NS, [NamespaceCreated(namespace=NS, boundaries=list(LAYOUT.boundaries()))], epoch=1)
    host = LiveHost(NamespaceBody(LoadBalancerConfig()), log, Clock.starting_now(), _Nowhere(),
                    tick_s=1.0, max_group=max_group)
    await host.start()
    return host, log


def _storm(seed: int, size: int = 60) -> list[Command]:
    """Lookups' assignments and brokers' confirmations, with what goes wrong in a storm: the
    leader's retries (new ids), repeated confirmations (same id), unknown brokers and bundles,
    a stale and a future epoch, and commands that run alone (an unload, a namespace)."""
    rng, made = Random(seed), list[Command]()
    for i in range(size):
        bundle = rng.choice([*BUNDLES, f"{NS}/0x00000000_0x00000001"] if rng.random() < 0.05 else BUNDLES)
        broker = rng.choice([*BROKERS, "broker-9"] if rng.random() < 0.05 else BROKERS)
        epoch = rng.choice([0, 2]) if rng.random() < 0.04 else 1
        roll = rng.random()
        if made and roll < 0.12:
            made.append(rng.choice(made))  # the same command again (a retry that kept its id)
        elif roll < 0.55:
            made.append(AssignBundle(command_id=f"leader:assign:{bundle}:{i}", epoch=epoch, bundle=bundle,
                                     dst=broker, reason="lookup"))
        elif roll < 0.93:
            made.append(ConfirmOwnership(command_id=f"{broker}:own:{bundle}:{i % 7}", epoch=epoch,
                                         bundle=bundle, owner=broker))
        elif roll < 0.97:
            made.append(UnloadBundle(command_id=f"admin:unload:{i}", epoch=1, bundle=bundle))
        else:
            made.append(CreateNamespace(command_id=f"admin:ns:{i}", epoch=1, namespace=f"public/n{i % 2}"))
    return made


def _answer(answer: Answer) -> tuple[Any, ...]:
    reply, error = answer
    if isinstance(reply, Receipt):
        reply = (reply.command_id, reply.events, reply.duplicate, dict(reply.detail))
    return reply, None if error is None else (type(error).__name__, error.message)


async def _written(log: MemoryEventLog) -> list[tuple[Any, ...]]:
    result = await log.read()
    return [(e.key, e.seq, e.epoch, e.type, e.causation_id, e.payload)
            for e in (item.envelope for item in result.records)]


async def _one_by_one(commands: list[Command]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], dict[str, int]]:
    host, log = await _shard(max_group=1)
    try:
        answers = [_answer(await host.command(c)) for c in commands]
        return answers, await _written(log), host.status()["counts"]
    finally:
        await host.close()


async def _in_groups(commands: list[Command]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], dict[str, int]]:
    """Every command arrives while the shard is busy: all of them queue behind its lock."""
    host, log = await _shard(max_group=1_000)
    try:
        async with host._lock:
            tasks = [asyncio.create_task(host.command(c)) for c in commands]
            await asyncio.sleep(0)  # each task queues its command and waits for the lock
        answers = [_answer(answer) for answer in await asyncio.gather(*tasks)]
        return answers, await _written(log), host.status()["counts"]
    finally:
        await host.close()


@pytest.mark.parametrize("seed", range(12))
async def test_a_group_decides_and_writes_exactly_what_the_same_commands_one_by_one_do(seed: int) -> None:
    commands = _storm(seed)
    alone, alone_log, alone_counts = await _one_by_one(commands)
    grouped, grouped_log, counts = await _in_groups(commands)
    assert grouped == alone
    assert grouped_log == alone_log  # the same events, keys, seqs, epochs and causation ids
    assert alone_counts["groups"] == 0
    assert counts["commands"] == alone_counts["commands"] == len(commands)
    assert counts["groups"] >= 1 and counts["appends"] < alone_counts["appends"]


async def test_a_lookup_storm_is_one_append_per_group() -> None:
    """Assignments of distinct bundles, then their confirmations: two transactions in all (a
    confirmation reads the record its bundle's assignment writes: it waits for the next group)."""
    assigns = [AssignBundle(command_id=f"a{i}", epoch=1, bundle=b, dst=BROKERS[i % 3], reason="lookup")
               for i, b in enumerate(BUNDLES)]
    confirms = [ConfirmOwnership(command_id=f"o{i}", epoch=1, bundle=b, owner=BROKERS[i % 3])
                for i, b in enumerate(BUNDLES)]
    answers, log, counts = await _in_groups(assigns + confirms)
    assert all(error is None for _, error in answers)
    assert [t for _, _, _, t, _, _ in log[-16:]] == ["BundleAssigned"] * 8 + ["BundleOwned"] * 8
    assert [c for *_, c, _ in log[-16:]] == [c.command_id for c in assigns + confirms]
    assert counts["appends"] == 2 and counts["groups"] == 2 and counts["largest_group"] == 8


async def test_an_append_with_a_causation_id_per_event_needs_exactly_one_per_event() -> None:
    log = MemoryEventLog()
    await log.start()
    with pytest.raises(ValueError, match="1 causation ids for 2 messages"):
        await log.append(LEADER_KEY, [LeaderElected(leader_id="a", epoch=1)] * 2, epoch=1, causation_ids=["x"])
