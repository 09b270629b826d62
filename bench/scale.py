"""Benchmarks S1-S5 (shared/bench/README.md, table S): the live system at Pulsar's sizes.

Every size runs in its own process (``--one BxN``) on the inproc host, so each peak memory (S5)
is that size's own. Figures are CPU seconds of that one process (the inproc host is one thread;
on this shared machine its wall time also counts the other engineers' load, so wall seconds are
printed beside): each row prints the same measure at the smallest size of the run and the
growth exponent between the two (log of the ratio over log of the size ratio), which is the
figure that counts.

- S1 cold start: a namespace of N bundles, about three Zipf topics per bundle; the clients look
  up every bundle at once; seconds until every bundle is Owned;
- S2 full restart: every broker crashes at once, the leader expires them all (after the session
  timeout, not timed), every broker restarts (each rebuilds from the log); seconds from the first
  restart until every broker is registered again and every bundle is Owned by one of them again:
  the expired sessions' records are void (no broker serves them), so the leader places every
  bundle anew, as Pulsar reassigns a restarted cluster's bundles;
- S3 leader failover: the leader crashes and a fresh one recovers from the log; seconds until it
  leads (caught up, deciding);
- S4 one broker's restart over 10^4..10^6 events of history, from its newest snapshot and the
  tail (snapshots written as a host writes them, ``actors.snapshots.SnapshotPolicy``); seconds,
  records folded, exponent (flat = 0), and beside it a fold from offset 0 (the restart before);
- S5 peak RSS of the process of each S1 size, MiB and MiB per 10k bundles.
S1r (Ray with real Kafka) is not run here.

``python -m bench.scale [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import resource
import subprocess
import sys
import time
import zlib
from collections.abc import Sequence
from random import Random
from typing import Any

from actors.api import Cluster
from actors.broker import BrokerBody
from actors.settings import LEADER
from actors.snapshots import DEFAULT_POLICY, BodySnapshot, MemorySnapshots
from actors.workload import Workload
from balancer.config import LoadBalancerConfig
from balancer.ownership import IN_FLIGHT, BundleState
from events.envelope import Envelope
from events.log.port import Record

NAMESPACE = "public/default"
FULL = ((10, 1024), (20, 8192), (100, 65536))
QUICK = ((10, 1024), (20, 4096))
HISTORY_FULL = (10_000, 100_000, 1_000_000)
HISTORY_QUICK = (10_000, 100_000)
STEP_MS = 100


def exponent(small: float, large: float, size_small: float, size_large: float) -> float:
    """Growth exponent of a measure between two sizes (1 = linear, 0 = flat)."""
    if small <= 0 or large <= 0 or size_large == size_small:
        return math.nan
    return math.log(large / small) / math.log(size_large / size_small)


async def _cluster(brokers: int, bundles: int, seed: int = 0) -> Cluster:
    workload = Workload.zipf(Random(seed), [NAMESPACE], topics_per_namespace=3 * bundles,
                             total_msg_rate=120_000.0)
    # An operator's namespace of this size: the cap on an admin's numBundles must allow it.
    config = LoadBalancerConfig().with_overrides({"loadBalancerNamespaceMaximumBundles": max(128, bundles)})
    cluster = await Cluster.start(config, brokers, host="inproc", seed=seed,
                                  workload=workload, clients=True)
    await cluster.wait_ready(brokers)
    await cluster.create_namespace(NAMESPACE, bundles)
    return cluster


def all_owned(cluster: Cluster, bundles: int) -> bool:
    """Every bundle has a record, none is in flight or Free (indexes: no walk), and none is
    void: a record of a broker's expired session is served by no one until the leader places
    the bundle again, so a full restart ends when those placements did too."""
    view = cluster.view
    if len(view.ownership.records) < bundles or view.by_broker.in_state(BundleState.FREE) or view.voided:
        return False
    return not any(view.by_broker.in_state(state) for state in IN_FLIGHT)


def records(cluster: Cluster) -> int:
    """Records the client's view has folded (the log's length on the one-partition inproc log)."""
    return sum(cluster.view.cursor.position.values())


class Timer:
    """CPU and wall seconds since it started."""

    def __init__(self) -> None:
        self.cpu0, self.wall0 = time.process_time(), time.perf_counter()

    def cpu(self) -> float:
        return time.process_time() - self.cpu0

    def wall(self) -> float:
        return time.perf_counter() - self.wall0


async def _until_owned(cluster: Cluster, bundles: int, max_ms: int = 600_000) -> int:
    """Simulated ms until every bundle is Owned."""
    sim0 = cluster.now_ms()
    while not all_owned(cluster, bundles):
        if cluster.now_ms() - sim0 > max_ms:
            raise RuntimeError(f"not every bundle Owned after {max_ms} simulated ms")
        await cluster.sleep(STEP_MS)
    return cluster.now_ms() - sim0


async def _leads(cluster: Cluster) -> bool:
    return bool((await cluster.statuses()).get(LEADER, {}).get("leads"))


async def one(brokers: int, bundles: int) -> dict[str, Any]:
    """S1, S2, S3 and S5 at one size (run in a process of its own), through ``Cluster``."""
    cluster = await _cluster(brokers, bundles)
    ids = [f"broker-{b}" for b in range(1, brokers + 1)]
    events0, timer = records(cluster), Timer()
    cold_sim = await _until_owned(cluster, bundles)
    cold_s, cold_wall = timer.cpu(), timer.wall()
    events = records(cluster) - events0
    for broker_id in ids:
        await cluster.kill_broker(broker_id)
    await cluster.sleep(cluster.settings.session_timeout_ms + 5_000)  # the leader expires them all
    timer = Timer()
    await cluster.add_brokers(ids, timeout_s=60)
    restart_sim = await _until_owned(cluster, bundles)
    restart_s, restart_wall = timer.cpu(), timer.wall()
    timer = Timer()
    await cluster.kill_leader(restart=True)
    while not await _leads(cluster):
        await cluster.sleep(STEP_MS)
    failover_s, failover_wall = timer.cpu(), timer.wall()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    history = records(cluster)
    await cluster.close()
    return {"brokers": brokers, "bundles": bundles, "cold_s": cold_s, "cold_wall_s": cold_wall,
            "cold_sim_ms": cold_sim, "events": events,
            "events_per_s": events / cold_s if cold_s else math.nan,
            "restart_s": restart_s, "restart_wall_s": restart_wall, "restart_sim_ms": restart_sim,
            "failover_s": failover_s, "failover_wall_s": failover_wall,
            "history": history, "peak_mib": peak}


def history_records(count: int, bundles: int = 1024, brokers: int = 10) -> list[Record]:
    """``count`` records of assign/own/unload/release cycles over a 10 x 1,024 cluster."""
    from bench.projection import protocol_events

    events: list[Envelope] = protocol_events(count, namespaces=max(1, bundles // 4))
    names = [f"broker-{i}" for i in range(1, brokers + 1)]
    out = []
    for offset, envelope in enumerate(events):
        payload = envelope.payload
        broker = names[zlib.crc32(str(payload.get("bundle")).encode()) % brokers]
        for field in ("dst", "owner", "src"):
            if payload.get(field) == "b1":
                payload = {**payload, field: broker}
        out.append(Record(0, offset, envelope._replace(payload=payload)))
    return out


def _broker() -> BrokerBody:
    return BrokerBody("broker-1", LoadBalancerConfig(), Workload([]))


def restart_cost(count: int) -> dict[str, Any]:
    """One broker that lived through ``count`` records of history, snapshot as a host snapshots
    it (``SnapshotPolicy``), then restarted: CPU seconds and records folded by the restart (the
    newest snapshot + the tail, at its longest), and by a fold from offset 0 (the restart before
    snapshots)."""
    records = history_records(count)
    store, policy, live = MemorySnapshots(), DEFAULT_POLICY, _broker()
    identity, since = live.snapshot_identity(), 0
    # The worst case: it crashes just before its next snapshot was due, so the last interval's
    # snapshot is never written and the restart folds a whole interval of tail.
    last = count - policy.min_records + 1
    for at, record in enumerate(records, start=1):
        live.fold(record)
        since += 1
        if at <= last and policy.due(since, live.state_size()):
            store.save(BodySnapshot(live.name, identity, {0: at}, at, live.snapshot_state()))
            since = 0
    timer, body, start = Timer(), _broker(), 0
    snapshot = store.newest(body.name, identity)
    if snapshot is not None:
        body.restore_state(snapshot.state)
        start = snapshot.position[0]
    body.recover(records[start:])
    restart_s = timer.cpu()
    timer = Timer()
    _broker().recover(records)
    return {"events": count, "seconds": restart_s, "folded": len(records) - start,
            "from_zero_s": timer.cpu()}


def _child(brokers: int, bundles: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.scale", "--one", f"{brokers}x{bundles}"]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=3000)
    if done.returncode != 0:
        return {"brokers": brokers, "bundles": bundles, "error": done.stderr.strip()[-400:]}
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


def run(quick: bool) -> dict[str, Any]:
    sizes = [_child(b, n) for b, n in (QUICK if quick else FULL)]
    history = [restart_cost(n) for n in (HISTORY_QUICK if quick else HISTORY_FULL)]
    return {"sizes": sizes, "history": history}


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (id, size) with the smallest size's figure and the growth exponent."""
    ok = [s for s in result["sizes"] if "error" not in s]
    out: list[dict[str, Any]] = []
    if ok:
        base = ok[0]
        for size in ok:
            grow = exponent(base["cold_s"], size["cold_s"], base["bundles"], size["bundles"])
            label = f"{size['brokers']} x {size['bundles']:,}"
            out.append({"id": "S1", "size": label, "seconds": size["cold_s"], "wall": size["cold_wall_s"],
                        "events_per_s": size["events_per_s"], "base": base["cold_s"], "exponent": grow})
            out.append({"id": "S2", "size": label, "seconds": size["restart_s"], "base": base["restart_s"],
                        "wall": size["restart_wall_s"],
                        "exponent": exponent(base["restart_s"], size["restart_s"], base["bundles"], size["bundles"])})
            out.append({"id": "S3", "size": label, "seconds": size["failover_s"], "base": base["failover_s"],
                        "history": size["history"], "wall": size["failover_wall_s"],
                        "exponent": exponent(base["failover_s"], size["failover_s"], base["bundles"], size["bundles"])})
            out.append({"id": "S5", "size": label, "mib": size["peak_mib"],
                        "mib_per_10k": size["peak_mib"] / size["bundles"] * 10_000})
    history = result["history"]
    for point in history:
        out.append({"id": "S4", "size": f"10 x 1,024, {point['events']:,} events", "seconds": point["seconds"],
                    "base": history[0]["seconds"], "folded": point.get("folded"),
                    "from_zero_s": point.get("from_zero_s"),
                    "exponent": exponent(history[0]["seconds"], point["seconds"], history[0]["events"], point["events"])})
    for failed in (s for s in result["sizes"] if "error" in s):
        out.append({"id": "S1", "size": f"{failed['brokers']} x {failed['bundles']:,}", "error": failed["error"]})
    return out


def render(table: list[dict[str, Any]]) -> str:
    lines = ["S   size                              CPU s (wall s)         at the smallest size   growth"]
    for row in table:
        if "error" in row:
            lines.append(f"{row['id']:<3} {row['size']:<33} failed: {row['error']}")
        elif row["id"] == "S5":
            lines.append(f"S5  {row['size']:<33} {row['mib']:8.0f} MiB    {row['mib_per_10k']:.0f} MiB per 10k bundles")
        else:
            extra = f"  {row['events_per_s']:,.0f} events/CPU s" if "events_per_s" in row else ""
            if row.get("folded") is not None:
                extra = f"  {row['folded']:,} records folded (from offset 0: {row['from_zero_s']:.2f} s)"
            wall = f"({row['wall']:7.2f})" if "wall" in row else " " * 9
            lines.append(f"{row['id']:<3} {row['size']:<33} {row['seconds']:8.2f} {wall}     {row['base']:8.2f} s"
                         f"          exponent {row['exponent']:.2f}{extra}")
    lines.append("S1r (Ray + Kafka): not run by this module")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="sizes up to 20 x 4,096, history up to 10^5")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--one", metavar="BxN", help="run one size and print its JSON (internal)")
    args = parser.parse_args(argv)
    if args.one:
        brokers, bundles = (int(part) for part in args.one.lower().split("x"))
        print(json.dumps(asyncio.run(one(brokers, bundles))))
        return 0
    table = rows(run(args.quick))
    print(render(table))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"rows": table}, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
