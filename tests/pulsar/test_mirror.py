"""``lbctl attach`` against real Pulsar 4.0.7 brokers (the session's ``pulsar_cluster``).

What a user would notice: the mirror's owner of every bundle is Pulsar's own lookup; an unload
with a destination done through Pulsar's admin shows both brokers in the log and in ``lbctl
explain``; a SIGKILLed broker's bundles are taken over by force and the broker leaves; the attach
process SIGKILLed and started again repeats no record and skips none; the audit of the mirrored
log finds no violation and what-if runs on it; the modular manager is mirrored through REST.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import pytest

from actors.api import Cluster
from actors.cluster.kept import open_kept
from attach.channel import CHANNEL_TOPIC, ChannelTranslator, SourceMessage
from attach.mirror import Mirror
from attach.positions import Position, parse_causation
from attach.source import PulsarSource, boundaries_of
from balancer.bundles import HashRange, topic_hash
from events.catalog import BundleAssigned, BundleOwned, LoadReported, TransferPrepared
from events.log.local import LocalEventLog
from events.log.port import Record
from lbctl.admin_http import AdminHttp

if TYPE_CHECKING:
    from tests.pulsar_server import PulsarCluster

pytestmark = [pytest.mark.pulsar, pytest.mark.timeout(600)]
LBCTL = [sys.executable, "-m", "lbctl"]


# -- helpers ---------------------------------------------------------------------------------

def topic_in(namespace: str, bundle_range: str) -> str:
    """A topic of ``namespace`` whose hash falls in ``bundle_range``."""
    span = HashRange.parse(bundle_range)
    for i in range(100_000):
        topic = f"persistent://{namespace}/mirror-{i}"
        if topic_hash(topic) in span:
            return topic
    raise AssertionError(f"no topic name hashes into {bundle_range}")


def pulsar_lookup(cluster: PulsarCluster, topic: str) -> str:
    status, body = cluster.admin("GET", f"/lookup/v2/topic/{topic.replace('://', '/')}")
    assert status == 200, f"lookup {topic}: HTTP {status} {body}"
    return urlparse(body["httpUrl"]).netloc


def ranges(cluster: PulsarCluster, namespace: str) -> list[str]:
    status, body = cluster.admin("GET", f"/admin/v2/namespaces/{namespace}/bundles")
    assert status == 200, body
    edges = boundaries_of(body, namespace)
    return [HashRange(a, b).name for a, b in itertools.pairwise(edges)]


async def mirrored(cluster: PulsarCluster, directory: Path, until: Callable[[Mirror], bool], *,
                   timeout_s: float = 90.0) -> Mirror:
    """A mirror of ``cluster`` into ``directory`` that cycled until ``until`` held (then closed)."""
    mirror = Mirror(directory, PulsarSource(AdminHttp(cluster.web_url)), poll_s=0.5)
    await mirror.open()
    try:
        deadline = time.monotonic() + timeout_s
        while not until(mirror):
            assert time.monotonic() < deadline, f"the mirror did not get there: {mirror.status}"
            await mirror.cycle()
    finally:
        await mirror.close()
    return mirror


def owner_in(mirror: Mirror, bundle: str) -> str | None:
    assert mirror.view is not None
    return mirror.view.ownership.owners().get(bundle)


async def records_of(directory: Path) -> list[Record]:
    log = LocalEventLog(directory / "log")
    try:
        result = await log.read()
        assert result.dead_letters == []
        return result.records
    finally:
        await log.close()


def lbctl(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*LBCTL, *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert done.returncode == 0, f"lbctl {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def looked_up(cluster: PulsarCluster, namespace: str) -> dict[str, str]:
    """Look up one topic per bundle through Pulsar (which assigns them); bundle -> owner."""
    return {f"{namespace}/{r}": pulsar_lookup(cluster, topic_in(namespace, r)) for r in ranges(cluster, namespace)}


def transfer(cluster: PulsarCluster, bundle: str, to: str) -> None:
    namespace, _, name = bundle.rpartition("/")
    status, body = cluster.admin("PUT", f"/admin/v2/namespaces/{namespace}/{name}/unload?destinationBroker={to}")
    assert status in (200, 204), f"unload {bundle} to {to}: HTTP {status} {body}"


# -- the extensible manager ------------------------------------------------------------------

async def test_the_mirrors_owner_of_every_bundle_is_pulsars_lookup(
        pulsar_cluster: PulsarCluster, new_namespace: Any, tmp_path: Path) -> None:
    namespace = new_namespace(pulsar_cluster, 8)
    owners = looked_up(pulsar_cluster, namespace)
    mirror = await mirrored(pulsar_cluster, tmp_path, lambda m: all(owner_in(m, b) for b in owners))
    assert {b: owner_in(mirror, b) for b in owners} == owners
    # Every verb reads the directory: the lookup is answered from the mirror, as Pulsar answers it.
    cluster = Cluster(await open_kept(tmp_path))
    try:
        for bundle, owner in owners.items():
            assert cluster.owner_of(topic_in(namespace, bundle.rpartition("/")[2])) == owner
    finally:
        await cluster.close()
    topic = topic_in(namespace, next(iter(owners)).rpartition("/")[2])
    done = lbctl("topics", "lookup", topic, "--state-dir", str(tmp_path))
    assert owners[next(iter(owners))] in done.stdout
    # A bundle no broker owns is not placed by the mirror: it says Pulsar would place it.
    other = new_namespace(pulsar_cluster, 16)
    first, *rest = ranges(pulsar_cluster, other)
    pulsar_lookup(pulsar_cluster, topic_in(other, first))
    seen = await mirrored(pulsar_cluster, tmp_path, lambda m: owner_in(m, f"{other}/{first}") is not None)
    unowned = next(r for r in rest if owner_in(seen, f"{other}/{r}") is None)
    refused = lbctl("topics", "lookup", topic_in(other, unowned), "--state-dir", str(tmp_path), check=False)
    assert refused.returncode == 2 and "Pulsar places a bundle on its own lookup" in refused.stderr
    changed = lbctl("namespaces", "unload", other, "--state-dir", str(tmp_path), check=False)
    assert changed.returncode == 2 and "mirrored from Pulsar" in changed.stderr


async def test_an_unload_with_destination_through_pulsar_shows_both_brokers_and_is_explained(
        pulsar_cluster: PulsarCluster, new_namespace: Any, tmp_path: Path) -> None:
    namespace = new_namespace(pulsar_cluster, 2)
    owners = looked_up(pulsar_cluster, namespace)
    bundle, src = next(iter(owners.items()))
    dst = next(b for b in pulsar_cluster.broker_ids if b != src)
    await mirrored(pulsar_cluster, tmp_path, lambda m: owner_in(m, bundle) == src)
    transfer(pulsar_cluster, bundle, dst)
    await mirrored(pulsar_cluster, tmp_path, lambda m: owner_in(m, bundle) == dst)
    moves = [r.envelope for r in await records_of(tmp_path)
             if isinstance(r.envelope.typed, TransferPrepared) and r.envelope.typed.bundle == bundle]
    assert [(m.typed.src, m.typed.dst) for m in moves] == [(src, dst)]  # type: ignore[attr-defined]
    found = parse_causation(moves[0].causation_id)
    assert found is not None and found[0] == CHANNEL_TOPIC
    explained = lbctl("explain", bundle, "--state-dir", str(tmp_path)).stdout
    assert f"{src} -> {dst}" in explained and "transfer" in explained and "made by Pulsar itself" in explained


async def test_a_sigkilled_brokers_bundles_are_taken_over_by_force_and_it_leaves(
        pulsar_cluster: PulsarCluster, new_namespace: Any, tmp_path: Path) -> None:
    doomed = pulsar_cluster.start_broker()  # a broker of this test's own, killed below
    index = pulsar_cluster.broker_ids.index(doomed)
    namespace = new_namespace(pulsar_cluster, 2)
    owners = looked_up(pulsar_cluster, namespace)
    bundles = list(owners)
    for bundle, owner in owners.items():
        if owner != doomed:
            transfer(pulsar_cluster, bundle, doomed)
    await mirrored(pulsar_cluster, tmp_path, lambda m: all(owner_in(m, b) == doomed for b in bundles))
    pulsar_cluster.kill_broker(index)
    mirror = await mirrored(pulsar_cluster, tmp_path, timeout_s=180, until=lambda m: doomed not in m.members.brokers
                            and all(owner_in(m, b) not in (None, doomed) for b in bundles))
    assert mirror.view is not None and doomed not in mirror.view.brokers
    records = await records_of(tmp_path)
    forced = {r.envelope.typed.bundle for r in records if isinstance(r.envelope.typed, BundleAssigned)
              and r.envelope.typed.force and r.envelope.typed.reason == "orphan"}
    assert set(bundles) <= forced
    left = [r.envelope.typed for r in records if r.envelope.type == "BrokerLeft"]
    assert any(e.broker_id == doomed and e.reason == "expired" for e in left)  # type: ignore[attr-defined]


def test_attach_killed_and_started_again_repeats_no_record_and_skips_none(
        pulsar_cluster: PulsarCluster, new_namespace: Any, tmp_path: Path) -> None:
    namespace = new_namespace(pulsar_cluster, 4)
    owners = looked_up(pulsar_cluster, namespace)
    a, b = pulsar_cluster.broker_ids[:2]
    process = subprocess.Popen([*LBCTL, "attach", pulsar_cluster.web_url, "--state-dir", str(tmp_path),
                                "--plain", "--poll-s", "0.5"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    try:
        _wait_for_log(tmp_path, lambda rs: any(r.envelope.type == "BundleOwned" and
                                               r.envelope.key == namespace for r in rs))
        where = dict(owners)
        for _ in range(3):
            for bundle, now in where.items():
                where[bundle] = b if now == a else a
                transfer(pulsar_cluster, bundle, where[bundle])
        os.killpg(process.pid, signal.SIGKILL)  # mid-stream: some transfers are still being read
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    for bundle, now in where.items():
        if now != b:
            transfer(pulsar_cluster, bundle, b)
    lbctl("attach", pulsar_cluster.web_url, "--state-dir", str(tmp_path), "--minutes", "0.25", "--plain")
    records = asyncio.run(records_of(tmp_path))
    # No duplicate: each channel message's records are one append (consecutive seqs of one key).
    runs: dict[str, list[Record]] = {}
    for record in records:
        found = parse_causation(record.envelope.causation_id)
        if found is not None and found[0] == CHANNEL_TOPIC:
            runs.setdefault(record.envelope.causation_id or "", []).append(record)
    for cause, group in runs.items():
        offsets = [r.offset for r in group]
        assert offsets == list(range(offsets[0], offsets[0] + len(group))), f"{cause} appended twice"
    # No gap: every message of this namespace that Pulsar's channel still holds, and that a fresh
    # translation of the channel turns into records, is in the log (Pulsar compacts its channel,
    # so the check reads it again now, and counts the messages of this test's namespace).
    mirrored_positions = {parse_causation(c)[1] for c in runs}  # type: ignore[index]
    expected = _translated_positions(pulsar_cluster, namespace)
    assert expected and expected - mirrored_positions == set()
    # And the view folded from the log is Pulsar's.
    async def owners_now() -> dict[str, str | None]:
        cluster = Cluster(await open_kept(tmp_path))
        try:
            return {bundle: cluster.ownership().owner(bundle) for bundle in owners}
        finally:
            await cluster.close()

    assert asyncio.run(owners_now()) == dict.fromkeys(owners, b)
    # The audit of the mirrored log finds no violation, and what-if runs on it.
    audit = lbctl("replay", "audit", str(tmp_path / "log"), timeout=600)
    assert "0 violation" in audit.stdout or "no violation" in audit.stdout.lower(), audit.stdout
    lbctl("replay", "whatif", str(tmp_path / "log"), "--strategy", "TransferShedder", timeout=600)


def _wait_for_log(directory: Path, until: Callable[[list[Record]], bool], timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (directory / "log").is_dir() and until(asyncio.run(records_of(directory))):
            return
        time.sleep(0.3)
    raise AssertionError("the mirror wrote nothing in time")


def _translated_positions(cluster: PulsarCluster, namespace: str) -> set[Position]:
    """The positions of ``namespace``'s channel messages a fresh translation turns into records."""
    source = PulsarSource(AdminHttp(cluster.web_url))
    try:
        source.discover_cluster()
        source.open_readers(None, loads=False)
        messages: list[SourceMessage] = []
        while batch := source.read(CHANNEL_TOPIC, 10_000, 2_000):
            messages.extend(batch)
        translator = ChannelTranslator()
        for namespace in translator.missing_namespaces(messages):
            translator.add_namespace(namespace, source.boundaries(namespace), messages)
        return {m.position for m in messages
                if translator.translate(m) and m.key.rpartition("/")[0] == namespace}
    finally:
        source.close()


# -- the modular manager ---------------------------------------------------------------------

async def test_the_modular_manager_is_mirrored_through_rest(
        pulsar_modular_cluster: PulsarCluster, new_namespace: Any, tmp_path: Path) -> None:
    cluster = pulsar_modular_cluster
    namespace = new_namespace(cluster, 4)
    owners = looked_up(cluster, namespace)
    broker = cluster.broker_ids[0]
    mirror = await mirrored(cluster, tmp_path, lambda m: all(owner_in(m, b) for b in owners)
                            and m.view is not None and broker in m.view.reports)
    assert mirror.manager == "modular"
    assert {b: owner_in(mirror, b) for b in owners} == owners
    bundle = next(iter(owners))
    status, body = cluster.admin("PUT", f"/admin/v2/namespaces/{namespace}/{bundle.rpartition('/')[2]}/unload")
    assert status in (200, 204), body
    await mirrored(cluster, tmp_path, lambda m: owner_in(m, bundle) is None)
    records = await records_of(tmp_path)
    assert any(isinstance(r.envelope.typed, LoadReported) and r.envelope.key == broker for r in records)
    assert any(isinstance(r.envelope.typed, BundleOwned) and r.envelope.typed.bundle == bundle for r in records)
    spec = json.loads((tmp_path / "cluster.json").read_text())
    assert (spec["host"], spec["pulsar_manager"]) == ("pulsar", "modular")


def test_attach_serves_the_dashboard_and_metrics_and_stops_cleanly_on_sigterm(
        pulsar_cluster: PulsarCluster, new_namespace: Any, tmp_path: Path) -> None:
    namespace = new_namespace(pulsar_cluster, 2)
    owners = looked_up(pulsar_cluster, namespace)
    process = subprocess.Popen([*LBCTL, "attach", pulsar_cluster.web_url, "--state-dir", str(tmp_path),
                                "--plain", "--web-service-port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        url = ""
        for line in process.stdout:
            if line.startswith("web service: "):
                url = line.split()[2]
                break
        assert url, "attach printed no web service URL"
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
            assert "bb_" in answer.read().decode()
        with urllib.request.urlopen(f"{url}/", timeout=10) as answer:
            assert answer.status == 200
        deadline = time.monotonic() + 60
        while True:  # the service's admin API answers from the mirror: Pulsar's brokers
            listed = lbctl("--admin-url", url, "brokers", "list", check=False).stdout
            if all(b in listed for b in pulsar_cluster.broker_ids[:2]):
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.5)
        spec = json.loads((tmp_path / "cluster.json").read_text())
        assert spec["web_service_url"] == url
        process.send_signal(signal.SIGTERM)
        rest = process.communicate(timeout=60)[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0 and "stopped:" in rest, f"exit {process.returncode}: {rest[-3000:]}"
    assert json.loads((tmp_path / "cluster.json").read_text())["web_service_url"] is None
    assert set(owners) <= {r.envelope.typed.bundle for r in asyncio.run(records_of(tmp_path))  # type: ignore[attr-defined]
                           if isinstance(r.envelope.typed, BundleOwned)}
