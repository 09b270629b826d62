"""The EventLog contract: every adapter (memory, local files, Kafka) must pass every test here.

What a user of the log relies on: per-key order and gap-free seq, offsets that only grow,
replay from an offset or a time, checkpoints that survive a restart, fencing of stale writers,
dead letters instead of crashes, and a large round trip that gives back exactly what was written.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import msgpack
import pytest

from balancer.errors import ForeignCluster, StateConflict, WriterFenced
from events.catalog import BrokerLeft, BundleAssigned, BundleOwned, LeaderElected
from events.codec import encode
from events.envelope import Envelope
from events.log.port import DeadLetter, Item, Record
from tests.contracts.conftest import LogFactory

NS = "public/default"


def assigned(i: int, ns: str = NS) -> BundleAssigned:
    return BundleAssigned(bundle=f"{ns}/0x{i:08x}_0x{i + 1:08x}", dst=f"broker-{i % 5}")


def by_key(items: list[Item]) -> dict[str, list[Envelope]]:
    out: dict[str, list[Envelope]] = defaultdict(list)
    for item in items:
        if isinstance(item, Record):
            out[item.key].append(item.envelope)
    return out


def raw_envelope(type_name: str, version: int, payload: dict[str, object]) -> bytes:
    env = Envelope("00000000-0000-4000-8000-ffffffffffff", type_name, version, NS, 99, 1,
                   1_700_000_000_000, None, None, payload)
    return encode(env)


class TestEventLogContract:
    async def test_empty_log_reads_nothing(self, logs: LogFactory) -> None:
        log = await logs.open()
        result = await log.read()
        assert result.items == []
        assert set((await log.end_offsets()).values()) == {0}
        assert await log.head(NS) == (0, 0)

    async def test_seq_is_gap_free_per_key_and_order_is_kept(self, logs: LogFactory) -> None:
        log = await logs.open()
        written: dict[str, list[Envelope]] = defaultdict(list)
        for round_ in range(4):
            for ns in ("t/a", "t/b", "t/c"):
                records = await log.append(ns, [assigned(round_ * 10 + j, ns) for j in range(3)], epoch=1)
                written[ns].extend(r.envelope for r in records)
        read = by_key((await log.read()).items)
        assert read == written
        for envelopes in read.values():
            assert [e.seq for e in envelopes] == list(range(1, 13))
        assert await log.head("t/b") == (12, 1)

    async def test_offsets_only_grow_within_a_partition(self, logs: LogFactory) -> None:
        log = await logs.open()
        for i in range(30):
            await log.append(f"t/ns{i % 4}", [assigned(i, f"t/ns{i % 4}")], epoch=1)
        last: dict[int, int] = {}
        for item in (await log.read()).items:
            assert item.offset > last.get(item.partition, -1)
            last[item.partition] = item.offset
        ends = await log.end_offsets()
        assert all(ends[p] > offset for p, offset in last.items())

    async def test_replay_from_an_offset_gives_the_rest(self, logs: LogFactory) -> None:
        log = await logs.open()
        await log.append(NS, [assigned(i) for i in range(20)], epoch=1)
        everything = (await log.read()).records
        middle = everything[7]
        rest = await log.read({middle.partition: middle.offset + 1})
        assert [r.envelope for r in rest.records] == [r.envelope for r in everything[8:]]
        first_five = await log.read(limit=5)
        assert [r.envelope for r in first_five.records] == [r.envelope for r in everything[:5]]
        after = await log.read(first_five.next)
        assert [r.envelope for r in after.records] == [r.envelope for r in everything[5:]]

    async def test_replay_from_a_timestamp(self, logs: LogFactory) -> None:
        log = await logs.open()
        records = []
        for i in range(10):
            records += await log.append(NS, [assigned(i)], epoch=1)
        cut = records[6].envelope.ts_ms
        later = await log.read(from_ts_ms=cut)
        assert [r.envelope for r in later.records] == [r.envelope for r in records[6:]]
        assert (await log.read(from_ts_ms=records[-1].envelope.ts_ms + 1)).items == []

    async def test_subscribe_follows_new_appends(self, logs: LogFactory) -> None:
        log = await logs.open()
        await log.append(NS, [assigned(0)], epoch=1)
        seen: list[int] = []

        async def follow() -> None:
            async for item in log.subscribe():
                assert isinstance(item, Record)
                seen.append(item.seq)
                if len(seen) == 4:
                    return

        task = asyncio.create_task(follow())
        await asyncio.sleep(0.3)
        writer = await logs.open()
        await writer.append(NS, [assigned(1), assigned(2)], epoch=1)
        await writer.append(NS, [assigned(3)], epoch=1)
        await asyncio.wait_for(task, 30)
        assert seen == [1, 2, 3, 4]

    async def test_checkpoints_survive_a_restart(self, logs: LogFactory) -> None:
        log = await logs.open()
        await log.append(NS, [assigned(i) for i in range(5)], epoch=1)
        position = (await log.read(limit=3)).next
        await log.save_checkpoint("ownership-projection", position)
        assert await log.load_checkpoint("never-saved") is None
        await logs.close_all()
        reopened = await logs.open()
        loaded = await reopened.load_checkpoint("ownership-projection")
        assert loaded is not None
        assert {p: o for p, o in loaded.items() if o} == {p: o for p, o in position.items() if o}
        rest = await reopened.read(loaded)
        assert [r.seq for r in rest.records] == [4, 5]

    async def test_an_older_epoch_is_refused_and_writes_nothing(self, logs: LogFactory) -> None:
        log = await logs.open()
        await log.append(NS, [assigned(0)], epoch=2)
        before = await log.end_offsets()
        with pytest.raises(WriterFenced):
            await log.append(NS, [assigned(1)], epoch=1)
        assert await log.end_offsets() == before
        other = await log.append("t/other", [assigned(2, "t/other")], epoch=1)
        assert other[0].seq == 1  # epochs are per key

    async def test_a_second_writer_fences_the_first(self, logs: LogFactory) -> None:
        first = await logs.open(writer_id="ns-shard-0")
        await first.append(NS, [assigned(0), assigned(1)], epoch=1)
        second = await logs.open(writer_id="ns-shard-0")
        taken = await second.append(NS, [assigned(2)], epoch=2)
        assert taken[0].seq == 3
        with pytest.raises(WriterFenced):
            await first.append(NS, [assigned(3)], epoch=1)
        reader = await logs.open(writer_id="reader")
        records = (await reader.read()).records
        assert [(r.seq, r.envelope.epoch) for r in records] == [(1, 1), (2, 1), (3, 2)]

    async def test_a_wrong_expected_seq_is_refused(self, logs: LogFactory) -> None:
        log = await logs.open()
        await log.append(NS, [assigned(0)], epoch=1, expected_seq=0)
        with pytest.raises(StateConflict):
            await log.append(NS, [assigned(1)], epoch=1, expected_seq=0)
        await log.append(NS, [assigned(1)], epoch=1, expected_seq=1)
        assert [r.seq for r in (await log.read()).records] == [1, 2]

    async def test_a_compare_and_set_sees_what_another_writer_appended(self, logs: LogFactory) -> None:
        # The leader expires a broker with a compare-and-set at the broker's last seq it folded;
        # reports the broker wrote since (another writer, another producer) must refuse it, not
        # let it land beside them with a seq already taken.
        leader = await logs.open(writer_id="leader")
        broker = await logs.open(writer_id="broker-1")
        expiry = [BrokerLeft(broker_id="broker-1", reason="expired")]
        with pytest.raises(StateConflict):  # the leader's handle has now read that partition
            await leader.append("broker-1", expiry, epoch=1, expected_seq=5)
        for _ in range(2):
            await broker.append("broker-1", [BrokerLeft(broker_id="broker-1", reason="graceful")], epoch=1)
        with pytest.raises(StateConflict):  # a lagging leader folded nothing of the broker's
            await leader.append("broker-1", expiry, epoch=1, expected_seq=0)
        await leader.append("broker-1", expiry, epoch=1, expected_seq=2)
        reader = await logs.open(writer_id="reader")
        records = [r for r in (await reader.read()).records if r.key == "broker-1"]
        assert [(r.seq, r.envelope.payload["reason"]) for r in records] == [
            (1, "graceful"), (2, "graceful"), (3, "expired")]

    async def test_bad_entries_become_dead_letters_and_reading_goes_on(self, logs: LogFactory) -> None:
        log = await logs.open()
        await log.append(NS, [assigned(0)], epoch=1)
        bad = {
            b"\xc1garbage": "corrupt",
            raw_envelope("BundleTeleported", 1, {"bundle": "x"}): "unknown_type",
            raw_envelope("BundleOwned", 7, {"bundle": "x", "owner": "b"}): "future_version",
            raw_envelope("BundleOwned", 1, {"bundle": "x"}): "missing_fields",
            msgpack.packb([1, 2, 3]): "bad_envelope",
        }
        await log.append_raw(NS, list(bad))
        await log.append(NS, [BundleOwned(bundle=f"{NS}/0x00000000_0x00000001", owner="broker-0")], epoch=1)
        items = (await log.read()).items
        letters = [i for i in items if isinstance(i, DeadLetter)]
        assert [(d.raw, d.reason) for d in letters] == list(bad.items())
        assert all(d.error for d in letters)
        assert [r.seq for r in items if isinstance(r, Record)] == [1, 2]
        listed = await log.dead_letters()
        assert [(d.partition, d.offset) for d in listed] == [(d.partition, d.offset) for d in letters]

    async def test_an_old_version_is_read_through_its_upcaster(self, logs: LogFactory) -> None:
        log = await logs.open()
        await log.append_raw("broker-1", [raw_envelope("BrokerLeft", 1, {"broker_id": "broker-1", "expired": True})])
        (record,) = (await log.read()).records
        assert record.envelope.version == BrokerLeft.VERSION
        assert record.message == BrokerLeft(broker_id="broker-1", reason="expired")

    async def test_a_100k_event_round_trip_gives_back_what_was_written(self, logs: LogFactory) -> None:
        log = await logs.open()
        written: dict[str, list[Envelope]] = defaultdict(list)
        keys = [f"t/ns{k}" for k in range(10)]
        for batch in range(100):
            key = keys[batch % 10]
            records = await log.append(key, [assigned(batch * 1000 + i, key) for i in range(1000)], epoch=1)
            written[key].extend(r.envelope for r in records)
        result = await log.read()
        assert len(result.items) == 100_000
        assert by_key(result.items) == written
        await log.append(keys[0], [LeaderElected(leader_id="b", epoch=1)], epoch=1)
        assert len((await log.read(result.next)).records) == 1

    async def test_a_log_founded_by_one_cluster_is_refused_by_another_by_name(self, logs: LogFactory) -> None:
        east = await logs.open(cluster_id="east")
        await east.append(NS, [assigned(1)], epoch=1)
        with pytest.raises(ForeignCluster, match=r"belongs to cluster 'east'.*not to cluster 'west'"):
            west = await logs.open(writer_id="writer-2", cluster_id="west")
            await west.append(NS, [assigned(2)], epoch=1)
        again = await logs.open(writer_id="writer-3", cluster_id="east")
        await again.append(NS, [assigned(3)], epoch=1)
        stamped = [r.envelope.cluster_id for r in (await again.read()).records]
        assert stamped == ["east", "east"]  # nothing of the refused cluster reached the log
