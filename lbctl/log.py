"""``lbctl log dead-letters|tail|ownership|anomalies|root|retain``: look into an event log, embedded
(``--log-dir``) or Kafka, and drop what no reader of an embedded one needs.

Invariants: the commands only read (a Kafka topic is never created, a missing log directory is
an error naming it), but ``retain --apply``; output is one line per entry: a table by default,
deterministic JSON lines with ``--json`` (sorted keys; raw bytes base64), a record's table row
ending with ``by=`` the principal of an admin write when it names one; ``tail --follow`` runs
until interrupted; a read of a retained log names, on stderr, the records retention dropped; a fold pinned to the
cluster's root key (``--root-key``, broker.conf's ``bundleBalancerRootKey``) refuses a log founded
under another root (one line, exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path

from actors.cluster.kept import LOG_SUBDIR, read_spec, state_dir
from actors.retention import Holder, report_lines, retain
from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput, MalformedInput, UnknownNamespace
from events.codec import to_json, to_json_value
from events.log.kafka import KafkaEventLog
from events.log.local import LocalEventLog
from events.log.port import DeadLetter, EventLog, Item, dropped_note
from events.times import iso
from lbctl import numargs
from lbctl.settings import deployment_of
from lbctl.timearg import instant_arg
from projections.authority import Trust, check_pinned, key_text, parse_key
from projections.ownership import OwnershipProjection
from projections.runner import ProjectionRunner, view_as_of


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("log", help="read the event log: dead letters, tail")
    verbs = parser.add_subparsers(dest="log_verb", metavar="VERB")
    verbs.required = True
    dead = verbs.add_parser("dead-letters", help="list entries that are not readable events")
    _source_arguments(dead)
    dead.set_defaults(handler=_dead_letters)
    tail = verbs.add_parser("tail", help="print entries as JSON lines")
    _source_arguments(tail)
    tail.add_argument("--from-offset", action="append", default=[], metavar="PARTITION:OFFSET",
                      help="start here (repeatable; other partitions start at 0)")
    tail.add_argument("--from-ts", type=instant_arg, default=None, metavar="TIME",
                      help="start at the first entry at or after TIME (ISO-8601 or epoch ms)")
    tail.add_argument("--limit", type=numargs.COUNT, default=None, help="at most this many entries")
    tail.add_argument("--follow", "-f", action="store_true", help="keep printing new entries")
    tail.set_defaults(handler=_tail)
    view = verbs.add_parser("ownership", help="the ownership view folded from the log (time travel)")
    _source_arguments(view)
    pin_arguments(view)
    view.add_argument("--as-of-offset", action="append", default=[], metavar="PARTITION:OFFSET",
                      help="fold only entries before this offset (repeatable)")
    view.add_argument("--as-of-ts", type=instant_arg, default=None, metavar="TIME",
                      help="fold only events at or before TIME (ISO-8601 or epoch ms)")
    view.add_argument("--namespace", default=None, help="only this namespace")
    view.set_defaults(handler=_ownership)
    anomalies = verbs.add_parser("anomalies", help="what the ownership fold refused: gaps, "
                                 "duplicates, stale epochs, invalid transitions, dead letters")
    _source_arguments(anomalies)
    pin_arguments(anomalies)
    anomalies.set_defaults(handler=_anomalies)
    root = verbs.add_parser("root", help="the root public key the log was founded under (what "
                            "--root-key and bundleBalancerRootKey pin)")
    _source_arguments(root)
    pin_arguments(root)
    root.set_defaults(handler=_root)
    retain = verbs.add_parser("retain", help="drop the embedded log's segments that every reader "
                              "holds in a snapshot or checkpoint (a dry run without --apply)")
    where = retain.add_mutually_exclusive_group()
    where.add_argument("--state-dir", default=None,
                       help="the cluster `lbctl run --keep` recorded (default: $LBCTL_STATE_DIR, .lbctl)")
    where.add_argument("--log-dir", default=None, help="an embedded log directory")
    retain.add_argument("--apply", action="store_true", help="drop them (default: only list them)")
    retain.add_argument("--ignore", action="append", default=[], metavar="READER",
                        help="do not count this reader (one gone for good), e.g. snapshot:broker_broker-4")
    retain.set_defaults(handler=_retain)


def _source_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()  # or `lbctl --cluster FILE`: its Kafka
    source.add_argument("--log-dir", help="an embedded log directory")
    source.add_argument("--bootstrap", help="Kafka bootstrap servers (host:port,...)")
    parser.add_argument("--cluster", default="lb", help="cluster name, the topic prefix (Kafka)")
    parser.add_argument("--topic", default="events", help="stream: events, load or commands (Kafka)")
    parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")


def pin_arguments(parser: argparse.ArgumentParser, *, conf: bool = True) -> None:
    parser.add_argument("--root-key", default=None, metavar="BASE64",
                        help="the cluster's root public key: refuse a log founded under another "
                             "(default: --conf's bundleBalancerRootKey; none: trust the log's first "
                             "signed record)")
    if conf:
        parser.add_argument("--conf", default=None, help="broker.conf (its bundleBalancerRootKey)")


def pinned_root(args: argparse.Namespace) -> bytes | None:
    """The root key a reader pins: ``--root-key``, else ``--conf``'s ``bundleBalancerRootKey``."""
    text = getattr(args, "root_key", None)
    source = "--root-key"
    if text is None and getattr(args, "conf", None) is not None:
        text = LoadBalancerConfig.from_broker_conf(Path(args.conf).read_text()).bundle_balancer_root_key
        source = f"{args.conf}: bundleBalancerRootKey"
    return None if text is None else parse_key(text, source)


def open_log(args: argparse.Namespace) -> EventLog:
    """The log named by ``--log-dir`` or ``--bootstrap``, or the Kafka of ``lbctl --cluster
    FILE`` (with its security settings), opened read-only in spirit."""
    if args.log_dir is not None:
        directory = Path(args.log_dir)
        if not (directory / "LOCK").exists():
            raise MalformedInput(f"--log-dir {args.log_dir!r}: not an event log directory "
                                 "(expected one written by LocalEventLog)", value=args.log_dir)
        return LocalEventLog(directory, name=args.topic)
    found = deployment_of(args)
    if found is not None and args.bootstrap is None:
        args.bootstrap, args.cluster = found.kafka.bootstrap_servers, found.name
    if args.bootstrap is None:
        raise MalformedInput("no log: give --log-dir, --bootstrap or lbctl --cluster FILE",
                             value="--log-dir")
    return KafkaEventLog(args.bootstrap, cluster=args.cluster, name=args.topic, create_topic=False,
                         security=found.kafka.security if found is not None else None)


def parse_offsets(values: list[str]) -> dict[int, int]:
    offsets: dict[int, int] = {}
    for value in values:
        partition, _, offset = value.partition(":")
        try:
            offsets[int(partition)] = int(offset)
        except ValueError:
            raise MalformedInput(f"--from-offset {value!r}: expected PARTITION:OFFSET, e.g. 0:120",
                                 value=value) from None
    return offsets


def dead_letter_line(letter: DeadLetter, as_json: bool) -> str:
    if as_json:
        return to_json_value(letter.to_dict()).decode()
    return (f"{letter.partition}:{letter.offset}\t{letter.reason}\tkey={letter.key}\t"
            f"{len(letter.raw)} bytes\t{letter.error}")


def item_line(item: Item, as_json: bool) -> str:
    if isinstance(item, DeadLetter):
        line = dead_letter_line(item, as_json)
        return line if as_json else f"DEAD {line}"
    if as_json:
        return to_json(item.envelope).decode()
    env = item.envelope
    line = (f"{item.partition}:{item.offset}\t{env.type} v{env.version}\tkey={env.key}\t"
            f"seq={env.seq}\tepoch={env.epoch}\tts={iso(env.ts_ms)}")
    by = env.payload.get("by")
    if isinstance(by, str):  # the principal of an admin write; escaped so it stays one cell
        line += f"\tby={by if by.isprintable() else repr(by)}"
    return line


async def _list_dead(args: argparse.Namespace) -> int:
    log = open_log(args)
    try:
        await log.start()
        letters = await log.dead_letters()
    finally:
        _notes(log)
        await log.close()
    for letter in letters:
        print(dead_letter_line(letter, args.json))
    if not args.json:
        print(f"{len(letters)} dead letter(s)", file=sys.stderr)
    return 0


async def _print_entries(args: argparse.Namespace, start: Mapping[int, int]) -> int:
    log = open_log(args)
    try:
        await log.start()
        if args.from_ts is None:
            await _warn_dropped(log, start)
        if not args.follow:
            result = await log.read(start, from_ts_ms=args.from_ts, limit=args.limit)
            for item in result.items:
                print(item_line(item, args.json))
            return 0
        printed = 0
        async for item in log.subscribe(start, from_ts_ms=args.from_ts):
            print(item_line(item, args.json), flush=True)
            printed += 1
            if args.limit is not None and printed >= args.limit:
                break
        return 0
    finally:
        _notes(log)
        await log.close()


async def _warn_dropped(log: EventLog, start: Mapping[int, int]) -> None:
    """Name the records retention dropped that a read from ``start`` would have begun with."""
    starts = getattr(log, "start_offsets", None)
    if starts is None:  # Kafka: its own logStartOffset, not this log's retention
        return
    held: dict[int, int] = await starts()
    dropped = {p: first for p, first in held.items() if start.get(p, 0) < first}
    if dropped:
        print(f"lbctl: note: {dropped_note(dropped)}; the entries start there", file=sys.stderr)


def _retain(args: argparse.Namespace) -> int:
    log_dir, others = _retained_log(args)
    report = retain(log_dir, apply=args.apply, ignore=args.ignore, others=others)
    for line in report_lines(report):
        print(line)
    return 0


def _retained_log(args: argparse.Namespace) -> tuple[Path, list[Holder]]:
    """The embedded log ``retain`` works on, and the readers its directory does not show."""
    if args.log_dir is not None:
        directory = Path(args.log_dir)
        if not (directory / "LOCK").exists():
            raise MalformedInput(f"--log-dir {args.log_dir!r}: not an event log directory "
                                 "(expected one written by LocalEventLog)", value=args.log_dir)
        return directory, []
    root = state_dir(args.state_dir)
    spec = read_spec(root)
    if spec.host == "inproc":
        # Each verb rebuilds every body of an in-process cluster from offset 0 (their snapshots
        # live in its memory only): they hold the floor at 0 unless the operator says otherwise.
        return root / LOG_SUBDIR, [Holder("inproc:bodies", 0, "an in-process cluster's bodies keep "
                                          "no snapshots on disk; every verb folds the log from 0")]
    if spec.log_dir is None:
        raise InvalidInput(f"--state-dir {str(root)!r}: the cluster's log is Kafka; its retention is "
                           "Kafka's own (retention.ms), not `lbctl log retain`", value=str(root))
    return Path(spec.log_dir), []


def _dead_letters(args: argparse.Namespace) -> int:
    return asyncio.run(_list_dead(args))


def _tail(args: argparse.Namespace) -> int:
    return asyncio.run(_print_entries(args, parse_offsets(args.from_offset)))


def _notes(log: EventLog) -> None:
    """What the embedded log did not trust (a rebuilt index, a stray file), one line each."""
    for note in getattr(getattr(log, "store", None), "notes", []):
        print(f"lbctl: note: {note}", file=sys.stderr)


async def _fold(args: argparse.Namespace) -> OwnershipProjection:
    pin = pinned_root(args)  # a bad key is refused before the log is opened
    log = open_log(args)
    fresh = OwnershipProjection(trust=None if pin is None else Trust(root=pin, pinned=True))
    try:
        await log.start()
        offsets = parse_offsets(getattr(args, "as_of_offset", []) or []) or None
        await _warn_dropped(log, {})
        if offsets is None and getattr(args, "as_of_ts", None) is None:
            runner = ProjectionRunner(log, fresh)
            await runner.catch_up()
            projection = runner.projection
        else:
            projection = await view_as_of(log, fresh, offsets=offsets, ts_ms=args.as_of_ts)
    finally:
        _notes(log)
        await log.close()
    assert isinstance(projection, OwnershipProjection)
    check_pinned(projection.trust, pin, args.log_dir or f"the {args.topic} log of {args.bootstrap}")
    return projection


def _root(args: argparse.Namespace) -> int:
    projection = asyncio.run(_fold(args))
    founder = projection.trust.founder if projection.trust is not None else None
    if founder is None:
        print("lbctl: the log has no signed record: no root", file=sys.stderr)
        return 1
    print(key_text(founder))
    return 0


def _ownership(args: argparse.Namespace) -> int:
    projection = asyncio.run(_fold(args))
    if args.namespace is not None and args.namespace not in projection.namespaces:
        raise UnknownNamespace(f"namespace {args.namespace!r} is not in the log; known: "
                               f"{', '.join(sorted(projection.namespaces)) or 'none'}",
                               value=args.namespace)
    for row in projection.bundles(args.namespace):
        degraded = projection.degraded_reason(namespace_of(row.bundle))
        if args.json:
            fields = dataclasses.asdict(row)
            if degraded is not None:
                fields["degraded"] = degraded
            print(to_json_value(fields).decode())
        else:
            mark = "\tDEGRADED" if degraded is not None else ""
            print(f"{row.bundle}\t{row.state}\towner={row.owner or '-'}\tv{row.version}{mark}")
    _warn_degraded(projection)
    return 0


def _warn_degraded(projection: OwnershipProjection) -> None:
    for key, why in sorted(projection.degraded.items()):
        print(f"lbctl: warning: the view of {key} is degraded: {why}", file=sys.stderr)


def _anomalies(args: argparse.Namespace) -> int:
    projection = asyncio.run(_fold(args))
    for anomaly in projection.anomalies:
        if args.json:
            print(to_json_value(anomaly.to_dict()).decode())
        else:
            print(f"{anomaly.offset}\t{anomaly.kind}\t{anomaly.event_type}\tkey={anomaly.key}"
                  f"\tseq={anomaly.seq}\t{anomaly.detail}")
    if not args.json:
        print(f"{len(projection.anomalies)} anomaly(ies)", file=sys.stderr)
    _warn_degraded(projection)
    return 0
