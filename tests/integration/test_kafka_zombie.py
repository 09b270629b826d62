"""Zombie writers on a real Kafka broker: two incarnations of one broker and of one namespace
shard, each writing through the transactional id of its role. The old one is paused (a GC
pause, a partitioned host), the new one starts and writes, the old one wakes up and tries
again: Kafka fences it, and only the new one's events land.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from actors.runtime.bodies import BodySpec
from balancer.config import LoadBalancerConfig
from balancer.errors import WriterFenced
from events.catalog import BundleAssigned, LoadReported, Message
from events.log.kafka import KafkaEventLog

pytestmark = pytest.mark.kafka

ROLES: dict[str, tuple[str, str, list[Message], list[Message]]] = {
    # role (its transactional id) -> (key, ..., what the old one writes, what the new one writes)
    "broker": ("broker-broker-1", "broker-1",
               [LoadReported(broker_id="broker-1", broker_load={"topics": 1})],
               [LoadReported(broker_id="broker-1", broker_load={"topics": 2})]),
    "namespace shard": ("ns-0", "public/default",
                        [BundleAssigned(bundle="public/default/0x00000000_0xffffffff", dst="broker-1")],
                        [BundleAssigned(bundle="public/default/0x00000000_0xffffffff", dst="broker-2")]),
}


@pytest.mark.parametrize("role", list(ROLES))
async def test_a_paused_incarnation_is_fenced_and_only_the_new_one_lands(kafka: Any, role: str) -> None:
    writer_id, key, old_events, new_events = ROLES[role]
    cluster = f"z{uuid.uuid4().hex[:8]}"
    servers = kafka.bootstrap_servers
    old = KafkaEventLog(servers, cluster=cluster, partitions=3, writer_id=writer_id)
    new = KafkaEventLog(servers, cluster=cluster, partitions=3, writer_id=writer_id)
    reader = KafkaEventLog(servers, cluster=cluster, partitions=3)
    try:
        await old.start()
        await old.append(key, old_events, epoch=1)
        # The old incarnation pauses here; the new one starts (fencing it) and writes.
        await new.start()
        await new.append(key, new_events, epoch=1)
        with pytest.raises(WriterFenced):
            await old.append(key, old_events, epoch=1)
        assert old.fenced
        with pytest.raises(WriterFenced):  # and stays fenced
            await old.append(key, old_events, epoch=1)
        await reader.start()
        landed = [r.envelope.payload for r in (await reader.read()).records if r.key == key]
        assert landed == [m.to_payload() for m in old_events + new_events]
    finally:
        for log in (old, new, reader):
            await log.close()


def test_every_writer_of_ownership_keys_is_transactional() -> None:
    kinds = {kind: BodySpec(kind=kind, config=LoadBalancerConfig(), broker_id="broker-1").transactional
             for kind in ("leader", "namespace", "broker", "clients")}
    assert kinds == {"leader": True, "namespace": True, "broker": True, "clients": False}
