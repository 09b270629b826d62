"""Retention under a running Ray cluster: a connect after it sees what a fold
from offset 0 sees.

What a user notices: `Cluster.connect` (what every `lbctl` verb and the web service use) on an
embedded log whose first segments were dropped restores its view from the client's snapshot
and folds the rest, and the brokers, owners, leader and load reports it shows are exactly those
of a view folded from offset 0 of the same records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.api import Cluster
from actors.client import ClientView
from actors.retention import holders, retain
from actors.snapshots import SnapshotPolicy
from events.log.local import LocalEventLog
from events.log.memory import MemoryEventLog
from events.log.port import Record
from tests.integration.ray_scenarios import QUIET, SETTINGS, bundles, topic_in, unique, workload
from tests.integration.test_log_retention_readers import _client_state

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]


async def _covering(reader: LocalEventLog, records: list[Record], view: ClientView) -> list[Record]:
    """``records`` extended until they reach the view's position; those before it."""
    while (records[-1].offset + 1 if records else 0) < view.cursor.position.get(0, 0):
        records = [*records, *(await reader.read({0: records[-1].offset + 1})).records]
    return [r for r in records if r.offset < view.cursor.position.get(0, 0)]


async def test_a_connect_after_retention_shows_what_a_fold_from_offset_0_shows(
        ray_session: Any, tmp_path: Path) -> None:
    load = workload(["public/r"], topics=40)
    log_dir = tmp_path / "log"
    async with Cluster.start(brokers=2, workload=load, settings=SETTINGS, overrides=QUIET,
                             log_dir=log_dir, segment_bytes=8_000,
                             ray_namespace=unique("test-retain")) as cluster:
        await cluster.create_namespace("public/r", bundles=8)
        for bundle in bundles(cluster, "public/r"):
            await cluster.lookup(topic_in(load, bundle))
        first = await Cluster.connect(log_dir=log_dir)
        first.view.snapshot_policy = SnapshotPolicy(min_records=1, per_state=0.0)  # write one now
        await cluster.sleep(3_000)
        await first.catch_up()
        await first.close()

        reader = LocalEventLog(log_dir, fsync=False)
        before = (await reader.read()).records
        # The bodies write their first snapshot after 10,000 records, so each holds the floor at
        # 0: the operator leaves them out here (this test is about the client's view).
        bodies = [h.reader for h in holders(log_dir, reader.store) if h.reader != "snapshot:client"]
        assert bodies and all(h.offset == 0 for h in holders(log_dir, reader.store) if h.reader in bodies)
        report = retain(log_dir, apply=True, ignore=bodies)
        assert report.dropped and report.held_by()[0].reader == "snapshot:client"
        assert 0 < report.start <= report.floor

        again = await Cluster.connect(log_dir=log_dir)
        try:
            taken, _ = again.view.started
            assert taken >= report.floor > 0  # restored from the client's newest snapshot, not offset 0
            records = await _covering(reader, before, again.view)
            scratch = ClientView(cluster.config, MemoryEventLog())
            scratch.take(records)
            assert _client_state(again.view) == _client_state(scratch)
            assert again.ownership().state_equals(scratch.ownership)
            assert {row.bundle for row in again.bundles("public/r")} == set(bundles(cluster, "public/r"))
        finally:
            await again.close()
            await reader.close()
