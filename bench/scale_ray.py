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

``--nodes N`` starts N Ray nodes with ``ray start`` (``bench.ray_nodes``) and spreads the actors
over them (``placement="spread"``); ``--restart`` then measures S2r, a full restart of every
broker (as S2 in process). The peak memory of every process (Kafka, the size's process, its Ray
nodes and actors) is sampled from this process every 2 s.

``python -m bench.scale_ray [--quick] [--sizes 10x1024,10x8192] [--settings K=V,...] [--nodes N]
[--restart] [--json PATH]``; ``lbctl bench --only S1r``; S1r-50 and S2r-50: ``bench.scale_ray_nodes``.
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
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from random import Random
from typing import Any

from bench.eventlog import kafka_servers
from bench.scale import exponent, records
from lbctl.procmem import MemorySampler

NAMESPACE = "public/default"
FULL = ((10, 1024), (10, 8192), (10, 65536))
QUICK = ((10, 1024),)


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


def _states(cluster: Any) -> str:
    """``12,000 Owned`` and, after it, how many bundles are in each other state (a flat stretch
    of Owned reads differently with thousands Assigning than with none)."""
    from collections import Counter

    from balancer.ownership import BundleState

    counts = Counter(r.state for r in cluster.ownership().records.values())
    others = ", ".join(f"{n:,} {s.value}" for s, n in sorted(counts.items(), key=lambda sn: sn[0].value)
                       if s is not BundleState.OWNED)
    return f"{counts.get(BundleState.OWNED, 0):,} Owned" + (f" ({others})" if others else "")


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


@contextmanager
def _ray_nodes(nodes: int) -> Iterator[str | None]:
    """``nodes`` Ray nodes started with ``ray start`` (a head and workers, every one a child of
    this process), their address; one node: None (``Cluster.start`` starts a local Ray)."""
    if nodes <= 1:
        yield None
        return
    import ray

    from bench.ray_nodes import ray_cluster

    workers: dict[str, dict[str, float]] = {f"node-{i}": {} for i in range(2, nodes + 1)}
    with ray_cluster(workers, {}, timeout_s=300.0) as started:
        _note(f"{nodes} Ray nodes at {started.address}")
        try:
            yield started.address
        finally:
            ray.shutdown()  # before its nodes go: a driver left connected waits on a dead GCS


async def _until(cluster: Any, done: Callable[[], bool], limit: float, label: str) -> float:
    """Seconds until ``done()`` (the view polled every 0.2 s), at most ``limit``; a progress
    line every 10 s."""
    t0 = last_note = time.perf_counter()
    while True:
        cluster.poll()
        now = time.perf_counter()
        if done() or now - t0 > limit:
            return now - t0
        if now - last_note >= 10.0:
            _note(f"{label}: {_states(cluster)} after {now - t0:.0f} s")
            last_note = now
        await asyncio.sleep(0.2)


async def cold_start(brokers: int, bundles: int, bootstrap: str, settings: Any = None,
                     limit: float | None = None, nodes: int = 1, restart: bool = False) -> dict[str, Any]:
    """One size: start the cluster, create the namespace, wait until every bundle is Owned
    (``settings``: the actors' ``ActorSettings``, default ones if None; ``limit``: seconds
    before it is reported as stopped, ``limit_s`` if None; ``nodes``: Ray nodes, the actors
    placed ``spread`` over them; ``restart``: then S2r, a full restart of every broker)."""
    limit = limit_s(bundles) if limit is None else limit
    from actors.api import Cluster
    from actors.workload import Workload

    workload = Workload.zipf(Random(0), [NAMESPACE], topics_per_namespace=3 * bundles,
                             total_msg_rate=120_000.0)
    load0, label = os.getloadavg()[0], f"{brokers}x{bundles}"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bb-s1r-") as snapshots, _ray_nodes(nodes) as address:
        on_nodes: dict[str, Any] = {} if address is None else {"ray_address": address, "placement": "spread"}
        async with Cluster.start(brokers=brokers, host="ray", bootstrap=bootstrap, clients=True,
                                 overrides={"loadBalancerNamespaceMaximumBundles": max(128, bundles)},
                                 workload=workload, settings=settings, cluster_name=f"s1r{uuid.uuid4().hex[:8]}",
                                 partitions=3, replication_factor=1, snapshot_dir=snapshots,
                                 ready_timeout_s=max(300.0, 10.0 * brokers), **on_nodes) as cluster:
            _note(f"{label}: actors started after {time.perf_counter() - started:.0f} s")
            await cluster.wait_ready(brokers, 120.0)
            start_s = time.perf_counter() - started
            _note(f"{label}: leader and brokers ready after {start_s:.0f} s")
            cluster.poll()
            events0, t0 = records(cluster), time.perf_counter()
            await cluster.create_namespace(NAMESPACE, bundles)
            _note(f"{label}: namespace created in {time.perf_counter() - t0:.1f} s")
            seconds = await _until(cluster, lambda: _owned(cluster) >= bundles, limit, label)
            events, owned = records(cluster) - events0, _owned(cluster)
            again = (await full_restart(cluster, brokers, bundles, limit)
                     if restart and owned >= bundles else None)
            # An actor whose mailbox is full answers late or never: that is a finding, not a hang.
            statuses = await cluster.statuses(timeout_s=30.0)
            actors = _actor_summary(statuses)
            actors["unanswered"] = sorted(n for n, s in statuses.items() if "error" in s)
            profiles = _profiles()
    row: dict[str, Any] = {"brokers": brokers, "bundles": bundles, "nodes": nodes, "seconds": seconds,
                           "events": events, "events_per_s": events / seconds if seconds else 0.0,
                           "owned": owned, "start_s": start_s, "load_start": load0,
                           "load_end": os.getloadavg()[0], "actors": actors,
                           "brokers_per_node": _brokers_per_node(statuses),
                           **({"restart": again} if again else {}),
                           **({"profiles": profiles} if profiles else {})}
    if owned < bundles:
        row["error"] = (f"stopped after {seconds:.0f} s: {owned:,} of {bundles:,} bundles Owned, "
                        f"{events:,} events; actors: {json.dumps(actors)}")
    return row


async def full_restart(cluster: Any, brokers: int, bundles: int, limit: float) -> dict[str, Any]:
    """S2r, as S2 in process: every broker crashes at once, the leader expires them all (not
    timed), every broker starts again (each rebuilds from its snapshot and the log); seconds
    from the first start until every broker is registered and every bundle is Owned by one of
    them again."""
    from balancer.errors import Unavailable
    from bench.scale import all_owned

    ids = [f"broker-{b}" for b in range(1, brokers + 1)]
    for broker_id in ids:
        await cluster.kill_broker(broker_id)
    expiry = cluster.settings.session_timeout_ms / 1000 + 60.0
    gone = await _until(cluster, lambda: not cluster.view.brokers, expiry, f"{brokers} brokers expiring")
    _note(f"S2r: every broker killed; the leader expired them in {gone:.0f} s")
    load0, t0 = os.getloadavg()[0], time.perf_counter()
    try:
        await cluster.add_brokers(ids, timeout_s=limit)
    except Unavailable as exc:  # a finding of the row, not the end of the size's figures
        seconds = time.perf_counter() - t0
        return {"seconds": seconds, "registered_s": seconds, "expired_s": gone, "owned": _owned(cluster),
                "load_start": load0, "load_end": os.getloadavg()[0],
                "error": f"stopped after {seconds:.0f} s: {len(cluster.view.brokers)} of {brokers} brokers "
                         f"registered again ({exc})"}
    registered = time.perf_counter() - t0
    _note(f"S2r: {brokers} brokers started again and registered after {registered:.0f} s")
    rest = await _until(cluster, lambda: all_owned(cluster, bundles), max(1.0, limit - registered), "S2r")
    seconds, owned = registered + rest, all_owned(cluster, bundles)
    out: dict[str, Any] = {"seconds": seconds, "registered_s": registered, "expired_s": gone,
                           "owned": _owned(cluster), "load_start": load0, "load_end": os.getloadavg()[0]}
    if not owned:
        out["error"] = f"stopped after {seconds:.0f} s: {_owned(cluster):,} of {bundles:,} bundles Owned"
    return out


def _brokers_per_node(statuses: dict[str, dict[str, Any]]) -> list[int]:
    """How many broker actors each Ray node ran, largest first."""
    nodes = Counter(s.get("node_id") for n, s in statuses.items() if n.startswith("broker:") and "error" not in s)
    return sorted(nodes.values(), reverse=True)


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


@dataclass(frozen=True, slots=True)
class Options:
    """How every size of one run is run (the command line's flags)."""

    settings: str | None = None
    """``key=value,...`` of ``ActorSettings``."""
    profile: str | None = None
    """Bodies whose stacks are sampled (``leader,ns:0``)."""
    limit: float | None = None
    """Seconds before a size is reported as stopped (``limit_s`` if None)."""
    nodes: int = 1
    """Ray nodes (``ray start``), the actors spread over them."""
    restart: bool = False
    """S2r after each cold start: every broker killed, expired and started again."""

    def flags(self) -> list[str]:
        return [*(["--settings", self.settings] if self.settings else []),
                *(["--limit-s", str(self.limit)] if self.limit else []),
                *(["--nodes", str(self.nodes)] if self.nodes > 1 else []),
                *(["--restart"] if self.restart else [])]


def _child(brokers: int, bundles: int, bootstrap: str, options: Options) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.scale_ray", "--one", f"{brokers}x{bundles}",
               "--bootstrap", bootstrap, *options.flags()]
    with tempfile.TemporaryDirectory(prefix="bb-s1r-prof-") as folder:
        profile = options.profile
        env = {**os.environ, **({"BB_SAMPLE_BODIES": profile, "BB_SAMPLE_DIR": folder} if profile else {})}
        memory = MemorySampler(interval_s=2.0).start()  # this process's tree: Kafka, the size's process, its Ray
        row = _run_child(command, env, brokers, bundles, options.limit)
        peak = memory.stop()
    return {**row, "peak": {"rss": peak.rss, "pss": peak.pss, "processes": peak.processes,
                            "text": peak.describe()}}


def _run_child(command: list[str], env: dict[str, str], brokers: int, bundles: int,
               limit: float | None) -> dict[str, Any]:
    limit = limit or limit_s(bundles)
    try:
        # Starting may take 10 min, and a full restart another limit; progress lines pass through.
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False, env=env,
                              timeout=2 * limit + 1200)
    except subprocess.TimeoutExpired:
        return {"brokers": brokers, "bundles": bundles, "error": "the size's process hung past its limit"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"brokers": brokers, "bundles": bundles, "error": f"exit status {done.returncode} (see stderr)"}
    row: dict[str, Any] = json.loads(lines[-1])
    return row


def run(sizes: Sequence[tuple[int, int]], bootstrap: str | None, options: Options = Options()) -> list[dict[str, Any]]:
    with kafka_servers(bootstrap) as servers:
        if servers is None:
            raise SystemExit("S1r needs Kafka: --bootstrap, KAFKA_BOOTSTRAP_SERVERS or the jars "
                             "(make kafka-jars)")
        return [_child(b, n, servers, options) for b, n in sizes]


def rows(sizes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A row per cold start (S1r; ``S1r-<brokers>`` on several nodes) and per full restart
    (S2r likewise); a cold start's growth is against the first size that finished."""
    ok = [s for s in sizes if "error" not in s]
    out: list[dict[str, Any]] = []
    for size in sizes:
        nodes = int(size.get("nodes", 1))
        suffix = f"-{size['brokers']}" if nodes > 1 else ""
        label = f"{size['brokers']} x {size['bundles']:,}" + (f" on {nodes} nodes" if nodes > 1 else "")
        row = {"id": f"S1r{suffix}", "size": label, **size}
        if "error" not in size and ok and size is not ok[0]:
            row["base"] = ok[0]["seconds"]
            row["exponent"] = exponent(ok[0]["seconds"], size["seconds"], ok[0]["bundles"], size["bundles"])
        out.append(row)
        if "restart" in size:
            out.append({"id": f"S2r{suffix}", "size": label, "brokers": size["brokers"],
                        "bundles": size["bundles"], "nodes": nodes, **size["restart"]})
    return out


TARGETS = {"S1r": "10 x 65,536 in <= 60 s", "S1r-50": "50 x 65,536 on 2 nodes in <= 180 s, peak memory reported",
           "S2r-50": "a full restart of those 50 brokers in <= 180 s"}
"""The issue's targets (Ray + Kafka, wall time), by row id."""


def render(table: list[dict[str, Any]]) -> str:
    lines = ["S      size                       wall s    events   events/s   growth          load (start -> end)"]
    for row in table:
        if "error" in row and "seconds" not in row:
            lines.append(f"{row['id']:<6} {row['size']:<25} failed: {row['error']}")
            continue
        if row["id"].startswith("S2r"):
            lines.append(f"{row['id']:<6} {row['size']:<25} {row['seconds']:7.1f}   (brokers registered again after "
                         f"{row['registered_s']:.1f} s; expired in {row['expired_s']:.0f} s, not timed)"
                         f"   {row['load_start']:.1f} -> {row['load_end']:.1f}")
            if "error" in row:
                lines.append(f"       {row['error']}")
            continue
        grow = f"exponent {row['exponent']:.2f}" if "exponent" in row else "-"
        lines.append(f"{row['id']:<6} {row['size']:<25} {row['seconds']:7.1f} {row['events']:9,} "
                     f"{row['events_per_s']:9,.0f}   {grow:<15} {row['load_start']:.1f} -> {row['load_end']:.1f}")
        if "error" in row:
            lines.append(f"       {row['error']}")
        elif "actors" in row:
            lines.append(f"       {_actor_line(row['actors'])}")
        lines.extend(f"       {line}" for line in _where(row))
    lines.append(f"actor settings: {next((r['settings'] for r in table if 'settings' in r), 'defaults')}")
    lines.extend(f"target {key}: {text} (Ray + Kafka, wall time)" for key, text in TARGETS.items()
                 if any(r["id"] == key for r in table) or key == "S1r")
    return "\n".join(lines)


def _where(row: dict[str, Any]) -> list[str]:
    """Where the brokers ran and the memory of every process (Kafka, the driver, Ray's)."""
    out = []
    if row.get("brokers_per_node") and row.get("nodes", 1) > 1:
        out.append(f"brokers per Ray node: {', '.join(str(n) for n in row['brokers_per_node'])}")
    if "peak" in row:
        out.append(row["peak"]["text"])
    return out


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
    parser.add_argument("--nodes", type=int, default=1,
                        help="Ray nodes started with `ray start`, the actors spread over them (default: 1, a local Ray)")
    parser.add_argument("--restart", action="store_true",
                        help="after each cold start, S2r: every broker killed, expired and started again")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--one", metavar="BxN", help="run one size and print its JSON (internal)")
    args = parser.parse_args(argv)
    if args.nodes < 1:
        raise SystemExit(f"--nodes {args.nodes}: at least 1")
    if args.one:
        (brokers, bundles), = _sizes(args.one)
        row = asyncio.run(cold_start(brokers, bundles, args.bootstrap, _settings(args.settings), args.limit_s,
                                     args.nodes, args.restart))
        print(json.dumps({**row, "settings": args.settings or "defaults"}))
        return 0
    sizes = _sizes(args.sizes) if args.sizes else list(QUICK if args.quick else FULL)
    _settings(args.settings)  # a bad one fails here, before anything starts
    options = Options(args.settings, args.profile, args.limit_s, args.nodes, args.restart)
    table = rows(run(sizes, args.bootstrap, options))
    print(render(table))
    print(render_profiles(table))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"rows": table}, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
