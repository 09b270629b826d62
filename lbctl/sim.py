"""``lbctl sim``: seeded fault simulation of the whole system (actors/runtime/sim/).

``lbctl sim --seeds N [--scenario S]`` runs seeds 0..N-1 (each scenario in turn by default) in a
process pool, with a progress bar and its time left (off a terminal: a line at once, then at least
every 10 s) and a summary table per scenario; ``lbctl sim --seed N``
replays one seed step for step and prints its reproduction if it fails.

Invariants: the verdict of a seed depends only on (seed, scenario, steps, --faults), never on
the pool or the order seeds finish in; the exit status is 1 if any seed broke an invariant, 2
for bad input (one line naming the bad value), else 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from actors.runtime.sim.run import SimResult, minimize, simulate
from actors.runtime.sim.scenarios import SCENARIOS, scenario_for
from balancer.errors import InvalidInput
from lbctl import numargs


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("sim", help="seeded fault simulation: invariants under crashes, drops, outages")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--seeds", type=numargs.COUNT, default=None, metavar="N", help="run seeds 0..N-1 (default 100)")
    which.add_argument("--seed", type=numargs.NATURAL, default=None, metavar="N", help="replay one seed, step for step")
    parser.add_argument("--first-seed", type=numargs.NATURAL, default=0, metavar="N", help="with --seeds: start here")
    parser.add_argument("--scenario", default=None, help=f"one of {', '.join(SCENARIOS)} (default: all, in turn)")
    parser.add_argument("--steps", type=numargs.COUNT, default=500, help="steps per seed (1 s of virtual time each)")
    parser.add_argument("--jobs", type=numargs.COUNT, default=2, help="worker processes (1: in this process)")
    parser.add_argument("--faults", default=None, metavar="I,J,...",
                        help="with --seed: keep only these planned faults (a minimized reproduction)")
    parser.add_argument("--minimize", action="store_true", help="with --seed: shrink a failing fault plan")
    parser.add_argument("--trail", action="store_true", help="with --seed: print the whole trail")
    parser.set_defaults(handler=_run)


def _check(args: argparse.Namespace) -> None:
    if args.scenario is not None and args.scenario not in SCENARIOS:
        raise InvalidInput(f"--scenario {args.scenario!r}; accepted: {', '.join(SCENARIOS)}", value=args.scenario)
    for flag in ("steps", "jobs"):
        if getattr(args, flag) < 1:
            raise InvalidInput(f"--{flag} {getattr(args, flag)} must be >= 1", value=getattr(args, flag))
    if args.seeds is not None and args.seeds < 1:
        raise InvalidInput(f"--seeds {args.seeds} must be >= 1", value=args.seeds)
    if (args.faults or args.minimize or args.trail) and args.seed is None:
        raise InvalidInput("--faults, --minimize and --trail need --seed", value="--seed")


def _keep(text: str | None) -> frozenset[int] | None:
    if text is None:
        return None
    try:
        return frozenset(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise InvalidInput(f"--faults {text!r}: expected comma-separated fault indices", value=text) from None


def _run(args: argparse.Namespace) -> int:
    _check(args)
    if args.seed is not None:
        return _replay(args)
    seeds = range(args.first_seed, args.first_seed + (args.seeds or 100))
    return _many(seeds, args.scenario, args.steps, args.jobs)


# -- one seed ------------------------------------------------------------------------------------
def _replay(args: argparse.Namespace) -> int:
    scenario = args.scenario or scenario_for(args.seed).name
    keep = _keep(args.faults)
    result = simulate(args.seed, scenario, args.steps, keep)
    if args.trail:
        print("\n".join(_trail(args.seed, scenario, args.steps, keep)))
    if result.ok:
        print(f"seed {args.seed} ({scenario}, {args.steps} steps): ok; {result.records} records, "
              f"{result.faults} faults, {result.delivery_faults} delivery faults; trail {result.digest[:16]}")
        return 0
    if args.minimize:
        keep, result = minimize(args.seed, scenario, args.steps, result)
    print(reproduction(result, keep))
    return 1


def _trail(seed: int, scenario: str, steps: int, keep: frozenset[int] | None) -> list[str]:
    from actors.runtime.sim.run import trail_of  # the whole trail is only kept on request

    return trail_of(seed, scenario, steps, keep)


def reproduction(result: SimResult, keep: frozenset[int] | None = None) -> str:
    """What a failing seed prints: enough to replay it and to read what happened."""
    faults = f" --faults {','.join(str(i) for i in sorted(keep))}" if keep is not None else ""
    lines = [f"FAILED seed {result.seed} scenario {result.scenario} ({result.steps} steps)",
             f"broken: {result.violation}",
             f"replay: lbctl sim --seed {result.seed} --scenario {result.scenario} --steps {result.steps}{faults}",
             f"fault schedule ({len(result.plan)} planned faults up to the failure):"]
    lines += [f"  {fault}" for fault in result.plan]
    lines.append(f"event trail (last {len(result.trail_tail)} lines):")
    lines += [f"  {line}" for line in result.trail_tail]
    return "\n".join(lines)


# -- many seeds ----------------------------------------------------------------------------------
@dataclass(slots=True)
class _Row:
    seeds: int = 0
    failed: list[int] = field(default_factory=list)
    records: int = 0
    faults: int = 0
    delivery: int = 0


def _one(job: tuple[int, str, int]) -> SimResult:
    seed, scenario, steps = job
    return simulate(seed, scenario, steps)


def _chunk(jobs: list[tuple[int, str, int]]) -> list[SimResult]:
    return [_one(job) for job in jobs]


def _results(jobs: list[tuple[int, str, int]], workers: int) -> Iterator[SimResult]:
    """Results as they finish (a slow seed holds back no other seed's progress); small chunks, so
    the first ones come within seconds even for 10,000 seeds."""
    if workers == 1:
        yield from map(_one, jobs)
        return
    size = max(1, min(8, len(jobs) // (workers * 50)))
    with ProcessPoolExecutor(workers) as pool:
        pending = [pool.submit(_chunk, jobs[i:i + size]) for i in range(0, len(jobs), size)]
        for done in as_completed(pending):
            yield from done.result()


PLAIN_EVERY_S = 10.0
"""Off a terminal, a progress line at least this often (and every 5 % of the seeds)."""


def _plain_line(done: int, total: int, failures: list[SimResult], elapsed: float) -> str:
    rate = done / elapsed if elapsed > 0 else 0.0
    left = f", about {(total - done) / rate:.0f} s left" if rate > 0 and done < total else ""
    failing = sorted(f.seed for f in failures)
    return (f"sim: {done}/{total} seeds, {len(failing)} failing {failing[:10]}, "
            f"{elapsed:.0f} s{left}")


def _many(seeds: Iterable[int], scenario: str | None, steps: int, workers: int) -> int:
    jobs = [(s, scenario or scenario_for(s).name, steps) for s in seeds]
    console = Console(stderr=True)
    rows: dict[str, _Row] = {}
    failures: list[SimResult] = []
    started = last_line = time.perf_counter()
    columns = (TextColumn("sim"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[bad]} failing"),
               TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn())
    if not console.is_terminal:  # said at once: a long run shows it started before any seed ends
        print(f"sim: {len(jobs)} seeds x {steps} steps on {workers} worker(s); a line every "
              f"{PLAIN_EVERY_S:.0f} s and every 5 %", file=sys.stderr, flush=True)
    with Progress(*columns, console=console, transient=not console.is_terminal) as progress:
        task = progress.add_task("seeds", total=len(jobs), bad=0)
        for result in _results(jobs, workers):
            row = rows.setdefault(result.scenario, _Row())
            row.seeds, row.records = row.seeds + 1, row.records + result.records
            row.faults, row.delivery = row.faults + result.faults, row.delivery + result.delivery_faults
            if not result.ok:
                row.failed.append(result.seed)
                failures.append(result)
            progress.update(task, advance=1, bad=len(failures))
            done, now = sum(r.seeds for r in rows.values()), time.perf_counter()
            if not console.is_terminal and (done % max(1, len(jobs) // 20) == 0 or not result.ok
                                            or now - last_line >= PLAIN_EVERY_S or done == len(jobs)):
                print(_plain_line(done, len(jobs), failures, now - started), file=sys.stderr, flush=True)
                last_line = now
    elapsed = time.perf_counter() - started
    for row in rows.values():
        row.failed.sort()
    failures.sort(key=lambda f: f.seed)
    for failure in failures[:3]:
        print(reproduction(failure), end="\n\n")
    Console().print(_table(rows, steps, elapsed))
    return 1 if failures else 0


def _table(rows: dict[str, _Row], steps: int, elapsed: float) -> Table:
    table = Table(title=f"lbctl sim: {sum(r.seeds for r in rows.values())} seeds x {steps} steps "
                        f"in {elapsed:.0f} s")
    for name in ("scenario", "seeds", "violations", "records", "faults", "delivery faults", "failing seeds"):
        table.add_column(name, justify="left" if name in ("scenario", "failing seeds") else "right")
    for name in [n for n in SCENARIOS if n in rows]:
        row = rows[name]
        shown = ", ".join(str(s) for s in row.failed[:8]) + (" ..." if len(row.failed) > 8 else "")
        table.add_row(name, str(row.seeds), str(len(row.failed)), str(row.records), str(row.faults),
                      str(row.delivery), shown or "-")
    total = _Row(seeds=sum(r.seeds for r in rows.values()), records=sum(r.records for r in rows.values()),
                 faults=sum(r.faults for r in rows.values()), delivery=sum(r.delivery for r in rows.values()))
    table.add_row("total", str(total.seeds), str(sum(len(r.failed) for r in rows.values())),
                  str(total.records), str(total.faults), str(total.delivery), "", end_section=True)
    return table


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - ``lbctl sim`` is the entry
    parser = argparse.ArgumentParser(prog="lbctl")
    register(parser.add_subparsers(dest="verb"))
    args = parser.parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
