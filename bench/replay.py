"""Benchmarks A10, A11 (docs/spec/bench.md): Spark replay on local[2], driver at 1 GiB.

- A10  audit of N events (all checks)      vs ``count()`` over the same Parquet data: events/s, ratio
       (after one untimed audit of 100k events that warms the JVM; 1M: the best of 3);
- A11  what-if sweep of C configs x H hours vs one config over the same recording: configs/min.
Synthetic data is written straight to Parquet with pyarrow in the decoded schema (half load
reports on broker keys, half ownership events cycling Assigned -> Owned -> TransferPrepared per
bundle, gap-free seq per key, a clean log), so the figure is the audit, not the generator.

``python -m bench.replay [--quick]`` prints the table and writes ``bench/results/replay.json``;
``--quick`` audits 1M events (full: 1M and 10M) and sweeps fewer configs.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.eventlog import machine, publish
from spark_replay.sources import ARROW_SCHEMA

BROKERS, NAMESPACES, BUNDLES = 20, 50, 16
CHUNK = 1_000_000


@dataclass(frozen=True)
class Row:
    id: str
    what: str
    figure: float
    reference: float
    unit: str

    @property
    def ratio(self) -> float:
        return self.figure / self.reference if self.reference else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}


def _strings(indices: np.ndarray, names: list[str]) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(indices.astype(np.int32)), pa.array(names)).cast(pa.string())


def _chunk(start: int, stop: int) -> pa.Table:
    idx = np.arange(start, stop, dtype=np.int64)
    load, i = idx % 2 == 0, idx // 2
    brokers = [f"broker-{b}" for b in range(BROKERS)]
    ns_names = [f"t/ns{k}" for k in range(NAMESPACES)]
    k, j = i % NAMESPACES, i // NAMESPACES
    bundle = k * BUNDLES + j % BUNDLES
    rnd = j // BUNDLES
    phase, turn = rnd % 3, rnd // 3
    owner = (bundle + turn) % BROKERS
    key_idx = np.where(load, i % BROKERS, BROKERS + k)
    types = ["LoadReported", "BundleAssigned", "BundleOwned", "TransferPrepared"]
    type_idx = np.where(load, 0, 1 + phase)
    bundle_names = [f"t/ns{b // BUNDLES}/0x{(b % BUNDLES) * (1 << 28):08x}_0x{(b % BUNDLES + 1) * (1 << 28) - 1:08x}"
                    for b in range(NAMESPACES * BUNDLES)]
    cols: dict[str, pa.Array] = {
        "topic": _strings(np.zeros(len(idx)), ["events"]),
        "partition": pa.array((key_idx % 3).astype(np.int32)), "offset": pa.array(idx),
        "key": _strings(key_idx, brokers + ns_names),
        "type": _strings(type_idx, types), "version": pa.array(np.ones(len(idx), np.int32)),
        "seq": pa.array(np.where(load, i // BROKERS, j) + 1), "epoch": pa.array(np.ones(len(idx), np.int64)),
        "ts": pa.array(1_700_000_000_000 + idx),
        "bundle": pa.array(np.where(load, None, np.array(bundle_names, dtype=object)[bundle]), pa.string()),
        "broker": _strings(np.where(load, i % BROKERS, owner), brokers),
        "src": pa.array(np.where(phase == 2, np.array(brokers, dtype=object)[owner], None), pa.string()),
        "cpu": pa.array(np.where(load, 0.5, np.nan)),
    }
    arrays = [cols[f.name] if f.name in cols else pa.nulls(len(idx), f.type) for f in ARROW_SCHEMA]
    table = pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)
    return table


def write_events(path: Path, n: int) -> Path:
    with pq.ParquetWriter(path, ARROW_SCHEMA) as writer:
        for start in range(0, n, CHUNK):
            writer.write_table(_chunk(start, min(n, start + CHUNK)))
    return path


def a10(spark: Any, n: int, folder: Path, repeats: int = 1) -> Row:
    from spark_replay.audit import audit
    from spark_replay.sources import read_parquet

    path = str(write_events(folder / f"events-{n}.parquet", n))
    df = read_parquet(spark, path)
    t0 = time.perf_counter()
    assert df.count() == n
    count_s = time.perf_counter() - t0
    audit_s = float("inf")
    for _ in range(repeats):  # the best of a few, as A2 takes: the JIT keeps compiling
        t0 = time.perf_counter()
        report = audit(df)
        audit_s = min(audit_s, time.perf_counter() - t0)
    assert report.events == n, report.by_check()
    best = f", best of {repeats}" if repeats > 1 else ""
    return Row("A10", f"audit {n:,} events ({len(report.violations)} violations{best}) vs count()",
               n / audit_s, n / count_s, "events/s")


def warm_up(spark: Any, folder: Path, n: int = 100_000) -> None:
    from spark_replay.audit import audit
    from spark_replay.sources import read_parquet

    audit(read_parquet(spark, str(write_events(folder / "warm-up.parquet", n))))


def _recording(hours: int) -> Any:
    from spark_replay.whatif import Recording

    rng = np.random.default_rng(7)
    bundles = [f"t/ns/0x{b:08x}_0x{b + 1:08x}" for b in range(64)]
    rates = rng.zipf(1.5, len(bundles)).clip(1, 50) * 2_000.0
    trace = [{b: [r, r, r * 1024, r * 1024, 10.0] for b, r in zip(bundles, rates * (1 + 0.2 * np.sin(c / 30)), strict=True)}
             for c in range(hours * 60)]
    brokers = {f"broker-{i}": (0.05, 1 / (200 * 1024 * 1024)) for i in range(10)}
    owners = {b: f"broker-{i % 3}" for i, b in enumerate(bundles)}
    return Recording(1_700_000_000_000, 60_000, brokers, owners, trace)


def a11(spark: Any, configs: int, hours: int) -> Row:
    from spark_replay.whatif import expand_grid, sweep

    recording = _recording(hours)
    strategies = ["ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder"]
    one = expand_grid({}, ["ThresholdShedder"], {})
    many = expand_grid({}, strategies, {"loadBalancerBrokerThresholdShedderPercentage":
                                        list(range(5, 5 + 5 * max(1, configs // len(strategies)), 5))})
    t0 = time.perf_counter()
    sweep(spark, recording, one)
    one_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sweep(spark, recording, many)
    many_s = time.perf_counter() - t0
    return Row("A11", f"what-if {len(many)} configs x {hours} h (64 bundles, 10 brokers) vs 1 config",
               len(many) / many_s * 60, 1 / one_s * 60, "configs/min")


def run(quick: bool = False) -> list[Row]:
    from spark_replay.session import session

    spark = session("local[2]", driver_memory="1g")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        # One untimed audit first: the JVM compiles the window and sort code on first use (the
        # first 1M audit took 17.7 s, the next 10.5 s), and the figure is the audit, not the JIT.
        warm_up(spark, Path(tmp))
        for n in ([1_000_000] if quick else [1_000_000, 10_000_000]):
            rows.append(a10(spark, n, Path(tmp), repeats=3 if n <= 1_000_000 else 1))
    rows.append(a11(spark, 4 if quick else 16, 1 if quick else 6))
    spark.stop()
    return rows


def table(rows: list[Row]) -> str:
    head = f"{'id':<4} {'what':<66} {'figure':>11} {'reference':>11} {'ratio':>6} unit"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.id:<4} {r.what:<66} {r.figure:>11,.1f} {r.reference:>11,.1f} {r.ratio:>6.2f} {r.unit}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replay", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rows = run(args.quick)
    publish("replay", machine(), table(rows), rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
