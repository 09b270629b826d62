"""Read the event log into one DataFrame: Kafka (Spark's own source), LocalEventLog files, Parquet.

Invariants:
- every source yields ``SCHEMA``: where the record is (topic, partition, offset), the envelope
  (key, type, version, seq, epoch, ts, causation) and the payload decoded to columns;
- bytes are decoded by ``events.codec.decode`` (upcasters included) inside ``mapInArrow``, a
  batch at a time, never with a row-at-a-time UDF;
- ``raw=True`` keeps each record's stored bytes in a ``value`` column as well (``RAW_KEPT``):
  what a replay of the leader's runs decodes into whole envelopes on the driver;
- a record that does not decode is never dropped and never crashes the job: it comes back in its
  place with ``type`` null and ``error`` set (the dead-letter reason and message; ``bad_event``
  for a payload its schema allows but no fold can use, ``events.usable``), so a reader reports it
  with its offset and skips it (``readable``);
- the LocalEventLog reader reads what lbctl's reader reads: the segments that form the log's
  chain (``events.log.local.chain_of``: strays skipped and named, a broken chain refused with
  ``LogDamaged``), each the way ``Segment`` reads it (committed appends only; a frame whose
  crc fails, or a record lost in a damaged stretch, is a dead letter at its own offset); a
  segment is decoded in slices of ``SLICE`` records, one task each, so one big segment does not
  leave a core idle;
- a signed record's signature is verified where it is decoded (the ``verified`` column,
  ``projections.authority.precheck``), once, for the process that folds the log
  (``spark_replay.authority``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgpack
import orjson
import pyarrow as pa

from balancer.bundles import namespace_of
from balancer.errors import DecodeError, MalformedInput
from events.codec import decode, reason_of
from events.envelope import Envelope
from events.log._segment import Segment
from events.log.local import chain_of
from projections.authority import Verified, precheck

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

BUNDLE_LOAD = pa.struct([
    ("bundle", pa.string()), ("msg_rate_in", pa.float64()), ("msg_rate_out", pa.float64()),
    ("msg_throughput_in", pa.float64()), ("msg_throughput_out", pa.float64()), ("topics", pa.int64()),
])
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("key", pa.string()),
    ("type", pa.string()), ("version", pa.int32()), ("seq", pa.int64()), ("epoch", pa.int64()),
    ("ts", pa.int64()), ("causation", pa.string()),
    ("bundle", pa.string()), ("namespace", pa.string()), ("broker", pa.string()),
    ("src", pa.string()), ("dst", pa.string()), ("reason", pa.string()), ("strategy", pa.string()),
    ("force", pa.bool_()), ("leader_epoch", pa.int64()), ("children", pa.list_(pa.string())),
    ("boundaries", pa.list_(pa.int64())), ("decision", pa.string()),
    ("cpu", pa.float64()), ("msg_rate", pa.float64()), ("msg_throughput", pa.float64()),
    ("bundle_loads", pa.list_(BUNDLE_LOAD)), ("error", pa.string()), ("verified", pa.binary()),
])
SCHEMA = (
    "topic string, partition int, offset long, key string, type string, version int, seq long, "
    "epoch long, ts long, causation string, bundle string, namespace string, broker string, "
    "src string, dst string, reason string, strategy string, force boolean, leader_epoch long, "
    "children array<string>, boundaries array<long>, decision string, cpu double, "
    "msg_rate double, msg_throughput double, bundle_loads array<struct<bundle:string,"
    "msg_rate_in:double,msg_rate_out:double,msg_throughput_in:double,msg_throughput_out:double,"
    "topics:long>>, error string, verified binary"
)
RAW_KEPT = SCHEMA + ", value binary"
ARROW_RAW_KEPT = ARROW_SCHEMA.append(pa.field("value", pa.binary()))
RAW_SCHEMA = "topic string, partition int, offset long, key string, ts long, value binary"
COLUMNS = tuple(ARROW_SCHEMA.names)
OPTIONAL = {"verified": "binary"}
"""Columns a decoded export written before them lacks: read back as nulls."""
_BATCH = 20_000


# -- decoding (runs on the workers) -------------------------------------------------------------


def cpu_share(load: dict[str, Any]) -> float | None:
    """A broker load's cpu usage over its limit (None: the load names no limit)."""
    cpu = load.get("cpu")
    if not isinstance(cpu, dict) or not cpu.get("limit"):
        return None
    return float(cpu.get("usage", 0.0)) / float(cpu["limit"])


def bundle_loads_of(bundles: list[Any]) -> list[dict[str, Any]]:
    """A report's bundle entries as the ``bundle_loads`` column holds them."""
    return [{
        "bundle": str(b.get("bundle")),
        "msg_rate_in": float(b.get("msg_rate_in", 0.0)), "msg_rate_out": float(b.get("msg_rate_out", 0.0)),
        "msg_throughput_in": float(b.get("msg_throughput_in", 0.0)),
        "msg_throughput_out": float(b.get("msg_throughput_out", 0.0)), "topics": int(b.get("topics", 0)),
    } for b in bundles if isinstance(b, dict)]


PROPOSAL_TYPES = ("ProposalRecorded", "ProposalApproved", "ProposalRejected", "ProposalCancelled",
                  "ProposalStale")
PROPOSAL_FIELDS = frozenset({"proposal_id", "strategy", "mode", "run_ms", "by", "at_ms", "note", "bundles",
                             "reason"})
_BROKER_FIELD = {"BundleOwned": "owner", "BundleAssigned": "dst", "SplitCompleted": "owner",
                 "LeaderElected": "leader_id"}


def payload_columns(kind: str, p: dict[str, Any]) -> dict[str, Any]:
    """The decoded columns of one payload (those the audits and what-if read)."""
    decision = p.get("decision")
    strategy = p.get("strategy") or (decision.get("strategy") if isinstance(decision, dict) else None)
    out: dict[str, Any] = {
        "bundle": p.get("bundle", p.get("parent")), "namespace": p.get("namespace"),
        "broker": p.get(_BROKER_FIELD.get(kind, "broker_id")), "src": p.get("src"),
        "dst": p.get("dst"), "reason": p.get("reason"), "force": p.get("force"),
        "strategy": strategy if isinstance(strategy, str) else None,  # any event's decision may hold one
        "decision": orjson.dumps(decision, option=orjson.OPT_NON_STR_KEYS).decode() if decision else None,
    }
    if out["namespace"] is None and isinstance(out["bundle"], str):
        out["namespace"] = namespace_of(out["bundle"])
    if kind in ("BalancerPaused", "BalancerResumed", "BrokerDrainRequested", "BrokerUndrained"):
        out["decision"] = orjson.dumps(p).decode()  # the pause or drain, whole: the audit reads it back
    elif kind in PROPOSAL_TYPES:  # the verdict, or the proposal's id and mode: what the audit reads
        out["decision"] = orjson.dumps({k: v for k, v in p.items() if k in PROPOSAL_FIELDS}).decode()
    elif kind == "SplitRequested" and p.get("proposal") is not None:  # the leader's proposal it carries out
        out["decision"] = orjson.dumps({"proposal": p["proposal"]}).decode()
    if kind == "LeaderElected":
        out["leader_epoch"] = p.get("epoch")
    elif kind == "SplitCompleted":
        out["children"], out["boundaries"] = list(p["children"]), [int(b) for b in p["boundaries"]]
    elif kind == "NamespaceCreated":
        out["boundaries"] = [int(b) for b in p["boundaries"]]
    elif kind == "LoadReported":
        load = p.get("broker_load") or {}
        out["cpu"] = cpu_share(load)
        out["msg_rate"] = float(load.get("msg_rate_in", 0.0)) + float(load.get("msg_rate_out", 0.0))
        out["msg_throughput"] = (float(load.get("msg_throughput_in", 0.0))
                                 + float(load.get("msg_throughput_out", 0.0)))
        out["bundle_loads"] = bundle_loads_of(p.get("bundles") or [])
    return out


def decode_row(topic: str, partition: int, offset: int, key: str | None, ts: int,
               raw: bytes | None) -> dict[str, Any]:
    """One stored value -> one row of ``SCHEMA`` (a dead letter keeps its place, with ``error``)."""
    row: dict[str, Any] = {"topic": topic, "partition": partition, "offset": offset, "key": key,
                           "ts": ts}
    try:
        env = decode(raw or b"")
    except DecodeError as exc:
        row["error"] = f"{reason_of(exc)}: {exc.message}"
        return row
    try:
        env.typed  # noqa: B018  (its rules refuse a payload no fold can use)
        row.update(payload_columns(env.type, env.payload))
    except DecodeError as exc:
        row["error"] = f"bad_event: {exc.message}"
        return row
    except Exception as exc:  # a payload that passed the codec but is not what its type says
        row["error"] = f"bad_payload: {type(exc).__name__}: {exc}"
        return row
    row.update(key=env.key, type=env.type, version=env.version, seq=env.seq, epoch=env.epoch,
               ts=env.ts_ms, causation=env.causation_id)
    if env[11] is not None:
        row["verified"] = verified_column(env)
    return row


def verified_column(env: Envelope) -> bytes | None:
    """A signed record's signature, verified here, where it is decoded (``projections.authority
    .precheck``): the process that folds the log takes it back with ``verification``."""
    found = precheck(env)
    return None if found is None else msgpack.packb(list(found))


def verification(column: bytes | None) -> Verified | None:
    """The value of ``verified_column`` back, for ``projections.authority.seed``."""
    if column is None:
        return None
    root, signer, detail = msgpack.unpackb(column)
    return root, signer, detail


def to_batch(rows: list[dict[str, Any]], raw: bool = False) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=ARROW_RAW_KEPT if raw else ARROW_SCHEMA)


def decode_batches(batches: Iterator[pa.RecordBatch], raw: bool = False) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: raw batches (``RAW_SCHEMA``) -> decoded batches (``SCHEMA``;
    ``RAW_KEPT`` with ``raw``)."""
    for batch in batches:
        cols = batch.to_pydict()
        rows = []
        for fields in zip(cols["topic"], cols["partition"], cols["offset"], cols["key"], cols["ts"],
                          cols["value"], strict=True):
            row = decode_row(*fields)
            if raw:
                row["value"] = fields[-1]
            rows.append(row)
        for i in range(0, len(rows), _BATCH):
            yield to_batch(rows[i:i + _BATCH], raw)


def decode_kept(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``decode_batches`` keeping the stored bytes (``RAW_KEPT``)."""
    return decode_batches(batches, raw=True)


def segment_rows(data_path: str, index_path: str, base: int, topic: str, raw: bool = False,
                 start: int = 0, stop: int = -1) -> Iterator[dict[str, Any]]:
    """The committed records of one LocalEventLog segment (those at local indexes [start,
    stop), -1: to its end), decoded, in offset order (read the way the log reads them: from the
    data, the index only where it agrees)."""
    path = Path(data_path)
    segment = Segment(path.parent, base)
    try:
        segment.refresh()
        stop = segment.count if stop < 0 else min(stop, segment.count)
        for i, entry in enumerate(segment.fetch(start, stop) if start < stop else [], start=start):
            if not entry.damaged:
                row = decode_row(topic, 0, base + i, entry.key, entry.ts_ms, entry.raw)
                if raw:
                    row["value"] = entry.raw
                yield row
            else:
                yield {"topic": topic, "partition": 0, "offset": base + i, "ts": segment.max_ts[i],
                       "error": f"corrupt: {segment.damage(i)}"}
    finally:
        segment.close()


def read_segments(batches: Iterator[pa.RecordBatch], raw: bool = False) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: rows of (topic, base, data, index, start, stop) -> decoded batches."""
    for batch in batches:
        cols = batch.to_pydict()
        for topic, base, data, index, start, stop in zip(
                cols["topic"], cols["base"], cols["data"], cols["index"], cols["start"], cols["stop"],
                strict=True):
            rows: list[dict[str, Any]] = []
            for row in segment_rows(data, index, base, topic, raw, start, stop):
                rows.append(row)
                if len(rows) >= _BATCH:
                    yield to_batch(rows, raw)
                    rows = []
            if rows:
                yield to_batch(rows, raw)


def read_segments_kept(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``read_segments`` keeping the stored bytes (``RAW_KEPT``)."""
    return read_segments(batches, raw=True)


# -- sources (run on the driver) -----------------------------------------------------------------


def read_kafka(spark: SparkSession, bootstrap: str, topics: list[str], *,
               starting: str | None = None, ending: str | None = None, raw: bool = False,
               options: Mapping[str, str] | None = None) -> DataFrame:
    """Topics through Spark's Kafka source (batch); ``starting``/``ending`` are Spark's offset
    specs (``earliest``/``latest`` or per-partition JSON) for reproducible audits; ``raw`` keeps
    the stored bytes (``RAW_KEPT``); ``options`` more ``kafka.*`` options (security:
    ``KafkaSecurity.spark_options()``)."""
    reader = (
        spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(topics))
        .option("startingOffsets", starting or "earliest").option("endingOffsets", ending or "latest")
        # Transactional writers leave offsets to commit markers: gaps are not data loss.
        .option("failOnDataLoss", "false").option("kafka.isolation.level", "read_committed")
        .options(**dict(options or {}))
    )
    records = reader.load().selectExpr(
        "topic", "partition", "offset", "CAST(key AS STRING) AS key",
        "CAST(unix_millis(timestamp) AS LONG) AS ts", "value")
    return _decoded(records, raw)


def _decoded(records: DataFrame, raw: bool) -> DataFrame:
    return records.mapInArrow(decode_kept, RAW_KEPT) if raw else records.mapInArrow(decode_batches, SCHEMA)


def segments(directory: str | os.PathLike[str]) -> list[tuple[int, str, str]]:
    """(base offset, data path, index path) of the segments of a LocalEventLog directory that
    are its log, checked as lbctl's reader checks them (``events.log.local.chain_of``): a stray
    file is named and skipped, files that are no single history raise ``LogDamaged``."""
    root = Path(directory)
    if not (root / "LOCK").exists():
        raise MalformedInput(f"{str(directory)!r} is not an event log directory (expected one "
                             "written by LocalEventLog)", value=str(directory))
    return [(base, str(data.resolve()), str(index.resolve())) for base, data, index in chain_of(root)]


SLICE = 5_000
"""Records a task decodes at most: a log of one big segment still decodes on every core."""


def slices(directory: Path, base: int) -> list[tuple[int, int]]:
    """[start, stop) local indexes of one segment, ``SLICE`` records each (the last: to the
    segment's end, -1, whatever was appended since)."""
    segment = Segment(directory, base)
    try:
        segment.refresh()
        count = segment.count
    finally:
        segment.close()
    starts = list(range(0, count, SLICE)) or [0]
    return [(start, -1 if start == starts[-1] else start + SLICE) for start in starts]


def read_local(spark: SparkSession, directory: str | os.PathLike[str], *, topic: str = "events",
               raw: bool = False) -> DataFrame:
    """The segment files of a LocalEventLog, one slice of a segment per task (``raw``: ``RAW_KEPT``)."""
    rows = [(topic, base, data, index, start, stop) for base, data, index in segments(directory)
            for start, stop in slices(Path(data).parent, base)]
    # One slice per partition, exactly: hashing slices into partitions put two in one and left
    # another empty (one core decoded twice as much), and cost a shuffle.
    paths = spark.createDataFrame(spark.sparkContext.parallelize(rows, max(1, len(rows))),
                                  "topic string, base long, data string, index string, "
                                  "start long, stop long")
    return paths.mapInArrow(read_segments_kept, RAW_KEPT) if raw else paths.mapInArrow(read_segments, SCHEMA)


def read_parquet(spark: SparkSession, path: str, *, raw: bool = False) -> DataFrame:
    """A Parquet export: decoded (``SCHEMA``, as ``export_parquet`` writes) or raw (``RAW_SCHEMA``:
    the stored bytes in ``value``, decoded here; kept with ``raw``). A decoded export has no
    stored bytes: ``raw`` does not apply to it."""
    df = spark.read.parquet(path)
    if "value" in df.columns:
        return _decoded(df.selectExpr(*RAW_SCHEMA_COLUMNS), raw)
    missing = [c for c in COLUMNS if c not in df.columns and c not in OPTIONAL]
    if missing:
        raise MalformedInput(f"{path!r}: not an event export, missing column(s) {', '.join(missing)}",
                             value=path)
    return df.selectExpr(*(c if c in df.columns else f"CAST(NULL AS {OPTIONAL[c]}) AS {c}" for c in COLUMNS))


RAW_SCHEMA_COLUMNS = ("topic", "CAST(partition AS INT) AS partition", "CAST(offset AS LONG) AS offset",
                      "key", "CAST(ts AS LONG) AS ts", "value")


def export_parquet(df: DataFrame, path: str) -> None:
    """Write the decoded log as Parquet (read back by ``read_parquet``)."""
    df.write.mode("overwrite").parquet(path)


def check_bounds(source: str, starting: str | None, ending: str | None) -> None:
    """Offset bounds name Kafka partitions: on another source they are a mistake, named."""
    if not source.startswith("kafka://") and (starting is not None or ending is not None):
        raise MalformedInput(f"source {source!r}: offset bounds apply to a Kafka source only",
                             value=starting if starting is not None else ending)


def check_source(source: str, topics: list[str] | None = None) -> None:
    """Whether ``source`` can be read at all, decided without Spark (so a typo costs no JVM): a
    Kafka source needs a topic; a path must exist and be a log directory or Parquet (a file, or
    a folder holding ``*.parquet`` files). Each refusal is one ``MalformedInput`` naming it."""
    if source.startswith("kafka://"):
        if not topics:
            raise MalformedInput(f"source {source!r}: a Kafka source needs --topic (one or more "
                                 "topic names)", value=source)
        return
    path = Path(source)
    if not path.exists():
        raise MalformedInput(f"source {source!r}: no such file or directory (give kafka://HOST:PORT, "
                             "a log directory or a Parquet path)", value=source)
    parquet = any(path.glob("*.parquet")) or any(path.glob("*=*/*.parquet"))  # flat or partitioned
    if path.is_dir() and not (path / "LOCK").exists() and not parquet:
        raise MalformedInput(f"source {source!r}: a directory that is neither an event log (no "
                             "LOCK file) nor a Parquet export (no .parquet file)", value=source)


def read_source(spark: SparkSession, source: str, *, topics: list[str] | None = None,
                raw: bool = False, starting: str | None = None, ending: str | None = None,
                kafka_options: Mapping[str, str] | None = None) -> DataFrame:
    """One string names any source: ``kafka://HOST:PORT`` (with ``topics``; ``starting`` and
    ``ending`` bound the read, ``kafka_options`` are its security), a LocalEventLog directory, or
    a Parquet file/folder (``raw``: keep the stored bytes where there are some)."""
    if source.startswith("kafka://"):
        if not topics:
            raise MalformedInput("a Kafka source needs --topic (one or more topic names)", value=source)
        return read_kafka(spark, source.removeprefix("kafka://"), topics, raw=raw,
                          starting=starting, ending=ending, options=kafka_options)
    check_bounds(source, starting, ending)
    path = Path(source)
    if (path / "LOCK").exists():
        return read_local(spark, path, topic=(topics or ["events"])[0], raw=raw)
    if path.exists():
        return read_parquet(spark, str(path.resolve()), raw=raw)
    raise MalformedInput(f"source {source!r}: not kafka://HOST:PORT, a log directory or a Parquet "
                         "path", value=source)


def decoded_once(df: DataFrame) -> DataFrame:
    """``df`` kept after its first computation (memory, spilling to disk): every record is read
    and decoded by Python once, not once per query of a job (an audit asks a dozen)."""
    from pyspark import StorageLevel

    return df.persist(StorageLevel.MEMORY_AND_DISK)


def readable(df: DataFrame) -> DataFrame:
    """The records that decoded (dead letters left out; ``dead_letters`` lists them)."""
    return df.where("error IS NULL")


def dead_letters(df: DataFrame) -> DataFrame:
    return df.where("error IS NOT NULL").select("topic", "partition", "offset", "key", "ts", "error")
