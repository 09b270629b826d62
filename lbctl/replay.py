"""``lbctl replay audit|timeline|whatif|export-parquet|import-pulsar``: Spark jobs over a log.

Invariants: a source is ``kafka://HOST:PORT`` (with ``--topic``; ``--starting-offsets`` and
``--ending-offsets`` bound the read as Spark's Kafka source does), a LocalEventLog directory or a
Parquet export; ``--master`` defaults to ``local[2]``, or to what ``spark-submit`` set when the
job runs through ``bin/spark-replay.py``; a corrupt record is reported with its offset and skipped, never a crash; an
unknown strategy or broker.conf key in a grid, and a source that is not there, are an
``InvalidInput`` naming it (exit 2) found before Spark starts; a job reads and decodes its log
once (``decoded_once``), whatever number of queries it then asks; ``audit`` exits 1 when it finds a violation, 0 when the log is clean;
long work shows a progress spinner on stderr (plain lines when stderr is not a terminal).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from balancer.config import LoadBalancerConfig
from balancer.errors import MalformedInput
from events.envelope import Stamper
from events.log.local import LocalEventLog
from events.log.port import dropped_note
from events.times import iso
from lbctl import numargs
from lbctl.log import pin_arguments, pinned_root
from lbctl.settings import deployment_of, settings_of

SUBMITTED = "BB_SPARK_SUBMITTED"  # set by bin/spark-replay.py: spark-submit chose the master


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("replay", help="Spark jobs over the log: audit, timeline, what-if")
    verbs = parser.add_subparsers(dest="replay_verb", metavar="VERB")
    verbs.required = True
    audit = verbs.add_parser("audit", help="check the invariants over the whole history")
    _source(audit)
    audit.add_argument("--in-flight-ms", type=numargs.COUNT, default=None,
                       help="in-flight wait (default: broker.conf's, 30000)")
    audit.add_argument("--moves", action="store_true", help="also print moves per broker and hour")
    audit.set_defaults(handler=_audit)
    timeline = verbs.add_parser("timeline", help="bundle -> owner intervals")
    _source(timeline)
    timeline.add_argument("--bundle", default=None, help="only this bundle")
    timeline.set_defaults(handler=_timeline)
    whatif = verbs.add_parser("whatif", help="sweep strategies and settings over recorded load")
    _source(whatif)
    whatif.add_argument("--grid", default=None, help="YAML grid: strategies, sweep, base")
    whatif.add_argument("--strategy", action="append", default=[], help="a strategy (repeatable)")
    whatif.add_argument("--set", action="append", default=[], metavar="KEY=V1,V2",
                        help="sweep a broker.conf key over values (repeatable)")
    whatif.add_argument("--report", default=None, metavar="DIR",
                        help="write PNG plots and report.html (with the audit's findings and an "
                             "ownership Gantt chart per namespace)")
    whatif.add_argument("--seed", type=numargs.NATURAL, default=0)
    whatif.set_defaults(handler=_whatif)
    export = verbs.add_parser("export-parquet", help="write the decoded log as Parquet")
    _source(export)
    export.add_argument("out", metavar="OUT", help="the Parquet folder to write (replaced)")
    export.set_defaults(handler=_export)
    imp = verbs.add_parser("import-pulsar", help="Pulsar load reports -> LoadReported events")
    imp.add_argument("files", nargs="+", metavar="FILE")
    imp.add_argument("--log-dir", required=True, help="the embedded log directory to write")
    imp.set_defaults(handler=_import)


def _source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", nargs="?", default=None,
                        help="kafka://HOST:PORT, a log directory or a Parquet path (default with "
                             "lbctl --cluster FILE: its Kafka's events topic, with its security)")
    parser.add_argument("--topic", action="append", default=[], help="Kafka topic(s) to read")
    parser.add_argument("--conf", default=None, help="broker.conf of the recorded cluster")
    parser.add_argument("--starting-offsets", default=None, metavar="SPEC",
                        help="Kafka only: earliest (default), latest or Spark's per-partition JSON")
    parser.add_argument("--ending-offsets", default=None, metavar="SPEC",
                        help="Kafka only: latest (default) or Spark's per-partition JSON")
    parser.add_argument("--master", default=None,
                        help="Spark master (default: spark-submit's, else lbctl --cluster's "
                             "spark.master, else local[2])")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    pin_arguments(parser, conf=False)


def _bounds_checked(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Offset bounds on a source that has none are refused before Spark (and its spinner) start."""
    def checked(args: argparse.Namespace) -> int:
        from spark_replay.sources import check_bounds

        if args.source is not None:  # none: lbctl --cluster's Kafka, which takes bounds
            check_bounds(args.source, args.starting_offsets, args.ending_offsets)
        return handler(args)

    return checked


@contextmanager
def _progress(console: Console) -> Iterator[Any]:
    """A spinner with the step under way and the time so far; where stderr is no terminal, one
    line per step with the seconds since the start (Spark runs lazily: a step's time is that of
    the work its first result needed), and the total at the end."""
    began = time.monotonic()

    def line(text: str) -> None:
        if not console.is_terminal:
            console.print(f"[{time.monotonic() - began:6.1f} s] {text}", highlight=False)

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task("starting Spark", total=None)  # a line only once it has: the
        # source is checked first, and a bad one is the only line on stderr

        def step(text: str) -> None:
            progress.update(task, description=text)
            line(text)

        yield step
        line("done")


def _config(args: argparse.Namespace) -> LoadBalancerConfig:
    return settings_of(args).balancer


def _frame(args: argparse.Namespace, step: Any, *, raw: bool = False, verify: bool = True) -> Any:
    """(spark, the log's frame, who wrote each record): with ``verify``, the records lbctl's
    reader refuses for their writer are left out of the frame (``spark_replay.authority``)."""
    from spark_replay.authority import check_authority, entitled
    from spark_replay.session import session
    from spark_replay.sources import check_source, decoded_once, read_source

    options = _kafka_options(args)  # before Spark: a refused user fails fast, in one line
    check_source(args.source, args.topic or None)  # and a path that is not there
    pin = pinned_root(args)  # and a root key that is none
    spark = session(_master(args), driver_memory=args.driver_memory)
    step(f"reading {args.source}")
    _retained_note(args.source)
    df = decoded_once(read_source(spark, args.source, topics=args.topic or None, raw=raw or verify,
                                  starting=args.starting_offsets, ending=args.ending_offsets,
                                  kafka_options=options))
    if not verify:
        return spark, df, None
    step("checking who wrote each record")
    trust = check_authority(df, root=pin, source=args.source or "the log")
    df = entitled(df, trust)
    return spark, (df if raw or "value" not in df.columns else df.drop("value")), trust


def _retained_note(source: str | None) -> None:
    """A log directory whose first records retention dropped: the replay starts after them."""
    from spark_replay.sources import segments

    if source is None or not (Path(source) / "LOCK").exists():
        return
    found = segments(source)
    if found and found[0][0] > 0:
        print(f"lbctl: note: {source}: {dropped_note({0: found[0][0]})}; this replay starts at "
              f"offset {found[0][0]}", file=sys.stderr)


def _master(args: argparse.Namespace) -> str | None:
    """``--master``, else spark-submit's (None: the session keeps it), else the deployment's
    (``lbctl --cluster FILE``: its ``spark.master``), else ``local[2]``."""
    if args.master is not None:
        return str(args.master)
    if os.environ.get(SUBMITTED) == "1":
        return None
    deployment = deployment_of(args)
    if deployment is not None:
        return deployment.spark.master
    return "local[2]"


def _kafka_options(args: argparse.Namespace) -> dict[str, str]:
    """The Kafka source's security options from ``lbctl --cluster FILE`` (which also names the
    source, its Kafka's ``{name}-events``, when none is given), checked with one fetch."""
    from events.log.kafka_client import check_readable

    found = deployment_of(args)
    if args.source is None:
        if found is None:
            raise MalformedInput("no source: give kafka://HOST:PORT, a log directory or a Parquet "
                                 "path, or lbctl --cluster FILE", value="source")
        args.source = f"kafka://{found.kafka.bootstrap_servers}"
        args.topic = args.topic or [f"{found.name}-events"]
    if found is None or not args.source.startswith("kafka://"):
        return {}
    security = found.kafka.security
    asyncio.run(check_readable(args.source.removeprefix("kafka://"), args.topic, security))
    return security.spark_options()


def _print(console: Console, args: argparse.Namespace, rows: list[dict[str, Any]], title: str) -> None:
    import pandas as pd

    from spark_replay.report import table

    if args.json:
        for row in rows:
            print(json.dumps(row, sort_keys=True, default=str))
    else:
        console.print(table(title, pd.DataFrame(rows)) if rows else f"{title}: none")


@_bounds_checked
def _audit(args: argparse.Namespace) -> int:
    from actors.leader_control import caps_of
    from spark_replay.audit import audit, move_stats
    from spark_replay.report import audit_tables

    config, console, err = _config(args), _console(), Console(stderr=True)
    wait = args.in_flight_ms or config.load_balancer_in_flight_service_unit_state_waiting_time_in_millis
    with _progress(err) as step:
        _, df, trust = _frame(args, step)
        step("auditing")
        report = audit(df, in_flight_ms=wait, caps=caps_of(config),
                       review=config.load_balancer_execution == "review", trust=trust)
        moves = [r.asDict() for r in move_stats(df).collect()] if args.moves else []
    if args.json:
        for v in report.violations:
            print(json.dumps(v.to_dict(), sort_keys=True))
    else:
        for shown in audit_tables(report):
            console.print(shown)
    if args.moves:
        _print(console, args, moves, "moves per broker and hour")
    return 0 if report.clean else 1


@_bounds_checked
def _export(args: argparse.Namespace) -> int:
    from spark_replay.sources import export_parquet

    with _progress(Console(stderr=True)) as step:
        _, df, _ = _frame(args, step, verify=False)  # a copy of the log: every record
        step(f"writing {args.out}")
        export_parquet(df, args.out)
        count = df.sparkSession.read.parquet(args.out).count()
    print(f"exported {count} record(s) to {args.out}")
    return 0


@_bounds_checked
def _timeline(args: argparse.Namespace) -> int:
    from spark_replay.audit import timeline

    console, err = _console(), Console(stderr=True)
    with _progress(err) as step:
        _, df, _ = _frame(args, step)
        step("folding ownership")
        frame = timeline(df)
        if args.bundle:
            frame = frame.where(frame.bundle == args.bundle)
        rows = [_with_times(r.asDict(), keep_ms=args.json) for r in frame.collect()]
    _print(console, args, rows, "ownership timeline")
    return 0


def _with_times(row: dict[str, Any], *, keep_ms: bool) -> dict[str, Any]:
    """An interval with its instants as ISO-8601 UTC (``from``, ``to``); the epoch ms stay in
    JSON (``from_ts``, ``to_ts``) and leave the table, which has no room for both."""
    ends = {k: iso(row[f"{k}_ts"]) if row.get(f"{k}_ts") is not None else None for k in ("from", "to")}
    shown = {"bundle": row["bundle"], "owner": row["owner"], **ends, "ended_by": row["ended_by"],
             "from_offset": row["from_offset"], "to_offset": row["to_offset"]}
    return {**shown, "from_ts": row["from_ts"], "to_ts": row["to_ts"]} if keep_ms else shown


def _base(args: argparse.Namespace) -> dict[str, Any]:
    """The recorded cluster's broker.conf (``--conf``): the live configuration and the grid's base."""
    return settings_of(args).balancer_pairs  # validated when read; a bad key is named


def _grid(args: argparse.Namespace) -> list[Any]:
    from spark_replay.whatif import expand_grid, parse_grid, parse_sets

    base = _base(args)
    if args.grid:
        return parse_grid(Path(args.grid).read_text(), base)
    return expand_grid(base, args.strategy, parse_sets(args.set))


@_bounds_checked
def _whatif(args: argparse.Namespace) -> int:
    from spark_replay.audit import audit, timeline
    from spark_replay.report import whatif_table, write_report
    from spark_replay.whatif import whatif

    grid = _grid(args)  # before Spark: a bad grid fails fast
    console, err = _console(), Console(stderr=True)
    with _progress(err) as step, ThreadPoolExecutor(1, thread_name_prefix="audit") as pool:
        spark, df, trust = _frame(args, step, raw=True)
        if args.report:  # the report's audit runs beside the sweep, on the log decoded once
            step("decoding the log")
            df.count()
            wait = _config(args).load_balancer_in_flight_service_unit_state_waiting_time_in_millis
            audited = pool.submit(lambda: (audit(df, in_flight_ms=wait, trust=trust),
                                           [r.asDict() for r in timeline(df).collect()]))
        step(f"simulating {len(grid) + 1} configuration(s)" + (" and auditing" if args.report else ""))
        result = whatif(spark, df, grid, live=_base(args), seed=args.seed, trust=trust)
        if args.report:
            report, intervals = audited.result()
            step("drawing the report")
            path = write_report(args.report, result, report, intervals, end_ms=report.end_ms)
    if args.json:
        for row in result.summary.to_dict(orient="records"):
            print(json.dumps(row, sort_keys=True, default=str))
    else:
        console.print(whatif_table(result))
        missed = _missed(result)
        if missed:
            _print(console, args, missed, "recorded decisions not reproduced")
    if args.report:
        console.print(f"report: {path}")
    return 0


def _missed(result: Any) -> list[dict[str, Any]]:
    """The recorded decisions the replay of the leader's runs does not make, with what it made."""
    if result.alignment is None:
        return []
    return [{"run (UTC)": iso(run.now_ms), "bundle": m.bundle, "from": m.source,
             "to": m.destination or "(placement)",
             "replayed": " ".join(f"{d.bundle}<-{d.source}" for d in run.replayed) or run.replayed_skip}
            for run in result.alignment.runs for m in run.missed]


def _import(args: argparse.Namespace) -> int:
    from spark_replay.pulsar import read_reports

    reports = read_reports(args.files)
    now = [0]
    stamper = Stamper(clock_ms=lambda: now[0])

    async def write() -> None:
        async with LocalEventLog(args.log_dir, stamper=stamper) as log:
            for ts, event in reports:
                now[0] = ts
                await log.append(event.broker_id, [event], epoch=0)

    asyncio.run(write())
    print(f"imported {len(reports)} load report(s) into {args.log_dir}")
    return 0


def _console() -> Console:
    """Tables keep whole cells: wide enough for them even when stdout is not a terminal."""
    return Console(width=None if sys.stdout.isatty() else 160)
