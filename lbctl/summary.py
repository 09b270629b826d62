"""The text ``lbctl run`` prints when it ends: balance, moves by reason, unloads/h, peak memory.

Invariants: plain text (the same on a terminal and in a log), one fact per line, numbers from
``RunStats`` (the log), ``MemoryPeak`` (/proc) and the run's ``Pace`` (wall clock against
cluster time) only, plus for a paced Ray cluster its clock's own account of whom it waited for;
rates per hour are per *simulated* hour; every expired broker is named.
"""

from __future__ import annotations

from actors.api import Cluster
from actors.cluster.kept import ClusterSpec
from actors.runtime.abilities import PacedLink
from balancer.config import LoadBalancerConfig
from lbctl.procmem import MemoryPeak
from lbctl.run_view import Pace, clock
from lbctl.runstats import RunStats


def summary(stats: RunStats, spec: ClusterSpec, config: LoadBalancerConfig, cluster: Cluster,
            wall_s: float, peak: MemoryPeak, *, bundles: int, pace: Pace | None = None) -> str:
    hours = max(stats.elapsed_ms(), 1) / 3_600_000
    speed = f"{spec.speed:g}x" if spec.speed > 0 else "max speed"
    leader, epoch = cluster.leader()
    lines = [
        f"summary: {spec.brokers} brokers on {spec.host}; {spec.namespace}: {bundles} bundles, "
        f"{spec.topics} topics, {spec.rate:,.0f} msg/s (zipf, seed {spec.seed})",
        f"  simulated {clock(stats.elapsed_ms())} in {wall_s:.1f} s of wall time ({speed}); "
        f"leader {leader or '-'}, epoch {epoch}",
        *pace_lines(pace, cluster),
        expiry_line(stats),
        f"  {config.load_manager_class_name}: shedding {config.load_balancer_load_shedding_strategy}, "
        f"placement {config.load_balancer_load_placement_strategy}",
        *balance_lines(stats, cluster),
        *move_lines(stats, hours),
        f"  events: {sum(stats.types.values())} ("
        + ", ".join(f"{kind} {n}" for kind, n in stats.types.most_common(4)) + ")",
        *([f"  bad events: {len(stats.anomalies)} (payloads no fold can use; `lbctl log anomalies` "
           "names them)"] if stats.anomalies else []),
        f"  {peak.describe()}",
    ]
    return "\n".join(lines)


def balance_lines(stats: RunStats, cluster: Cluster) -> list[str]:
    lines = ["  balance (broker load = max resource usage of its latest report):"]
    now = stats.balance()
    if now is None:
        return [*lines, "    no load report yet"]
    lines.append(f"    at the end    max/mean {now.max_over_mean:.2f}  std {now.std:.3f}  "
                 f"mean {100 * now.mean:.1f}%")
    if stats.balances:
        n = len(stats.balances)
        lines.append(f"    over the run  max/mean {sum(b.max_over_mean for b in stats.balances) / n:.2f}  "
                     f"std {sum(b.std for b in stats.balances) / n:.3f}  (mean of {n} samples)")
    counts: dict[str, int] = {}
    for owner in cluster.ownership().owners().values():
        counts[owner] = counts.get(owner, 0) + 1
    for broker, load in sorted(stats.loads.items()):
        lines.append(f"    {broker:<12} {100 * load:5.1f}%  {counts.get(broker, 0)} bundles  "
                     f"{stats.msg_rates.get(broker, 0.0):,.0f} msg/s")
    return lines


def move_lines(stats: RunStats, hours: float) -> list[str]:
    lines = ["  moves by reason:"]
    if not stats.by_reason:
        lines.append("    none")
    for (kind, reason), count in sorted(stats.by_reason.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1])):
        lines.append(f"    {kind:<9} {reason:<22} {count}")
    splits = sum(n for (kind, _), n in stats.by_reason.items() if kind == "split")
    children = sum(n for (kind, reason), n in stats.by_reason.items() if kind == "unload" and reason == "split")
    also = f", not the {children} children the splits unloaded" if children else ""
    lines.append(f"  unloads/h: {stats.unloads() / hours:.1f} (transfers and unloads{also}); "
                 f"splits/h: {splits / hours:.1f}; placements: {stats.placements}")
    return lines


def pace_lines(pace: Pace | None, cluster: Cluster) -> list[str]:
    """Whether cluster time kept ``--speed`` over the run, and if not by how much it fell behind
    (and, on a paced Ray cluster, for which actors its clock stood still)."""
    if pace is None or pace.speed <= 0:
        return []
    if not pace.behind:
        return [f"  pace: kept {pace.speed:g}x"]
    lines = [f"  pace: the host could not keep {pace.speed:g}x: cluster time ran slower, "
             f"{pace.text()}, rather than run ahead of late actors"]
    report = cluster.link.pace() if isinstance(cluster.link, PacedLink) else None
    if report is not None:
        lines.append(f"    {report.describe()}")
    return lines


def expiry_line(stats: RunStats) -> str:
    if not stats.expiries:
        return "  brokers expired: none"
    named = ", ".join(f"{broker} at {clock(at - stats.start_ms)}" for at, broker in stats.expiries)
    return f"  brokers expired: {len(stats.expiries)} ({named}; no load report within the session timeout)"
