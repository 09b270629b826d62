"""``lbctl bench [--quick] [--only A1,B]`` and ``lbctl bench --compare OLD.json NEW.json``.

Runs the tables of docs/spec/bench.md through ``bench.runner`` (each module in its own
process), shows progress while it runs (rich; plain lines when stdout is not a terminal), prints
the header (machine, versions) and every table, and writes one combined, timestamped run file
to ``bench/results/``. ``--compare`` prints the change of every headline figure between two run
files and runs nothing.

Invariants: an unknown table in ``--only`` or an unreadable run file is bad input (exit 2); a
module that failed makes the exit status 1 after every other module has run; a missing module
(``bench.replay`` before it lands) is "not run (module missing)" and does not fail the run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from balancer.errors import MalformedInput
from bench import compare, runner


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("bench", help="run the benchmark tables A1-A11, B and S1-S5 "
                                "(S1r and S1r-50/S2r-50, Ray + Kafka, and O1-O2, drains and the throttle, with --only) "
                                "or compare two runs")
    parser.add_argument("--quick", action="store_true", help="small sizes: the whole run in < 3 min")
    parser.add_argument("--only", metavar="IDS", help=f"only these tables, e.g. A1,B (of {','.join(runner.ALL_IDS)})")
    parser.add_argument("--out", metavar="DIR", default=str(runner.RESULTS), help="where the run file goes")
    parser.add_argument("--compare", nargs=2, metavar=("OLD.json", "NEW.json"),
                        help="show the change between two run files; runs nothing")
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    if args.compare:
        return _compare(*args.compare)
    try:
        modules = runner.select(runner.SUITE, args.only)
    except ValueError as exc:
        raise MalformedInput(f"--only {args.only!r}: {exc}", value=args.only) from None
    console = Console()
    record = _run_with_progress(modules, args.quick, console)
    print(runner.render_run(record))
    path = runner.write_run(record, Path(args.out))
    print(f"\nresults: {path}")
    return 1 if any(m["status"] == "failed" for m in record["modules"]) else 0


def _run_with_progress(modules: list[runner.Module], quick: bool, console: Console) -> dict[str, Any]:
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed}/{task.total} modules"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        overall = progress.add_task("bench", total=len(modules))
        current: dict[str, TaskID] = {}

        def listener(module: runner.Module, outcome: runner.Outcome | None) -> None:
            ids = ",".join(module.ids)
            if outcome is None:
                current[module.name] = progress.add_task(f"  {ids}: {module.what}", total=None)
                progress.update(overall, description=f"bench: {ids}")
                return
            progress.remove_task(current.pop(module.name))
            progress.advance(overall)
            status = runner.NOT_RUN_MISSING if outcome.status == "missing" else outcome.status
            progress.console.print(f"{ids:<12} {status:<26} {outcome.seconds:6.1f} s  {module.name}")

        return runner.run_suite(modules, quick, listener=listener)


def _compare(old_path: str, new_path: str) -> int:
    runs = []
    for path in (old_path, new_path):
        try:
            runs.append(compare.load(path))
        except (OSError, ValueError, json.JSONDecodeError) as exc:
            raise MalformedInput(f"--compare {path!r}: {exc}", value=path) from None
    print(compare.compare(runs[0], runs[1]))
    return 0
