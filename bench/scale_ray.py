"""Benchmark S1r (table S): cold start on Ray with real Kafka.

N brokers and a namespace of B bundles, about three Zipf topics per bundle (as S1 in
``bench.scale``); the clients look up every topic at once; wall seconds from the namespace's
creation until the driver's view (``Cluster``) shows every bundle Owned. The cluster is
``Cluster.start(host="ray", bootstrap=..., clients=True, workload=...)``: one Ray actor per body,
the log a Kafka topic of its own per size (a fresh ``cluster_name``), snapshots in a temporary
directory. Kafka comes from ``bench.eventlog.kafka_servers`` (``--bootstrap``, env
``KAFKA_BOOTSTRAP_SERVERS``, else a broker started once from the test jars in ``.cache``).

Each size runs in a process of its own (``--one BxN``: Ray is started and shut down with it).
Every figure is wall time on a shared machine, so the 1-minute load average is printed beside
it (at the start and at the end of the size). A size that does not finish within its limit is
a row saying how far it got (bundles Owned, events) and what the actors report, never a hang.
Printed: wall seconds, events in the log from the namespace's creation to the last Owned,
events per wall second, and the growth exponent of the seconds against the smallest size.

``python -m bench.scale_ray [--quick] [--sizes 10x1024,10x8192] [--settings K=V,...] [--json PATH]``;
``lbctl bench --only S1r``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from random import Random
from typing import Any

from bench.eventlog import kafka_servers
from bench.scale import exponent

NAMESPACE = "public/default"
FULL = ((10, 1024), (10, 8192), (10, 65536))
QUICK = ((10, 1024),)
TARGET = (10, 65536, 60.0)
"""The issue's target: 10 x 65,536 in <= 60 s."""


def limit_s(bundles: int) -> float:
    """How long one size may take before it is reported as stopped: three minutes, plus 20
    bundles a second (the target's pace is 1,092 a second)."""
    return 180.0 + bundles / 20


def _note(text: str) -> None:
    """A progress line on stderr (a stall shows where it stopped while it runs)."""
    print(f"S1r {time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.1f}: {text}", file=sys.stderr, flush=True)


def _owned(cluster: Any) -> int:
    from balancer.ownership import BundleState

    return sum(1 for r in cluster.ownership().records.values() if r.state is BundleState.OWNED)


def _actor_summary(statuses: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the actors report, summed per kind of body: records folded, snapshots written,
    commands taken, appends, sends, and commands that waited to fold what their sender had seen
    (``behind``; ``behind_read``: the subscription did not bring it within 0.2 s), group
    commits of two commands or more and the commands in them (``groups``, ``grouped``), and
    the Ray calls that carried the sends (``send_batches``)."""
    keys = ("records", "snapshots", "commands", "appends", "sends", "behind", "behind_read",
            "groups", "grouped")
    out: dict[str, Any] = {}
    for name, status in sorted(statuses.items()):
        if "error" in status:
            continue
        counts = status.get("counts", {})
        into = out.setdefault(name.split(":")[0], {"actors": 0, **dict.fromkeys(keys, 0), "failed_sends": 0,
                                                   "send_batches": 0})
        into["actors"] += 1
        for key in keys:
            into[key] += int(counts.get(key, 0))
        into["failed_sends"] += int(status.get("failed_sends", 0))
        into["send_batches"] += int(status.get("send_batches", 0))
    return out


async def cold_start(brokers: int, bundles: int, bootstrap: str, settings: Any = None,
                     limit: float | None = None) -> dict[str, Any]:
    """One size: start the cluster, create the namespace, wait until every bundle is Owned
    (``settings``: the actors' ``ActorSettings``, default ones if None; ``limit``: seconds
    before it is reported as stopped, ``limit_s`` if None)."""
    limit = limit_s(bundles) if limit is None else limit
    from actors.api import Cluster
    from actors.workload import Workload

    workload = Workload.zipf(Random(0), [NAMESPACE], topics_per_namespace=3 * bundles,
                             total_msg_rate=120_000.0)
    load0 = os.getloadavg()[0]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bb-s1r-") as snapshots:
        async with Cluster.start(brokers=brokers, host="ray", bootstrap=bootstrap, clients=True,
                                 overrides={"loadBalancerNamespaceMaximumBundles": max(128, bundles)},
                                 workload=workload, settings=settings, cluster_name=f"s1r{uuid.uuid4().hex[:8]}",
                                 partitions=3, replication_factor=1, snapshot_dir=snapshots,
                                 ready_timeout_s=300.0) as cluster:
            _note(f"{brokers}x{bundles}: actors started after {time.perf_counter() - started:.0f} s")
            await cluster.wait_ready(brokers, 120.0)
            start_s = time.perf_counter() - started
            _note(f"{brokers}x{bundles}: leader and brokers ready after {start_s:.0f} s")
            cluster.poll()
            t0 = time.perf_counter()
            await cluster.create_namespace(NAMESPACE, bundles)
            _note(f"{brokers}x{bundles}: namespace created in {time.perf_counter() - t0:.1f} s")
            owned, events, last_note = 0, 0, t0
            while True:
                events += len(cluster.poll())
                owned = _owned(cluster)
                now = time.perf_counter()
                if owned >= bundles or now - t0 > limit:
                    break
                if now - last_note >= 10.0:
                    _note(f"{brokers}x{bundles}: {owned:,} of {bundles:,} Owned after {now - t0:.0f} s")
                    last_note = now
                await asyncio.sleep(0.2)
            seconds = time.perf_counter() - t0
            # An actor whose mailbox is full answers late or never: that is a finding, not a hang.
            statuses = await cluster.statuses(timeout_s=30.0)
            actors = _actor_summary(statuses)
            actors["unanswered"] = sorted(n for n, s in statuses.items() if "error" in s)
            profiles = _profiles()
    row: dict[str, Any] = {"brokers": brokers, "bundles": bundles, "seconds": seconds, "events": events,
                           "events_per_s": events / seconds if seconds else 0.0, "owned": owned,
                           "start_s": start_s, "load_start": load0, "load_end": os.getloadavg()[0],
                           "actors": actors, **({"profiles": profiles} if profiles else {})}
    if owned < bundles:
        row["error"] = (f"stopped after {seconds:.0f} s: {owned:,} of {bundles:,} bundles Owned, "
                        f"{events:,} events; actors: {json.dumps(actors)}")
    return row


def _profiles() -> dict[str, Any]:
    """The stack samplers' tables of the bodies named by ``BB_SAMPLE_BODIES`` (``--profile``),
    as their actors last wrote them."""
    folder = os.environ.get("BB_SAMPLE_DIR")
    if not folder or not os.path.isdir(folder):
        return {}
    out: dict[str, Any] = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name), encoding="utf-8") as table:
                out[name[:-5]] = json.load(table)
    return out


def _child(brokers: int, bundles: int, bootstrap: str, settings: str | None,
           profile: str | None = None, limit: float | None = None) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.scale_ray", "--one", f"{brokers}x{bundles}",
               "--bootstrap", bootstrap, *(["--settings", settings] if settings else []),
               *(["--limit-s", str(limit)] if limit else [])]
    with tempfile.TemporaryDirectory(prefix="bb-s1r-prof-") as folder:
        env = {**os.environ, **({"BB_SAMPLE_BODIES": profile, "BB_SAMPLE_DIR": folder} if profile else {})}
        return _run_child(command, env, brokers, bundles, limit)


def _run_child(command: list[str], env: dict[str, str], brokers: int, bundles: int,
               limit: float | None) -> dict[str, Any]:
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False, env=env,
                              timeout=(limit or limit_s(bundles)) + 1200)  # starting may take 10 min; its progress lines pass through
    except subprocess.TimeoutExpired:
        return {"brokers": brokers, "bundles": bundles, "error": "the size's process hung past its limit"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"brokers": brokers, "bundles": bundles, "error": f"exit status {done.returncode} (see stderr)"}
    row: dict[str, Any] = json.loads(lines[-1])
    return row


def run(sizes: Sequence[tuple[int, int]], bootstrap: str | None, settings: str | None = None,
        profile: str | None = None, limit: float | None = None) -> list[dict[str, Any]]:
    with kafka_servers(bootstrap) as servers:
        if servers is None:
            raise SystemExit("S1r needs Kafka: --bootstrap, KAFKA_BOOTSTRAP_SERVERS or the jars "
                             "(make kafka-jars)")
        return [_child(b, n, servers, settings, profile, limit) for b, n in sizes]


def rows(sizes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ok = [s for s in sizes if "error" not in s]
    out: list[dict[str, Any]] = []
    for size in sizes:
        row = {"id": "S1r", "size": f"{size['brokers']} x {size['bundles']:,}", **size}
        if "error" not in size and ok and size is not ok[0]:
            row["base"] = ok[0]["seconds"]
            row["exponent"] = exponent(ok[0]["seconds"], size["seconds"], ok[0]["bundles"], size["bundles"])
        out.append(row)
    return out


def render(table: list[dict[str, Any]]) -> str:
    lines = ["S    size             wall s    events   events/s   growth          load (start -> end)"]
    for row in table:
        if "error" in row and "seconds" not in row:
            lines.append(f"{row['id']:<4} {row['size']:<15} failed: {row['error']}")
            continue
        grow = f"exponent {row['exponent']:.2f}" if "exponent" in row else "-"
        lines.append(f"{row['id']:<4} {row['size']:<15} {row['seconds']:7.1f} {row['events']:9,} "
                     f"{row['events_per_s']:9,.0f}   {grow:<15} {row['load_start']:.1f} -> {row['load_end']:.1f}")
        if "error" in row:
            lines.append(f"     {row['error']}")
        elif "actors" in row:
            lines.append(f"     {_actor_line(row['actors'])}")
    lines.append(f"actor settings: {next((r['settings'] for r in table if 'settings' in r), 'defaults')}; "
                 f"target: {TARGET[0]} x {TARGET[1]:,} in <= {TARGET[2]:g} s (Ray + Kafka, wall time)")
    return "\n".join(lines)


def render_profiles(table: list[dict[str, Any]], top: int = 15) -> str:
    """Each sampled actor's top functions: % of its busy samples spent in the function itself
    and anywhere below it."""
    lines: list[str] = []
    loop = ("threading.py", "base_events.py", "events.py:_run")  # every sample's own frames
    for row in table:
        for body, prof in row.get("profiles", {}).items():
            prof = {**prof, "total": [t for t in prof["total"] if not t[0].startswith(loop)]}
            lines.append(f"{row['id']} {row['size']} {body}: {prof['busy']:,} busy samples of {prof['samples']:,}")
            lines.append("  self %  function                                   | total %  function")
            for (own, _, own_pct), (tot, _, tot_pct) in zip(prof["self"][:top], prof["total"][:top], strict=False):
                lines.append(f"  {own_pct:5.1f}  {own:<42} | {tot_pct:5.1f}  {tot}")
    return "\n".join(lines)


def _actor_line(actors: dict[str, Any]) -> str:
    """The storm's counts in one line: lookups the clients sent, commands the leader and the
    shard took, confirmations the brokers sent, sends that failed (timed out or refused)."""
    def get(kind: str, key: str) -> int:
        return int(actors.get(kind, {}).get(key, 0))
    failed = sum(int(v.get("failed_sends", 0)) for v in actors.values() if isinstance(v, dict))
    return (f"lookups sent {get('clients', 'sends'):,}, leader commands {get('leader', 'commands'):,}, "
            f"leader sends {get('leader', 'sends'):,}, shard commands {get('ns', 'commands'):,} "
            f"({get('ns', 'appends'):,} appends), broker sends {get('broker', 'sends'):,}, "
            f"failed sends {failed:,} (clients {get('clients', 'failed_sends'):,}, "
            f"leader {get('leader', 'failed_sends'):,}, brokers {get('broker', 'failed_sends'):,})")


def _sizes(text: str) -> list[tuple[int, int]]:
    try:
        out = [(int(b), int(n)) for b, n in (part.lower().split("x") for part in text.split(","))]
    except ValueError:
        raise SystemExit(f"--sizes {text!r}: expected BROKERSxBUNDLES[,...], e.g. 10x1024,10x8192") from None
    if any(b < 1 or n < 1 for b, n in out):
        raise SystemExit(f"--sizes {text!r}: every count must be at least 1")
    return out


def _settings(text: str | None) -> Any:
    """``key=value,...`` of ``ActorSettings`` (whole numbers), or None for the defaults."""
    if not text:
        return None
    from actors.settings import ActorSettings

    try:
        pairs = {key.strip(): int(value) for key, value in (part.split("=") for part in text.split(","))}
        return ActorSettings(**pairs)
    except (ValueError, TypeError) as exc:
        raise SystemExit(f"--settings {text!r}: expected key=value,... of ActorSettings ({exc})") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_ray", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10 x 1,024 only")
    parser.add_argument("--sizes", default=None, help="BROKERSxBUNDLES,... (default: 10x1024,10x8192,10x65536)")
    parser.add_argument("--bootstrap", default=None, help="Kafka (else env or the test jars)")
    parser.add_argument("--settings", default=None, metavar="K=V,...",
                        help="the actors' ActorSettings, e.g. lookup_retry_ms=10000,retry_ms=30000")
    parser.add_argument("--profile", default=None, metavar="BODY,...",
                        help="sample these actors' stacks (e.g. leader,ns:0) and print their top lines")
    parser.add_argument("--limit-s", type=float, default=None,
                        help="seconds before a size is reported as stopped (default: 180 + 20 bundles a second)")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--one", metavar="BxN", help="run one size and print its JSON (internal)")
    args = parser.parse_args(argv)
    if args.one:
        (brokers, bundles), = _sizes(args.one)
        row = asyncio.run(cold_start(brokers, bundles, args.bootstrap, _settings(args.settings), args.limit_s))
        print(json.dumps({**row, "settings": args.settings or "defaults"}))
        return 0
    sizes = _sizes(args.sizes) if args.sizes else list(QUICK if args.quick else FULL)
    _settings(args.settings)  # a bad one fails here, before anything starts
    table = rows(run(sizes, args.bootstrap, args.settings, args.profile, args.limit_s))
    print(render(table))
    print(render_profiles(table))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"rows": table}, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
