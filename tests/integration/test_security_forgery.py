"""Forgery on a secured Kafka: the broker role's valid credentials write to the events topic
(Kafka's ACLs are per topic, and every writer role writes that one topic), so Kafka cannot tell
who wrote a record; the record's signature can. Before signed appends, the broker role's
credentials appended namespace-key and ``_leader`` records that the auditor read back as true.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from events.catalog import (
    LEADER_KEY,
    BrokerRegistered,
    BundleAssigned,
    BundleOwned,
    LeaderElected,
    Message,
    NamespaceCreated,
)
from events.codec import encode
from events.envelope import Stamper
from events.log.kafka import KafkaEventLog
from events.signing import Root
from projections.ownership import OwnershipProjection
from projections.runner import ProjectionRunner
from tests.integration.test_security import Secured, secured_kafka
from tests.kafka_secure import USERS

pytestmark = [pytest.mark.security, pytest.mark.kafka, pytest.mark.timeout(420)]

NS = "public/default"
BUNDLE = f"{NS}/0x00000000_0xffffffff"
CLUSTER_ID = "c0ffee00-0000-4000-8000-000000000001"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with secured_kafka(tmp_path_factory.mktemp("forgery"), "forge") as found:
        yield found


class RoleWriter:
    """A writer of one role: that role's Kafka credentials, its signing identity."""

    def __init__(self, secured: Secured, role: str, root: Root, identity: str | None) -> None:
        self.stamper = Stamper(cluster_id=CLUSTER_ID, signer=root.issue(identity) if identity else None)
        self.log = KafkaEventLog(secured.bootstrap, cluster=secured.name, partitions=3, create_topic=False,
                                 stamper=self.stamper,
                                 security=secured.setup.security(USERS[role], cluster=secured.name))

    async def append(self, key: str, messages: list[Message], epoch: int, expected_seq: int | None = None) -> None:
        await self.log.append(key, messages, epoch=epoch, expected_seq=expected_seq)

    async def forge(self, key: str, messages: list[Message], epoch: int, seq: int) -> None:
        """Well-formed records as this role's process could write them, straight to the topic."""
        envelopes = [self.stamper.seal(m, key=key, seq=seq + i, epoch=epoch) for i, m in enumerate(messages, 1)]
        _, raws = self.stamper.sign(envelopes, [encode(e) for e in envelopes])
        await self.log.append_raw(key, raws)


async def fold_as_auditor(secured: Secured) -> OwnershipProjection:
    log = KafkaEventLog(secured.bootstrap, cluster=secured.name, partitions=3, create_topic=False,
                        security=secured.setup.security(USERS["auditor"], cluster=secured.name))
    try:
        runner = ProjectionRunner(log, OwnershipProjection())
        await runner.catch_up()
        assert isinstance(runner.projection, OwnershipProjection)
        return runner.projection
    finally:
        await log.close()


async def test_the_broker_roles_credentials_cannot_forge_namespace_or_leader_records(secured: Secured) -> None:
    root = Root()
    leader = RoleWriter(secured, "leader", root, "leader:leader")
    namespace = RoleWriter(secured, "namespace", root, "namespace:0/1")
    brokers = {b: RoleWriter(secured, "broker", root, f"broker:{b}") for b in ("broker-1", "broker-2")}
    writers = [leader, namespace, *brokers.values()]
    try:
        await leader.append(LEADER_KEY, [LeaderElected(leader_id="leader", epoch=1)], 1, expected_seq=0)
        for broker_id, writer in brokers.items():
            await writer.append(broker_id, [BrokerRegistered(broker_id=broker_id, url=f"pulsar://{broker_id}:6650")], 1)
        await namespace.append(NS, [NamespaceCreated(namespace=NS, boundaries=[0, 0xFFFFFFFF])], 1)
        await namespace.append(NS, [BundleAssigned(bundle=BUNDLE, dst="broker-1"),
                                    BundleOwned(bundle=BUNDLE, owner="broker-1")], 1)
        honest = await fold_as_auditor(secured)
        assert honest.anomalies == [] and honest.owner(BUNDLE) == "broker-1"

        # broker-2's process: valid SASL credentials of the broker role, its own signing key.
        thief = brokers["broker-2"]
        move: list[Message] = [
            BundleAssigned(bundle=BUNDLE, dst="broker-2", src="broker-1", reason="admin", force=True),
            BundleOwned(bundle=BUNDLE, owner="broker-2", src="broker-1")]
        await thief.forge(NS, move, 1, seq=3)  # signed by broker:broker-2
        unsigned = RoleWriter(secured, "broker", root, None)
        writers.append(unsigned)
        await unsigned.forge(NS, move, 1, seq=5)  # not signed at all
        await thief.forge(LEADER_KEY, [LeaderElected(leader_id="broker-2", epoch=2)], 2, seq=1)
        await unsigned.forge(LEADER_KEY, [LeaderElected(leader_id="evil", epoch=2)], 2, seq=2)
        await thief.forge("broker-1", [BrokerRegistered(broker_id="broker-1", url="pulsar://evil:6650")], 1, seq=1)
    finally:
        for writer in writers:
            await writer.log.close()

    view = await fold_as_auditor(secured)
    assert view.state_equals(honest) and view.elected == 1 and view.owner(BUNDLE) == "broker-1"
    kinds = sorted((a.key, a.event_type, a.kind) for a in view.anomalies)
    assert kinds == sorted([
        (NS, "BundleAssigned", "unauthorized"), (NS, "BundleOwned", "unauthorized"),
        (NS, "BundleAssigned", "forged"), (NS, "BundleOwned", "forged"),
        (LEADER_KEY, "LeaderElected", "unauthorized"), (LEADER_KEY, "LeaderElected", "forged"),
        ("broker-1", "BrokerRegistered", "unauthorized")]), view.anomalies

    # The auditor's own tool says the same: the owner stands, every forgery is named.
    owners = secured.lbctl(secured.auditor(), "log", "ownership", "--json")
    assert owners.returncode == 0, owners.stderr
    assert [(r["bundle"], r["owner"]) for r in map(json.loads, owners.stdout.splitlines())] == [(BUNDLE, "broker-1")]
    named = secured.lbctl(secured.auditor(), "log", "anomalies", "--json")
    assert named.returncode == 0, named.stderr
    assert sorted(a["kind"] for a in map(json.loads, named.stdout.splitlines())) == sorted(k for *_, k in kinds)
