"""Benchmark S6 (table S): load report traffic in a steady run.

N brokers and a namespace of B bundles with about three Zipf topics per bundle (as S1 in
``bench.scale``), on the in-process host at simulated speed (``Cluster.start(host="inproc")``):
once every bundle is Owned and ``WARMUP_MS`` simulated ms have passed (the reports of a growing
broker are over), the ``LoadReported`` records the brokers append during ``WINDOW_MS`` simulated
ms are read back from the log. Printed: their bytes as the log stores them (``events.codec``
envelopes) per bundle per minute, the reports and bundle entries they carried, and how many
of them were full reports. The bytes are what every actor that follows the log reads and
decodes, whatever host it runs on (a Ray actor over Kafka reads the same records).

``python -m bench.report_traffic [--quick] [--size 10x65536] [--json PATH]``; ``lbctl bench --only S6``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

from bench.scale import STEP_MS, _cluster, all_owned
from events.catalog import LoadReported
from events.codec import encode

FULL = (10, 65536)
QUICK = (10, 4096)
WARMUP_MS = 120_000
WINDOW_MS = 300_000
TARGET_RATIO = 0.25


async def steady(brokers: int, bundles: int, window_ms: int = WINDOW_MS) -> dict[str, Any]:
    cluster = await _cluster(brokers, bundles)
    try:
        started = time.process_time()
        while not all_owned(cluster, bundles):
            await cluster.sleep(STEP_MS)
        await cluster.sleep(WARMUP_MS)
        first = dict(cluster.view.cursor.position)
        await cluster.sleep(window_ms)
        last = dict(cluster.view.cursor.position)
        result = await cluster.view.log.read()
        size = reports = entries = full = 0
        for item in result.records:
            if not first.get(item.partition, 0) <= item.offset < last.get(item.partition, 0):
                continue
            envelope = item.envelope
            if envelope.type != LoadReported.TYPE:
                continue
            size += len(encode(envelope))
            event = envelope.typed
            assert isinstance(event, LoadReported)
            entries += len(event.bundles or ())
            if event.report() is not None:
                reports += 1
                full += not event.broker_load.get("delta", False)
        minutes = window_ms / 60_000
        return {"brokers": brokers, "bundles": bundles, "window_min": minutes, "bytes": size,
                "reports": reports, "full_reports": full, "entries": entries,
                "bytes_per_bundle_minute": size / bundles / minutes,
                "entries_per_bundle_minute": entries / bundles / minutes,
                "cpu_s": time.process_time() - started}
    finally:
        await cluster.close()


def render(row: dict[str, Any]) -> str:
    return (f"S6   {row['brokers']} x {row['bundles']:,}: {row['bytes_per_bundle_minute']:.1f} bytes per bundle per "
            f"minute ({row['bytes']:,} bytes in {row['window_min']:g} simulated min; {row['reports']:,} reports, "
            f"{row['full_reports']:,} of them full, {row['entries']:,} bundle entries, "
            f"{row['entries_per_bundle_minute']:.2f} per bundle per minute; {row['cpu_s']:.1f} CPU s)\n"
            f"target: <= {TARGET_RATIO:g} of the full reports' figure")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report_traffic", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK[0]} x {QUICK[1]:,}, a 2-minute window")
    parser.add_argument("--size", default=None, help="BROKERSxBUNDLES (default 10x65536)")
    parser.add_argument("--json", metavar="PATH", help="also write the row as JSON")
    args = parser.parse_args(argv)
    if args.size:
        try:
            brokers, bundles = (int(x) for x in args.size.lower().split("x"))
        except ValueError:
            raise SystemExit(f"--size {args.size!r}: expected BROKERSxBUNDLES, e.g. 10x65536") from None
    else:
        brokers, bundles = QUICK if args.quick else FULL
    row = asyncio.run(steady(brokers, bundles, 120_000 if args.quick else WINDOW_MS))
    table = [{"id": "S6", "size": f"{brokers} x {bundles:,}", **row}]
    print(render(row))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"rows": table}, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
