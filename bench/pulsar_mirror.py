"""Benchmarks P1 and P2 of ``lbctl attach`` on a real Pulsar (table P of docs/benchmarks.md).

    .venv/bin/python -m bench.pulsar_mirror [--url http://127.0.0.1:PORT] [--transitions 10000]
                                            [--bundles 1024] [--workers 8]

Without ``--url`` it starts the test cluster of ``tests/pulsar_server.py`` (2 brokers, the
extensible manager; a repository checkout with ``make pulsar-server-jars``) and kills it at the
end. Then, on a namespace of ``--bundles`` bundles of its own:

- **P1, mirror lag.** A mirror runs live while every bundle is looked up (assigned), some are
  split, and all are unloaded to the other broker over and over through Pulsar's admin, until the
  channel holds ``--transitions`` records of the namespace. The lag of a record is the wall time
  at which its events were committed and folded, minus Pulsar's time of the record (its
  ``timestamp``; one machine, one clock): p50 and p99 over every record written live.
- **P2, catch-up.** A second mirror starts on an empty state directory and reads the whole
  channel from its first message, every message (not Pulsar's compacted view, which keeps one
  record per bundle): channel messages read per second until it holds them all.

Invariants: it only measures (nothing is asserted); every figure comes from one run on one
machine, with the ratio to its target printed beside it; what it started it kills.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from attach.channel import CHANNEL_TOPIC
from attach.mirror import Cycle, Mirror
from attach.positions import parse_causation
from attach.source import PulsarSource, boundaries_of
from balancer.bundles import HashRange, topic_hash
from lbctl.admin_http import AdminHttp

P1_TARGET_MS = 1_000
P2_TARGET = 5_000.0

Call = Callable[[str, str], tuple[int, Any]]


def _topic_in(namespace: str, span: HashRange) -> str:
    for i in itertools.count():
        topic = f"persistent://{namespace}/bench-{i}"
        if topic_hash(topic) in span:
            return topic
    raise AssertionError("unreachable")


class Load:
    """Transitions on one namespace through Pulsar's admin, from worker threads, until stopped."""

    def __init__(self, call: Call, namespace: str, brokers: list[str], workers: int) -> None:
        self.call, self.namespace, self.brokers, self.workers = call, namespace, brokers, workers
        self.stop = threading.Event()
        self.done = 0

    def ranges(self) -> list[HashRange]:
        status, body = self.call("GET", f"/admin/v2/namespaces/{self.namespace}/bundles")
        edges = boundaries_of(body, self.namespace) if status == 200 else []
        return [HashRange(a, b) for a, b in itertools.pairwise(edges)]

    def run(self, splits: int) -> None:
        with ThreadPoolExecutor(self.workers) as pool:
            list(pool.map(self._lookup, self.ranges()))
            list(pool.map(self._split, self.ranges()[:splits]))
            for sweep in itertools.count():
                if self.stop.is_set():
                    return
                targets = [self.brokers[(sweep + i) % len(self.brokers)] for i in range(len(self.ranges()))]
                list(pool.map(self._unload, self.ranges(), targets))

    def _lookup(self, span: HashRange) -> None:
        topic = _topic_in(self.namespace, span)
        self.call("GET", f"/lookup/v2/topic/{topic.replace('://', '/')}")

    def _split(self, span: HashRange) -> None:
        self.call("PUT", f"/admin/v2/namespaces/{self.namespace}/{span.name}/split?unload=false")

    def _unload(self, span: HashRange, to: str) -> None:
        if self.stop.is_set():
            return
        status, _ = self.call("PUT", f"/admin/v2/namespaces/{self.namespace}/{span.name}/unload"
                                     f"?destinationBroker={to}")
        if status in (200, 204):
            self.done += 1


async def live_lag(url: str, namespace: str, call: Call, brokers: list[str], transitions: int,
                   workers: int, splits: int) -> tuple[list[int], int]:
    """P1: (lags in ms of the records written live, channel records of the namespace)."""
    lags: list[int] = []
    seen = 0
    started_ms = time.time_ns() // 1_000_000

    def hook(cycle: Cycle) -> None:
        nonlocal seen
        now = time.time_ns() // 1_000_000
        for record in cycle.records:
            found = parse_causation(record.envelope.causation_id)
            if found is None or found[0] != CHANNEL_TOPIC or record.envelope.key != namespace:
                continue
            seen += 1
            if record.envelope.ts_ms >= started_ms:
                lags.append(now - record.envelope.ts_ms)

    with tempfile.TemporaryDirectory(prefix="bench-mirror-") as directory:
        mirror = Mirror(Path(directory), PulsarSource(AdminHttp(url)), poll_s=1.0)
        await mirror.open()
        load = Load(call, namespace, brokers, workers)
        thread = threading.Thread(target=load.run, args=(splits,), daemon=True)
        thread.start()
        try:
            while seen < transitions:
                hook(await mirror.cycle())
                if not thread.is_alive():
                    break
        finally:
            load.stop.set()
            thread.join()
            await mirror.close()
    return lags, seen


async def catch_up(url: str) -> tuple[int, float, float]:
    """P2: (channel messages read, seconds, seconds after ``open``) of a mirror reading the whole
    channel from empty: from the start, and from when its readers were open."""
    with tempfile.TemporaryDirectory(prefix="bench-catchup-") as directory:
        # Every transition the channel holds, not Pulsar's compacted view of it.
        mirror = Mirror(Path(directory), PulsarSource(AdminHttp(url)), poll_s=60.0, compacted=False)
        began = time.perf_counter()
        await mirror.open()
        opened = time.perf_counter()
        quiet = 0
        last = time.perf_counter()
        while quiet < 3:
            before = mirror.status.channel
            await mirror.cycle()
            if mirror.status.channel == before:
                quiet += 1
            else:
                quiet, last = 0, time.perf_counter()
        await mirror.close()
        return mirror.status.channel, last - began, last - opened


def _percentile(values: list[int], share: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pulsar_mirror", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=None, help="a running Pulsar's web service (default: start one)")
    parser.add_argument("--transitions", type=int, default=10_000)
    parser.add_argument("--bundles", type=int, default=1_024)
    parser.add_argument("--splits", type=int, default=64, help="bundles split once before the unloads")
    parser.add_argument("--workers", type=int, default=4, help="admin calls in flight")
    args = parser.parse_args(argv)
    cluster: Any = None
    if args.url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from tests.pulsar_server import PulsarCluster

        cluster = PulsarCluster(brokers=2, load_manager="extensible", shedding=False)
        cluster.start()
        print(f"started a 2-broker Pulsar in {cluster.start_seconds:.1f} s", flush=True)
    try:
        url = args.url or cluster.web_url
        from tests.pulsar_server import admin_call

        def call(method: str, path: str) -> tuple[int, Any]:
            try:
                return admin_call(url, method, path)
            except (OSError, RuntimeError) as exc:  # a busy broker timed out: the load goes on
                return 0, str(exc)

        _, brokers = call("GET", "/admin/v2/brokers/" + (cluster.cluster_name if cluster else _cluster(url)))
        namespace = f"public/bench-{uuid.uuid4().hex[:8]}"
        admin_call(url, "PUT", f"/admin/v2/namespaces/{namespace}", {"bundles": {"numBundles": args.bundles}})
        lags, seen = asyncio.run(live_lag(url, namespace, call, sorted(brokers), args.transitions,
                                          args.workers, args.splits))
        p50, p99 = _percentile(lags, 0.5), _percentile(lags, 0.99)
        print(f"P1 mirror lag over {len(lags)} live records ({seen} channel records of {namespace}): "
              f"p50 {p50} ms, p99 {p99} ms (target p99 <= {P1_TARGET_MS} ms: {p99 / P1_TARGET_MS:.2f}x), "
              f"mean {statistics.fmean(lags):.0f} ms", flush=True)
        read, seconds, reading = asyncio.run(catch_up(url))
        rate, steady = read / max(seconds, 1e-9), read / max(reading, 1e-9)
        print(f"P2 catch-up: {read} channel messages in {seconds:.2f} s = {rate:,.0f} transitions/s "
              f"(target >= {P2_TARGET:,.0f}/s: {rate / P2_TARGET:.2f}x); {steady:,.0f}/s once its "
              f"readers were open ({reading:.2f} s)", flush=True)
    finally:
        if cluster is not None:
            cluster.close()
    return 0


def _cluster(url: str) -> str:
    return PulsarSource(AdminHttp(url)).discover_cluster()


if __name__ == "__main__":
    sys.exit(main())
