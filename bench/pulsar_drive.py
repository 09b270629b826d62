"""Benchmark P3: drive mode on a real Pulsar 4.0.7 cluster, from a decision to Owned at the
destination in Pulsar's ownership channel (p50/p99), beside Pulsar's own unload latency
(``brk_lb_unload_latency_ms`` from the brokers' ``/metrics``) in the same run.

Each round: a new namespace of 16 bundles, Zipf traffic on 16 topics (``bench.pulsar_traffic``),
every bundle first unloaded onto broker 0 (Pulsar's own unloads with a destination), then
``lbctl attach URL --mode drive`` for a few minutes on a fresh state directory, with
UniformLoadShedder (message rates and throughput: on one machine Pulsar reports no NIC speed, so
usage-based strategies see 0) deciding every 5 s, at most 1 execution per cycle and 12 a minute.
Ours: decision (the proposal's ``run_ms``) to the channel's Owned at the destination, and request
to Owned, per confirmed execution. Pulsar's: the change of its histogram over the drive phase
only (the setup's unloads are left out), summed over the brokers: count, mean, and p50/p99 as
the bucket bounds Pulsar's histogram has (1, 10, 100, 200, 1000 ms).

    python -m bench.pulsar_drive [--quick] [--json PATH] [--web-url URL --service-url URL]

Without URLs it starts the test cluster (tests.pulsar_server: 2 brokers, extensible manager,
Pulsar's own shedding off) and kills it at the end; a given cluster must have shedding off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attach.pulsar_admin import PulsarAdmin
from attach.report import executions
from balancer.bundles import namespace_of
from bench.pulsar_traffic import TrafficPlan, run_traffic
from events.log.local import LocalEventLog
from events.log.port import Record
from lbctl.admin_http import AdminHttp

CONF = """\
loadBalancerLoadSheddingStrategy=UniformLoadShedder
minUnloadMessage=10
minUnloadMessageThroughput=10000
loadBalancerMsgRateDifferenceShedderThreshold=10
loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold=1.2
attachDecisionIntervalSeconds=5
attachDriveMaxExecutionsPerCycle=1
attachDriveMaxExecutionsPerMinute=12
attachDriveExecutionTimeoutSeconds=30
"""
METRIC = "brk_lb_unload_latency_ms"
_SAMPLE = re.compile(r'^(\w+)\{([^}]*)\}\s+([-+0-9.eEInfa]+)$')


@dataclass
class Cluster:
    web_urls: list[str]
    broker_ids: list[str]
    service_url: str
    name: str

    def admin(self) -> PulsarAdmin:
        return PulsarAdmin(AdminHttp(self.web_urls[0]))


@dataclass
class Histogram:
    """One histogram of Pulsar's, summed over brokers: upper bound -> cumulative count."""

    buckets: dict[float, float] = field(default_factory=dict)
    count: float = 0.0
    total: float = 0.0

    def minus(self, earlier: Histogram) -> Histogram:
        return Histogram({le: n - earlier.buckets.get(le, 0.0) for le, n in self.buckets.items()},
                         self.count - earlier.count, self.total - earlier.total)

    def quantile(self, q: float) -> float | None:
        """The upper bound of the bucket that holds the q-quantile (None: no sample)."""
        if self.count <= 0:
            return None
        wanted = q * self.count
        return next((le for le, n in sorted(self.buckets.items()) if n >= wanted), math.inf)


def scrape(cluster: Cluster) -> Histogram:
    """Pulsar's unload latency histogram, summed over every broker's ``/metrics``."""
    out = Histogram()
    for url in cluster.web_urls:
        with urllib.request.urlopen(url.rstrip("/") + "/metrics/", timeout=30) as reply:
            text = reply.read().decode()
        for line in text.splitlines():
            found = _SAMPLE.match(line.strip())
            if found is None or not found[1].startswith(METRIC):
                continue
            name, labels, value = found[1], found[2], float(found[3])
            if name == f"{METRIC}_bucket":
                le = float(re.search(r'le="([^"]+)"', labels)[1])  # type: ignore[index]
                out.buckets[le] = out.buckets.get(le, 0.0) + value
            elif name == f"{METRIC}_count":
                out.count += value
            elif name == f"{METRIC}_sum":
                out.total += value
    return out


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def owners(cluster: Cluster, namespace: str) -> dict[str, str]:
    admin = cluster.admin()
    out: dict[str, str] = {}
    for broker in cluster.broker_ids:
        for name in admin.get_json(f"/admin/v2/brokers/{cluster.name}/{broker}/ownedNamespaces") or {}:
            if namespace_of(name) == namespace:
                out[name.rpartition("/")[2]] = broker
    return out


def skew(cluster: Cluster, namespace: str, broker: str) -> int:
    """Every owned bundle of ``namespace`` onto ``broker`` (once the traffic owns some)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not owners(cluster, namespace):
        time.sleep(1)
    time.sleep(3)
    moved = 0
    for bundle, owner in sorted(owners(cluster, namespace).items()):
        if owner != broker:
            moved += cluster.admin().unload(f"{namespace}/{bundle}", broker).ok
    return moved


@contextmanager
def traffic(cluster: Cluster, namespace: str, seconds: float) -> Iterator[None]:
    stop = threading.Event()
    plan = TrafficPlan(service_url=cluster.service_url, namespace=namespace, topics=16, rate=400.0,
                       seconds=seconds, zipf=1.2, size=1024, topic_prefix="p3")
    worker = threading.Thread(target=run_traffic, args=(plan,), kwargs={"stop": stop}, daemon=True)
    worker.start()
    try:
        yield
    finally:
        stop.set()
        worker.join(timeout=60)


def read_log(state: Path) -> list[Record]:
    async def read() -> list[Record]:
        async with LocalEventLog(state / "log", fsync=False) as log:
            return list((await log.read()).records)

    return asyncio.run(read())


def drive_round(cluster: Cluster, minutes: float, work: Path) -> tuple[list[Record], Histogram]:
    """One round; the records of its drive and Pulsar's histogram over the drive phase."""
    from lbctl.main import main

    namespace = f"public/p3-{uuid.uuid4().hex[:8]}"
    admin = cluster.admin()
    answer = admin.request("PUT", f"/admin/v2/namespaces/{namespace}", body={"bundles": {"numBundles": 16}})
    assert answer.ok, answer.message
    with traffic(cluster, namespace, minutes * 60 + 120):
        skew(cluster, namespace, cluster.broker_ids[0])
        time.sleep(10)  # Pulsar's reports follow the skew
        before = scrape(cluster)
        conf, state = work / "drive.conf", work / f"state-{namespace.rpartition('-')[2]}"
        conf.write_text(CONF)
        status = main(["attach", cluster.web_urls[0], "--state-dir", str(state), "--mode", "drive",
                       "--conf", str(conf), "--minutes", str(minutes), "--plain"])
        assert status == 0, f"lbctl attach exited {status}"
        after = scrape(cluster)
    return read_log(state), after.minus(before)


def run(cluster: Cluster, rounds: int, minutes: float) -> dict[str, Any]:
    decided: list[float] = []
    requested: list[float] = []
    outcomes: dict[str, int] = {}
    pulsar = Histogram()
    with tempfile.TemporaryDirectory(prefix="bench-p3-") as tmp:
        for _ in range(rounds):
            records, histogram = drive_round(cluster, minutes, Path(tmp))
            pulsar = Histogram({le: pulsar.buckets.get(le, 0.0) + n for le, n in histogram.buckets.items()},
                               pulsar.count + histogram.count, pulsar.total + histogram.total)
            for row in executions(records):
                outcomes[row.outcome or "open"] = outcomes.get(row.outcome or "open", 0) + 1
                if row.owned_ms is not None:
                    decided.append(float(row.owned_ms - row.decided_ms))
                    requested.append(float(row.owned_ms - row.requested_ms))
    p99, pulsar_p99 = percentile(decided, 0.99), pulsar.quantile(0.99)
    return {"id": "P3", "rounds": rounds, "minutes": minutes, "executions": sum(outcomes.values()),
            "outcomes": outcomes, "confirmed": len(decided),
            "decision_to_owned_p50_ms": percentile(decided, 0.5), "decision_to_owned_p99_ms": p99,
            "request_to_owned_p50_ms": percentile(requested, 0.5),
            "request_to_owned_p99_ms": percentile(requested, 0.99),
            "pulsar_unloads": pulsar.count,
            "pulsar_unload_mean_ms": pulsar.total / pulsar.count if pulsar.count else None,
            "pulsar_unload_p50_bucket_ms": pulsar.quantile(0.5), "pulsar_unload_p99_bucket_ms": pulsar_p99,
            "p99_over_pulsar_p99": (p99 / pulsar_p99 if p99 is not None and pulsar_p99 else None)}


def render(row: dict[str, Any]) -> str:
    def ms(value: Any) -> str:
        return "-" if value is None else f"{value:.0f} ms"

    return "\n".join([
        "P3 drive: a decision to Owned at the destination in Pulsar's channel",
        f"  executions {row['executions']} {row['outcomes']}, confirmed {row['confirmed']} "
        f"({row['rounds']} round(s) of {row['minutes']:g} min)",
        f"  ours: decision -> Owned p50 {ms(row['decision_to_owned_p50_ms'])}, p99 "
        f"{ms(row['decision_to_owned_p99_ms'])}; request -> Owned p50 {ms(row['request_to_owned_p50_ms'])}, "
        f"p99 {ms(row['request_to_owned_p99_ms'])}",
        f"  Pulsar's own {METRIC} in the same phases: {row['pulsar_unloads']:.0f} unloads, mean "
        f"{ms(row['pulsar_unload_mean_ms'])}, p50 <= {ms(row['pulsar_unload_p50_bucket_ms'])}, "
        f"p99 <= {ms(row['pulsar_unload_p99_bucket_ms'])} (its bucket bounds)",
        "  ratio: our p99 / Pulsar's p99 bound = "
        + ("-" if row["p99_over_pulsar_p99"] is None else f"{row['p99_over_pulsar_p99']:.2f}")])


@contextmanager
def cluster_for(web_url: str | None, service_url: str | None) -> Iterator[Cluster]:
    """The cluster given, or the test cluster started here and killed at the end."""
    if web_url is not None and service_url is not None:
        admin = PulsarAdmin(AdminHttp(web_url))
        name = (admin.get_json("/admin/v2/clusters") or ["standalone"])[0]
        brokers = list(admin.get_json(f"/admin/v2/brokers/{name}") or [])
        yield Cluster([f"http://{b}" for b in brokers], brokers, service_url, str(name))
        return
    from tests.pulsar_server import PulsarCluster

    with PulsarCluster(brokers=2, load_manager="extensible", shedding=False) as started:
        yield Cluster(started.web_urls, started.broker_ids, started.service_url, started.cluster_name)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="one round of 1.5 minutes (full: 3 of 2)")
    parser.add_argument("--json", metavar="PATH", help="also write the row as JSON")
    parser.add_argument("--web-url", default=None, help="a running cluster's web service (shedding off)")
    parser.add_argument("--service-url", default=None, help="its pulsar:// URL")
    args = parser.parse_args(argv)
    rounds, minutes = (1, 1.5) if args.quick else (3, 2.0)
    with cluster_for(args.web_url, args.service_url) as cluster:
        row = run(cluster, rounds, minutes)
    print(render(row))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": [row]}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
