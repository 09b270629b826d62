"""The live system on Ray over Kafka signs every append, and a forged record in its topic moves
nothing: the leader keeps leading and placing, and the forgery is named in the client's view.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from actors.api import Cluster
from events.catalog import LEADER_KEY, BundleAssigned, BundleOwned, LeaderElected, Message
from events.codec import encode
from events.envelope import Stamper
from events.log.kafka import KafkaEventLog
from projections.ownership import OwnershipProjection
from tests.integration.ray_scenarios import QUIET, SETTINGS, unique
from tests.support.patience import patient

pytestmark = [pytest.mark.ray, pytest.mark.kafka, pytest.mark.timeout(300)]

NS = "public/signed"


async def test_a_ray_cluster_signs_its_appends_and_a_forgery_moves_nothing(
        ray_session: Any, kafka: Any, tmp_path: Path) -> None:
    name = unique("signed")
    async with Cluster.start(brokers=2, settings=SETTINGS, overrides=QUIET, bootstrap=kafka.bootstrap_servers,
                             cluster_name=name, ray_namespace=unique("test-signed"),
                             signing_dir=str(tmp_path / "keys")) as cluster:
        await cluster.wait_ready(2)
        await cluster.create_namespace(NS, bundles=2)
        topic = f"persistent://{NS}/t-1"
        owner = await cluster.lookup(topic)
        assert owner in {"broker-1", "broker-2"}
        assert sorted(p.name for p in (tmp_path / "keys").iterdir()) == [
            "broker@broker-1.key", "broker@broker-2.key", "leader@leader.key", "namespace@0-of-1.key", "root.key"]

        log = KafkaEventLog(kafka.bootstrap_servers, cluster=name, partitions=3, create_topic=False,
                            stamper=Stamper(cluster_id=cluster.view.ownership.cluster_id))
        try:
            honest = OwnershipProjection(ordered=False)
            for record in (await log.read()).records:
                honest.apply(record.offset, record.envelope)
            assert honest.trust is not None and honest.anomalies == []
            bundle = cluster.view.ownership.bundle_of_topic(topic)
            thief = "broker-2" if owner == "broker-1" else "broker-1"
            epoch = cluster.view.epoch
            forged: dict[str, list[Message]] = {
                LEADER_KEY: [LeaderElected(leader_id="evil", epoch=epoch + 1)],
                NS: [BundleAssigned(bundle=bundle, dst=thief, src=owner, reason="admin", force=True),
                     BundleOwned(bundle=bundle, owner=thief, src=owner)]}
            for key, messages in forged.items():
                seq, _ = await log.head(key)
                await log.append_raw(key, [encode(log._stamper.seal(m, key=key, seq=seq + i, epoch=epoch + 1
                                                                    if key == LEADER_KEY else epoch))
                                           for i, m in enumerate(messages, start=1)])
        finally:
            await log.close()

        # Read committed: a record lands behind any transaction still open on its partition (a
        # genuine writer's), so the forgeries become readable when that one commits.
        deadline = asyncio.get_running_loop().time() + patient(30)
        while asyncio.get_running_loop().time() < deadline:
            await cluster.view.catch_up()
            if sum(a.kind == "forged" for a in cluster.view.ownership.anomalies) >= 3:
                break
            await asyncio.sleep(0.5)
        assert cluster.view.epoch == epoch and cluster.view.leader_id == "leader"
        assert cluster.view.ownership.owner(bundle) == owner
        anomalies = cluster.view.ownership.anomalies
        assert sorted(a.kind for a in anomalies if a.kind != "gap") == ["forged"] * 3, (
        f"anomalies: {anomalies}; forged under {sorted(forged)} at the heads the test read")
        # The forgeries took their seqs in the log's numbering: the next genuine record of
        # their key shows the gap (named, never silent).
        assert {a.key for a in anomalies if a.kind == "gap"} <= set(forged)
        assert await cluster.lookup(f"persistent://{NS}/t-after") in {"broker-1", "broker-2"}
