"""``lbctl log dead-letters|tail|ownership|anomalies``: look into an event log, embedded
(``--log-dir``) or Kafka.

Invariants: the commands only read (a Kafka topic is never created, a missing log directory is
an error naming it); output is one line per entry: a table by default, deterministic JSON lines
with ``--json`` (sorted keys; raw bytes base64); ``tail --follow`` runs until interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path

from actors.cluster_conf import ClusterConf
from balancer.errors import MalformedInput, UnknownNamespace
from events.codec import to_json, to_json_value
from events.log.kafka import KafkaEventLog
from events.log.local import LocalEventLog
from events.log.port import DeadLetter, EventLog, Item
from events.times import iso
from lbctl.timearg import instant_arg
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
    tail.add_argument("--limit", type=int, default=None, help="at most this many entries")
    tail.add_argument("--follow", "-f", action="store_true", help="keep printing new entries")
    tail.set_defaults(handler=_tail)
    view = verbs.add_parser("ownership", help="the ownership view folded from the log (time travel)")
    _source_arguments(view)
    view.add_argument("--as-of-offset", action="append", default=[], metavar="PARTITION:OFFSET",
                      help="fold only entries before this offset (repeatable)")
    view.add_argument("--as-of-ts", type=instant_arg, default=None, metavar="TIME",
                      help="fold only events at or before TIME (ISO-8601 or epoch ms)")
    view.add_argument("--namespace", default=None, help="only this namespace")
    view.set_defaults(handler=_ownership)
    anomalies = verbs.add_parser("anomalies", help="what the ownership fold refused: gaps, "
                                 "duplicates, stale epochs, invalid transitions, dead letters")
    _source_arguments(anomalies)
    anomalies.set_defaults(handler=_anomalies)


def _source_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()  # or `lbctl --cluster FILE`: its Kafka
    source.add_argument("--log-dir", help="an embedded log directory")
    source.add_argument("--bootstrap", help="Kafka bootstrap servers (host:port,...)")
    parser.add_argument("--cluster", default="lb", help="cluster name, the topic prefix (Kafka)")
    parser.add_argument("--topic", default="events", help="stream: events, load or commands (Kafka)")
    parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")


def open_log(args: argparse.Namespace) -> EventLog:
    """The log named by ``--log-dir`` or ``--bootstrap``, or the Kafka of ``lbctl --cluster
    FILE`` (with its security settings), opened read-only in spirit."""
    if args.log_dir is not None:
        directory = Path(args.log_dir)
        if not (directory / "LOCK").exists():
            raise MalformedInput(f"--log-dir {args.log_dir!r}: not an event log directory "
                                 "(expected one written by LocalEventLog)", value=args.log_dir)
        return LocalEventLog(directory, name=args.topic)
    deployment = getattr(args, "cluster_conf", None)
    found = ClusterConf.load(deployment) if deployment is not None else None
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
    return (f"{item.partition}:{item.offset}\t{env.type} v{env.version}\tkey={env.key}\t"
            f"seq={env.seq}\tepoch={env.epoch}\tts={iso(env.ts_ms)}")


async def _list_dead(args: argparse.Namespace) -> int:
    log = open_log(args)
    try:
        await log.start()
        letters = await log.dead_letters()
    finally:
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
        await log.close()


def _dead_letters(args: argparse.Namespace) -> int:
    return asyncio.run(_list_dead(args))


def _tail(args: argparse.Namespace) -> int:
    return asyncio.run(_print_entries(args, parse_offsets(args.from_offset)))


async def _fold(args: argparse.Namespace) -> OwnershipProjection:
    log = open_log(args)
    try:
        await log.start()
        offsets = parse_offsets(getattr(args, "as_of_offset", []) or []) or None
        if offsets is None and getattr(args, "as_of_ts", None) is None:
            runner = ProjectionRunner(log, OwnershipProjection())
            await runner.catch_up()
            projection = runner.projection
        else:
            projection = await view_as_of(log, OwnershipProjection(), offsets=offsets,
                                          ts_ms=args.as_of_ts)
    finally:
        await log.close()
    assert isinstance(projection, OwnershipProjection)
    return projection


def _ownership(args: argparse.Namespace) -> int:
    projection = asyncio.run(_fold(args))
    if args.namespace is not None and args.namespace not in projection.namespaces:
        raise UnknownNamespace(f"namespace {args.namespace!r} is not in the log; known: "
                               f"{', '.join(sorted(projection.namespaces)) or 'none'}",
                               value=args.namespace)
    for row in projection.bundles(args.namespace):
        if args.json:
            print(to_json_value(dataclasses.asdict(row)).decode())
        else:
            print(f"{row.bundle}\t{row.state}\towner={row.owner or '-'}\tv{row.version}")
    return 0


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
    return 0
