"""The reach of a record (``events.bounds``): a record far past its key's seq or epoch counts for
no one, writer or reader, so the key goes on from its last record in reach."""

from __future__ import annotations

import msgpack
import pytest

from actors.namespace import NamespaceBody
from balancer.config import LoadBalancerConfig
from events.bounds import STEP_MAX
from events.catalog import LEADER_KEY, LeaderElected, NamespaceCreated, NamespacePolicySet
from events.log.memory import MemoryEventLog
from projections.ownership import OwnershipProjection

NS = "t/n"
TOP = 2**63 - 1


def _raw(kind: str, key: str, seq: int, epoch: int, payload: dict[str, object]) -> bytes:
    data: bytes = msgpack.packb(["forged", kind, 1, key, seq, epoch, 1_700_000_000_000, None, None, payload],
                                use_bin_type=True)
    return data


@pytest.mark.parametrize(("key", "kind", "seq", "epoch", "payload"), [
    (NS, "NamespacePolicySet", TOP, 1, {"namespace": NS}),
    (NS, "NamespacePolicySet", 2 + STEP_MAX, 1, {"namespace": NS}),
    (LEADER_KEY, "LeaderElected", 2, TOP, {"leader_id": "nobody", "epoch": TOP}),
])
async def test_a_record_beyond_reach_moves_no_head_and_the_key_goes_on(
        key: str, kind: str, seq: int, epoch: int, payload: dict[str, object]) -> None:
    log = MemoryEventLog()
    await log.append(LEADER_KEY, [LeaderElected(leader_id="leader", epoch=1)], epoch=1)
    await log.append(NS, [NamespaceCreated(namespace=NS, boundaries=[0, 2**32 - 1])], epoch=1)
    before = await log.head(key)
    await log.append_raw(key, [_raw(kind, key, seq, epoch, payload)])
    assert await log.head(key) == before  # the writer's head: the forged record is not its own

    after = await log.append(NS, [NamespacePolicySet(namespace=NS, anti_affinity_group="g")], epoch=1)
    assert after[0].seq == 2  # the namespace key's next seq, whatever was forged
    elected = await log.append(LEADER_KEY, [LeaderElected(leader_id="leader", epoch=2)], epoch=2)
    assert elected[0].envelope.epoch == 2  # an election at the newest epoch + 1 is still written

    records = (await log.read()).records
    view = OwnershipProjection()
    body = NamespaceBody(LoadBalancerConfig())
    for record in records:
        view.apply(record.offset, record.envelope)
    body.recover(records)
    forged = records[2].offset
    assert [a.kind for a in view.anomalies if a.offset == forged] == ["out_of_range"]
    assert [a.offset for a in view.anomalies] == [forged]  # the records after it fold as usual
    assert body.epoch == view.elected == 2
    assert view.namespaces[NS].anti_affinity_group == body.ownership.namespaces[NS].anti_affinity_group == "g"
    assert body.key_seq(NS) == 2
