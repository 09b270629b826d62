"""Benchmarks O1 and O2 (docs/benchmarks.md, table O): drains and the throttle on the inproc host.

- O1 rolling restart of B brokers x N bundles, each broker in turn taken down and started again,
  with drains first (``Cluster.restart_plan``: drain at ``--rate``, wait until empty, graceful
  shutdown, start, undrain) against three restarts without: a crash (the process down
  ``CRASH_DOWN_MS``); Pulsar's graceful shutdown (``unload``: the extensible manager with
  ``loadBalancerTransferEnabled=false``, so every bundle of the broker is unloaded at once and
  placed again at its next lookup); and this project's graceful shutdown (``shutdown``: the
  broker asks the leader to transfer every bundle it owns at once, each to a chosen broker).
  Figures, from the log (``unavailability``): bundle-seconds not Owned by a live broker (from a
  move's first record until the bundle is Owned again; a bundle Owned by a broker that left
  counts from the leaving), and lookups that failed: seeded probes, 20 per second of the
  restart, of a random bundle at a random moment; one fails when its bundle is unavailable
  then and stays so past the lookup timeout (``LOOKUP_TIMEOUT_MS``, as a client's lookup waits).
- O2 scale-out from B to 2B brokers at N bundles with the throttle on (the default caps)
  against off (caps of 10^6), on a flat load (Zipf 0.3, ~60 % CPU on the first brokers, no
  floor on a run's offload, ``loadBalancerBundleUnloadMinThroughputThreshold=0``): the peak of shedding moves in flight in the cluster and per broker
  (from the log, ``projections.control``), every start checked against the caps
  (``caps_exceeded``), and the cluster time from the new brokers' registration until the first
  shedding run the leader skips as Balanced after it moved a bundle (a run before the new
  brokers' first load reports finds the old ones balanced among themselves).

Figures are simulated (cluster) time, so they do not depend on the machine's load; the CPU
seconds each run took are printed beside. ``python -m bench.drain [--quick] [--json PATH]
[--only O1,O2]``.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import heapq
import json
import time
from collections.abc import Iterable, Sequence
from random import Random
from typing import Any

from actors.api import Cluster
from actors.workload import Workload
from balancer.config import LoadBalancerConfig
from balancer.control import Caps, caps_exceeded
from events.log.port import Record
from projections.control import control_history, is_shedding

NAMESPACE = "public/default"
LOOKUP_TIMEOUT_MS = 5_000
PROBES_PER_S = 20
COMMAND_LATENCY_MS = 20
"""Every command's delivery takes this long, so a handover takes cluster time (in process it
would otherwise take none)."""
CRASH_DOWN_MS = 10_000
"""How long a crashed broker's process stays down before it starts again."""
MODES = ("crash", "unload", "shutdown", "drain")
PULSAR_SHUTDOWN = {"loadManagerClassName": "ExtensibleLoadManagerImpl", "loadBalancerTransferEnabled": False}
"""The ``unload`` mode's settings: a move (a shutdown's too) releases the bundle with no
destination, as Pulsar's shutdown unloads every bundle, and the clients' next lookup places it."""
O2_EXPONENT = 0.3
"""O2's topics follow a flat Zipf: under the usual 1.1 a few hot bundles carry most of a broker's
load, so two moves balance a scale-out and no throttle is ever reached."""
FULL = {"O1": (20, 8192), "O2": (10, 65536)}
QUICK = {"O1": (5, 512), "O2": (4, 2048)}
UNTHROTTLED = {"loadBalancerMaxMovesInFlightPerBroker": 1_000_000, "loadBalancerMaxMovesInFlight": 1_000_000,
               "loadBalancerMaxMovesPerMinute": 1_000_000}


def unavailability(records: Iterable[Record], since_ms: int, until_ms: int,
                   outages: Sequence[tuple[str, int, int]] = ()) -> dict[str, list[tuple[int, int]]]:
    """Bundle -> its intervals (from, to) in [since, until] not Owned by a live broker;
    ``outages``: (broker, from, to) when a broker's process was down (a crash the log does not
    show until its session expires)."""
    down_from: dict[str, int] = {}
    owner: dict[str, str] = {}
    out: dict[str, list[tuple[int, int]]] = {}

    def close(bundle: str, at: int) -> None:
        start = down_from.pop(bundle, None)
        if start is not None and at > since_ms:
            out.setdefault(bundle, []).append((max(start, since_ms), min(at, until_ms)))

    def gone(broker: str, at: int) -> None:
        for bundle, held in owner.items():
            if held == broker:
                down_from.setdefault(bundle, at)

    marks = sorted([(start, 0, broker) for broker, start, _ in outages]
                   + [(end, 1, broker) for broker, _, end in outages])
    for record in records:
        envelope, ts = record.envelope, record.envelope.ts_ms
        while marks and marks[0][0] <= ts:
            at, back, broker = marks.pop(0)
            if back:  # served again by its restarted owner
                for bundle in [b for b, held in owner.items() if held == broker]:
                    close(bundle, at)
            else:
                gone(broker, at)
        kind, payload = envelope.type, envelope.payload
        if kind in ("UnloadRequested", "TransferPrepared", "BundleAssigned"):
            down_from.setdefault(str(payload["bundle"]), ts)
        elif kind == "BundleOwned":
            bundle = str(payload["bundle"])
            owner[bundle] = str(payload["owner"])
            close(bundle, ts)
        elif kind == "BrokerLeft":
            gone(str(payload["broker_id"]), ts)
    for bundle in list(down_from):
        close(bundle, until_ms)
    return out


def failed_lookups(down: dict[str, list[tuple[int, int]]], bundles: Sequence[str], since_ms: int,
                   until_ms: int, seed: int = 0) -> tuple[int, int]:
    """(failed, probes): seeded lookups of a random bundle at a random moment (see the module)."""
    rng = Random(seed)
    probes = max(1, (until_ms - since_ms) * PROBES_PER_S // 1000)
    starts = {b: [s for s, _ in spans] for b, spans in down.items()}
    failed = 0
    for _ in range(probes):
        bundle, at = rng.choice(bundles), rng.randint(since_ms, until_ms)
        spans = down.get(bundle)
        if not spans:
            continue
        i = bisect.bisect_right(starts[bundle], at) - 1
        if i >= 0 and spans[i][0] <= at < spans[i][1] and spans[i][1] - at > LOOKUP_TIMEOUT_MS:
            failed += 1
    return failed, probes


async def _cluster(brokers: int, bundles: int, overrides: dict[str, Any], rate: float,
                   exponent: float = 1.1) -> Cluster:
    workload = Workload.zipf(Random(0), [NAMESPACE], topics_per_namespace=3 * bundles, total_msg_rate=rate,
                             exponent=exponent)
    config = LoadBalancerConfig().with_overrides({"loadBalancerNamespaceMaximumBundles": max(128, bundles),
                                                  "loadBalancerAutoBundleSplitEnabled": False, **overrides})
    cluster = await Cluster.start(config, brokers, host="inproc", seed=0, workload=workload, clients=True)
    await cluster.wait_ready(brokers)
    await cluster.create_namespace(NAMESPACE, bundles)
    while not _all_owned(cluster, bundles):
        await cluster.sleep(500)
    return cluster


def _all_owned(cluster: Cluster, bundles: int) -> bool:
    from bench.scale import all_owned

    return all_owned(cluster, bundles)


async def o1(brokers: int, bundles: int, mode: str, rate: int) -> dict[str, Any]:
    """One rolling restart (see the module); ``mode``: one of ``MODES``. Figures from the log."""
    overrides = {"loadBalancerSheddingEnabled": False, **(PULSAR_SHUTDOWN if mode == "unload" else {})}
    cluster = await _cluster(brokers, bundles, overrides, 120_000.0)
    cluster.link.host.command_latency_ms = COMMAND_LATENCY_MS  # type: ignore[attr-defined]
    cpu, start = time.process_time(), cluster.now_ms()
    ids = [f"broker-{i}" for i in range(1, brokers + 1)]
    outages: list[tuple[str, int, int]] = []
    if mode == "drain":
        await cluster.restart_plan(ids, rate, "bench", timeout_s=3_600)
    for broker in ids if mode != "drain" else ():
        if mode in ("shutdown", "unload"):
            await cluster.shutdown_broker(broker, timeout_s=600)
            await cluster.add_broker(broker, timeout_s=600)
            continue
        down = cluster.now_ms()
        await cluster.kill_broker(broker)
        await cluster.sleep(CRASH_DOWN_MS)
        cluster.link.host.restart(f"broker:{broker}")  # type: ignore[attr-defined]
        await cluster.sleep(1_000)
        outages.append((broker, down, cluster.now_ms()))
    while not _all_owned(cluster, bundles):
        await cluster.sleep(500)
    end = cluster.now_ms()
    records = await cluster.log_tail(10**9)
    names = sorted(cluster.view.ownership.records)
    await cluster.close()
    down_spans = unavailability(records, start, end, outages)
    failed, probes = failed_lookups(down_spans, names, start, end)
    return {"brokers": brokers, "bundles": bundles, "mode": mode, "rate_per_minute": rate if mode == "drain" else None,
            "unavailable_bundle_s": sum(b - a for spans in down_spans.values() for a, b in spans) / 1000,
            "bundles_unavailable": len(down_spans), "failed_lookups": failed, "probes": probes,
            "restart_sim_s": (end - start) / 1000, "cpu_s": time.process_time() - cpu}


def peaks(records: Iterable[Record]) -> tuple[int, int]:
    """(peak shedding moves in flight in the cluster, peak on one broker), from the log, counted
    as the audit's ``caps_exceeded`` counts them: at each start, after the moves ended by then."""
    spans = sorted(control_history(records).spans, key=lambda s: s.start_ms)
    ends: list[tuple[int, int]] = []
    flying: dict[int, tuple[str, ...]] = {}
    busy: dict[str, int] = {}
    cluster_peak = broker_peak = 0
    for number, span in enumerate(spans):
        while ends and ends[0][0] <= span.start_ms:
            for broker in flying.pop(heapq.heappop(ends)[1], ()):
                busy[broker] -= 1
        touched = (span.src,) if span.dst is None else (span.src, span.dst)
        flying[number] = touched
        for broker in touched:
            busy[broker] = busy.get(broker, 0) + 1
        if span.end_ms is not None:
            heapq.heappush(ends, (span.end_ms, number))
        cluster_peak = max(cluster_peak, len(flying))
        broker_peak = max(broker_peak, *(busy[b] for b in touched))
    return cluster_peak, broker_peak


async def o2(brokers: int, bundles: int, throttled: bool, max_sim_s: int) -> dict[str, Any]:
    """One scale-out from ``brokers`` to twice as many (see the module)."""
    config = LoadBalancerConfig()
    # Each bundle carries little (the load is flat): a run's offload is below Pulsar's 10 MB
    # floor on the quick size, so no run would move anything.
    overrides: dict[str, Any] = {"loadBalancerBundleUnloadMinThroughputThreshold": 0,
                                 **({} if throttled else UNTHROTTLED)}
    cluster = await _cluster(brokers, bundles, overrides, 14_000.0 * brokers, O2_EXPONENT)
    cluster.link.host.command_latency_ms = COMMAND_LATENCY_MS  # type: ignore[attr-defined]
    await cluster.sleep(3 * 60_000)  # load reports and the first runs on the first brokers
    cpu = time.process_time()
    await cluster.add_brokers([f"broker-{i}" for i in range(brokers + 1, 2 * brokers + 1)], timeout_s=600)
    start = cluster.now_ms()
    balanced: int | None = None
    moved = False  # a run before the new brokers' first reports finds the old ones balanced
    while balanced is None and cluster.now_ms() - start < max_sim_s * 1000:
        await cluster.sleep(5_000)
        for record in cluster.poll():
            envelope = record.envelope
            moved = moved or (envelope.type in ("UnloadRequested", "TransferPrepared")
                              and envelope.ts_ms > start and is_shedding(envelope.typed))  # type: ignore[arg-type]
            if (moved and envelope.type == "SheddingSkipped" and envelope.payload.get("reason") == "Balanced"
                    and envelope.ts_ms > start):
                balanced = envelope.ts_ms
                break
    records = await cluster.log_tail(10**9)
    await cluster.close()
    caps = Caps(config.load_balancer_max_moves_in_flight_per_broker, config.load_balancer_max_moves_in_flight,
                config.load_balancer_max_moves_per_minute)
    cluster_peak, broker_peak = peaks(records)
    return {"brokers": f"{brokers}->{2 * brokers}", "bundles": bundles, "throttled": throttled,
            "moves": len(control_history(records).spans), "peak_in_flight": cluster_peak,
            "peak_per_broker": broker_peak, "over_caps": len(caps_exceeded(control_history(records).spans, caps))
            if throttled else None, "caps": caps.to_dict() if throttled else None,
            "balanced_sim_s": None if balanced is None else (balanced - start) / 1000,
            "max_sim_s": max_sim_s, "cpu_s": time.process_time() - cpu}


def run(quick: bool, only: Sequence[str], rate: int) -> dict[str, list[dict[str, Any]]]:
    sizes = QUICK if quick else FULL
    out: dict[str, list[dict[str, Any]]] = {}
    if "O1" in only:
        brokers, bundles = sizes["O1"]
        out["O1"] = [asyncio.run(o1(brokers, bundles, mode, rate)) for mode in MODES]
        print(json.dumps(out["O1"]), flush=True)
    if "O2" in only:
        brokers, bundles = sizes["O2"]
        budget = 1_800 if quick else 3 * 3_600
        out["O2"] = [asyncio.run(o2(brokers, bundles, throttled, budget)) for throttled in (False, True)]
        print(json.dumps(out["O2"]), flush=True)
    return out


def render(result: dict[str, list[dict[str, Any]]]) -> str:
    lines = []
    rows = result.get("O1") or []
    if rows:
        best = rows[-1]["unavailable_bundle_s"]
        for row in rows:
            ratio = row["unavailable_bundle_s"] / best if best else float("inf")
            lines.append(f"O1 rolling restart {row['brokers']} x {row['bundles']}, {row['mode']}"
                         f"{' at ' + str(row['rate_per_minute']) + '/min' if row['rate_per_minute'] else ''}: "
                         f"unavailable {row['unavailable_bundle_s']:.1f} bundle-s ({ratio:.1f}x the drain's), "
                         f"{row['bundles_unavailable']} bundles touched, failed lookups {row['failed_lookups']} "
                         f"of {row['probes']}; {row['restart_sim_s']:.0f} s of cluster time, {row['cpu_s']:.0f} CPU s")
    rows = result.get("O2") or []
    if len(rows) == 2:
        free, held = rows
        lines.append(f"O2 scale-out {held['brokers']} at {held['bundles']}: peak in flight {held['peak_in_flight']} "
                     f"(per broker {held['peak_per_broker']}; caps {held['caps']}), starts over a cap "
                     f"{held['over_caps']}; unthrottled peak {free['peak_in_flight']}; balanced after "
                     f"{held['balanced_sim_s']} s throttled vs {free['balanced_sim_s']} s unthrottled "
                     f"(cluster time; None: not within {held['max_sim_s']} s); moves {held['moves']} / {free['moves']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.drain", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="O1 at 5 x 512, O2 at 4 -> 8 x 2,048")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--only", default="O1,O2", help="O1, O2 or both")
    parser.add_argument("--rate", type=int, default=1200, help="O1's drain rate, moves per minute")
    args = parser.parse_args(argv)
    only = [part.strip().upper() for part in args.only.split(",") if part.strip()]
    result = run(args.quick, only, args.rate)
    print(render(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
