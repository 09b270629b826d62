"""Who wrote each record, decided for a Spark replay by lbctl's own reader.

Invariants:
- the decision is lbctl's: every readable record is folded, in log order, by the ownership
  projection (``projections.ownership``, with ``projections.authority.Trust``), and a record it
  refuses (``forged``, ``unauthorized``, a deposed leader's ``stale_epoch``: what no body folds,
  ``REFUSED``) is named here with the projection's own words and left out of every replay
  (``entitled``), so an audit, a timeline and a what-if see the view lbctl sees;
- signatures are verified once per record, where the record is decoded (the ``verified`` column,
  on Spark's workers); the fold on the driver takes that result (``seed``) and verifies again
  only a record signed under another root than the log's;
- a pinned root (``root``: the cluster's, from ``bundleBalancerRootKey`` or ``--root-key``) is
  the log's root from the first record on: a log whose first signed record names another root is
  refused as a whole (``ForeignCluster``, one line naming both keys), as lbctl's readers do;
- without the stored bytes (a decoded Parquet export) nothing can be verified: ``checked`` is
  False and the replay says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from events.codec import decode
from events.envelope import Envelope
from projections.authority import Trust, check_pinned, seed
from projections.ownership import REFUSED, OwnershipProjection
from spark_replay.sources import readable, verification

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

STORED = ("topic", "partition", "offset", "ts", "value", "verified")


@dataclass(frozen=True)
class Refusal:
    """A record lbctl's reader refuses: where it is and why (``kind``: the anomaly's)."""

    kind: str
    topic: str
    key: str
    partition: int
    offset: int
    ts: int
    detail: str


@dataclass(frozen=True)
class Authority:
    refused: tuple[Refusal, ...] = ()
    checked: bool = True
    """False: the source has no stored bytes (a decoded export): nothing was verified."""
    root: bytes | None = None
    """The root key of the log (None: no signed record)."""
    envelopes: list[tuple[int, int, Envelope]] = field(default_factory=list, repr=False, compare=False)
    """(partition, offset, envelope) of every readable record, decoded and verified once: a fold
    on the driver that needs them (the what-if's replay of the leader's runs) reuses them."""


def stored_rows(df: DataFrame) -> list[dict[str, Any]]:
    """The readable records with their stored bytes, in the order lbctl's reader folds them:
    offset order on one partition, else by time (partitions interleave as they were written).
    They reach the driver as Arrow (``toArrow``): pickled rows cost several times more."""
    table = readable(df).where("value IS NOT NULL").select(*STORED).toArrow()
    rows: list[dict[str, Any]] = table.to_pylist()
    if len({(r["topic"], r["partition"]) for r in rows}) > 1:
        rows.sort(key=lambda r: (r["ts"], r["topic"], r["partition"], r["offset"]))
    else:
        rows.sort(key=lambda r: r["offset"])
    return rows


def check_authority(df: DataFrame, *, root: bytes | None = None, source: str = "the log") -> Authority:
    """Fold ``df`` (a ``sources`` frame read with ``raw=True``) as lbctl's reader does and name
    the records it refuses; ``root`` pins the cluster's root key (``ForeignCluster`` naming
    ``source`` if the log was founded under another)."""
    if "value" not in df.columns:
        return Authority(checked=False)
    rows = stored_rows(df)
    view = OwnershipProjection(trust=Trust(root=root, pinned=True) if root is not None else None)
    view.ordered = len({(r["topic"], r["partition"]) for r in rows}) <= 1
    kept: list[tuple[int, int, Envelope]] = []
    where: dict[int, Any] = {}
    for row in rows:
        envelope = decode(row["value"])
        seed(envelope, verification(row["verified"]))
        view.apply(row["offset"], envelope)
        kept.append((row["partition"], row["offset"], envelope))
        where[id(envelope)] = row
    check_pinned(view.trust, root, source)
    kinds = {(a.offset, a.detail): a.kind for a in view.anomalies}
    refused = tuple(
        Refusal(kinds.get((offset, envelope.__dict__[REFUSED]), "unauthorized"), where[id(envelope)]["topic"],
                envelope.key, partition, offset, envelope.ts_ms, envelope.__dict__[REFUSED])
        for partition, offset, envelope in kept if REFUSED in envelope.__dict__)
    return Authority(refused, True, view.trust.root if view.trust is not None else None, kept)


def entitled(df: DataFrame, found: Authority) -> DataFrame:
    """``df`` without the records ``found`` refused (a broadcast anti-join on their positions)."""
    if not found.refused:
        return df
    from pyspark.sql import functions as F

    spark = df.sparkSession
    positions = spark.createDataFrame([(r.topic, r.partition, r.offset) for r in found.refused],
                                      "topic string, partition int, offset long")
    return df.join(F.broadcast(positions), on=["topic", "partition", "offset"], how="left_anti")
